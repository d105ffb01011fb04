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
        objects.push(Object {
            category,
            bbox,
            rings,
        });
    }
    Ok(Frame {
        path: path.to_path_buf(),
        image,
        width,
        height,
        objects,
    })
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
    let pts = rings.iter().flatten();
    let (Some(x0), Some(x1), Some(y0), Some(y1)) = (
        pts.clone().map(|p| p[0]).min(),
        pts.clone().map(|p| p[0]).max(),
        pts.clone().map(|p| p[1]).min(),
        pts.map(|p| p[1]).max(),
    ) else {
        return m;
    };
    let clampx = |v: i64| v.clamp(0, w as i64 - 1) as usize;
    let clampy = |v: i64| v.clamp(0, h as i64 - 1) as usize;
    if x1 < 0 || y1 < 0 || x0 >= w as i64 || y0 >= h as i64 {
        return m;
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
                m[y * w + x] = 1;
            }
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(objects: &str) -> Frame {
        let t = format!(
            r#"{{"info": {{"width": 10, "height": 8, "name": "frame_00007.jpg"}}, "objects": [{objects}]}}"#
        );
        parse_frame(&t, Path::new("frame_00007.json")).unwrap()
    }

    fn count(m: &[u8]) -> usize {
        m.iter().filter(|v| **v != 0).count()
    }

    #[test]
    fn rectangles_holes_parts_and_union() {
        // A rectangle (1,1)-(6,5): 6×5 pixels, bounds inclusive as cv2.fillPoly.
        let f = frame(
            r#"{"category": "box", "bbox": [1, 1, 6, 5], "segmentation": [[1, 1], [6, 1], [6, 5], [1, 5]]}"#,
        );
        assert_eq!((f.stem(), f.number()), ("frame_00007", Some(7)));
        let q = f.queries();
        assert_eq!(count(&q[0].mask), 30);
        assert_eq!(q[0].mask[10 + 1], 1);
        assert_eq!(q[0].mask[5 * 10 + 6], 1);
        assert_eq!(q[0].mask[6 * 10 + 6], 0);
        // A hole: outer 0..8 × 0..6 (63 px) minus the hole's interior (3..5 × 2..4
        // outline stays filled; interior (4, 3) only).
        let f = frame(
            r#"{"category": "ring", "bbox": [0, 0, 8, 6], "segmentation": [[[0, 0], [8, 0], [8, 6], [0, 6]], [[3, 2], [5, 2], [5, 4], [3, 4]]]}"#,
        );
        let m = &f.queries()[0].mask;
        assert_eq!(count(m), 63 - 1);
        assert_eq!(m[3 * 10 + 4], 0);
        assert_eq!(m[2 * 10 + 3], 1);
        // Two parts in one object, and two objects of one category (union, both boxes);
        // float vertices are truncated.
        let f = frame(
            r#"{"category": "cup", "bbox": [0, 0, 1, 1], "segmentation": [[[0, 0], [1.9, 0], [1, 1], [0, 1]], [[8, 6], [9, 6], [9, 7], [8, 7]]]},
               {"category": "plate", "bbox": [4, 4, 5, 5], "segmentation": [[4, 4], [5, 4], [5, 5], [4, 5]]},
               {"category": "cup", "bbox": [3, 0, 3, 0], "segmentation": [[3, 0], [3, 0], [3, 0]]}"#,
        );
        let q = f.queries();
        assert_eq!(
            q.iter().map(|q| q.category.as_str()).collect::<Vec<_>>(),
            ["cup", "plate"]
        );
        assert_eq!(count(&q[0].mask), 4 + 4 + 1);
        assert_eq!(q[0].boxes.len(), 2);
        assert_eq!(count(&q[1].mask), 4);
        // A triangle: pixels inside or on the outline.
        let f = frame(
            r#"{"category": "t", "bbox": [0, 0, 4, 4], "segmentation": [[0, 0], [4, 0], [0, 4]]}"#,
        );
        assert_eq!(count(&f.queries()[0].mask), 5 + 4 + 3 + 2 + 1);
        // Off-image parts are clipped.
        let f = frame(
            r#"{"category": "big", "bbox": [-5, -5, 20, 20], "segmentation": [[-5, -5], [20, -5], [20, 20], [-5, 20]]}"#,
        );
        assert_eq!(count(&f.queries()[0].mask), 80);
    }

    #[test]
    fn bad_files_name_the_file_and_the_problem() {
        let p = Path::new("frame_00001.json");
        for (text, want) in [
            ("{", "not valid JSON"),
            (
                r#"{"info": {"width": 4, "name": "a.jpg"}, "objects": []}"#,
                "info.height",
            ),
            (
                r#"{"info": {"width": 4, "height": 4, "name": "a.jpg"}, "objects": [{"category": "x", "bbox": [1, 2], "segmentation": [[0, 0]]}]}"#,
                "object 0: `bbox`",
            ),
            (
                r#"{"info": {"width": 4, "height": 4, "name": "a.jpg"}, "objects": [{"category": "x", "bbox": [1, 2, 3, 4], "segmentation": [[0, "a"]]}]}"#,
                "object 0: `segmentation`",
            ),
        ] {
            let e = parse_frame(text, p).unwrap_err().to_string();
            assert!(
                e.starts_with("frame_00001.json: ") && e.contains(want),
                "{e}"
            );
        }
    }
}
