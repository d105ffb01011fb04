//! LangSplatV2 in a checkpoint: the logits `[N, 64]` and their Adam moments are the
//! checkpoint's main tensors; the codebook `[64, D]` and its moments are the extra
//! tensors `codebook`, `codebook_m` and `codebook_v`. Every Gaussian is caught up
//! (lazy Adam) before the logits are read, so the file holds the dense Adam's state;
//! a restored run starts from it with every Gaussian current.

use bevy_ecs::prelude::*;
use lsplat_data::run::Extra;
use lsplat_device::Backend;
use lsplat_engine::resources::Dev;
use lsplat_engine::{EngineError, ModelState};

use crate::CODES;
use crate::model::V2State;

/// Names of the codebook tensors.
const CODEBOOK: [&str; 3] = ["codebook", "codebook_m", "codebook_v"];

/// The state after the steps run so far (catching every Gaussian up first, which
/// changes no later result: the lazy Adam equals the dense one bit for bit).
pub(crate) fn snapshot<B: Backend>(world: &mut World) -> Result<ModelState, EngineError> {
    world.resource_scope(|world, mut st: Mut<V2State<B>>| {
        let dev = &world.resource::<Dev<B>>().0;
        st.finish(dev)?;
        let extra = [&st.codebook, &st.m_codebook, &st.v_codebook]
            .into_iter()
            .zip(CODEBOOK)
            .map(|(buf, name)| {
                Ok(Extra {
                    name: name.into(),
                    rows: CODES,
                    cols: st.dim,
                    data: dev.download(buf)?,
                })
            })
            .collect::<Result<Vec<_>, EngineError>>()?;
        Ok(ModelState {
            gaussians: st.gaussians,
            channels: CODES,
            params: dev.download(&st.logits)?,
            adam_m: dev.download(&st.m_logits)?,
            adam_v: dev.download(&st.v_logits)?,
            extra,
        })
    })
}

/// Puts a [`snapshot`] taken after `steps` steps back into the state: every Gaussian
/// current at `steps`, its selection made by the next step.
pub(crate) fn restore<B: Backend>(
    world: &mut World,
    state: ModelState,
    steps: u64,
) -> Result<(), EngineError> {
    world.resource_scope(|world, mut st: Mut<V2State<B>>| {
        let dev = &world.resource::<Dev<B>>().0;
        let bad = |what: String| EngineError::Config(format!("the checkpoint {what}"));
        if (state.gaussians, state.channels) != (st.gaussians, CODES) {
            return Err(bad(format!(
                "holds {}×{} logits but LangSplatV2 on this scene has {}×{CODES}",
                state.gaussians, state.channels, st.gaussians
            )));
        }
        let steps = u32::try_from(steps).map_err(|_| bad(format!("step {steps} is too large")))?;
        let find = |name: &str| {
            state
                .extra
                .iter()
                .find(|e| e.name == name)
                .filter(|e| (e.rows, e.cols) == (CODES, st.dim))
                .ok_or_else(|| {
                    bad(format!(
                        "has no `{name}` tensor of {CODES}×{} (the scene's feature width)",
                        st.dim
                    ))
                })
        };
        let [cb, cm, cv] = [find(CODEBOOK[0])?, find(CODEBOOK[1])?, find(CODEBOOK[2])?];
        dev.upload_into(&mut st.logits, &state.params)?;
        dev.upload_into(&mut st.m_logits, &state.adam_m)?;
        dev.upload_into(&mut st.v_logits, &state.adam_v)?;
        dev.upload_into(&mut st.codebook, &cb.data)?;
        dev.upload_into(&mut st.m_codebook, &cm.data)?;
        dev.upload_into(&mut st.v_codebook, &cv.data)?;
        dev.fill(&mut st.last, steps)?;
        st.steps = steps;
        st.selected = false;
        Ok(())
    })
}
