//! 3D Gaussian splatting PLY files in the Inria layout.
//!
//! Reading accepts `ascii`, `binary_little_endian` and `binary_big_endian` bodies,
//! any scalar property type (converted to `f32`), any SH degree 0–4, and extra
//! properties (kept as [`SplatPly::extra_names`]). Every value must be finite.
//! Quaternions are normalised on load. Writing produces the Inria layout as
//! `binary_little_endian` float properties plus optional extra per-vertex floats
//! (e.g. `f_lang_0..D-1`), atomically. Labelled point clouds (x, y, z and an integer
//! label per vertex) are read by [`read_labelled_points`].

mod body;
mod header;
mod points;
mod write;

use std::path::Path;

use lsplat_core::Gaussians;

use crate::DataError;

pub use points::{LabelledPoints, parse_labelled_points, read_labelled_points};
pub use write::{lang_property_names, write_ply, write_ply_with_comments};

/// A splat PLY: geometry, colour SH coefficients and extra per-vertex properties.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SplatPly {
    /// Geometry (means, log-scales, unit quaternions, opacity logits).
    pub gaussians: Gaussians,
    /// SH degree of the colour (0–4), from the number of `f_rest_*` properties.
    pub sh_degree: u32,
    /// DC colour coefficients `f_dc_0..2`, one triple per Gaussian.
    pub sh_dc: Vec<[f32; 3]>,
    /// `f_rest_*` coefficients, `[N, rest_len]` row-major in file order
    /// (`rest_len = 3·((degree+1)² − 1)`).
    pub sh_rest: Vec<f32>,
    /// Names of other per-vertex properties (not normals), in file order.
    pub extra_names: Vec<String>,
    /// Their values, `[N, extra_names.len()]` row-major.
    pub extra: Vec<f32>,
}

impl SplatPly {
    /// Number of `f_rest_*` values per Gaussian.
    pub fn rest_len(&self) -> usize {
        rest_len(self.sh_degree)
    }

    /// The values of extra property `name` for every Gaussian, if present.
    pub fn extra_column(&self, name: &str) -> Option<Vec<f32>> {
        let k = self.extra_names.iter().position(|n| n == name)?;
        Some(
            self.extra
                .iter()
                .skip(k)
                .step_by(self.extra_names.len())
                .copied()
                .collect(),
        )
    }
}

/// Number of `f_rest_*` values of SH degree `d`.
pub fn rest_len(d: u32) -> usize {
    3 * ((d as usize + 1).pow(2) - 1)
}

/// Reads a splat PLY file.
pub fn read_ply(path: &Path) -> Result<SplatPly, DataError> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    parse_ply(&bytes, path)
}

/// Where a vertex property goes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Slot {
    Mean(usize),
    Normal,
    Dc(usize),
    Rest(usize),
    Opacity,
    Scale(usize),
    Rot(usize),
    Extra(usize),
}

fn slot_of(name: &str, extras: &mut usize) -> Slot {
    let idx = |p: &str| name.strip_prefix(p).and_then(|s| s.parse::<usize>().ok());
    match name {
        "x" | "y" | "z" => Slot::Mean((name.as_bytes()[0] - b'x') as usize),
        "nx" | "ny" | "nz" => Slot::Normal,
        "opacity" => Slot::Opacity,
        _ => match (idx("f_dc_"), idx("f_rest_"), idx("scale_"), idx("rot_")) {
            (Some(k @ 0..3), ..) => Slot::Dc(k),
            (_, Some(k), ..) => Slot::Rest(k),
            (_, _, Some(k @ 0..3), _) => Slot::Scale(k),
            (.., Some(k @ 0..4)) => Slot::Rot(k),
            _ => {
                *extras += 1;
                Slot::Extra(*extras - 1)
            }
        },
    }
}

/// Parses the bytes of a splat PLY; `path` only names the file in errors.
pub fn parse_ply(bytes: &[u8], path: &Path) -> Result<SplatPly, DataError> {
    let bad = |p: String| DataError::format(path, p);
    let h = header::parse_header(bytes).map_err(bad)?;
    let vi = h
        .elements
        .iter()
        .position(|e| e.name == "vertex")
        .ok_or_else(|| bad("no `vertex` element".into()))?;
    let el = &h.elements[vi];
    if el.count == 0 {
        return Err(bad("the PLY holds no Gaussians (`element vertex 0`)".into()));
    }
    if el.props.iter().any(|p| p.name.starts_with("packed_")) {
        return Err(bad(
            "this is a compressed (PlayCanvas/SuperSplat) PLY; decompress it to the Inria layout"
                .into(),
        ));
    }
    let mut n_extra = 0;
    let slots: Vec<Slot> = el
        .props
        .iter()
        .map(|p| slot_of(&p.name, &mut n_extra))
        .collect();
    for (i, s) in slots.iter().enumerate() {
        if *s != Slot::Normal && slots[..i].contains(s) {
            return Err(bad(format!(
                "property `{}` appears twice",
                el.props[i].name
            )));
        }
    }
    let mut required: Vec<(Slot, &str)> = vec![(Slot::Opacity, "opacity")];
    let names = [
        "x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", "scale_0", "scale_1", "scale_2",
    ];
    let req = [
        Slot::Mean(0),
        Slot::Mean(1),
        Slot::Mean(2),
        Slot::Dc(0),
        Slot::Dc(1),
        Slot::Dc(2),
    ];
    required.extend(req.iter().copied().zip(names));
    required.extend((0..3).map(|k| (Slot::Scale(k), names[6 + k])));
    required.extend((0..4).map(|k| (Slot::Rot(k), ["rot_0", "rot_1", "rot_2", "rot_3"][k])));
    if let Some((_, name)) = required.iter().find(|(s, _)| !slots.contains(s)) {
        return Err(bad(format!("missing vertex property `{name}`")));
    }
    let n_rest = slots.iter().filter(|s| matches!(s, Slot::Rest(_))).count();
    let sh_degree = (0..=4u32).find(|&d| rest_len(d) == n_rest).ok_or_else(|| {
        bad(format!(
            "{n_rest} f_rest_* properties match no SH degree (0, 9, 24, 45 or 72 expected)"
        ))
    })?;
    if let Some(k) = (0..n_rest).find(|k| !slots.contains(&Slot::Rest(*k))) {
        return Err(bad(format!("missing vertex property `f_rest_{k}`")));
    }
    let n = el.count;
    let extra_names: Vec<String> = el
        .props
        .iter()
        .zip(&slots)
        .filter(|(_, s)| matches!(s, Slot::Extra(_)))
        .map(|(p, _)| p.name.clone())
        .collect();
    // Only allocate after the body is known to hold `n` vertices (checked by the
    // decoder before its first call); start small and grow.
    let cap = n.min(bytes.len() / el.props.len().max(1));
    let mut out = SplatPly {
        gaussians: Gaussians {
            means: Vec::with_capacity(cap),
            log_scales: Vec::with_capacity(cap),
            rotations: Vec::with_capacity(cap),
            opacity_logits: Vec::with_capacity(cap),
        },
        sh_degree,
        sh_dc: Vec::with_capacity(cap),
        sh_rest: Vec::with_capacity(cap * n_rest),
        extra_names,
        extra: Vec::with_capacity(cap * n_extra),
    };
    let mut rest = vec![0f32; n_rest];
    let mut extra = vec![0f32; n_extra];
    body::for_each_item(bytes, &h, vi, |i, row| {
        let (mut m, mut s, mut q, mut dc, mut o) =
            ([0f32; 3], [0f32; 3], [0f32; 4], [0f32; 3], 0f32);
        for ((&v64, slot), p) in row.iter().zip(&slots).zip(&el.props) {
            let v = v64 as f32;
            if !v.is_finite() {
                return Err(format!(
                    "vertex {i}: property `{}` is not finite ({v64})",
                    p.name
                ));
            }
            match *slot {
                Slot::Mean(k) => m[k] = v,
                Slot::Normal => {}
                Slot::Dc(k) => dc[k] = v,
                Slot::Rest(k) => rest[k] = v,
                Slot::Opacity => o = v,
                Slot::Scale(k) => s[k] = v,
                Slot::Rot(k) => q[k] = v,
                Slot::Extra(k) => extra[k] = v,
            }
        }
        let g = &mut out.gaussians;
        g.means.push(m);
        g.log_scales.push(s);
        g.rotations.push(q);
        g.opacity_logits.push(o);
        out.sh_dc.push(dc);
        out.sh_rest.extend_from_slice(&rest);
        out.extra.extend_from_slice(&extra);
        Ok(())
    })
    .map_err(bad)?;
    out.gaussians.normalize_rotations();
    Ok(out)
}

#[cfg(test)]
mod tests;
