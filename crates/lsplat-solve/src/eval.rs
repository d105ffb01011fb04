//! Quality of per-Gaussian features on chosen cameras, per level.

use lsplat_device::{Backend, PixelSet};
use lsplat_render::{EvalReport, EvalSum, Scratch, cache};

use crate::average::columns;
use crate::{Problem, Result};

/// How a camera is rendered.
enum Via<'o, B: Backend> {
    Operator(&'o B::Operator),
    Raster(PixelSet<B>),
}

/// Renders `x` (`[N, L·C]`, composited as stored) at the union of the levels' valid
/// pixels of each camera in `cameras` and scores every level on its own valid pixels:
/// one report per level. `operator(cam)` may return a cached operator whose rows are
/// exactly that pixel set (then the camera is an SpMM instead of a rasterization).
pub fn evaluate<'o, B: Backend>(
    dev: &B,
    p: &Problem<'_, B>,
    x: &[f32],
    cameras: &[usize],
    operator: impl Fn(usize) -> Option<&'o B::Operator>,
) -> Result<Vec<EvalReport>> {
    p.validate()?;
    let (c, levels) = (p.channels(), p.level_count());
    let width = levels * c;
    let chunks = p.level_chunks(dev, c)?;
    let xs: Vec<B::Buf<f32>> = chunks
        .iter()
        .map(|ls| dev.upload(&columns(x, width, ls.start * c..ls.end * c)))
        .collect::<Result<_, _>>()?;
    let mut sums = vec![EvalSum::default(); levels];
    let mut scratch = Scratch::<B>::default();
    for &cam in cameras {
        let labels: Vec<_> = p.levels.iter().map(|l| l[cam]).collect();
        let hw = p.cameras[cam].pixel_count();
        let op = operator(cam);
        let targets = p.targets(cam);
        if targets.is_empty() {
            for s in &mut sums {
                s.add_camera(std::iter::empty(), c, hw);
            }
            continue;
        }
        let via = match op {
            Some(op) => Via::Operator(op),
            None => {
                let camera = &p.cameras[cam];
                let (grid, clip) = (targets.grid, p.render.clip);
                cache::project(dev, p.geometry, camera, grid, clip, &mut scratch)?;
                cache::bin(dev, grid, &mut scratch)?;
                Via::Raster(PixelSet::upload(
                    dev,
                    grid,
                    &targets.pixels,
                    &targets.offsets,
                )?)
            }
        };
        for (ls, xb) in chunks.iter().zip(&xs) {
            let ch = ls.len() * c;
            let mut out = dev.alloc::<f32>(targets.len() * ch)?;
            match &via {
                Via::Operator(op) => dev.spmm(op, xb, ch, &mut out)?,
                Via::Raster(set) => {
                    let (proj, bins) = (&scratch.projection, &scratch.bins);
                    dev.rasterize(proj, bins, set, xb, ch, &mut out)?
                }
            }
            let rendered = dev.download(&out)?;
            for (j, l) in ls.clone().enumerate() {
                let table = &labels[l].features;
                let rows = targets.rows[l].iter().enumerate().filter(|(_, r)| **r != 0);
                let pairs = rows.map(|(i, &r)| {
                    let m = (r - 1) as usize;
                    (
                        &rendered[i * ch + j * c..i * ch + (j + 1) * c],
                        &table[m * c..(m + 1) * c],
                    )
                });
                sums[l].add_camera(pairs, c, hw);
            }
        }
    }
    Ok(sums.iter().map(EvalSum::report).collect())
}
