//! The 3D-OVS benchmark (Liu et al. 2023, "Weakly Supervised 3D Open-vocabulary
//! Segmentation"): its annotations as the dataset is distributed, read as its
//! `dataLoader/llff.py` reads them, and its scoring ([`score`]).
//!
//! ```text
//! <scene>/segmentations/classes.txt      one category per line
//! <scene>/segmentations/<k>/<class>.png  per test view k (a number: the index of the
//!                                        view in the name-sorted image list), one
//!                                        mask per listed class
//! ```
//!
//! Lines of `classes.txt` are trimmed and sorted (3D-OVS sorts them); blank lines are
//! skipped. A mask pixel is in its class when its 8-bit luma is 255 (3D-OVS divides
//! by 255 and truncates to an integer); colour masks are reduced to luma as PIL's
//! `convert('L')` does (`(19595 R + 38470 G + 7471 B + 2¹⁵) >> 16`), alpha ignored.
//! Errors name the file: a missing `classes.txt` or mask, a folder whose name is not a
//! view number, two folders of one view, masks of one view of different sizes,
//! 16-bit masks, and masks whose pixels are set but never to 255 (0/1 masks, which
//! 3D-OVS would read as empty).

pub mod score;

use std::path::{Path, PathBuf};

use crate::QueryError;

/// Largest mask edge accepted (as label files).
const MAX_EDGE: u32 = 1 << 16;

/// A 3D-OVS scene's annotations.
#[derive(Clone, Debug, PartialEq)]
pub struct OvsScene {
    /// The `segmentations` folder.
    pub dir: PathBuf,
    /// The categories, sorted.
    pub classes: Vec<String>,
    /// The annotated views, by view number.
    pub frames: Vec<OvsFrame>,
}

/// One annotated view.
#[derive(Clone, Debug, PartialEq)]
pub struct OvsFrame {
    /// Its folder.
    pub dir: PathBuf,
    /// The view number (the folder's name).
    pub number: usize,
    /// Mask width.
    pub width: u32,
    /// Mask height.
    pub height: u32,
    /// PNG files of the folder that name no listed class (not scored).
    pub unlisted: Vec<String>,
}

impl OvsFrame {
    /// The masks of `classes`, each `[height, width]` 0/1.
    pub fn masks(&self, classes: &[String]) -> Result<Vec<Vec<u8>>, QueryError> {
        classes
            .iter()
            .map(|c| {
                let p = self.dir.join(format!("{c}.png"));
                let (w, h, luma) = read_luma(&p)?;
                if (w, h) != (self.width, self.height) {
                    return Err(QueryError::labels(
                        &p,
                        format!(
                            "the mask is {w}x{h} but the view's other masks are {}x{}",
                            self.width, self.height
                        ),
                    ));
                }
                Ok(luma.iter().map(|&v| u8::from(v == 255)).collect())
            })
            .collect()
    }
}

/// Reads a scene's annotations: `path` is the scene folder or its `segmentations`.
/// Every mask is decoded and checked.
pub fn read_scene(path: &Path) -> Result<OvsScene, QueryError> {
    let dir = if path.join("segmentations").is_dir() {
        path.join("segmentations")
    } else {
        path.to_path_buf()
    };
    let classes = read_classes(&dir.join("classes.txt"))?;
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |error| QueryError::Io { path: p, error }
    };
    let mut frames: Vec<OvsFrame> = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(io(&dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    entries.sort();
    for fdir in entries {
        let name = fdir.file_name().map(|n| n.to_string_lossy().into_owned());
        let number: usize = name.as_deref().and_then(|n| n.parse().ok()).ok_or_else(|| {
            QueryError::labels(
                &fdir,
                "not a view folder: 3D-OVS names them by the view's index in the name-sorted images (e.g. `00`, `13`)",
            )
        })?;
        if let Some(other) = frames.iter().find(|f| f.number == number) {
            return Err(QueryError::labels(
                &fdir,
                format!("view {number} again (also {})", other.dir.display()),
            ));
        }
        let mut size = None;
        for c in &classes {
            let p = fdir.join(format!("{c}.png"));
            if !p.is_file() {
                return Err(QueryError::labels(
                    &p,
                    format!(
                        "missing: every view needs a mask of each class in classes.txt (`{c}`)"
                    ),
                ));
            }
            let (w, h, luma) = read_luma(&p)?;
            match size {
                None => size = Some((w, h)),
                Some(s) if s != (w, h) => {
                    return Err(QueryError::labels(
                        &p,
                        format!(
                            "the mask is {w}x{h} but the view's other masks are {}x{}",
                            s.0, s.1
                        ),
                    ));
                }
                Some(_) => {}
            }
            if luma.iter().any(|&v| v != 0) && !luma.contains(&255) {
                return Err(QueryError::labels(
                    &p,
                    "pixels are set but none is 255: 3D-OVS counts only 255 as the class (a 0/1 mask? save it as 0/255)",
                ));
            }
        }
        let mut unlisted: Vec<String> = std::fs::read_dir(&fdir)
            .map_err(io(&fdir))?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|n| n.strip_suffix(".png").map(String::from))
            .filter(|n| !classes.contains(n))
            .collect();
        unlisted.sort();
        let (width, height) = size.unwrap_or_default();
        frames.push(OvsFrame {
            dir: fdir,
            number,
            width,
            height,
            unlisted,
        });
    }
    if frames.is_empty() {
        return Err(QueryError::labels(&dir, "no view folders (e.g. `00/`)"));
    }
    frames.sort_by_key(|f| f.number);
    Ok(OvsScene {
        dir,
        classes,
        frames,
    })
}

/// `classes.txt`: trimmed non-blank lines, sorted; duplicates and names that are not
/// file names are errors.
pub fn read_classes(path: &Path) -> Result<Vec<String>, QueryError> {
    let text = std::fs::read_to_string(path).map_err(|error| QueryError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    let mut classes: Vec<String> = Vec::new();
    for (no, line) in text.lines().enumerate() {
        let c = line.trim();
        if c.is_empty() {
            continue;
        }
        if c.contains(['/', '\\']) || c == "." || c == ".." {
            return Err(QueryError::labels(
                path,
                format!("line {}: `{c}` cannot name a mask file", no + 1),
            ));
        }
        if classes.iter().any(|k| k == c) {
            return Err(QueryError::labels(
                path,
                format!("line {}: `{c}` is listed twice", no + 1),
            ));
        }
        classes.push(c.to_string());
    }
    if classes.is_empty() {
        return Err(QueryError::labels(path, "no classes"));
    }
    classes.sort();
    Ok(classes)
}

/// An 8-bit PNG as luma (`(width, height, [h·w])`), as PIL's `convert('L')`.
pub fn read_luma(path: &Path) -> Result<(u32, u32, Vec<u8>), QueryError> {
    let bad = |p: String| QueryError::labels(path, p);
    let bytes = std::fs::read(path).map_err(|error| QueryError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    let mut dec = png::Decoder::new(std::io::Cursor::new(bytes));
    dec.set_transformations(png::Transformations::EXPAND);
    let mut r = dec
        .read_info()
        .map_err(|e| bad(format!("not a readable PNG: {e}")))?;
    let (w, h) = (r.info().width, r.info().height);
    if w == 0 || h == 0 || w > MAX_EDGE || h > MAX_EDGE {
        return Err(bad(format!("a {w}x{h} mask (at most {MAX_EDGE} per side)")));
    }
    let (color, depth) = r.output_color_type();
    if depth != png::BitDepth::Eight {
        return Err(bad(format!(
            "a {}-bit mask: 3D-OVS masks are 8-bit (save it as 8-bit 0/255)",
            depth as u8
        )));
    }
    let size = r
        .output_buffer_size()
        .ok_or_else(|| bad("the image is too large".into()))?;
    let mut buf = vec![0u8; size];
    let info = r
        .next_frame(&mut buf)
        .map_err(|e| bad(format!("not a readable PNG: {e}")))?;
    let buf = &buf[..info.buffer_size()];
    let px = (w * h) as usize;
    let luma = |c: &[u8]| {
        ((u32::from(c[0]) * 19595 + u32::from(c[1]) * 38470 + u32::from(c[2]) * 7471 + 0x8000)
            >> 16) as u8
    };
    let out: Vec<u8> = match color {
        png::ColorType::Grayscale => buf[..px].to_vec(),
        png::ColorType::GrayscaleAlpha => buf.chunks_exact(2).map(|c| c[0]).collect(),
        png::ColorType::Rgb => buf.chunks_exact(3).map(luma).collect(),
        png::ColorType::Rgba => buf.chunks_exact(4).map(luma).collect(),
        png::ColorType::Indexed => return Err(bad("a palette the decoder did not expand".into())),
    };
    if out.len() != px {
        return Err(bad("truncated image data".into()));
    }
    Ok((w, h, out))
}

#[cfg(test)]
mod tests;
