//! What a LangSplatV2 run writes: the per-Gaussian top-4 codes and weights of the
//! final logits (`codes.parquet`) and the codebook (`codebook.parquet`).

use std::path::Path;

use bevy_ecs::prelude::*;
use lsplat_device::Backend;
use lsplat_engine::EngineError;
use lsplat_engine::resources::Dev;

use crate::TOP_K;
use crate::model::V2State;

/// Per-Gaussian codes and weights.
pub const CODES_FILE: &str = "codes.parquet";
/// The codebook, `[64, D]`.
pub const CODEBOOK_FILE: &str = "codebook.parquet";

const NOTE: &str = "LangSplatV2: a Gaussian's 64-code weights are zero except `codes` (top-4 softmax of its logits, renormalised) = `weights`; composite them (alpha*T, no normalisation, no background) and decode a pixel as codebook^T * w";

/// Writes both files into `dir` from the state's final logits and codebook.
pub(crate) fn write<B: Backend>(world: &mut World, dir: &Path) -> Result<Vec<String>, EngineError> {
    world.resource_scope(|world, mut st: Mut<V2State<B>>| {
        let dev = &world.resource::<Dev<B>>().0;
        let (idx, val) = final_codes(dev, &mut st)?;
        let codebook = dev.download(&st.codebook)?;
        write_files(dir, &idx, &val, &codebook, st.dim)
    })
}

/// The final selection: top-4 of the trained logits (every Gaussian caught up),
/// downloaded.
pub fn final_codes<B: Backend>(
    dev: &B,
    st: &mut V2State<B>,
) -> Result<(Vec<u32>, Vec<f32>), EngineError> {
    st.finish(dev)?;
    Ok((dev.download(&st.idx)?, dev.download(&st.val)?))
}

pub(crate) fn write_files(
    dir: &Path,
    idx: &[u32],
    val: &[f32],
    codebook: &[f32],
    dim: usize,
) -> Result<Vec<String>, EngineError> {
    let meta = [("lsplat.model", crate::model::NAME), ("lsplat.note", NOTE)];
    lsplat_data::output::write_sparse_codes(&dir.join(CODES_FILE), idx, val, TOP_K, &meta)?;
    lsplat_data::output::write_row_table(
        &dir.join(CODEBOOK_FILE),
        "code",
        "feature",
        codebook,
        dim,
        &meta,
    )?;
    Ok(vec![CODES_FILE.into(), CODEBOOK_FILE.into()])
}
