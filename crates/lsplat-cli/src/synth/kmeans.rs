//! The clustering behind `synth`'s objects: hierarchical k-means on Gaussian
//! positions, in time close to linear in the Gaussians for any number of clusters.
//!
//! - Seeding is k-means++ (each new centre drawn with probability ∝ the squared
//!   distance to the nearest centre so far, the distances kept up to date as centres
//!   are added: O(n·k)) while n·k ≤ [`PLUS_PLUS_BUDGET`]; above it, k distinct members
//!   drawn uniformly (seeded), so a cluster count near the Gaussian count does not
//!   cost n·k.
//! - Each of the [`LLOYD_ITERATIONS`] Lloyd iterations finds every member's nearest
//!   centre through a k-d tree of the centres (ties go to the lower centre index, as a
//!   linear scan would).
//! - The levels below split every parent segment in two, with the members of each
//!   parent gathered in one pass.

use glam::Vec3;
use lsplat_core::Rng;

/// Lloyd iterations per clustering.
pub const LLOYD_ITERATIONS: usize = 12;
/// Largest n·k seeded by k-means++ (above it, uniform distinct members).
pub const PLUS_PLUS_BUDGET: u64 = 1 << 26;

/// Hierarchical k-means on `pts`: `[level1 (4K), level2 (2K), level3 (K)]` segment of
/// every point. Level 3 clusters all points into `k`; level 2 halves every level-3
/// segment and level 1 every level-2 segment (a segment of one point stays whole).
pub fn segment(pts: &[Vec3], k: usize, seed: u64) -> [Vec<u32>; 3] {
    let all: Vec<usize> = (0..pts.len()).collect();
    let mut rng = Rng::new(seed);
    let l3 = kmeans(pts, &all, k, &mut rng);
    let l2 = split(pts, &l3, k, &mut rng);
    let l1 = split(pts, &l2, 2 * k, &mut rng);
    [l1, l2, l3]
}

/// Halves each of the `n_parent` segments of `parent`: point i goes to `2·p + s`.
fn split(pts: &[Vec3], parent: &[u32], n_parent: usize, rng: &mut Rng) -> Vec<u32> {
    // The members of every parent, in point order, gathered by a counting sort.
    let mut start = vec![0usize; n_parent + 1];
    for &p in parent {
        start[p as usize + 1] += 1;
    }
    for p in 0..n_parent {
        start[p + 1] += start[p];
    }
    let mut order = vec![0usize; pts.len()];
    let mut next = start.clone();
    for (i, &p) in parent.iter().enumerate() {
        order[next[p as usize]] = i;
        next[p as usize] += 1;
    }
    let mut out = vec![0u32; pts.len()];
    for p in 0..n_parent {
        let members = &order[start[p]..start[p + 1]];
        let sub = kmeans(pts, members, 2, rng);
        for (&i, &s) in members.iter().zip(&sub) {
            out[i] = 2 * p as u32 + s;
        }
    }
    out
}

/// Lloyd's k-means on `pts[members]` (k-means++ or uniform seeding, then
/// [`LLOYD_ITERATIONS`] iterations); returns the cluster of each member. `k` is capped
/// at the member count.
pub fn kmeans(pts: &[Vec3], members: &[usize], k: usize, rng: &mut Rng) -> Vec<u32> {
    if members.is_empty() {
        return Vec::new();
    }
    let k = k.min(members.len()).max(1);
    let mut centres = if (members.len() as u64).saturating_mul(k as u64) <= PLUS_PLUS_BUDGET {
        plus_plus(pts, members, k, rng)
    } else {
        distinct_members(pts, members, k, rng)
    };
    let mut assign = vec![0u32; members.len()];
    for _ in 0..LLOYD_ITERATIONS {
        let tree = KdTree::new(&centres);
        for (a, &i) in assign.iter_mut().zip(members) {
            *a = tree.nearest(pts[i]);
        }
        let mut sums = vec![(Vec3::ZERO, 0usize); k];
        for (&a, &i) in assign.iter().zip(members) {
            sums[a as usize].0 += pts[i];
            sums[a as usize].1 += 1;
        }
        for (c, (s, n)) in centres.iter_mut().zip(sums) {
            if n > 0 {
                *c = s / n as f32;
            }
        }
    }
    assign
}

/// k-means++ seeding in O(n·k): the squared distance of every member to its nearest
/// centre is lowered as each centre is added.
fn plus_plus(pts: &[Vec3], members: &[usize], k: usize, rng: &mut Rng) -> Vec<Vec3> {
    let first = pts[members[rng.below(members.len() as u64) as usize]];
    let mut centres = vec![first];
    let mut d: Vec<f64> = members
        .iter()
        .map(|&i| (pts[i] - first).length_squared() as f64)
        .collect();
    while centres.len() < k {
        let total: f64 = d.iter().sum();
        let mut t = rng.f64() * total;
        let mut pick = members.len() - 1;
        for (j, dj) in d.iter().enumerate() {
            t -= dj;
            if t <= 0.0 && *dj > 0.0 {
                pick = j;
                break;
            }
        }
        let c = pts[members[pick]];
        centres.push(c);
        for (dj, &i) in d.iter_mut().zip(members) {
            *dj = dj.min((pts[i] - c).length_squared() as f64);
        }
    }
    centres
}

/// `k` distinct members drawn uniformly (a partial Fisher–Yates shuffle).
fn distinct_members(pts: &[Vec3], members: &[usize], k: usize, rng: &mut Rng) -> Vec<Vec3> {
    let mut pool: Vec<usize> = members.to_vec();
    for j in 0..k {
        let r = j + rng.below((pool.len() - j) as u64) as usize;
        pool.swap(j, r);
    }
    pool[..k].iter().map(|&i| pts[i]).collect()
}

/// A k-d tree over points, stored implicitly: the node of range `lo..hi` of `order`
/// sits at its middle, split on `axis[mid]`.
pub struct KdTree<'a> {
    pts: &'a [Vec3],
    order: Vec<u32>,
    axis: Vec<u8>,
}

impl<'a> KdTree<'a> {
    /// Builds the tree (each range split at its median along its widest axis).
    pub fn new(pts: &'a [Vec3]) -> Self {
        let mut t = KdTree {
            pts,
            order: (0..pts.len() as u32).collect(),
            axis: vec![0; pts.len()],
        };
        let mut stack = vec![(0usize, pts.len())];
        while let Some((lo, hi)) = stack.pop() {
            if hi - lo <= 1 {
                continue;
            }
            let (mut min, mut max) = (Vec3::INFINITY, Vec3::NEG_INFINITY);
            for &i in &t.order[lo..hi] {
                min = min.min(pts[i as usize]);
                max = max.max(pts[i as usize]);
            }
            let ext = max - min;
            let ax = if ext.x >= ext.y && ext.x >= ext.z {
                0
            } else if ext.y >= ext.z {
                1
            } else {
                2
            };
            let mid = (lo + hi) / 2;
            t.order[lo..hi].select_nth_unstable_by(mid - lo, |&a, &b| {
                pts[a as usize][ax]
                    .total_cmp(&pts[b as usize][ax])
                    .then(a.cmp(&b))
            });
            t.axis[mid] = ax as u8;
            stack.push((lo, mid));
            stack.push((mid + 1, hi));
        }
        t
    }

    /// Index of the point nearest to `q` (the lowest index among equally near ones).
    pub fn nearest(&self, q: Vec3) -> u32 {
        let mut best = (f32::INFINITY, u32::MAX);
        self.search(q, 0, self.order.len(), &mut best);
        best.1
    }

    fn search(&self, q: Vec3, lo: usize, hi: usize, best: &mut (f32, u32)) {
        if lo >= hi {
            return;
        }
        let mid = (lo + hi) / 2;
        let i = self.order[mid];
        let d = (q - self.pts[i as usize]).length_squared();
        if d < best.0 || (d == best.0 && i < best.1) {
            *best = (d, i);
        }
        if hi - lo == 1 {
            return;
        }
        let ax = self.axis[mid] as usize;
        let diff = q[ax] - self.pts[i as usize][ax];
        let (near, far) = if diff < 0.0 {
            ((lo, mid), (mid + 1, hi))
        } else {
            ((mid + 1, hi), (lo, mid))
        };
        self.search(q, near.0, near.1, best);
        // Points at distance equal to the best may hold a lower index: visit the far
        // side unless it is strictly farther.
        if diff * diff <= best.0 {
            self.search(q, far.0, far.1, best);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute(centres: &[Vec3], q: Vec3) -> u32 {
        (0..centres.len())
            .min_by(|&x, &y| {
                (q - centres[x])
                    .length_squared()
                    .total_cmp(&(q - centres[y]).length_squared())
            })
            .unwrap() as u32
    }

    /// The k-d tree finds what a linear scan finds, ties (duplicate centres, points on
    /// a lattice) included.
    #[test]
    fn kd_tree_nearest_is_the_linear_scan() {
        let mut rng = Rng::new(3);
        let mut centres: Vec<Vec3> = (0..500)
            .map(|_| Vec3::new(rng.normal(), rng.normal(), 0.1 * rng.normal()))
            .collect();
        centres.extend_from_within(..50);
        centres.extend((0..64).map(|i| Vec3::new((i % 4) as f32, (i / 4 % 4) as f32, 0.0)));
        let tree = KdTree::new(&centres);
        for j in 0..5000 {
            let q = if j % 5 == 0 {
                Vec3::new((j % 7) as f32 * 0.5, (j % 3) as f32 * 0.5, 0.0)
            } else {
                Vec3::new(2.0 * rng.normal(), 2.0 * rng.normal(), rng.normal())
            };
            assert_eq!(tree.nearest(q), brute(&centres, q), "query {q}");
        }
    }

    /// Well-separated blobs are found whatever the seeding, and every cluster of a
    /// clustering into as many clusters as points holds exactly one point.
    #[test]
    fn kmeans_finds_blobs_and_handles_k_equal_to_n() {
        let mut rng = Rng::new(9);
        let blobs = [
            Vec3::ZERO,
            Vec3::new(10.0, 0.0, 0.0),
            Vec3::new(0.0, 10.0, 0.0),
        ];
        let pts: Vec<Vec3> = (0..3000)
            .map(|i| blobs[i % 3] + 0.3 * Vec3::new(rng.normal(), rng.normal(), rng.normal()))
            .collect();
        let all: Vec<usize> = (0..pts.len()).collect();
        let a = kmeans(&pts, &all, 3, &mut Rng::new(1));
        for i in 3..pts.len() {
            assert_eq!(a[i], a[i % 3], "point {i}");
        }
        let few: Vec<usize> = (0..200).collect();
        let b = kmeans(&pts, &few, 200, &mut Rng::new(2));
        let mut seen = b.clone();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 200, "200 clusters of 200 distinct points");
    }

    /// The levels nest: a level-2 segment lies inside one level-3 segment, a level-1
    /// segment inside one level-2 segment.
    #[test]
    fn levels_nest() {
        let mut rng = Rng::new(4);
        let pts: Vec<Vec3> = (0..2000)
            .map(|_| Vec3::new(rng.normal(), rng.normal(), rng.normal()))
            .collect();
        let [l1, l2, l3] = segment(&pts, 5, 0);
        for i in 0..pts.len() {
            assert_eq!(l2[i] / 2, l3[i]);
            assert_eq!(l1[i] / 2, l2[i]);
        }
    }
}
