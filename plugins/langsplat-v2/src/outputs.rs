//! What a LangSplatV2 run writes: the per-Gaussian top-4 codes and weights of the
//! final logits (`codes.parquet`) and the codebook (`codebook.parquet`).

use std::path::Path;

use bevy_ecs::prelude::*;
use lsplat_device::Backend;
use lsplat_engine::EngineError;
use lsplat_engine::resources::Dev;

use lsplat_data::DataError;
use lsplat_data::run_dir::{Decoder, RunFeatures};

use crate::model::V2State;
use crate::{CODES, TOP_K};

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

/// A finished LangSplatV2 run's features for `render`, `query` and `eval`: each
/// Gaussian's dense `[CODES]` weights (zero off its codes) from `codes.parquet`, to
/// composite, and the codebook from `codebook.parquet` that decodes a composited
/// pixel (`codebookᵀ·w`).
pub fn read_run(dir: &Path) -> Result<RunFeatures, DataError> {
    let cp = dir.join(CODES_FILE);
    let codes = lsplat_data::tables::read_sparse_codes(&cp)?;
    let dense = codes.dense(CODES, &cp)?;
    let bp = dir.join(CODEBOOK_FILE);
    let (matrix, dim) = lsplat_data::tables::read_row_table(&bp, "code", "feature")?;
    if matrix.len() != CODES * dim {
        return Err(DataError::format(
            &bp,
            format!(
                "{} codebook rows; LangSplatV2 has {CODES}",
                matrix.len() / dim
            ),
        ));
    }
    Ok(RunFeatures {
        data: dense,
        channels: CODES,
        file: cp,
        decoder: Some(Decoder {
            matrix,
            dim,
            file: bp,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_run_reads_back_as_dense_weights_and_a_codebook() {
        let dir = std::env::temp_dir().join(format!("lsplat-v2-out-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let idx: Vec<u32> = (0..3 * TOP_K as u32)
            .map(|i| (i * 7) % CODES as u32)
            .collect();
        let val: Vec<f32> = (0..3 * TOP_K).map(|i| 0.1 * i as f32).collect();
        let codebook: Vec<f32> = (0..CODES * 5).map(|i| i as f32).collect();
        write_files(&dir, &idx, &val, &codebook, 5).unwrap();
        let got = read_run(&dir).unwrap();
        assert_eq!((got.channels, got.data.len()), (CODES, 3 * CODES));
        for g in 0..3 {
            for j in 0..TOP_K {
                let c = idx[g * TOP_K + j] as usize;
                assert_eq!(got.data[g * CODES + c], val[g * TOP_K + j]);
            }
            let nz = got.data[g * CODES..][..CODES].iter().filter(|&&w| w != 0.0);
            assert!(nz.count() <= TOP_K);
        }
        let dec = got.decoder.unwrap();
        assert_eq!((dec.matrix, dec.dim), (codebook, 5));
        // A codebook of the wrong size is refused, naming the file.
        write_files(&dir, &idx, &val, &[1.0; 10], 5).unwrap();
        let e = read_run(&dir).unwrap_err().to_string();
        assert!(
            e.contains("codebook.parquet") && e.contains("2 codebook rows"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
