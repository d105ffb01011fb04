//! Image sizes from PNG/JPEG headers, and cameras matched to an image folder.

use std::io::Read;
use std::path::{Path, PathBuf};

use lsplat_core::Camera;

use super::scale::{ImageScale, scale_camera};
use crate::DataError;

/// Image file extensions tried, in order, when looking for `<stem>.<ext>`.
pub const IMAGE_EXTENSIONS: [&str; 6] = ["png", "jpg", "jpeg", "PNG", "JPG", "JPEG"];

/// Width and height of a PNG or JPEG file, read from its header only.
pub fn image_size(path: &Path) -> Result<(u32, u32), DataError> {
    let mut head = Vec::new();
    let file = std::fs::File::open(path).map_err(|e| DataError::io(path, e))?;
    // JPEG frame headers can follow large EXIF blocks; 1 MiB covers them.
    file.take(1 << 20)
        .read_to_end(&mut head)
        .map_err(|e| DataError::io(path, e))?;
    parse_image_size(&head)
        .ok_or_else(|| DataError::format(path, "not a PNG or JPEG with a readable size"))
}

/// Size from the first bytes of a PNG (IHDR) or JPEG (first SOF marker).
pub fn parse_image_size(b: &[u8]) -> Option<(u32, u32)> {
    let be32 = |at: usize| Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?));
    let be16 = |at: usize| Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?) as u32);
    if b.starts_with(b"\x89PNG\r\n\x1a\n") && b.get(12..16)? == b"IHDR" {
        return Some((be32(16)?, be32(20)?)).filter(|&(w, h)| w > 0 && h > 0);
    }
    if !b.starts_with(&[0xFF, 0xD8]) {
        return None;
    }
    let mut at = 2;
    loop {
        if *b.get(at)? != 0xFF {
            return None;
        }
        let marker = *b.get(at + 1)?;
        if marker == 0xFF {
            at += 1;
            continue;
        }
        let len = be16(at + 2)? as usize;
        let sof = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if sof {
            return Some((be16(at + 7)?, be16(at + 5)?)).filter(|&(w, h)| w > 0 && h > 0);
        }
        at += 2 + len;
    }
}

/// The image of camera `name` in `dir`, trying [`IMAGE_EXTENSIONS`].
pub fn find_image(dir: &Path, name: &str) -> Option<PathBuf> {
    IMAGE_EXTENSIONS
        .iter()
        .map(|e| dir.join(format!("{name}.{e}")))
        .find(|p| p.is_file())
}

/// Matches cameras to the images actually in `dir` (e.g. `images_8`): each camera's
/// image `<name>.<ext>` is looked up and its size read. If the size is the camera's
/// size truncated by an integer factor f (2..=64), the intrinsics are divided by f
/// exactly ([`ImageScale::Factor`]); otherwise they scale with the size ratio
/// ([`ImageScale::Size`]). A missing image is an error.
pub fn match_image_folder(cameras: &[Camera], dir: &Path) -> Result<Vec<Camera>, DataError> {
    cameras
        .iter()
        .map(|c| {
            let path = find_image(dir, &c.name).ok_or_else(|| {
                DataError::format(
                    dir,
                    format!("no image `{}.png`/`.jpg` for camera `{}`", c.name, c.name),
                )
            })?;
            let (w, h) = image_size(&path)?;
            if (w, h) == (c.width, c.height) {
                return Ok(c.clone());
            }
            let factor = (2..=64u32).find(|f| (c.width / f, c.height / f) == (w, h));
            Ok(match factor {
                Some(f) => scale_camera(c, ImageScale::Factor(f as f64)),
                None => scale_camera(
                    c,
                    ImageScale::Size {
                        width: w,
                        height: h,
                    },
                ),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_of_real_images() {
        let Some(data) = crate::testdata::test_data() else {
            return;
        };
        let png = data.join("snowmiku/images_8/20240212_003919.png");
        assert_eq!(image_size(&png).unwrap(), (494, 371));
        let jpg = data.join("snowmiku/input_samples/20240212_003919.jpg");
        assert_eq!(image_size(&jpg).unwrap(), (4032, 3024));
        assert_eq!(
            image_size(&data.join("fern_llff/images_8/image000.png")).unwrap(),
            (504, 378)
        );
        assert!(
            image_size(&data.join("snowmiku/cameras.json"))
                .unwrap_err()
                .to_string()
                .contains("PNG")
        );
        assert_eq!(
            parse_image_size(&[0xFF, 0xD8, 0xFF, 0xE0, 0xFF, 0xFF]),
            None
        );
    }

    #[test]
    fn cameras_match_the_images_8_folder() {
        let Some(data) = crate::testdata::test_data() else {
            return;
        };
        let cams = super::super::read_inria_cameras(&data.join("snowmiku/cameras.json")).unwrap();
        let dir = data.join("snowmiku/images_8");
        let m = match_image_folder(&cams[..3], &dir).unwrap();
        let text =
            super::super::read_colmap(&data.join("snowmiku/colmap_images_8/sparse/0")).unwrap();
        for (a, b) in m.iter().zip(&text) {
            assert_eq!((a.width, a.height), (b.width, b.height));
            assert!(
                (a.fx - b.fx).abs() < 1e-3
                    && (a.cx - b.cx).abs() < 1e-4
                    && (a.cy - b.cy).abs() < 1e-4
            );
        }
        let mut odd = cams[0].clone();
        odd.name = "missing".into();
        assert!(
            match_image_folder(&[odd], &dir)
                .unwrap_err()
                .to_string()
                .contains("missing")
        );
    }
}
