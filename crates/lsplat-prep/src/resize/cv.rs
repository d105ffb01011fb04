//! OpenCV's `resize` with `INTER_LINEAR` on 8-bit images (imgproc `resize.cpp`,
//! read to learn its arithmetic): 11-bit fixed-point weights per axis, a horizontal
//! pass into `i32` rows and a vertical pass that rounds the two weighted rows with
//! `((b0·(s0>>4))>>16 + (b1·(s1>>4))>>16 + 2) >> 2`. A resize by exactly 1/2 on both
//! axes takes OpenCV's `INTER_AREA` fast path (the rounded mean of 2×2 pixels); an
//! unchanged size is a copy.

use super::Image8;

/// Fixed-point scale of the interpolation weights (`INTER_RESIZE_COEF_SCALE`).
const COEF_SCALE: f32 = 2048.0;

/// `cvRound` of a float: round half to even.
fn round_i32(v: f32) -> i32 {
    v.round_ties_even() as i32
}

/// Resizes `src` to `width × height` as `cv2.resize(src, (width, height))` does.
pub fn resize_linear(src: &Image8, width: usize, height: usize) -> Image8 {
    assert!(width > 0 && height > 0 && src.width > 0 && src.height > 0);
    if (width, height) == (src.width, src.height) {
        return src.clone();
    }
    let inv_x = width as f64 / src.width as f64;
    let inv_y = height as f64 / src.height as f64;
    let (scale_x, scale_y) = (1.0 / inv_x, 1.0 / inv_y);
    let (ix, iy) = (scale_x.round_ties_even(), scale_y.round_ties_even());
    let area_fast = (scale_x - ix).abs() < f64::EPSILON && (scale_y - iy).abs() < f64::EPSILON;
    if area_fast && ix == 2.0 && iy == 2.0 {
        return halve(src, width, height);
    }
    let cn = src.channels;
    // Horizontal taps: source pixel and the two weights of each output column.
    let mut xofs = Vec::with_capacity(width);
    let mut alpha = Vec::with_capacity(width);
    for dx in 0..width {
        let mut fx = ((dx as f64 + 0.5) * scale_x - 0.5) as f32;
        let mut sx = fx.floor() as i64;
        fx -= sx as f32;
        if sx < 0 {
            fx = 0.0;
            sx = 0;
        }
        if sx >= src.width as i64 - 1 {
            fx = 0.0;
            sx = src.width as i64 - 1;
        }
        xofs.push(sx as usize);
        alpha.push([
            round_i32((1.0 - fx) * COEF_SCALE),
            round_i32(fx * COEF_SCALE),
        ]);
    }
    let mut out = Image8::zeros(width, height, cn);
    let mut rows = [vec![0i32; width * cn], vec![0i32; width * cn]];
    let mut have = [usize::MAX; 2];
    let last = src.width - 1;
    for dy in 0..height {
        let mut fy = ((dy as f64 + 0.5) * scale_y - 0.5) as f32;
        let sy = fy.floor() as i64;
        fy -= sy as f32;
        let b = [
            round_i32((1.0 - fy) * COEF_SCALE),
            round_i32(fy * COEF_SCALE),
        ];
        for k in 0..2 {
            let y = (sy + k as i64).clamp(0, src.height as i64 - 1) as usize;
            if have[k] == y {
                continue;
            }
            if have[1 - k] == y {
                let (a, c) = rows.split_at_mut(1);
                if k == 0 {
                    a[0].copy_from_slice(&c[0]);
                } else {
                    c[0].copy_from_slice(&a[0]);
                }
            } else {
                let s = src.row(y);
                let d = &mut rows[k];
                for dx in 0..width {
                    let sx = xofs[dx];
                    let a = alpha[dx];
                    for c in 0..cn {
                        let v0 = s[sx * cn + c] as i32;
                        d[dx * cn + c] = if sx < last {
                            v0 * a[0] + s[(sx + 1) * cn + c] as i32 * a[1]
                        } else {
                            v0 * COEF_SCALE as i32
                        };
                    }
                }
            }
            have[k] = y;
        }
        let o = &mut out.data[dy * width * cn..(dy + 1) * width * cn];
        for (x, v) in o.iter_mut().enumerate() {
            let t = ((b[0] * (rows[0][x] >> 4)) >> 16) + ((b[1] * (rows[1][x] >> 4)) >> 16) + 2;
            *v = (t >> 2) as u8;
        }
    }
    out
}

/// OpenCV's `INTER_AREA` fast path for an exact 2× reduction: the mean of each 2×2
/// block, rounded half up.
fn halve(src: &Image8, width: usize, height: usize) -> Image8 {
    let cn = src.channels;
    let mut out = Image8::zeros(width, height, cn);
    for y in 0..height {
        let (r0, r1) = (src.row(2 * y), src.row(2 * y + 1));
        for x in 0..width {
            for c in 0..cn {
                let i = 2 * x * cn + c;
                let s = r0[i] as u32 + r0[i + cn] as u32 + r1[i] as u32 + r1[i + cn] as u32;
                out.data[(y * width + x) * cn + c] = ((s + 2) >> 2) as u8;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(w: usize, h: usize) -> Image8 {
        let mut im = Image8::zeros(w, h, 3);
        for (i, v) in im.data.iter_mut().enumerate() {
            *v = ((i * 37) % 251) as u8;
        }
        im
    }

    #[test]
    fn same_size_is_a_copy_and_constant_images_stay_constant() {
        let im = ramp(7, 5);
        assert_eq!(resize_linear(&im, 7, 5), im);
        let mut flat = Image8::zeros(13, 9, 3);
        flat.data.fill(200);
        for (w, h) in [(224, 224), (5, 3), (26, 18), (6, 4)] {
            let r = resize_linear(&flat, w, h);
            assert!(r.data.iter().all(|&v| v == 200), "{w}x{h}");
        }
    }

    #[test]
    fn exact_halving_is_the_rounded_block_mean() {
        let im = ramp(8, 6);
        let r = resize_linear(&im, 4, 3);
        let px = |x: usize, y: usize, c: usize| im.data[(y * 8 + x) * 3 + c] as u32;
        let want = (px(2, 2, 1) + px(3, 2, 1) + px(2, 3, 1) + px(3, 3, 1) + 2) / 4;
        assert_eq!(r.data[(4 + 1) * 3 + 1] as u32, want);
    }
}
