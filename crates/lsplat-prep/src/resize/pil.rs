//! Pillow's `Image.resize(size, BILINEAR)` on 8-bit images (`Resample.c`, read to
//! learn its arithmetic): a triangle filter widened by the reduction factor
//! (antialiasing), weights normalised per output pixel and converted to 22-bit fixed
//! point, a horizontal pass into an 8-bit image of the rows the vertical pass needs,
//! then the vertical pass. SAM resizes its input this way (torchvision on a PIL image).

use super::Image8;

/// Fixed-point precision of the weights (`PRECISION_BITS`).
const BITS: u32 = 22;

/// Taps of one axis: for each output position the first source index, the count and
/// the fixed-point weights.
struct Taps {
    first: Vec<usize>,
    count: Vec<usize>,
    /// `ksize` weights per output position.
    weights: Vec<i32>,
    ksize: usize,
}

fn taps(in_size: usize, out_size: usize) -> Taps {
    let scale = in_size as f64 / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = filterscale; // the bilinear filter's support is 1
    let ksize = support.ceil() as usize * 2 + 1;
    let (mut first, mut count) = (Vec::with_capacity(out_size), Vec::with_capacity(out_size));
    let mut weights = vec![0i32; out_size * ksize];
    let mut k = vec![0f64; ksize];
    for xx in 0..out_size {
        let center = (xx as f64 + 0.5) * scale;
        let ss = 1.0 / filterscale;
        let xmin = ((center - support + 0.5) as i64).max(0) as usize;
        let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize - xmin;
        let mut ww = 0.0;
        for (x, kx) in k.iter_mut().enumerate().take(xmax) {
            let t = ((x + xmin) as f64 - center + 0.5) * ss;
            let w = if t.abs() < 1.0 { 1.0 - t.abs() } else { 0.0 };
            *kx = w;
            ww += w;
        }
        for x in 0..xmax {
            let w = if ww != 0.0 { k[x] / ww } else { k[x] };
            weights[xx * ksize + x] = if w < 0.0 {
                (-0.5 + w * (1u32 << BITS) as f64) as i32
            } else {
                (0.5 + w * (1u32 << BITS) as f64) as i32
            };
        }
        first.push(xmin);
        count.push(xmax);
    }
    Taps {
        first,
        count,
        weights,
        ksize,
    }
}

fn clip8(v: i32) -> u8 {
    (v >> BITS).clamp(0, 255) as u8
}

/// Resizes `src` to `width × height` as Pillow's bilinear `resize` does.
pub fn resize_bilinear(src: &Image8, width: usize, height: usize) -> Image8 {
    assert!(width > 0 && height > 0 && src.width > 0 && src.height > 0);
    if (width, height) == (src.width, src.height) {
        return src.clone();
    }
    let cn = src.channels;
    let need_h = width != src.width;
    let need_v = height != src.height;
    let tv = taps(src.height, height);
    let th = taps(src.width, width);
    let half = 1i32 << (BITS - 1);
    // Horizontal pass over the rows the vertical pass reads.
    let (y_first, y_last) = (tv.first[0], tv.first[height - 1] + tv.count[height - 1]);
    let tmp = if need_h {
        let mut t = Image8::zeros(width, y_last - y_first, cn);
        for y in y_first..y_last {
            let s = src.row(y);
            let d = &mut t.data[(y - y_first) * width * cn..(y - y_first + 1) * width * cn];
            for xx in 0..width {
                let (x0, n) = (th.first[xx], th.count[xx]);
                let k = &th.weights[xx * th.ksize..xx * th.ksize + n];
                for c in 0..cn {
                    let mut ss = half;
                    for (x, &w) in k.iter().enumerate() {
                        ss += s[(x0 + x) * cn + c] as i32 * w;
                    }
                    d[xx * cn + c] = clip8(ss);
                }
            }
        }
        t
    } else {
        src.clone()
    };
    if !need_v {
        return tmp;
    }
    let off = if need_h { y_first } else { 0 };
    let mut out = Image8::zeros(width, height, cn);
    for yy in 0..height {
        let (y0, n) = (tv.first[yy] - off, tv.count[yy]);
        let k = &tv.weights[yy * tv.ksize..yy * tv.ksize + n];
        for x in 0..width * cn {
            let mut ss = half;
            for (y, &w) in k.iter().enumerate() {
                ss += tmp.data[(y0 + y) * width * cn + x] as i32 * w;
            }
            out.data[yy * width * cn + x] = clip8(ss);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_images_stay_constant_both_ways() {
        let mut flat = Image8::zeros(37, 23, 3);
        flat.data.fill(77);
        for (w, h) in [(1024, 637), (10, 6), (37, 50), (80, 23)] {
            let r = resize_bilinear(&flat, w, h);
            assert!(r.data.iter().all(|&v| v == 77), "{w}x{h}");
        }
    }

    #[test]
    fn weights_sum_to_one_in_fixed_point() {
        for (i, o) in [(504, 1024), (1264, 1024), (7, 3), (3, 7)] {
            let t = taps(i, o);
            for xx in 0..o {
                let s: i32 = t.weights[xx * t.ksize..xx * t.ksize + t.count[xx]]
                    .iter()
                    .sum();
                assert!(
                    (s - (1 << BITS)).abs() <= t.count[xx] as i32,
                    "{i}->{o} at {xx}: {s}"
                );
            }
        }
    }
}
