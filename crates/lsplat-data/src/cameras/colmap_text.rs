//! COLMAP text model files: `cameras.txt` and `images.txt` (readers and writers).

use std::fmt::Write as _;
use std::path::Path;

use super::colmap::{CAMERA_MODELS, ColmapCamera, ColmapImage};
use crate::DataError;

fn read_text(path: &Path) -> Result<String, DataError> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    String::from_utf8(bytes).map_err(|_| DataError::format(path, "not UTF-8 text"))
}

/// Reads `cameras.txt`.
pub fn read_cameras_txt(path: &Path) -> Result<Vec<ColmapCamera>, DataError> {
    parse_cameras_txt(&read_text(path)?, path)
}

fn num<T: std::str::FromStr>(t: &str, what: &str, line: usize) -> Result<T, String> {
    t.parse()
        .map_err(|_| format!("line {line}: {what} `{t}` is not a valid number"))
}

fn finite(v: f64, what: &str, line: usize) -> Result<f64, String> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("line {line}: {what} {v} is not finite"))
    }
}

/// Parses the text of `cameras.txt`; `path` only names the file in errors.
pub fn parse_cameras_txt(text: &str, path: &Path) -> Result<Vec<ColmapCamera>, DataError> {
    let run = || -> Result<Vec<ColmapCamera>, String> {
        let mut out = Vec::new();
        for (no, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let t: Vec<&str> = line.split_whitespace().collect();
            let [id, model, w, h, params @ ..] = t.as_slice() else {
                return Err(format!(
                    "line {no}: expected CAMERA_ID MODEL WIDTH HEIGHT PARAMS[]"
                ));
            };
            let m = CAMERA_MODELS
                .iter()
                .position(|(n, _)| n == model)
                .ok_or_else(|| format!("line {no}: unknown camera model `{model}`"))?;
            if params.len() != CAMERA_MODELS[m].1 {
                let e = CAMERA_MODELS[m].1;
                return Err(format!(
                    "line {no}: {model} needs {e} parameters, found {}",
                    params.len()
                ));
            }
            let params = params
                .iter()
                .map(|p| num::<f64>(p, "parameter", no).and_then(|v| finite(v, "parameter", no)))
                .collect::<Result<Vec<_>, _>>()?;
            let (width, height) = (num::<u32>(w, "width", no)?, num::<u32>(h, "height", no)?);
            if width == 0 || height == 0 {
                return Err(format!("line {no}: image size {width}x{height} is empty"));
            }
            out.push(ColmapCamera {
                id: num(id, "camera id", no)?,
                model: m as u32,
                width,
                height,
                params,
            });
        }
        Ok(out)
    };
    run().map_err(|p| DataError::format(path, p))
}

/// Reads `images.txt` (poses and names; 2D points are skipped).
pub fn read_images_txt(path: &Path) -> Result<Vec<ColmapImage>, DataError> {
    parse_images_txt(&read_text(path)?, path)
}

/// Parses the text of `images.txt`; `path` only names the file in errors. Each image
/// takes two lines; the second (its 2D points, possibly empty) is skipped.
pub fn parse_images_txt(text: &str, path: &Path) -> Result<Vec<ColmapImage>, DataError> {
    let run = || -> Result<Vec<ColmapImage>, String> {
        let mut out = Vec::new();
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim()));
        while let Some((no, line)) = lines.next() {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let t: Vec<&str> = line.split_whitespace().collect();
            if t.len() < 10 {
                return Err(format!(
                    "line {no}: expected IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME"
                ));
            }
            let mut v = [0f64; 7];
            for (x, s) in v.iter_mut().zip(&t[1..8]) {
                *x = finite(num(s, "pose value", no)?, "pose value", no)?;
            }
            let name = t[9..].join(" ");
            out.push(ColmapImage {
                id: num(t[0], "image id", no)?,
                qvec: [v[0], v[1], v[2], v[3]],
                tvec: [v[4], v[5], v[6]],
                camera_id: num(t[8], "camera id", no)?,
                name,
            });
            lines.next();
        }
        Ok(out)
    };
    run().map_err(|p| DataError::format(path, p))
}

/// Writes `cameras.txt` atomically.
pub fn write_cameras_txt(path: &Path, cameras: &[ColmapCamera]) -> Result<(), DataError> {
    let mut s = format!("# Camera list\n# Number of cameras: {}\n", cameras.len());
    for c in cameras {
        let _ = write!(s, "{} {} {} {}", c.id, c.model_name(), c.width, c.height);
        c.params.iter().for_each(|p| {
            let _ = write!(s, " {p:?}");
        });
        s.push('\n');
    }
    crate::io::write_bytes_atomic(path, s.as_bytes())
}

/// Writes `images.txt` atomically (every 2D-point line empty).
pub fn write_images_txt(path: &Path, images: &[ColmapImage]) -> Result<(), DataError> {
    let mut s = format!("# Image list\n# Number of images: {}\n", images.len());
    for im in images {
        if im.name.trim().is_empty() || im.name.contains(['\n', '\r']) {
            return Err(DataError::format(
                path,
                format!("image {}: bad name `{}`", im.id, im.name),
            ));
        }
        let [qw, qx, qy, qz] = im.qvec;
        let [tx, ty, tz] = im.tvec;
        let _ = writeln!(
            s,
            "{} {qw:?} {qx:?} {qy:?} {qz:?} {tx:?} {ty:?} {tz:?} {} {}\n",
            im.id, im.camera_id, im.name
        );
    }
    crate::io::write_bytes_atomic(path, s.as_bytes())
}
