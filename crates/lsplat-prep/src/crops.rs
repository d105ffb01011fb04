//! LangSplat's CLIP crops (`get_seg_img`, `pad_img`, `cv2.resize`): the image with
//! every pixel outside the mask black, cut to the mask's box as LangSplat reads it
//! (`x, y, w, h` with `w = x1 − x0`, so the box's last column and row are left out),
//! zero-padded to a square with the short side centred at `(long − short) // 2`, and
//! resized to 224×224 with OpenCV's bilinear `uint8` resize.

use crate::bitmask::BitMask;
use crate::resize::Image8;
use crate::resize::cv::resize_linear;

/// Side of a CLIP crop.
pub const CROP_SIDE: usize = 224;

/// The padded square (before resizing) of `mask` over the RGB image `image`. An empty
/// box (a one-pixel mask: LangSplat's `cv2.resize` fails on it) gives a 1×1 black
/// square.
pub fn padded_square(image: &Image8, mask: &BitMask) -> Image8 {
    let [x0, y0, x1, y1] = mask.bbox();
    let (w, h) = ((x1 - x0) as usize, (y1 - y0) as usize);
    let l = w.max(h);
    if l == 0 {
        return Image8::zeros(1, 1, image.channels);
    }
    let cn = image.channels;
    let mut sq = Image8::zeros(l, l, cn);
    let (ox, oy) = if h > w {
        ((h - w) / 2, 0)
    } else {
        (0, (w - h) / 2)
    };
    for y in 0..h {
        let src = image.row(y0 as usize + y);
        let dst = &mut sq.data[((oy + y) * l + ox) * cn..((oy + y) * l + ox + w) * cn];
        for x in 0..w {
            if mask.get(x0 + x as u32, y0 + y as u32) {
                let s = (x0 as usize + x) * cn;
                dst[x * cn..(x + 1) * cn].copy_from_slice(&src[s..s + cn]);
            }
        }
    }
    sq
}

/// The 224×224 CLIP crop of `mask`.
pub fn clip_crop(image: &Image8, mask: &BitMask) -> Image8 {
    resize_linear(&padded_square(image, mask), CROP_SIDE, CROP_SIDE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crop_cuts_masks_and_centres_the_short_side() {
        let mut im = Image8::zeros(10, 8, 3);
        for (i, v) in im.data.iter_mut().enumerate() {
            *v = (i % 250) as u8 + 1;
        }
        // Mask: columns 2..=7, rows 1..=3, except pixel (4, 2).
        let px: Vec<u8> = (0..8)
            .flat_map(|y| (0..10).map(move |x| (x, y)))
            .map(|(x, y)| ((2..=7).contains(&x) && (1..=3).contains(&y) && (x, y) != (4, 2)) as u8)
            .collect();
        let m = BitMask::from_bytes(10, 8, &px);
        let sq = padded_square(&im, &m);
        // Box w = 5, h = 2: a 5×5 square, rows placed at (5 − 2) // 2 = 1.
        assert_eq!((sq.width, sq.height), (5, 5));
        let at = |x: usize, y: usize| &sq.data[(y * 5 + x) * 3..(y * 5 + x) * 3 + 3];
        assert_eq!(at(0, 0), &[0, 0, 0]);
        assert_eq!(at(0, 1), &im.data[(10 + 2) * 3..(10 + 2) * 3 + 3]);
        assert_eq!(at(2, 2), &[0, 0, 0], "pixel outside the mask is black");
        assert_eq!(at(4, 2), &im.data[(2 * 10 + 6) * 3..(2 * 10 + 6) * 3 + 3]);
        assert_eq!(at(0, 3), &[0, 0, 0], "the box's last row is left out");
        let c = clip_crop(&im, &m);
        assert_eq!((c.width, c.height), (224, 224));
    }
}
