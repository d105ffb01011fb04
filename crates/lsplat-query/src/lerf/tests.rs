use lsplat_core::Rng;

use super::*;

fn random_map(w: usize, h: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    (0..w * h).map(|_| rng.range(0.3, 0.7)).collect()
}

/// OpenCV's reflect-101 border written the way its documentation draws it.
#[test]
fn reflect101_matches_opencv() {
    let len = 5;
    let want = [
        (-1, 1),
        (-2, 2),
        (-4, 4),
        (5, 3),
        (6, 2),
        (8, 0),
        (-9, 1),
        (0, 0),
        (4, 4),
    ];
    for (p, r) in want {
        assert_eq!(reflect101(p, len), r, "p = {p}");
    }
    assert_eq!(reflect101(-7, 1), 0);
    assert_eq!(reflect101(3, 2), 1);
}

/// The 30×30 box filter against a direct float64 sum over the reflected window, on
/// images larger and smaller than the box.
#[test]
fn box_filter_matches_a_direct_float64_sum() {
    for (w, h, k) in [(37, 23, 30), (7, 5, 30), (9, 11, 5), (4, 3, 2)] {
        let r = random_map(w, h, (w * h) as u64);
        let got = box_filter(&r, w, h, k);
        let a = (k / 2) as isize;
        for y in 0..h {
            for x in 0..w {
                let mut s = 0f64;
                for i in 0..k as isize {
                    for j in 0..k as isize {
                        let yy = reflect101(y as isize + i - a, h);
                        let xx = reflect101(x as isize + j - a, w);
                        s += r[yy * w + xx] as f64;
                    }
                }
                let want = s / (k * k) as f64;
                assert!(
                    (got[y * w + x] as f64 - want).abs() < 1e-6,
                    "{w}x{h} k{k} at ({x}, {y})"
                );
            }
        }
    }
}

#[test]
fn threshold_matches_float64() {
    let (w, h) = (31, 17);
    let r = random_map(w, h, 4);
    let b = blend(&r, &box_filter(&r, w, h, BOX_SIZE));
    let got = threshold(&b, MASK_THRESHOLD);
    let min = b.iter().map(|v| *v as f64).fold(f64::INFINITY, f64::min);
    let max = b.iter().map(|v| *v as f64 - min).fold(0.0, f64::max);
    let mut ones = 0;
    for (i, v) in b.iter().enumerate() {
        let n = ((*v as f64 - min) / (max + 1e-9) * 2.0 - 1.0).clamp(0.0, 1.0);
        if (n - 0.4).abs() > 1e-5 {
            assert_eq!(got[i], (n > 0.4) as u8, "pixel {i}: n = {n}");
        }
        ones += got[i] as usize;
    }
    assert!(ones > 0 && ones < w * h);
    // Blend is the mean of the map and its filtered version.
    assert_eq!(blend(&[1.0], &[0.5]), vec![0.75]);
}

/// LangSplat's `smooth` written as its Python loops: a bincount's argmax over the
/// window `mask[max(0, i-3):min(i+4, h-1), max(0, j-3):min(j+4, w-1)]`.
fn smooth_reference(mask: &[u8], w: usize, h: usize) -> Vec<u8> {
    let mut out = vec![0; w * h];
    for i in 0..h {
        for j in 0..w {
            let mut count = [0usize; 2];
            for y in i.saturating_sub(3)..(i + 4).min(h - 1) {
                for x in j.saturating_sub(3)..(j + 4).min(w - 1) {
                    count[mask[y * w + x] as usize] += 1;
                }
            }
            out[i * w + j] = (count[1] > count[0]) as u8;
        }
    }
    out
}

#[test]
fn majority_vote_matches_langsplats_loops() {
    let mut rng = Rng::new(9);
    for (w, h) in [(2, 2), (9, 8), (20, 13), (5, 30)] {
        for density in [0.3, 0.5, 0.7] {
            let mask: Vec<u8> = (0..w * h).map(|_| (rng.f64() < density) as u8).collect();
            assert_eq!(
                majority_vote(&mask, w, h),
                smooth_reference(&mask, w, h),
                "{w}x{h} density {density}"
            );
        }
    }
    // The last row and column never count for themselves: a mask that is 1 only
    // there is wiped out; a tie goes to 0.
    let (w, h) = (8, 8);
    let mut m = vec![0u8; 64];
    (0..8).for_each(|i| {
        m[7 * 8 + i] = 1;
        m[i * 8 + 7] = 1
    });
    assert!(majority_vote(&m, w, h).iter().all(|v| *v == 0));
}

/// The threaded box filter and vote give the one-thread bits, also with more threads
/// than rows or columns and strips of uneven width.
#[test]
fn threads_do_not_change_the_box_filter_or_the_vote() {
    let mut rng = Rng::new(3);
    for (w, h) in [(1, 1), (3, 2), (37, 23), (64, 5), (5, 64), (131, 77)] {
        let r = random_map(w, h, (w * 31 + h) as u64);
        let mask: Vec<u8> = (0..w * h).map(|_| (rng.f64() < 0.5) as u8).collect();
        for k in [1, 2, 5, BOX_SIZE] {
            let one = box_filter(&r, w, h, k);
            for t in [2, 3, 4, 7, 200] {
                let got = box_filter_threads(&r, w, h, k, t);
                assert!(
                    one.iter()
                        .zip(&got)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "box {w}x{h} k{k} on {t} threads"
                );
            }
        }
        for t in [2, 3, 4, 7, 200] {
            assert_eq!(
                majority_vote(&mask, w, h),
                majority_vote_threads(&mask, w, h, t),
                "vote {w}x{h} on {t} threads"
            );
        }
    }
}

/// Level choice, plateau ties, and boxes that touch the image border.
#[test]
fn levels_ties_and_border_boxes() {
    let (w, h) = (64, 48);
    // Level 0: flat 0.5. Level 1: a 40×40 plateau of 0.9 in the top-left corner, so
    // the 30×30 box reaches its maximum (0.9) wherever its window (with the reflected
    // border) lies inside the plateau: x, y in 0..=25.
    let flat = vec![0.5f32; w * h];
    let mut plateau = vec![0.2f32; w * h];
    for y in 0..40 {
        for x in 0..40 {
            plateau[y * w + x] = 0.9;
        }
    }
    let levels = vec![flat.clone(), plateau.clone()];
    let loc = localize(Protocol::LangSplat, &levels, w, h).unwrap();
    assert_eq!(loc.level, 1);
    assert!((loc.scores[1] - 0.9).abs() < 1e-6);
    let mut want = Vec::new();
    for y in 0..=25u32 {
        for x in 0..=25u32 {
            want.push((x, y));
        }
    }
    let mut got = loc.candidates.clone();
    got.sort_by_key(|&(x, y)| (y, x));
    assert_eq!(got, want, "every tied maximum is a candidate");
    // A box touching the top-left border contains (0, 0): a hit, inclusive bounds.
    assert!(hit(&loc.candidates, &[[0.0, 0.0, 0.0, 0.0]]));
    assert!(
        hit(&loc.candidates, &[[50.0, 40.0, 25.0, 25.0]]),
        "corners in either order, inclusive"
    );
    assert!(!hit(&loc.candidates, &[[26.0, 0.0, 63.0, 47.0]]));
    // Two identical levels tie: the first is chosen.
    let tie = localize(
        Protocol::LangSplat,
        &[plateau.clone(), plateau.clone()],
        w,
        h,
    )
    .unwrap();
    assert_eq!(tie.level, 0);
    // Segmentation: the plateau level wins; its mask is the plateau (less the clipped
    // vote at the border and the smoothing at the plateau's edge).
    let seg = segment(Protocol::LangSplat, &levels, w, h).unwrap();
    assert_eq!(seg.level, 1);
    let mut gt = vec![0u8; w * h];
    for y in 0..40 {
        for x in 0..40 {
            gt[y * w + x] = 1;
        }
    }
    let score = iou(&seg.mask, &gt);
    assert!(score > 0.85 && score < 1.0, "IoU {score}");
    assert_eq!(iou(&gt, &gt), 1.0);
    assert_eq!(iou(&[0, 0], &[0, 0]), 0.0);
    assert!(segment(Protocol::LangSplat, &[vec![0.0; 3]], 2, 2).is_err());
}

/// PyTorch's `AvgPool2d(k, 1, k/2, count_include_pad=False)` written as direct loops.
fn pool_reference(r: &[f32], w: usize, h: usize, k: usize) -> Vec<f32> {
    let a = (k / 2) as isize;
    let mut out = vec![0f32; w * h];
    for y in 0..h as isize {
        for x in 0..w as isize {
            let (mut s, mut n) = (0f64, 0usize);
            for dy in -a..=a {
                for dx in -a..=a {
                    let (yy, xx) = (y + dy, x + dx);
                    if yy >= 0 && yy < h as isize && xx >= 0 && xx < w as isize {
                        s += f64::from(r[yy as usize * w + xx as usize]);
                        n += 1;
                    }
                }
            }
            out[y as usize * w + x as usize] = (s / n as f64) as f32;
        }
    }
    out
}

#[test]
fn langsplat_v2_pool_and_clean_up_match_direct_loops() {
    for (w, h, k) in [(40, 31, 29), (7, 5, 29), (12, 9, 7), (1, 6, 7)] {
        let r = random_map(w, h, (w * h) as u64);
        assert_eq!(
            pool_mean(&r, w, h, k),
            pool_reference(&r, w, h, k),
            "{w}x{h}, k {k}"
        );
        let mask: Vec<u8> = r.iter().map(|&v| u8::from(v > 0.5)).collect();
        let m: Vec<f32> = mask.iter().map(|&v| f32::from(v)).collect();
        let want: Vec<u8> = pool_reference(&m, w, h, CLEAN_SIZE)
            .iter()
            .map(|&v| u8::from(v > 0.5))
            .collect();
        assert_eq!(Protocol::LangSplatV2.clean(&mask, w, h), want);
    }
    // A lone pixel in a corner: 1 of 16 in-image pixels, removed; the vote of
    // LangSplat differs from the pool near the clipped last row and column.
    let (w, h) = (10, 8);
    let mut mask = vec![0u8; w * h];
    mask[0] = 1;
    assert!(
        Protocol::LangSplatV2
            .clean(&mask, w, h)
            .iter()
            .all(|&v| v == 0)
    );
    let block: Vec<u8> = (0..w * h).map(|i| u8::from(i % w >= 6)).collect();
    assert_ne!(
        Protocol::LangSplatV2.clean(&block, w, h),
        Protocol::LangSplat.clean(&block, w, h)
    );
}

#[test]
fn the_v2_protocol_segments_and_localizes_with_its_own_smoothing() {
    let (w, h) = (48, 36);
    let levels: Vec<Vec<f32>> = (0..3).map(|s| random_map(w, h, 40 + s)).collect();
    let seg = segment(Protocol::LangSplatV2, &levels, w, h).unwrap();
    let f: Vec<Vec<f32>> = levels
        .iter()
        .map(|r| pool_reference(r, w, h, POOL_SIZE))
        .collect();
    let b: Vec<Vec<f32>> = levels.iter().zip(&f).map(|(r, f)| blend(r, f)).collect();
    let scores: Vec<f32> = b
        .iter()
        .map(|x| x.iter().copied().fold(f32::MIN, f32::max))
        .collect();
    assert_eq!(seg.scores, scores);
    let want = Protocol::LangSplatV2.clean(&threshold(&b[seg.level], MASK_THRESHOLD), w, h);
    assert_eq!(seg.mask, want);
    let loc = localize(Protocol::LangSplatV2, &levels, w, h).unwrap();
    let lmax: Vec<f32> = f
        .iter()
        .map(|x| x.iter().copied().fold(f32::MIN, f32::max))
        .collect();
    assert_eq!(loc.scores, lmax);
    assert_ne!(
        segment(Protocol::LangSplat, &levels, w, h).unwrap().mask,
        seg.mask,
        "the two protocols agree here: the test would not tell them apart"
    );
}
