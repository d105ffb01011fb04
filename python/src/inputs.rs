//! The inputs of `Scene(splats, cameras, dataset)` given as arrays or paths.

use std::path::PathBuf;

use lsplat_core::{Camera as CoreCamera, Gaussians};
use lsplat_data::ImageLabels;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arrays::{Dim, array, slice};
use crate::camera::Camera;
use crate::errors::{Error, Result};

/// Gaussians from a PLY path or a mapping of arrays.
pub fn read_splats<'py>(obj: &Bound<'py, PyAny>) -> Result<Gaussians> {
    if let Ok(path) = obj.extract::<PathBuf>() {
        return Ok(lsplat_data::ply::read_ply(&path)?.gaussians);
    }
    let Ok(d) = obj.cast::<PyDict>() else {
        return Err(Error::Type(format!(
            "splats: expected a PLY path or a dict of arrays (means, log_scales, rotations, opacity_logits), got {}",
            obj.get_type().name()?
        )));
    };
    const KEYS: [&str; 4] = ["means", "log_scales", "rotations", "opacity_logits"];
    for k in d.keys() {
        let k: String = k.extract()?;
        if !KEYS.contains(&k.as_str()) {
            return Err(Error::Value(format!(
                "splats: unknown key {k:?} (expected {})",
                KEYS.join(", ")
            )));
        }
    }
    let get = |k: &str| -> Result<Bound<'py, PyAny>> {
        d.get_item(k)?
            .ok_or_else(|| Error::Value(format!("splats: no {k:?} array")))
    };
    let means = get("means")?;
    let (m, shape) = array::<f32>("splats['means']", &means, Some(&[Dim::Any, Dim::Is(3, "")]))?;
    let n = shape[0];
    let rows = |name: &str, obj: &Bound<'py, PyAny>, w: usize| -> Result<Vec<f32>> {
        let dims: Vec<Dim> = if w == 1 {
            vec![Dim::Is(n, "Gaussians")]
        } else {
            vec![Dim::Is(n, "Gaussians"), Dim::Is(w, "")]
        };
        let arg = format!("splats['{name}']");
        let (a, _) = array::<f32>(&arg, obj, Some(&dims))?;
        Ok(slice(&arg, &a)?.to_vec())
    };
    let scales = rows("log_scales", &get("log_scales")?, 3)?;
    let rots = rows("rotations", &get("rotations")?, 4)?;
    let opac = rows("opacity_logits", &get("opacity_logits")?, 1)?;
    let m = slice("splats['means']", &m)?;
    let mut g = Gaussians {
        means: m.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect(),
        log_scales: scales.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect(),
        rotations: rots
            .chunks_exact(4)
            .map(|c| [c[0], c[1], c[2], c[3]])
            .collect(),
        opacity_logits: opac,
    };
    // Rows already of unit length (to float32 rounding) are kept as given, so a scene's
    // own `splats()` round-trip bit for bit; the others are normalised as the PLY reader
    // normalises them.
    let unit = |q: &[f32; 4]| {
        let n2: f64 = q.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        (n2.sqrt() - 1.0).abs() <= 1e-6
    };
    if !g.rotations.iter().all(unit) {
        let keep: Vec<bool> = g.rotations.iter().map(unit).collect();
        let given = g.rotations.clone();
        g.normalize_rotations();
        for ((q, k), orig) in g.rotations.iter_mut().zip(keep).zip(given) {
            if k {
                *q = orig;
            }
        }
    }
    g.validate()?;
    Ok(g)
}

/// Cameras from a path (COLMAP folder, cameras.json, transforms.json) or a sequence
/// of `Camera`s.
pub fn read_cameras(obj: &Bound<'_, PyAny>) -> Result<Vec<CoreCamera>> {
    if let Ok(path) = obj.extract::<PathBuf>() {
        let mut cams = lsplat_data::cameras::load_cameras(&path)?;
        cams.sort_by(|a, b| a.name.cmp(&b.name));
        return Ok(cams);
    }
    let mut out = Vec::new();
    for (i, c) in obj.try_iter()?.enumerate() {
        let c = c?;
        let cam = c.cast::<Camera>().map_err(|_| {
            Error::Type(format!(
                "cameras[{i}]: expected an lsplat.Camera (or give a cameras path)"
            ))
        })?;
        out.push(cam.get().0.clone());
    }
    if out.is_empty() {
        return Err(Error::Value("cameras: no cameras".into()));
    }
    Ok(out)
}

/// Labels from a sequence of `{"name", "segmentation", "features"}` dicts, aligned with
/// `cameras` (each rescaled to its labels' size).
pub fn read_labels<'py>(
    obj: &Bound<'py, PyAny>,
    cameras: &mut [CoreCamera],
) -> Result<Vec<ImageLabels>> {
    let mut given = Vec::new();
    for (i, item) in obj.try_iter()?.enumerate() {
        let item = item?;
        let arg = format!("dataset[{i}]");
        let d = item.cast::<PyDict>().map_err(|_| {
            Error::Type(format!(
                "{arg}: expected a dict with name, segmentation and features"
            ))
        })?;
        let get = |k: &str| -> Result<Bound<'py, PyAny>> {
            d.get_item(k)?
                .ok_or_else(|| Error::Value(format!("{arg}: no {k:?}")))
        };
        let name: String = get("name")?
            .extract()
            .map_err(|_| Error::Type(format!("{arg}['name']: expected a str")))?;
        let seg_arg = format!("{arg}['segmentation']");
        let (seg, shape) =
            array::<i32>(&seg_arg, &get("segmentation")?, Some(&[Dim::Any, Dim::Any]))?;
        let feat_arg = format!("{arg}['features']");
        let (feat, fshape) =
            array::<f32>(&feat_arg, &get("features")?, Some(&[Dim::Any, Dim::Any]))?;
        let labels = ImageLabels::from_seg_map(
            name,
            (shape[1] as u32, shape[0] as u32),
            slice(&seg_arg, &seg)?,
            slice(&feat_arg, &feat)?.to_vec(),
            fshape[1],
        )?;
        given.push(labels);
    }
    let mut out = Vec::with_capacity(cameras.len());
    let mut missing = Vec::new();
    for cam in cameras.iter_mut() {
        match given.iter().position(|l| l.name == cam.name) {
            Some(i) => {
                let l = given.swap_remove(i);
                *cam = lsplat_data::scene::fit_camera(cam, &l.name, (l.width, l.height))?;
                out.push(l);
            }
            None => missing.push(cam.name.clone()),
        }
    }
    if !missing.is_empty() || !given.is_empty() {
        let extra: Vec<&str> = given.iter().map(|l| l.name.as_str()).collect();
        return Err(Error::Value(format!(
            "dataset: cameras and labelled images differ; cameras without labels: [{}]; labels without a camera: [{}]",
            missing.join(", "),
            extra.join(", ")
        )));
    }
    Ok(out)
}
