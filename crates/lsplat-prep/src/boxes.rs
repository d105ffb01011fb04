//! Boxes: torchvision's `nms` (as SAM's `batched_nms` calls it with one category),
//! SAM's crop-edge test and box areas.

use crate::bitmask::BoxXyxy;

/// Order of `scores` from highest to lowest; equal scores keep their input order
/// (a stable sort: the original's tie order depends on the PyTorch device, see
/// docs/formats.md).
pub fn order_desc<T: PartialOrd + Copy>(scores: &[T]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| {
        scores[b]
            .partial_cmp(&scores[a])
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    idx
}

/// Greedy non-maximum suppression: visits boxes by decreasing score and drops every
/// later box whose IoU with a kept one exceeds `iou_threshold`. Boxes are SAM's
/// (`x1 − x0` is the width torchvision uses), IoU is computed in float32 and
/// compared in double, as torchvision's CPU kernel does. Returns the kept indices
/// in visiting order (highest score first).
pub fn nms<T: PartialOrd + Copy>(
    boxes: &[BoxXyxy],
    scores: &[T],
    iou_threshold: f64,
) -> Vec<usize> {
    assert_eq!(boxes.len(), scores.len());
    let order = order_desc(scores);
    let f: Vec<[f32; 4]> = boxes.iter().map(|b| b.map(|v| v as f32)).collect();
    let area: Vec<f32> = f.iter().map(|b| (b[2] - b[0]) * (b[3] - b[1])).collect();
    let mut suppressed = vec![false; boxes.len()];
    let mut keep = Vec::new();
    for (n, &i) in order.iter().enumerate() {
        if suppressed[i] {
            continue;
        }
        keep.push(i);
        let a = f[i];
        for &j in &order[n + 1..] {
            if suppressed[j] {
                continue;
            }
            let b = f[j];
            let w = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
            let h = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
            let inter = w * h;
            let iou = inter / (area[i] + area[j] - inter);
            if iou as f64 > iou_threshold {
                suppressed[j] = true;
            }
        }
    }
    keep
}

/// SAM's `is_box_near_crop_edge`: the box (frame coordinates) lies within 20 pixels
/// of an edge of its crop that is not an edge of the frame.
pub fn near_crop_edge(b: BoxXyxy, crop: [u32; 4], frame: (u32, u32)) -> bool {
    let full = [0, 0, frame.0, frame.1];
    (0..4).any(|k| {
        let near = |e: u32| (b[k] as f32 - e as f32).abs() <= 20.0;
        near(crop[k]) && !near(full[k])
    })
}

/// torchvision's `box_area` of a crop box `[x0, y0, x1, y1]` (exclusive ends).
pub fn crop_area(c: [u32; 4]) -> u64 {
    (c[2] - c[0]) as u64 * (c[3] - c[1]) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nms_suppresses_by_iou_and_keeps_ties_in_order() {
        let boxes = [
            [0, 0, 10, 10],
            [1, 1, 10, 10],
            [20, 20, 30, 30],
            [0, 0, 10, 10],
        ];
        // IoU(0,1) = 81/100 > 0.7; box 3 duplicates box 0; box 2 is apart.
        assert_eq!(nms(&boxes, &[0.9f32, 0.95, 0.5, 0.9], 0.7), vec![1, 2]);
        assert_eq!(nms(&boxes, &[1.0f32, 1.0, 1.0, 1.0], 0.7), vec![0, 2]);
        assert_eq!(nms(&boxes, &[1.0f32, 1.0, 1.0, 1.0], 0.85), vec![0, 1, 2]);
        // Zero-area boxes have IoU 0/0: never suppressed.
        assert_eq!(
            nms(&[[3, 0, 3, 9], [3, 0, 3, 9]], &[1.0f32, 0.5], 0.7),
            vec![0, 1]
        );
    }

    #[test]
    fn crop_edges_count_only_inside_the_frame() {
        let frame = (100, 80);
        assert!(near_crop_edge([5, 5, 55, 30], [0, 0, 60, 45], frame));
        assert!(!near_crop_edge([5, 5, 30, 20], [0, 0, 60, 45], frame));
        assert!(!near_crop_edge([5, 5, 99, 79], [0, 0, 100, 80], frame));
    }
}
