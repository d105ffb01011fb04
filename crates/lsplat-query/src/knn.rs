//! Nearest neighbours among 3D points: a balanced k-d tree (median splits on the axis
//! of largest spread) answering the nearest point within a radius and the k nearest
//! points. Distances are squared Euclidean in float64; equal distances are ordered
//! by point index, so every answer is deterministic.

use std::collections::BinaryHeap;

/// A k-d tree over 3D points.
pub struct KdTree {
    points: Vec<[f64; 3]>,
    /// Point indices, permuted so that each subtree is a contiguous range whose
    /// middle element is the subtree's splitting point.
    order: Vec<u32>,
    /// Splitting axis of the node at each position of `order`.
    axis: Vec<u8>,
}

/// A candidate: squared distance, then index (the heap's order).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Cand(f64, u32);

impl Eq for Cand {}

impl Ord for Cand {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0).then(self.1.cmp(&o.1))
    }
}

impl PartialOrd for Cand {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl KdTree {
    /// Builds the tree (`O(n log² n)`). At most `u32::MAX` points.
    pub fn new(points: &[[f32; 3]]) -> KdTree {
        let points: Vec<[f64; 3]> = points.iter().map(|p| p.map(f64::from)).collect();
        let mut order: Vec<u32> = (0..points.len() as u32).collect();
        let mut axis = vec![0u8; points.len()];
        build(&points, &mut order, &mut axis);
        KdTree {
            points,
            order,
            axis,
        }
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// True without points.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The nearest point to `q` within distance `radius` (inclusive): its index and
    /// squared distance; the lowest index among equally near points.
    pub fn nearest_within(&self, q: [f32; 3], radius: f64) -> Option<(usize, f64)> {
        let mut best = Nearest(Cand(radius * radius, u32::MAX));
        self.visit(&q.map(f64::from), 0, self.order.len(), &mut best);
        let Cand(d2, i) = best.0;
        (i != u32::MAX).then_some((i as usize, d2))
    }

    /// The `k` nearest points to `q` (itself included when `q` is a point of the
    /// tree), nearest first; ties by index.
    pub fn k_nearest(&self, q: [f32; 3], k: usize) -> Vec<usize> {
        if k == 0 {
            return Vec::new();
        }
        let mut best = NearestK {
            k,
            heap: BinaryHeap::with_capacity(k + 1),
        };
        self.visit(&q.map(f64::from), 0, self.order.len(), &mut best);
        best.heap
            .into_sorted_vec()
            .into_iter()
            .map(|c| c.1 as usize)
            .collect()
    }

    /// Offers `sink` the points of `order[lo..hi]` that may be nearer than its bound.
    fn visit(&self, q: &[f64; 3], lo: usize, hi: usize, sink: &mut dyn Sink) {
        if lo >= hi {
            return;
        }
        let mid = lo + (hi - lo) / 2;
        let i = self.order[mid];
        let p = &self.points[i as usize];
        let d2 = (0..3).map(|a| (q[a] - p[a]).powi(2)).sum::<f64>();
        sink.offer(Cand(d2, i));
        let ax = self.axis[mid] as usize;
        let d = q[ax] - p[ax];
        let (near, far) = if d < 0.0 {
            ((lo, mid), (mid + 1, hi))
        } else {
            ((mid + 1, hi), (lo, mid))
        };
        self.visit(q, near.0, near.1, sink);
        // `<=`: a point exactly at the bound may have a lower index.
        if d * d <= sink.bound() {
            self.visit(q, far.0, far.1, sink);
        }
    }
}

/// What a search keeps.
trait Sink {
    fn offer(&mut self, c: Cand);
    /// The squared distance beyond which no point can be kept.
    fn bound(&self) -> f64;
}

/// The best candidate so far (starting at the radius).
struct Nearest(Cand);

impl Sink for Nearest {
    fn offer(&mut self, c: Cand) {
        if c < self.0 {
            self.0 = c;
        }
    }
    fn bound(&self) -> f64 {
        self.0.0
    }
}

/// The k best candidates so far (a max-heap).
struct NearestK {
    k: usize,
    heap: BinaryHeap<Cand>,
}

impl Sink for NearestK {
    fn offer(&mut self, c: Cand) {
        if self.heap.len() < self.k {
            self.heap.push(c);
        } else if self.heap.peek().is_some_and(|w| c < *w) {
            self.heap.pop();
            self.heap.push(c);
        }
    }
    fn bound(&self) -> f64 {
        if self.heap.len() < self.k {
            f64::INFINITY
        } else {
            self.heap.peek().map_or(f64::INFINITY, |w| w.0)
        }
    }
}

fn build(points: &[[f64; 3]], order: &mut [u32], axis: &mut [u8]) {
    let n = order.len();
    if n == 0 {
        return;
    }
    let mut lo = [f64::INFINITY; 3];
    let mut hi = [f64::NEG_INFINITY; 3];
    for &i in order.iter() {
        for a in 0..3 {
            lo[a] = lo[a].min(points[i as usize][a]);
            hi[a] = hi[a].max(points[i as usize][a]);
        }
    }
    let ax = (0..3)
        .max_by(|&a, &b| (hi[a] - lo[a]).total_cmp(&(hi[b] - lo[b])).then(b.cmp(&a)))
        .unwrap_or(0);
    let mid = n / 2;
    order.select_nth_unstable_by(mid, |&a, &b| {
        points[a as usize][ax]
            .total_cmp(&points[b as usize][ax])
            .then(a.cmp(&b))
    });
    axis[mid] = ax as u8;
    let (left, right) = order.split_at_mut(mid);
    let (al, ar) = axis.split_at_mut(mid);
    build(points, left, al);
    build(points, &mut right[1..], &mut ar[1..]);
}

#[cfg(test)]
mod tests {
    use lsplat_core::Rng;

    use super::*;

    fn brute(pts: &[[f32; 3]], q: [f32; 3]) -> Vec<(f64, usize)> {
        let mut d: Vec<(f64, usize)> = pts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let d2 = (0..3)
                    .map(|a| (f64::from(q[a]) - f64::from(p[a])).powi(2))
                    .sum::<f64>();
                (d2, i)
            })
            .collect();
        d.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        d
    }

    /// Against a brute-force sort, on random points and on a lattice full of ties.
    #[test]
    fn matches_brute_force_with_ties() {
        let mut rng = Rng::new(3);
        let random: Vec<[f32; 3]> = (0..700)
            .map(|_| {
                [
                    rng.range(-1.0, 1.0),
                    rng.range(-1.0, 1.0),
                    rng.range(-0.1, 0.1),
                ]
            })
            .collect();
        let lattice: Vec<[f32; 3]> = (0..216)
            .map(|i| [(i % 6) as f32, (i / 6 % 6) as f32, (i / 36) as f32])
            .collect();
        for pts in [random, lattice] {
            let t = KdTree::new(&pts);
            assert_eq!(t.len(), pts.len());
            for j in 0..60 {
                let q = if j % 2 == 0 {
                    pts[j * 3]
                } else {
                    [
                        rng.range(-1.0, 6.0),
                        rng.range(-1.0, 6.0),
                        rng.range(-1.0, 6.0),
                    ]
                };
                let want = brute(&pts, q);
                for k in [1, 10, 27] {
                    let got = t.k_nearest(q, k);
                    let w: Vec<usize> = want.iter().take(k).map(|p| p.1).collect();
                    assert_eq!(got, w, "k = {k}, q = {q:?}");
                }
                for r in [0.0, 0.05, 1.0, 1.5] {
                    let w = want.first().filter(|p| p.0 <= r * r).map(|p| p.1);
                    assert_eq!(t.nearest_within(q, r).map(|p| p.0), w, "r = {r}");
                }
            }
        }
        assert!(KdTree::new(&[]).nearest_within([0.0; 3], 1.0).is_none());
        assert!(KdTree::new(&[]).k_nearest([0.0; 3], 3).is_empty());
    }
}
