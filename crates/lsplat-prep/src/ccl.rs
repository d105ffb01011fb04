//! 8-connected components of a binary grid, with what SAM's `remove_small_regions`
//! needs from OpenCV's `connectedComponentsWithStats`: each component's size and its
//! rank in OpenCV's label order. OpenCV (Spaghetti/BBDT) numbers components by the
//! first 2×2 block (even-aligned in the image) that holds one of their pixels, in
//! raster order of blocks — not by their first pixel — so the rank key is the least
//! `(y >> 1, x >> 1)` over the component, in frame coordinates.

/// Components of a grid.
#[derive(Clone, Debug, Default)]
pub struct Components {
    /// Per pixel: 0 for background, else the component's index + 1.
    pub label: Vec<u32>,
    /// Per component: its number of pixels.
    pub size: Vec<u64>,
    /// Per component: its least `(y >> 1, x >> 1)` block in frame coordinates.
    pub key: Vec<(u32, u32)>,
}

fn find(parent: &mut [u32], mut i: u32) -> u32 {
    while parent[i as usize] != i {
        let p = parent[parent[i as usize] as usize];
        parent[i as usize] = p;
        i = p;
    }
    i
}

/// Labels the nonzero pixels of `grid` (`w × h`, row-major) by 8-connectivity. The
/// grid's pixel `(0, 0)` is frame pixel `origin`.
pub fn label8(grid: &[u8], w: usize, h: usize, origin: (u32, u32)) -> Components {
    assert_eq!(grid.len(), w * h);
    let mut label = vec![0u32; w * h];
    let mut parent: Vec<u32> = vec![0];
    for y in 0..h {
        for x in 0..w {
            if grid[y * w + x] == 0 {
                continue;
            }
            let mut best = 0u32;
            let mut others = [0u32; 4];
            let mut n = 0;
            let mut see = |l: u32| {
                if l != 0 {
                    others[n] = l;
                    n += 1;
                }
            };
            if x > 0 {
                see(label[y * w + x - 1]);
            }
            if y > 0 {
                let r = (y - 1) * w;
                if x > 0 {
                    see(label[r + x - 1]);
                }
                see(label[r + x]);
                if x + 1 < w {
                    see(label[r + x + 1]);
                }
            }
            for &l in &others[..n] {
                let r = find(&mut parent, l);
                best = if best == 0 { r } else { best.min(r) };
            }
            if best == 0 {
                best = parent.len() as u32;
                parent.push(best);
            } else {
                for &l in &others[..n] {
                    let r = find(&mut parent, l);
                    parent[r as usize] = best;
                }
            }
            label[y * w + x] = best;
        }
    }
    // Resolve to dense component indices.
    let mut dense = vec![0u32; parent.len()];
    let mut count = 0u32;
    for i in 1..parent.len() as u32 {
        let r = find(&mut parent, i);
        if r == i {
            count += 1;
            dense[i as usize] = count;
        }
    }
    let mut size = vec![0u64; count as usize];
    let mut key = vec![(u32::MAX, u32::MAX); count as usize];
    for y in 0..h {
        for x in 0..w {
            let l = label[y * w + x];
            if l == 0 {
                continue;
            }
            let d = dense[find(&mut parent, l) as usize];
            label[y * w + x] = d;
            let c = d as usize - 1;
            size[c] += 1;
            let k = ((y as u32 + origin.1) >> 1, (x as u32 + origin.0) >> 1);
            key[c] = key[c].min(k);
        }
    }
    Components { label, size, key }
}

/// SAM's `remove_small_regions` on a whole frame (0/1 bytes): `holes` fills the
/// components of the background smaller than `min_area`; otherwise the islands
/// smaller than `min_area` are removed (if every island is small, the largest stays,
/// the first in OpenCV's order among equals). Returns the mask and whether a small
/// region was found (SAM's "changed", true even when keeping the largest island
/// leaves the mask as it was).
pub fn remove_small_regions(
    mask: &[u8],
    w: usize,
    h: usize,
    min_area: u64,
    holes: bool,
) -> (Vec<u8>, bool) {
    let work: Vec<u8> = mask.iter().map(|&v| ((v != 0) ^ holes) as u8).collect();
    let c = label8(&work, w, h, (0, 0));
    let sizes: Vec<u64> = c.size.clone();
    resolve(mask, &c, &sizes, min_area, holes)
}

/// The mask after dropping/filling: `sizes` are the components' true sizes (which
/// may differ from `c.size` when the grid is a crop of the frame).
pub(crate) fn resolve(
    mask: &[u8],
    c: &Components,
    sizes: &[u64],
    min_area: u64,
    holes: bool,
) -> (Vec<u8>, bool) {
    let small: Vec<bool> = sizes.iter().map(|&s| s < min_area).collect();
    if !small.iter().any(|&s| s) {
        return (mask.to_vec(), false);
    }
    let keep: Vec<bool> = if holes {
        small
    } else if small.iter().all(|&s| s) {
        let best = (0..sizes.len())
            .max_by(|&a, &b| sizes[a].cmp(&sizes[b]).then(c.key[b].cmp(&c.key[a])))
            .unwrap_or(0);
        (0..sizes.len()).map(|i| i == best).collect()
    } else {
        small.iter().map(|&s| !s).collect()
    };
    let out = mask
        .iter()
        .zip(&c.label)
        .map(|(&m, &l)| {
            if holes {
                (m != 0 || (l != 0 && keep[l as usize - 1])) as u8
            } else {
                (l != 0 && keep[l as usize - 1]) as u8
            }
        })
        .collect();
    (out, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(rows: &[&str]) -> (Vec<u8>, usize, usize) {
        let w = rows[0].len();
        let g = rows
            .iter()
            .flat_map(|r| r.bytes().map(|b| (b == b'#') as u8))
            .collect();
        (g, w, rows.len())
    }

    #[test]
    fn eight_connectivity_sizes_and_block_order() {
        let (g, w, h) = grid(&[
            "....#.....", //
            "#..#......",
            "#.........",
            "......##..",
        ]);
        let c = label8(&g, w, h, (0, 0));
        assert_eq!(c.size.len(), 3);
        let l = |x: usize, y: usize| c.label[y * w + x] as usize - 1;
        assert_eq!(l(3, 1), l(4, 0), "diagonal neighbours join");
        assert_eq!(c.size[l(0, 1)], 2);
        // (0,1) lies in block (0,0), before block (0,2) of (4,0).
        assert!(c.key[l(0, 1)] < c.key[l(4, 0)]);
    }

    #[test]
    fn small_islands_and_holes() {
        let (g, w, h) = grid(&[
            "#####.....", //
            "#.###....#",
            "#####.....",
        ]);
        let (f, ch) = remove_small_regions(&g, w, h, 2, true);
        assert!(ch);
        assert_eq!(f[w + 1], 1, "hole of one pixel filled");
        let (i, ch) = remove_small_regions(&g, w, h, 2, false);
        assert!(ch);
        assert_eq!(i[w + 9], 0, "island of one pixel removed");
        assert_eq!(i[0], 1);
        // All islands small: the largest stays.
        let (k, ch) = remove_small_regions(&g, w, h, 100, false);
        assert!(ch);
        assert_eq!((k[0], k[w + 9]), (1, 0));
    }
}
