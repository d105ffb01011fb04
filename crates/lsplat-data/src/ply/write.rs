//! Writer of splat PLY files (Inria layout, binary little-endian, atomic).

use std::path::Path;

use super::SplatPly;
use crate::DataError;

/// Property names `f_lang_0..dim-1` for per-Gaussian language features.
pub fn lang_property_names(dim: usize) -> Vec<String> {
    (0..dim).map(|k| format!("f_lang_{k}")).collect()
}

/// Writes `ply` in the Inria layout (`x y z nx ny nz f_dc_0..2 f_rest_* opacity
/// scale_0..2 rot_0..3`, all float, normals zero) followed by its extra properties,
/// as `binary_little_endian`, atomically. Lengths and names are checked first.
pub fn write_ply(path: &Path, ply: &SplatPly) -> Result<(), DataError> {
    write_ply_with_comments(path, ply, &[])
}

/// [`write_ply`] with `comment` lines in the header (one line each, no newlines).
pub fn write_ply_with_comments(
    path: &Path,
    ply: &SplatPly,
    comments: &[&str],
) -> Result<(), DataError> {
    let bad = |p: String| DataError::format(path, p);
    let g = &ply.gaussians;
    g.validate()?;
    let n = g.len();
    let rest = ply.rest_len();
    let ne = ply.extra_names.len();
    if ply.sh_degree > 4 {
        return Err(bad(format!("SH degree {} is above 4", ply.sh_degree)));
    }
    if ply.sh_dc.len() != n || ply.sh_rest.len() != n * rest || ply.extra.len() != n * ne {
        return Err(bad(format!(
            "colour/extra arrays ({}, {}, {}) do not match {n} Gaussians of SH degree {} with {ne} extra properties",
            ply.sh_dc.len(),
            ply.sh_rest.len(),
            ply.extra.len(),
            ply.sh_degree
        )));
    }
    let colour = ply
        .sh_dc
        .iter()
        .flatten()
        .chain(&ply.sh_rest)
        .chain(&ply.extra);
    if let Some(v) = colour.into_iter().find(|v| !v.is_finite()) {
        return Err(bad(format!("a colour or extra value is not finite ({v})")));
    }
    let mut names: Vec<String> = [
        "x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2",
    ]
    .map(String::from)
    .into();
    names.extend((0..rest).map(|k| format!("f_rest_{k}")));
    names.extend(
        [
            "opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3",
        ]
        .map(String::from),
    );
    for e in &ply.extra_names {
        if e.is_empty()
            || e.chars().any(|c| c.is_whitespace() || c.is_control())
            || names.contains(e)
        {
            return Err(bad(format!(
                "extra property name `{e}` is empty, has blanks or repeats a name"
            )));
        }
        names.push(e.clone());
    }
    if let Some(c) = comments.iter().find(|c| c.contains(['\n', '\r'])) {
        return Err(bad(format!("comment `{c}` spans several lines")));
    }
    let mut header = String::from(
        "ply\nformat binary_little_endian 1.0\n\
         comment written by lsplat-engine; rot_0..3 are unit quaternions (w, x, y, z): the input rotations, normalised\n",
    );
    for c in comments {
        header.push_str(&format!("comment {c}\n"));
    }
    header.push_str(&format!("element vertex {n}\n"));
    for name in &names {
        header.push_str(&format!("property float {name}\n"));
    }
    header.push_str("end_header\n");
    crate::io::write_atomic(path, |w| {
        w.write_all(header.as_bytes())?;
        let mut row: Vec<f32> = Vec::with_capacity(names.len());
        let mut buf: Vec<u8> = Vec::with_capacity(names.len() * 4);
        for i in 0..n {
            row.clear();
            row.extend_from_slice(&g.means[i]);
            row.extend_from_slice(&[0.0; 3]);
            row.extend_from_slice(&ply.sh_dc[i]);
            row.extend_from_slice(&ply.sh_rest[i * rest..(i + 1) * rest]);
            row.push(g.opacity_logits[i]);
            row.extend_from_slice(&g.log_scales[i]);
            row.extend_from_slice(&g.rotations[i]);
            row.extend_from_slice(&ply.extra[i * ne..(i + 1) * ne]);
            buf.clear();
            buf.extend(row.iter().flat_map(|v| v.to_le_bytes()));
            w.write_all(&buf)?;
        }
        Ok(())
    })
}
