//! SAM's `postprocess_small_regions` (min_mask_region_area): fill small holes, then
//! drop small islands, each by 8-connected components; masks that changed score 0,
//! the others 1, and a box NMS on those scores removes new duplicates.
//!
//! The components are found on the mask's bounding box padded by one pixel on every
//! side that is not a frame edge, not on the whole frame. The result is the
//! full-frame one byte for byte: pixels outside the box are background, so islands
//! are the same; for holes, the pad stands for the frame outside the box (one region,
//! or two when the box spans the frame's whole width or height), and a component that
//! reaches the pad gets the true size of the region it joins. In the one case the
//! crop cannot express — a hole that reaches outside the box and is itself small
//! (frames under `min_area` pixels across) — the frame is labelled whole.

use crate::bitmask::{BitMask, BoxXyxy, words_per_row};
use crate::boxes::nms;
use crate::ccl::{label8, remove_small_regions, resolve};

/// A cleaned mask and whether cleaning changed it (SAM's sense).
#[derive(Clone, Debug)]
pub struct Cleaned {
    /// The mask after filling holes and dropping islands.
    pub mask: BitMask,
    /// True when either pass found a small region.
    pub changed: bool,
}

/// Cleans one mask as SAM's `remove_small_regions` "holes" then "islands" do.
pub fn clean_mask(mask: &BitMask, min_area: u64) -> Cleaned {
    if mask.area() == 0 {
        return Cleaned {
            mask: mask.clone(),
            changed: false,
        };
    }
    let (fw, fh) = (mask.width(), mask.height());
    let [x0, y0, x1, y1] = mask.bbox();
    let pad = [x0 > 0, y0 > 0, x1 + 1 < fw, y1 + 1 < fh]; // left, top, right, bottom
    let cx0 = x0 - pad[0] as u32;
    let cy0 = y0 - pad[1] as u32;
    let cw = (x1 + pad[2] as u32 - cx0 + 1) as usize;
    let ch = (y1 + pad[3] as u32 - cy0 + 1) as usize;
    let mut crop = vec![0u8; cw * ch];
    for y in y0..=y1 {
        for x in x0..=x1 {
            crop[(y - cy0) as usize * cw + (x - cx0) as usize] = mask.get(x, y) as u8;
        }
    }
    // Holes: the background of the padded crop.
    let work: Vec<u8> = crop.iter().map(|&v| (v == 0) as u8).collect();
    let comps = label8(&work, cw, ch, (cx0, cy0));
    let mut sizes = comps.size.clone();
    let (bw, bh) = ((x1 - x0 + 1) as u64, (y1 - y0 + 1) as u64);
    let (fw64, fh64) = (fw as u64, fh as u64);
    let full_w = !pad[0] && !pad[2];
    let full_h = !pad[1] && !pad[3];
    // Outside regions: (a pad pixel of the region, its pad pixels, its frame pixels).
    let mut parts: Vec<((usize, usize), u64, u64)> = Vec::new();
    if full_w && !full_h {
        if pad[1] {
            parts.push(((0, 0), cw as u64, y0 as u64 * fw64));
        }
        if pad[3] {
            parts.push(((0, ch - 1), cw as u64, (fh - 1 - y1) as u64 * fw64));
        }
    } else if full_h && !full_w {
        if pad[0] {
            parts.push(((0, 0), ch as u64, x0 as u64 * fh64));
        }
        if pad[2] {
            parts.push(((cw - 1, 0), ch as u64, (fw - 1 - x1) as u64 * fh64));
        }
    } else if !(full_w && full_h) {
        // (0, 0) is a pad pixel with a left or top pad, else the opposite corner is.
        let at = if pad[0] || pad[1] {
            (0, 0)
        } else {
            (cw - 1, ch - 1)
        };
        parts.push((at, (cw * ch) as u64 - bw * bh, fw64 * fh64 - bw * bh));
    }
    let mut outside = vec![false; sizes.len()];
    for &((px, py), in_pad, in_frame) in &parts {
        let l = comps.label[py * cw + px] as usize - 1;
        sizes[l] = sizes[l] - in_pad + in_frame;
        outside[l] = true;
    }
    if (0..sizes.len()).any(|l| outside[l] && sizes[l] < min_area) {
        return clean_full(mask, min_area);
    }
    let (filled, changed_holes) = resolve(&crop, &comps, &sizes, min_area, true);
    // Islands: the mask's components (the pad is background).
    let comps = label8(&filled, cw, ch, (cx0, cy0));
    let sizes = comps.size.clone();
    let (kept, changed_islands) = resolve(&filled, &comps, &sizes, min_area, false);
    let changed = changed_holes || changed_islands;
    if !changed {
        return Cleaned {
            mask: mask.clone(),
            changed,
        };
    }
    let wpr = words_per_row(fw);
    let mut rows = vec![0u64; wpr * ch];
    for y in 0..ch {
        for x in 0..cw {
            if kept[y * cw + x] != 0 {
                let fx = cx0 as usize + x;
                rows[y * wpr + fx / 64] |= 1 << (fx % 64);
            }
        }
    }
    Cleaned {
        mask: BitMask::from_frame_rows(fw, fh, cy0, &rows),
        changed,
    }
}

/// [`clean_mask`] on the whole frame, as SAM runs it.
pub fn clean_full(mask: &BitMask, min_area: u64) -> Cleaned {
    let (w, h) = (mask.width() as usize, mask.height() as usize);
    let bytes = mask.to_bytes();
    let (a, c1) = remove_small_regions(&bytes, w, h, min_area, true);
    let (b, c2) = remove_small_regions(&a, w, h, min_area, false);
    Cleaned {
        mask: BitMask::from_bytes(mask.width(), mask.height(), &b),
        changed: c1 || c2,
    }
}

/// SAM's `postprocess_small_regions` on one list of masks: cleans each (through
/// `clean`, which may share results between lists), then keeps the NMS survivors of
/// the cleaned boxes scored 1 (unchanged) or 0 (changed), highest score first.
/// Returns, in that order, (index into `masks`, cleaned mask).
pub fn postprocess_small_regions(
    masks: &[&BitMask],
    nms_thresh: f64,
    mut clean: impl FnMut(usize) -> Cleaned,
) -> Vec<(usize, BitMask)> {
    if masks.is_empty() {
        return Vec::new();
    }
    let cleaned: Vec<Cleaned> = (0..masks.len()).map(&mut clean).collect();
    let boxes: Vec<BoxXyxy> = cleaned.iter().map(|c| c.mask.bbox()).collect();
    let scores: Vec<f32> = cleaned.iter().map(|c| (!c.changed) as u8 as f32).collect();
    let keep = nms(&boxes, &scores, nms_thresh);
    let mut cleaned: Vec<Option<Cleaned>> = cleaned.into_iter().map(Some).collect();
    keep.into_iter()
        .map(|i| {
            (
                i,
                cleaned[i]
                    .take()
                    .map(|c| c.mask)
                    .unwrap_or_else(|| masks[i].clone()),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsplat_core::rng::Rng;

    /// Random blobby masks with holes and specks, some touching frame edges.
    fn random_mask(rng: &mut Rng, w: u32, h: u32) -> BitMask {
        let mut px = vec![0u8; (w * h) as usize];
        let blobs = 1 + (rng.below(4) as u32) as usize;
        for b in 0..blobs {
            let cx = rng.f32() * w as f32;
            let cy = rng.f32() * h as f32;
            let r = 2.0 + rng.f32() * if b == 0 { 30.0 } else { 8.0 };
            let hole = rng.f32() < 0.5;
            for y in 0..h {
                for x in 0..w {
                    let d = ((x as f32 - cx).powi(2) + (y as f32 - cy).powi(2)).sqrt();
                    if d < r && !(hole && d < r * 0.3) {
                        px[(y * w + x) as usize] = 1;
                    }
                }
            }
        }
        for _ in 0..rng.below(12) {
            let i = rng.below((w * h) as u64) as usize;
            px[i] ^= 1;
        }
        BitMask::from_bytes(w, h, &px)
    }

    #[test]
    fn bbox_crop_cleaning_equals_the_full_frame_byte_for_byte() {
        let mut rng = Rng::new(31);
        let mut changed = 0;
        for case in 0..400 {
            let (w, h) = match case % 4 {
                0 => (96, 64),
                1 => (200, 37),
                2 => (20, 130),
                _ => (13, 9),
            };
            let m = random_mask(&mut rng, w, h);
            for min_area in [1, 25, 100] {
                let a = clean_mask(&m, min_area);
                let b = clean_full(&m, min_area);
                assert_eq!(a.changed, b.changed, "case {case} area {min_area}");
                assert_eq!(
                    a.mask.to_bytes(),
                    b.mask.to_bytes(),
                    "case {case} area {min_area}"
                );
                changed += a.changed as u32;
            }
        }
        assert!(changed > 300, "the cases exercise cleaning ({changed})");
    }
}
