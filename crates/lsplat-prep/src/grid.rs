//! SAM's prompt points and crops (`utils/amg.py`, `utils/transforms.py`): the
//! regular point grid of each crop layer, the crop boxes of each layer and the
//! resize of a crop's longest side to the encoder's input side.

/// The `n × n` grid of points in `[0, 1]²` (cell centres), x fastest, as float64
/// values of `numpy.linspace(1/(2n), 1 − 1/(2n), n)`.
pub fn point_grid(n: usize) -> Vec<[f64; 2]> {
    let side = linspace(1.0 / (2 * n) as f64, 1.0 - 1.0 / (2 * n) as f64, n);
    side.iter()
        .flat_map(|&y| side.iter().map(move |&x| [x, y]))
        .collect()
}

/// numpy's `linspace(start, stop, n)` (endpoint included): `start + i·step`, the last
/// value set to `stop`.
fn linspace(start: f64, stop: f64, n: usize) -> Vec<f64> {
    if n == 1 {
        return vec![start];
    }
    let step = (stop - start) / (n - 1) as f64;
    let mut v: Vec<f64> = (0..n).map(|i| start + i as f64 * step).collect();
    v[n - 1] = stop;
    v
}

/// Points per side of crop layer `layer`: `int(n / factor^layer)`.
pub fn layer_points(n: usize, factor: usize, layer: u32) -> usize {
    n / factor.pow(layer)
}

/// A crop: its box `[x0, y0, x1, y1]` (exclusive ends) and its layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crop {
    /// Box in the frame, exclusive ends.
    pub bbox: [u32; 4],
    /// Crop layer (0 = the whole image).
    pub layer: u32,
}

/// SAM's `generate_crop_boxes`: the whole image, then for each layer `i` a
/// `2^(i+1) × 2^(i+1)` set of overlapping crops (x outer, y inner).
pub fn crop_boxes(width: u32, height: u32, layers: u32, overlap_ratio: f64) -> Vec<Crop> {
    let mut out = vec![Crop {
        bbox: [0, 0, width, height],
        layer: 0,
    }];
    let short = width.min(height) as f64;
    for i in 0..layers {
        let n = 2u32.pow(i + 1);
        let overlap = (overlap_ratio * short * (2.0 / n as f64)) as i64;
        let len =
            |orig: u32| ((overlap as f64 * (n - 1) as f64 + orig as f64) / n as f64).ceil() as i64;
        let (cw, ch) = (len(width), len(height));
        let x0s: Vec<i64> = (0..n as i64).map(|k| (cw - overlap) * k).collect();
        let y0s: Vec<i64> = (0..n as i64).map(|k| (ch - overlap) * k).collect();
        for &x0 in &x0s {
            for &y0 in &y0s {
                out.push(Crop {
                    bbox: [
                        x0 as u32,
                        y0 as u32,
                        (x0 + cw).min(width as i64) as u32,
                        (y0 + ch).min(height as i64) as u32,
                    ],
                    layer: i + 1,
                });
            }
        }
    }
    out
}

/// SAM's default crop overlap ratio (512 / 1500).
pub const CROP_OVERLAP_RATIO: f64 = 512.0 / 1500.0;

/// `ResizeLongestSide.get_preprocess_shape`: the (width, height) a `w × h` image takes
/// when its longest side is scaled to `side` (rounded half up).
pub fn preprocess_shape(w: usize, h: usize, side: usize) -> (usize, usize) {
    let scale = side as f64 / w.max(h) as f64;
    (
        (w as f64 * scale + 0.5) as usize,
        (h as f64 * scale + 0.5) as usize,
    )
}

/// The prompt points of a crop of size `w × h`, in pixels of the crop (float64, as
/// SAM passes them on), and the same points in the encoder's frame, where the crop
/// fills `nw × nh` (float32, what the decoder receives: `ResizeLongestSide.apply_coords`
/// with `(nw, nh)` = [`preprocess_shape`]; EfficientSAM's per-axis scaling with
/// `(nw, nh) = (S, S)`).
pub fn crop_points(
    grid: &[[f64; 2]],
    w: usize,
    h: usize,
    (nw, nh): (usize, usize),
) -> (Vec<[f64; 2]>, Vec<[f32; 2]>) {
    let px: Vec<[f64; 2]> = grid
        .iter()
        .map(|p| [p[0] * w as f64, p[1] * h as f64])
        .collect();
    let sx = nw as f64 / w as f64;
    let sy = nh as f64 / h as f64;
    let enc = px
        .iter()
        .map(|p| [(p[0] * sx) as f32, (p[1] * sy) as f32])
        .collect();
    (px, enc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_and_crops_as_sam() {
        let g = point_grid(4);
        assert_eq!(g.len(), 16);
        assert_eq!(g[1], [0.375, 0.125]);
        assert_eq!(g[15], [0.875, 0.875]);
        // 1264 × 832 with one crop layer: four crops of 774 × 558 overlapping by 283.
        let c = crop_boxes(1264, 832, 1, CROP_OVERLAP_RATIO);
        assert_eq!(c.len(), 5);
        assert_eq!(c[0].bbox, [0, 0, 1264, 832]);
        assert_eq!(c[1].bbox, [0, 0, 774, 558]);
        assert_eq!(c[2].bbox, [0, 275, 774, 832]);
        assert_eq!(c[3].bbox, [491, 0, 1264, 558]);
        assert_eq!(preprocess_shape(1264, 832, 1024), (1024, 674));
        assert_eq!(preprocess_shape(504, 378, 1024), (1024, 768));
        assert_eq!(layer_points(32, 1, 1), 32);
        assert_eq!(layer_points(32, 2, 1), 16);
    }
}
