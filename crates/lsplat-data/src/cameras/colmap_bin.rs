//! COLMAP binary model files: `cameras.bin` and `images.bin` (readers and writers).

use std::path::Path;

use super::colmap::{CAMERA_MODELS, ColmapCamera, ColmapImage};
use crate::DataError;

/// A bounds-checked little-endian reader over a byte slice.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let s = self
            .b
            .get(self.at..self.at.saturating_add(n))
            .ok_or_else(|| format!("truncated: file ends inside {what} (byte {})", self.at))?;
        self.at += n;
        Ok(s)
    }
    fn u64(&mut self, what: &str) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().unwrap_or_default(),
        ))
    }
    fn u32(&mut self, what: &str) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4, what)?.try_into().unwrap_or_default(),
        ))
    }
    fn f64(&mut self, what: &str) -> Result<f64, String> {
        Ok(f64::from_le_bytes(
            self.take(8, what)?.try_into().unwrap_or_default(),
        ))
    }
    fn left(&self) -> usize {
        self.b.len().saturating_sub(self.at)
    }
    /// Reads a count and checks that `count * min_size` bytes remain.
    fn count(&mut self, min_size: usize, what: &str) -> Result<usize, String> {
        let n = self.u64(what)?;
        if n.saturating_mul(min_size as u64) > self.left() as u64 {
            return Err(format!(
                "truncated: {n} {what} cannot fit in the remaining {} bytes",
                self.left()
            ));
        }
        Ok(n as usize)
    }
}

/// Reads `cameras.bin`.
pub fn read_cameras_bin(path: &Path) -> Result<Vec<ColmapCamera>, DataError> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    parse_cameras_bin(&bytes, path)
}

/// Parses the bytes of `cameras.bin`; `path` only names the file in errors.
pub fn parse_cameras_bin(bytes: &[u8], path: &Path) -> Result<Vec<ColmapCamera>, DataError> {
    let mut c = Cursor { b: bytes, at: 0 };
    let run = |c: &mut Cursor| -> Result<Vec<ColmapCamera>, String> {
        let n = c.count(24, "cameras")?;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let id = c.u32("a camera id")?;
            let model = c.u32("a camera model")?;
            let (_, n_params) = CAMERA_MODELS
                .get(model as usize)
                .ok_or_else(|| format!("camera {id}: unknown model id {model}"))?;
            let width = size(c.u64("a camera width")?, "width", id)?;
            let height = size(c.u64("a camera height")?, "height", id)?;
            let params = (0..*n_params)
                .map(|_| c.f64("camera parameters"))
                .collect::<Result<Vec<_>, _>>()?;
            if let Some(v) = params.iter().find(|v| !v.is_finite()) {
                return Err(format!(
                    "camera {id} (entry {i}): parameter {v} is not finite"
                ));
            }
            out.push(ColmapCamera {
                id,
                model,
                width,
                height,
                params,
            });
        }
        trailing(c)?;
        Ok(out)
    };
    run(&mut c).map_err(|p| DataError::format(path, p))
}

fn size(v: u64, what: &str, id: u32) -> Result<u32, String> {
    u32::try_from(v)
        .ok()
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("camera {id}: {what} {v} is out of range"))
}

fn trailing(c: &Cursor) -> Result<(), String> {
    match c.left() {
        0 => Ok(()),
        n => Err(format!("{n} unexpected bytes after the last entry")),
    }
}

/// Reads `images.bin` (poses and names; 2D points are skipped).
pub fn read_images_bin(path: &Path) -> Result<Vec<ColmapImage>, DataError> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    parse_images_bin(&bytes, path)
}

/// Parses the bytes of `images.bin`; `path` only names the file in errors.
pub fn parse_images_bin(bytes: &[u8], path: &Path) -> Result<Vec<ColmapImage>, DataError> {
    let mut c = Cursor { b: bytes, at: 0 };
    let run = |c: &mut Cursor| -> Result<Vec<ColmapImage>, String> {
        let n = c.count(4 + 56 + 4 + 1 + 8, "images")?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let id = c.u32("an image id")?;
            let mut v = [0f64; 7];
            for x in &mut v {
                *x = c.f64("an image pose")?;
            }
            if let Some(x) = v.iter().find(|x| !x.is_finite()) {
                return Err(format!("image {id}: pose value {x} is not finite"));
            }
            let camera_id = c.u32("a camera id")?;
            let len =
                c.b.get(c.at..)
                    .unwrap_or_default()
                    .iter()
                    .position(|&b| b == 0);
            let len =
                len.ok_or_else(|| format!("truncated: name of image {id} is not terminated"))?;
            let name = std::str::from_utf8(
                c.take(len + 1, "an image name")?
                    .get(..len)
                    .unwrap_or_default(),
            )
            .map_err(|_| format!("image {id}: name is not UTF-8"))?
            .to_string();
            if name.is_empty() {
                return Err(format!("image {id}: empty name"));
            }
            let n_points = c.count(24, "2D points")?;
            c.take(n_points * 24, "2D points")?;
            let (qvec, tvec) = ([v[0], v[1], v[2], v[3]], [v[4], v[5], v[6]]);
            out.push(ColmapImage {
                id,
                qvec,
                tvec,
                camera_id,
                name,
            });
        }
        trailing(c)?;
        Ok(out)
    };
    run(&mut c).map_err(|p| DataError::format(path, p))
}

/// Writes `cameras.bin` atomically.
pub fn write_cameras_bin(path: &Path, cameras: &[ColmapCamera]) -> Result<(), DataError> {
    let mut b = (cameras.len() as u64).to_le_bytes().to_vec();
    for c in cameras {
        let expected = CAMERA_MODELS.get(c.model as usize).map(|m| m.1);
        if expected != Some(c.params.len()) {
            return Err(DataError::format(
                path,
                format!("camera {}: wrong parameter count", c.id),
            ));
        }
        b.extend_from_slice(&c.id.to_le_bytes());
        b.extend_from_slice(&c.model.to_le_bytes());
        b.extend_from_slice(&(c.width as u64).to_le_bytes());
        b.extend_from_slice(&(c.height as u64).to_le_bytes());
        c.params
            .iter()
            .for_each(|p| b.extend_from_slice(&p.to_le_bytes()));
    }
    crate::io::write_bytes_atomic(path, &b)
}

/// Writes `images.bin` atomically (with no 2D points).
pub fn write_images_bin(path: &Path, images: &[ColmapImage]) -> Result<(), DataError> {
    let mut b = (images.len() as u64).to_le_bytes().to_vec();
    for im in images {
        if im.name.is_empty() || im.name.contains('\0') {
            return Err(DataError::format(
                path,
                format!("image {}: bad name `{}`", im.id, im.name),
            ));
        }
        b.extend_from_slice(&im.id.to_le_bytes());
        im.qvec
            .iter()
            .chain(&im.tvec)
            .for_each(|v| b.extend_from_slice(&v.to_le_bytes()));
        b.extend_from_slice(&im.camera_id.to_le_bytes());
        b.extend_from_slice(im.name.as_bytes());
        b.push(0);
        b.extend_from_slice(&0u64.to_le_bytes());
    }
    crate::io::write_bytes_atomic(path, &b)
}
