//! Labelled point clouds: the `vertex` element's `x`, `y`, `z` and an integer label
//! property (ScanNet's `<scene>_vh_clean_2.labels.ply`: NYU40 ids in `label`, 0 for
//! unlabelled), in any PLY body format and scalar type; other vertex properties and
//! other elements (faces) are ignored.

use std::path::Path;

use crate::DataError;

use super::{body, header};

/// Points with one integer label each.
#[derive(Clone, Debug, PartialEq)]
pub struct LabelledPoints {
    /// Positions.
    pub positions: Vec<[f32; 3]>,
    /// Labels, one per point.
    pub labels: Vec<u32>,
}

/// Reads a labelled point cloud; `property` names the label property. Errors name the
/// file: no points, a missing property (listing the vertex properties), a coordinate
/// that is not finite, a label that is not a non-negative integer.
pub fn read_labelled_points(path: &Path, property: &str) -> Result<LabelledPoints, DataError> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    parse_labelled_points(&bytes, path, property)
}

/// [`read_labelled_points`] on the file's bytes.
pub fn parse_labelled_points(
    bytes: &[u8],
    path: &Path,
    property: &str,
) -> Result<LabelledPoints, DataError> {
    let bad = |p: String| DataError::format(path, p);
    let h = header::parse_header(bytes).map_err(bad)?;
    let vi = h
        .elements
        .iter()
        .position(|e| e.name == "vertex")
        .ok_or_else(|| bad("no `vertex` element".into()))?;
    let el = &h.elements[vi];
    if el.count == 0 {
        return Err(bad("no points (`element vertex 0`)".into()));
    }
    let col = |name: &str| {
        el.props
            .iter()
            .position(|p| p.name == name && p.list.is_none())
    };
    let names = || {
        el.props
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (Some(x), Some(y), Some(z)) = (col("x"), col("y"), col("z")) else {
        return Err(bad(format!(
            "the vertices need x, y and z (they have: {})",
            names()
        )));
    };
    let l = col(property).ok_or_else(|| {
        bad(format!(
            "no vertex property `{property}` to read labels from (the vertices have: {})",
            names()
        ))
    })?;
    let cap = el.count.min(bytes.len() / el.props.len().max(1));
    let mut out = LabelledPoints {
        positions: Vec::with_capacity(cap),
        labels: Vec::with_capacity(cap),
    };
    body::for_each_item(bytes, &h, vi, |i, row| {
        let p = [row[x], row[y], row[z]].map(|v| v as f32);
        if p.iter().any(|v| !v.is_finite()) {
            return Err(format!("vertex {i}: a coordinate is not finite ({p:?})"));
        }
        let v = row[l];
        if !(v >= 0.0 && v <= f64::from(u32::MAX) && v.fract() == 0.0) {
            return Err(format!(
                "vertex {i}: `{property}` = {v} is not a non-negative integer"
            ));
        }
        out.positions.push(p);
        out.labels.push(v as u32);
        Ok(())
    })
    .map_err(bad)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ScanNet's layout (binary, ushort labels, colours and faces), an ASCII file with
    /// float labels, and the errors.
    #[test]
    fn reads_scannet_layout_and_refuses_bad_files() {
        let mut b = b"ply\nformat binary_little_endian 1.0\ncomment scannet\nelement vertex 2\n\
property float x\nproperty float y\nproperty float z\nproperty uchar red\nproperty uchar green\n\
property uchar blue\nproperty uchar alpha\nproperty ushort label\nelement face 1\n\
property list uchar int vertex_indices\nend_header\n"
            .to_vec();
        for (p, label) in [([1.0f32, 2.0, 3.0], 5u16), ([-1.0, 0.5, 0.0], 40)] {
            for v in p {
                b.extend(v.to_le_bytes());
            }
            b.extend([9, 9, 9, 255]);
            b.extend(label.to_le_bytes());
        }
        b.extend([3, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0]);
        let p = Path::new("scene0000_00_vh_clean_2.labels.ply");
        let pts = parse_labelled_points(&b, p, "label").unwrap();
        assert_eq!(pts.positions, [[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]]);
        assert_eq!(pts.labels, [5, 40]);
        let e = parse_labelled_points(&b, p, "semantic")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("labels.ply")
                && e.contains("no vertex property `semantic`")
                && e.contains("red"),
            "{e}"
        );
        let e = parse_labelled_points(&b[..b.len() - 20], p, "label").unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        let ascii = |body: &str| {
            format!(
                "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\n\
property float z\nproperty float label\nend_header\n{body}"
            )
        };
        let pts =
            parse_labelled_points(ascii("0 0 0 3\n1 1 1 0\n").as_bytes(), p, "label").unwrap();
        assert_eq!(pts.labels, [3, 0]);
        for (body, want) in [
            (
                "0 0 0 3.5\n1 1 1 0\n",
                "vertex 0: `label` = 3.5 is not a non-negative integer",
            ),
            ("0 0 0 3\n1 1 1 -2\n", "vertex 1: `label` = -2"),
            (
                "0 nan 0 3\n1 1 1 0\n",
                "vertex 0: a coordinate is not finite",
            ),
        ] {
            let e = parse_labelled_points(ascii(body).as_bytes(), p, "label").unwrap_err();
            assert!(e.to_string().contains(want), "{e}");
        }
        let none = b"ply\nformat ascii 1.0\nelement vertex 0\nproperty float x\nend_header\n";
        assert!(
            parse_labelled_points(none, p, "label")
                .unwrap_err()
                .to_string()
                .contains("no points")
        );
        let noxyz = b"ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty int label\nend_header\n1 2\n";
        let e = parse_labelled_points(noxyz, p, "label")
            .unwrap_err()
            .to_string();
        assert!(e.contains("need x, y and z"), "{e}");
    }
}
