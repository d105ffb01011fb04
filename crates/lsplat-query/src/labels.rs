//! LERF-OVS label files (`label/<scene>/frame_XXXXX.json`), labelme-like:
//!
//! ```json
//! {"info": {"width": 988, "height": 731, "name": "frame_00041.jpg"},
//!  "objects": [{"category": "coffee mug", "bbox": [x1, y1, x2, y2],
//!               "segmentation": [[x, y], [x, y], ...]}]}
//! ```
//!
//! As LangSplat reads them: objects sharing a category form one query whose mask is the
//! union of the objects' masks and whose boxes are all their boxes; queries keep the
//! order in which their categories first appear. Polygon vertices are truncated to
//! integers (NumPy's `int32` cast) and filled as `cv2.fillPoly` does: a pixel is in the
//! mask when its integer position is inside the polygon or on its outline.
//! `segmentation` may also be a list of rings `[[[x, y], ...], ...]`, filled together
//! with the even–odd rule (several parts, or a hole inside a part) — what
//! `cv2.fillPoly` does with several contours.
//!
//! Shapes that cannot be scored are errors naming the file, the object and the shape:
//! an inverted box (`x2 < x1` or `y2 < y1`), a box or polygon that covers no pixel of
//! the image (entirely outside it), a file without objects, and (in
//! [`read_frames`]) two files naming one frame. Shapes partly outside the image
//! (a coordinate beyond `[0, width] × [0, height]`) are clipped to it and counted in
//! [`Frame::clipped`], which the evaluation reports.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::QueryError;

/// One labelled object.
#[derive(Clone, Debug, PartialEq)]
pub struct Object {
    /// The text query.
    pub category: String,
    /// Box `[x1, y1, x2, y2]`.
    pub bbox: [f64; 4],
    /// Polygon rings, integer vertices.
    pub rings: Vec<Vec<[i64; 2]>>,
}

/// One label file.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    /// The file.
    pub path: PathBuf,
    /// `info.name` (the image's file name).
    pub image: String,
    /// Image width.
    pub width: u32,
    /// Image height.
    pub height: u32,
    /// The objects in file order.
    pub objects: Vec<Object>,
    /// Objects with a box or polygon partly outside the image (clipped to it).
    pub clipped: usize,
}

/// A query of a frame: a category with its ground truth.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    /// The category (the text prompt).
    pub category: String,
    /// Union of the category's object masks, `[height, width]`, 0/1.
    pub mask: Vec<u8>,
    /// Every box of the category.
    pub boxes: Vec<[f64; 4]>,
}

impl Frame {
    /// The image name's stem (up to the first '.'), e.g. `frame_00041`.
    pub fn stem(&self) -> &str {
        self.image.split('.').next().unwrap_or(&self.image)
    }

    /// The frame number LangSplat reads from the name (`frame_00041.jpg` → 41).
    pub fn number(&self) -> Option<u64> {
        self.stem().rsplit('_').next()?.parse().ok()
    }

    /// Queries in order of first appearance.
    pub fn queries(&self) -> Vec<Query> {
        let (w, h) = (self.width as usize, self.height as usize);
        let mut out: Vec<Query> = Vec::new();
        for o in &self.objects {
            let m = fill_rings(&o.rings, w, h);
            match out.iter_mut().find(|q| q.category == o.category) {
                Some(q) => {
                    q.mask.iter_mut().zip(&m).for_each(|(a, b)| *a |= b);
                    q.boxes.push(o.bbox);
                }
                None => out.push(Query {
                    category: o.category.clone(),
                    mask: m,
                    boxes: vec![o.bbox],
                }),
            }
        }
        out
    }
}

/// Reads a label file.
pub fn read_frame(path: &Path) -> Result<Frame, QueryError> {
    let text = std::fs::read_to_string(path).map_err(|error| QueryError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    parse_frame(&text, path)
}

/// Parses a label file's text; `path` names it in errors.
pub fn parse_frame(text: &str, path: &Path) -> Result<Frame, QueryError> {
    let bad = |p: String| QueryError::labels(path, p);
    let v: Value = serde_json::from_str(text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
    let info = &v["info"];
    let dim = |k: &str| -> Result<u32, QueryError> {
        info[k]
            .as_u64()
            .filter(|&x| x > 0 && x <= 1 << 16)
            .map(|x| x as u32)
            .ok_or_else(|| bad(format!("`info.{k}` is missing or not a positive integer")))
    };
    let (width, height) = (dim("width")?, dim("height")?);
    let image = info["name"]
        .as_str()
        .ok_or_else(|| bad("`info.name` is missing or not a string".into()))?
        .to_string();
    let objs = v["objects"]
        .as_array()
        .ok_or_else(|| bad("`objects` is missing or not a list".into()))?;
    let mut objects = Vec::with_capacity(objs.len());
    let mut clipped = 0;
    for (i, o) in objs.iter().enumerate() {
        let at = |p: &str| bad(format!("object {i}: {p}"));
        let category = o["category"]
            .as_str()
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| at("`category` is missing or empty"))?
            .to_string();
        let b: Vec<f64> = o["bbox"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        let bbox: [f64; 4] = b
            .as_slice()
            .try_into()
            .ok()
            .filter(|b: &[f64; 4]| b.iter().all(|x| x.is_finite()))
            .ok_or_else(|| at("`bbox` is not four numbers [x1, y1, x2, y2]"))?;
        let rings = parse_rings(&o["segmentation"])
            .ok_or_else(|| at("`segmentation` is not a polygon [[x, y], …] or a list of them"))?;
        let shape = |p: &str| bad(format!("object {i} (`{category}`): {p}"));
        if let Some(r) = rings.iter().find(|r| r.len() < 3) {
            return Err(shape(&format!(
                "`segmentation` polygon {r:?} has {} point(s): a polygon needs at least 3",
                r.len()
            )));
        }
        let [x1, y1, x2, y2] = bbox;
        if x2 < x1 || y2 < y1 {
            return Err(shape(&format!(
                "inverted `bbox` {bbox:?}: [x1, y1, x2, y2] needs x1 ≤ x2 and y1 ≤ y2"
            )));
        }
        let (w, h) = (f64::from(width), f64::from(height));
        if box_pixels(&bbox, width, height) == 0 {
            return Err(shape(&format!(
                "`bbox` {bbox:?} {}",
                no_pixel(
                    x2 < 0.0 || y2 < 0.0 || x1 > w - 1.0 || y1 > h - 1.0,
                    width,
                    height
                )
            )));
        }
        if ring_pixels(&rings, width as usize, height as usize) == 0 {
            let outside = rings.iter().flatten().all(|p| {
                p[0] < 0 || p[1] < 0 || p[0] >= i64::from(width) || p[1] >= i64::from(height)
            });
            return Err(shape(&format!(
                "`segmentation` {}",
                no_pixel(outside, width, height)
            )));
        }
        let beyond = |v: f64, max: f64| v < 0.0 || v > max;
        let box_out = beyond(x1, w) || beyond(x2, w) || beyond(y1, h) || beyond(y2, h);
        let ring_out = rings
            .iter()
            .flatten()
            .any(|p| beyond(p[0] as f64, w) || beyond(p[1] as f64, h));
        clipped += usize::from(box_out || ring_out);
        objects.push(Object {
            category,
            bbox,
            rings,
        });
    }
    if objects.is_empty() {
        return Err(bad(
            "no objects: a label file must label at least one object".into(),
        ));
    }
    Ok(Frame {
        path: path.to_path_buf(),
        image,
        width,
        height,
        objects,
        clipped,
    })
}

/// The words of an error about a shape covering no pixel.
fn no_pixel(outside: bool, w: u32, h: u32) -> String {
    if outside {
        format!("lies entirely outside the {w}x{h} image")
    } else {
        format!("covers no pixel of the {w}x{h} image")
    }
}

/// Pixels `(x, y)` (integers, inside the image) of a box, bounds inclusive.
fn box_pixels(b: &[f64; 4], w: u32, h: u32) -> u64 {
    let span = |lo: f64, hi: f64, n: u32| {
        let (lo, hi) = (lo.max(0.0).ceil(), hi.min(f64::from(n) - 1.0).floor());
        if hi >= lo { (hi - lo) as u64 + 1 } else { 0 }
    };
    span(b[0], b[2], w) * span(b[1], b[3], h)
}

/// Reads every label file of a folder (`*.json`, sorted by name); a folder without
/// label files and two files naming one frame (the same image stem) are errors.
pub fn read_frames(dir: &Path) -> Result<Vec<Frame>, QueryError> {
    let io = |error| QueryError::Io {
        path: dir.to_path_buf(),
        error,
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(QueryError::labels(dir, "no label files (*.json)"));
    }
    let frames: Vec<Frame> = files
        .iter()
        .map(|p| read_frame(p))
        .collect::<Result<_, _>>()?;
    for (k, f) in frames.iter().enumerate() {
        if let Some(first) = frames[..k].iter().find(|g| g.stem() == f.stem()) {
            return Err(QueryError::labels(
                &f.path,
                format!(
                    "names frame `{}` (image `{}`), as {} does: one label file per frame",
                    f.stem(),
                    f.image,
                    first.path.display()
                ),
            ));
        }
    }
    Ok(frames)
}

fn point(v: &Value) -> Option<[i64; 2]> {
    let a = v.as_array()?;
    if a.len() != 2 {
        return None;
    }
    let c = |x: &Value| {
        x.as_f64()
            .filter(|f| f.is_finite() && f.abs() < 1e9)
            .map(|f| f.trunc() as i64)
    };
    Some([c(&a[0])?, c(&a[1])?])
}

fn parse_rings(v: &Value) -> Option<Vec<Vec<[i64; 2]>>> {
    let a = v.as_array().filter(|a| !a.is_empty())?;
    let ring = |r: &Value| -> Option<Vec<[i64; 2]>> {
        r.as_array()
            .filter(|r| !r.is_empty())?
            .iter()
            .map(point)
            .collect()
    };
    if a[0].as_array()?.first()?.is_number() {
        Some(vec![ring(v)?])
    } else {
        a.iter().map(ring).collect()
    }
}

/// Fills rings (even–odd) into a `[h, w]` 0/1 mask, outlines included.
pub fn fill_rings(rings: &[Vec<[i64; 2]>], w: usize, h: usize) -> Vec<u8> {
    let mut m = vec![0u8; w * h];
    for_each_pixel(rings, w, h, |x, y| m[y * w + x] = 1);
    m
}

/// The number of pixels [`fill_rings`] sets (without allocating the image).
pub fn ring_pixels(rings: &[Vec<[i64; 2]>], w: usize, h: usize) -> usize {
    let mut n = 0;
    for_each_pixel(rings, w, h, |_, _| n += 1);
    n
}

/// Calls `put(x, y)` for every image pixel inside a ring or on its outline.
fn for_each_pixel(rings: &[Vec<[i64; 2]>], w: usize, h: usize, mut put: impl FnMut(usize, usize)) {
    let pts = rings.iter().flatten();
    let (Some(x0), Some(x1), Some(y0), Some(y1)) = (
        pts.clone().map(|p| p[0]).min(),
        pts.clone().map(|p| p[0]).max(),
        pts.clone().map(|p| p[1]).min(),
        pts.map(|p| p[1]).max(),
    ) else {
        return;
    };
    if w == 0 || h == 0 {
        return;
    }
    let clampx = |v: i64| v.clamp(0, w as i64 - 1) as usize;
    let clampy = |v: i64| v.clamp(0, h as i64 - 1) as usize;
    if x1 < 0 || y1 < 0 || x0 >= w as i64 || y0 >= h as i64 {
        return;
    }
    let edges: Vec<([i64; 2], [i64; 2])> = rings
        .iter()
        .flat_map(|r| (0..r.len()).map(move |i| (r[i], r[(i + 1) % r.len()])))
        .collect();
    for y in clampy(y0)..=clampy(y1) {
        for x in clampx(x0)..=clampx(x1) {
            let (px, py) = (x as i64, y as i64);
            let mut inside = false;
            let mut on_edge = false;
            for &(a, b) in &edges {
                // On the segment a–b (exact, integer arithmetic)?
                let cross = (b[0] - a[0]) * (py - a[1]) - (b[1] - a[1]) * (px - a[0]);
                if cross == 0
                    && px >= a[0].min(b[0])
                    && px <= a[0].max(b[0])
                    && py >= a[1].min(b[1])
                    && py <= a[1].max(b[1])
                {
                    on_edge = true;
                    break;
                }
                // Crossing number with half-open y ranges.
                if (a[1] > py) != (b[1] > py) {
                    // x of the edge at py, compared without division.
                    let lhs = (px - a[0]) * (b[1] - a[1]);
                    let rhs = (b[0] - a[0]) * (py - a[1]);
                    if (b[1] > a[1] && lhs < rhs) || (b[1] < a[1] && lhs > rhs) {
                        inside = !inside;
                    }
                }
            }
            if on_edge || inside {
                put(x, y);
            }
        }
    }
}

#[cfg(test)]
mod tests;
