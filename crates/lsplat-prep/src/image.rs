//! Input images: PNG and JPEG decoded to 8-bit RGB the way `cv2.imread` (LangSplat's
//! reader) sees them — 16-bit samples keep their high byte, grey is replicated, alpha
//! is dropped — and LangSplat's resolution rule applied with OpenCV's bilinear resize.

use std::path::Path;

use crate::PrepError;
use crate::resize::Image8;
use crate::resize::cv::resize_linear;

/// Bytes per pixel a preprocessed image may need at its peak (decoded and resized
/// copies, four float segmentation maps, masks); checked before decoding.
pub const PEAK_BYTES_PER_PIXEL: u64 = 64;

/// Reads the size of an image from its header.
pub fn image_size(path: &Path) -> Result<(u32, u32), PrepError> {
    let bytes = std::fs::read(path).map_err(|e| PrepError::io(path, e))?;
    header_size(&bytes, path)
}

fn header_size(bytes: &[u8], path: &Path) -> Result<(u32, u32), PrepError> {
    if bytes.starts_with(b"\x89PNG") {
        let r = png::Decoder::new(std::io::Cursor::new(bytes))
            .read_info()
            .map_err(|e| PrepError::image(path, format!("not a readable PNG: {e}")))?;
        let i = r.info();
        Ok((i.width, i.height))
    } else if bytes.starts_with(&[0xFF, 0xD8]) {
        let mut d = zune_jpeg::JpegDecoder::new(zune_core::bytestream::ZCursor::new(bytes));
        d.decode_headers()
            .map_err(|e| PrepError::image(path, format!("not a readable JPEG: {e:?}")))?;
        let (w, h) = d.dimensions().unwrap_or((0, 0));
        Ok((w as u32, h as u32))
    } else {
        Err(PrepError::image(path, "neither a PNG nor a JPEG file"))
    }
}

/// Decodes a PNG or JPEG file to RGB.
pub fn read_rgb(path: &Path) -> Result<Image8, PrepError> {
    let bytes = std::fs::read(path).map_err(|e| PrepError::io(path, e))?;
    let (w, h) = header_size(&bytes, path)?;
    if w == 0 || h == 0 {
        return Err(PrepError::image(
            path,
            format!("image size {w}x{h} is empty"),
        ));
    }
    lsplat_core::memory::check_fits(
        &format!("preprocessing {} ({w}x{h})", path.display()),
        w as u64 * h as u64,
        PEAK_BYTES_PER_PIXEL,
    )
    .map_err(|e| PrepError::image(path, e.to_string()))?;
    let img = if bytes.starts_with(b"\x89PNG") {
        decode_png(&bytes, path)?
    } else {
        decode_jpeg(&bytes, path)?
    };
    Ok(img)
}

fn decode_png(bytes: &[u8], path: &Path) -> Result<Image8, PrepError> {
    let bad = |e: String| PrepError::image(path, e);
    let mut dec = png::Decoder::new(std::io::Cursor::new(bytes));
    dec.set_transformations(png::Transformations::EXPAND);
    let mut r = dec
        .read_info()
        .map_err(|e| bad(format!("not a readable PNG: {e}")))?;
    let size = r
        .output_buffer_size()
        .ok_or_else(|| bad("PNG too large".into()))?;
    let mut buf = vec![0u8; size];
    let info = r
        .next_frame(&mut buf)
        .map_err(|e| bad(format!("truncated or corrupt PNG: {e}")))?;
    let (w, h) = (info.width as usize, info.height as usize);
    let channels = info.color_type.samples();
    let bytes_per = match info.bit_depth {
        png::BitDepth::Sixteen => 2,
        png::BitDepth::Eight => 1,
        d => return Err(bad(format!("unexpected bit depth {d:?} after expansion"))),
    };
    let mut out = Image8::zeros(w, h, 3);
    for y in 0..h {
        let row = &buf[y * info.line_size..(y + 1) * info.line_size];
        for x in 0..w {
            let sample = |c: usize| row[(x * channels + c) * bytes_per];
            let rgb = match channels {
                1 | 2 => [sample(0); 3],
                _ => [sample(0), sample(1), sample(2)],
            };
            out.data[(y * w + x) * 3..(y * w + x) * 3 + 3].copy_from_slice(&rgb);
        }
    }
    Ok(out)
}

fn decode_jpeg(bytes: &[u8], path: &Path) -> Result<Image8, PrepError> {
    use zune_core::colorspace::ColorSpace;
    use zune_core::options::DecoderOptions;
    let opts = DecoderOptions::default()
        .jpeg_set_out_colorspace(ColorSpace::RGB)
        .set_max_width(1 << 16)
        .set_max_height(1 << 16)
        .set_strict_mode(true);
    let mut d =
        zune_jpeg::JpegDecoder::new_with_options(zune_core::bytestream::ZCursor::new(bytes), opts);
    let data = d
        .decode()
        .map_err(|e| PrepError::image(path, format!("truncated or corrupt JPEG: {e:?}")))?;
    let (w, h) = d.dimensions().unwrap_or((0, 0));
    if data.len() != w * h * 3 {
        return Err(PrepError::image(path, "JPEG decoded to an unexpected size"));
    }
    Ok(Image8 {
        width: w,
        height: h,
        channels: 3,
        data,
    })
}

/// How images are sized before preprocessing (`--resolution`), as LangSplat's
/// camera loader sizes them for training (the segmentation maps must match it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// LangSplat's default: images taller than 1080 are scaled to height 1080.
    Auto,
    /// Downscale by 1, 2, 4 or 8 (sizes rounded half to even, as Python's `round`).
    Factor(u32),
    /// Scale to this width.
    Width(u32),
}

impl Resolution {
    /// `--resolution N`: 1, 2, 4, 8 are factors, other values widths, −1 automatic.
    pub fn from_arg(n: i64) -> Result<Resolution, PrepError> {
        match n {
            -1 => Ok(Resolution::Auto),
            1 | 2 | 4 | 8 => Ok(Resolution::Factor(n as u32)),
            n if n > 8 && n <= u32::MAX as i64 => Ok(Resolution::Width(n as u32)),
            _ => Err(PrepError::Config(format!(
                "resolution {n} is not -1, 1, 2, 4, 8 or a width above 8"
            ))),
        }
    }

    /// The size an image of `w × h` is processed at.
    pub fn size(self, w: u32, h: u32) -> (u32, u32) {
        let by_scale = |s: f64| {
            (
                ((w as f64 / s) as u32).max(1),
                ((h as f64 / s) as u32).max(1),
            )
        };
        match self {
            Resolution::Auto if h > 1080 => by_scale(h as f64 / 1080.0),
            Resolution::Auto => (w, h),
            Resolution::Factor(f) => (
                ((w as f64 / f as f64).round_ties_even() as u32).max(1),
                ((h as f64 / f as f64).round_ties_even() as u32).max(1),
            ),
            Resolution::Width(n) => by_scale(w as f64 / n as f64),
        }
    }
}

/// Reads an image and brings it to its processing size (OpenCV bilinear, as
/// LangSplat's `cv2.resize`).
pub fn load(path: &Path, res: Resolution) -> Result<Image8, PrepError> {
    let img = read_rgb(path)?;
    let (w, h) = res.size(img.width as u32, img.height as u32);
    Ok(resize_linear(&img, w as usize, h as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_rule_as_langsplat() {
        assert_eq!(Resolution::Auto.size(3958, 2968), (1440, 1080));
        assert_eq!(Resolution::Auto.size(1264, 832), (1264, 832));
        assert_eq!(Resolution::Factor(2).size(1265, 833), (632, 416));
        assert_eq!(Resolution::Width(1000).size(3958, 2968), (1000, 749));
        assert!(Resolution::from_arg(0).is_err());
        assert!(Resolution::from_arg(3).is_err());
    }

    /// Pixels are taken as stored whatever the EXIF orientation says, as COLMAP and
    /// the 3DGS camera loader take them (a rotated map would miss its camera).
    #[test]
    fn an_exif_orientation_is_not_applied() {
        let (w, h) = (24u16, 16u16);
        let rgb: Vec<u8> = (0..w as usize * h as usize * 3)
            .map(|i| ((i / 3 % w as usize) * 10 + (i / 3 / w as usize) * 3) as u8)
            .collect();
        // A big-endian TIFF block with one entry: orientation (0x0112) = 6, "rotate 90°".
        let tiff = [
            b'M', b'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 6, 0, 0, 0, 0, 0,
            0,
        ];
        let dir = tempfile::tempdir().unwrap();
        let read = |exif: bool| {
            let mut bytes = Vec::new();
            let mut enc = jpeg_encoder::Encoder::new(&mut bytes, 95);
            if exif {
                enc.add_exif_metadata(&tiff).unwrap();
            }
            enc.encode(&rgb, w, h, jpeg_encoder::ColorType::Rgb)
                .unwrap();
            let mut d = zune_jpeg::JpegDecoder::new(zune_core::bytestream::ZCursor::new(&bytes));
            d.decode_headers().unwrap();
            assert_eq!(d.exif().is_some(), exif, "the tag is in the file");
            let p = dir.path().join("x.jpg");
            std::fs::write(&p, &bytes).unwrap();
            read_rgb(&p).unwrap()
        };
        let (plain, tagged) = (read(false), read(true));
        assert_eq!((tagged.width, tagged.height), (w as usize, h as usize));
        assert_eq!(tagged.data, plain.data);
    }

    #[test]
    fn garbage_and_truncated_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.png");
        std::fs::write(&p, b"hello").unwrap();
        let e = read_rgb(&p).unwrap_err().to_string();
        assert!(e.contains("x.png") && e.contains("neither"), "{e}");
        // A real PNG cut in half.
        let mut png_bytes = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut png_bytes, 64, 64);
            enc.set_color(png::ColorType::Rgb);
            let mut w = enc.write_header().unwrap();
            let data: Vec<u8> = (0..64 * 64 * 3).map(|i| (i * 7 % 256) as u8).collect();
            w.write_image_data(&data).unwrap();
        }
        std::fs::write(&p, &png_bytes[..png_bytes.len() / 2]).unwrap();
        let e = read_rgb(&p).unwrap_err().to_string();
        assert!(e.contains("x.png") && e.contains("truncated"), "{e}");
        std::fs::write(&p, &png_bytes).unwrap();
        let im = read_rgb(&p).unwrap();
        assert_eq!((im.width, im.height, im.data[3]), (64, 64, 21));
    }
}
