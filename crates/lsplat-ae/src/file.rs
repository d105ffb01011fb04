//! Model files: safetensors (an 8-byte little-endian header length, a JSON header
//! naming each tensor's dtype, shape and byte range, then the raw little-endian data),
//! written by our own code and readable by the `safetensors` Python package.
//!
//! Tensor names and shapes are those of LangSplat's PyTorch `Autoencoder` state dict
//! (`encoder.0.weight` `[256, 512]`, `encoder.1.running_mean`, …, `decoder.12.bias`),
//! so a model moves both ways: `load_state_dict(safetensors.torch.load_file(path))`
//! in LangSplat, and a LangSplat checkpoint saved with `safetensors.torch.save_file`
//! loads here. The architecture is read from the tensor shapes; `__metadata__` records
//! `format = lsplat-ae`, the widths and how the model was trained.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value, json};

use crate::AeError;
use crate::layers::{BatchNorm, Linear};
use crate::model::{Autoencoder, check_dims};

/// Largest header accepted (a model header is a few kB).
const MAX_HEADER: u64 = 16 << 20;

/// Names and indices of the layers, as PyTorch's `nn.ModuleList` numbers them:
/// encoder `[Linear | BN ReLU Linear | …]`, decoder `[Linear | ReLU Linear | …]`.
fn enc_bn(stage: usize) -> usize {
    1 + 3 * stage
}
fn enc_lin(stage: usize) -> usize {
    3 + 3 * stage
}
fn dec_lin(stage: usize) -> usize {
    2 + 2 * stage
}

enum Data<'a> {
    F32(&'a [f32]),
    I64(i64),
}

/// The model's tensors by name, in a stable order.
fn tensors(m: &Autoencoder) -> Vec<(String, Vec<usize>, Data<'_>)> {
    let mut t = Vec::new();
    fn push_lin<'a>(t: &mut Vec<(String, Vec<usize>, Data<'a>)>, p: &str, l: &'a Linear) {
        t.push((
            format!("{p}.weight"),
            vec![l.outputs, l.inputs],
            Data::F32(&l.weight),
        ));
        t.push((format!("{p}.bias"), vec![l.outputs], Data::F32(&l.bias)));
    }
    push_lin(&mut t, "encoder.0", &m.enc_first);
    for (s, (bn, l)) in m.enc.iter().enumerate() {
        let p = format!("encoder.{}", enc_bn(s));
        for (n, v) in [
            ("weight", &bn.weight),
            ("bias", &bn.bias),
            ("running_mean", &bn.running_mean),
            ("running_var", &bn.running_var),
        ] {
            t.push((format!("{p}.{n}"), vec![bn.dim], Data::F32(v)));
        }
        t.push((
            format!("{p}.num_batches_tracked"),
            vec![],
            Data::I64(bn.batches_tracked),
        ));
        push_lin(&mut t, &format!("encoder.{}", enc_lin(s)), l);
    }
    push_lin(&mut t, "decoder.0", &m.dec_first);
    for (s, l) in m.dec.iter().enumerate() {
        push_lin(&mut t, &format!("decoder.{}", dec_lin(s)), l);
    }
    t
}

/// The bytes of a model file; `meta` adds string entries to `__metadata__`.
pub fn model_bytes(m: &Autoencoder, meta: &BTreeMap<String, String>) -> Vec<u8> {
    let mut header = Map::new();
    let mut md: Map<String, Value> = meta
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    md.insert("format".into(), "lsplat-ae".into());
    md.insert("version".into(), "1".into());
    md.insert("input_dim".into(), m.input_dim().to_string().into());
    md.insert("code_dim".into(), m.code_dim().to_string().into());
    md.insert(
        "encoder_dims".into(),
        json!(m.encoder_dims()).to_string().into(),
    );
    md.insert(
        "decoder_dims".into(),
        json!(m.decoder_dims()).to_string().into(),
    );
    header.insert("__metadata__".into(), Value::Object(md));
    let mut data = Vec::new();
    for (name, shape, d) in tensors(m) {
        let start = data.len();
        let dtype = match d {
            Data::F32(v) => {
                v.iter()
                    .for_each(|x| data.extend_from_slice(&x.to_le_bytes()));
                "F32"
            }
            Data::I64(v) => {
                data.extend_from_slice(&v.to_le_bytes());
                "I64"
            }
        };
        header.insert(
            name,
            json!({"dtype": dtype, "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let mut h = Value::Object(header).to_string().into_bytes();
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut out = Vec::with_capacity(8 + h.len() + data.len());
    out.extend_from_slice(&(h.len() as u64).to_le_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(&data);
    out
}

/// A model read from a file, with its `__metadata__`.
#[derive(Clone, Debug)]
pub struct ModelFile {
    /// The network.
    pub model: Autoencoder,
    /// String metadata (empty for files from other tools).
    pub metadata: BTreeMap<String, String>,
}

/// Parses a model file's bytes; `path` names the file in errors.
pub fn parse_model(bytes: &[u8], path: &Path) -> Result<ModelFile, AeError> {
    let bad = |p: String| AeError::model(path, p);
    if bytes.len() < 8 {
        return Err(bad("not a safetensors file (shorter than 8 bytes)".into()));
    }
    let hlen = u64::from_le_bytes(bytes[..8].try_into().unwrap_or_default());
    if hlen > MAX_HEADER || 8 + hlen > bytes.len() as u64 {
        return Err(bad(format!(
            "not a safetensors file (header length {hlen} with {} bytes present)",
            bytes.len()
        )));
    }
    let body = &bytes[8 + hlen as usize..];
    let header: Map<String, Value> = serde_json::from_slice(&bytes[8..8 + hlen as usize])
        .map_err(|e| bad(format!("safetensors header is not a JSON object: {e}")))?;
    let mut metadata = BTreeMap::new();
    let mut tensors: BTreeMap<String, (Vec<usize>, Vec<f64>)> = BTreeMap::new();
    for (name, v) in &header {
        if name == "__metadata__" {
            if let Some(o) = v.as_object() {
                for (k, x) in o {
                    metadata.insert(k.clone(), x.as_str().unwrap_or_default().to_string());
                }
            }
            continue;
        }
        let dtype = v["dtype"].as_str().unwrap_or_default();
        let shape: Option<Vec<usize>> = v["shape"]
            .as_array()
            .and_then(|a| a.iter().map(|x| x.as_u64().map(|u| u as usize)).collect());
        let offs: Option<Vec<usize>> = v["data_offsets"]
            .as_array()
            .and_then(|a| a.iter().map(|x| x.as_u64().map(|u| u as usize)).collect());
        let (Some(shape), Some(offs)) = (shape, offs) else {
            return Err(bad(format!(
                "tensor `{name}` has no valid shape or offsets"
            )));
        };
        let n: usize = shape.iter().product();
        let size = match dtype {
            "F32" => 4,
            "F64" | "I64" => 8,
            other => {
                return Err(bad(format!(
                    "tensor `{name}` has dtype {other} (F32, F64 or I64 expected)"
                )));
            }
        };
        let range = match offs.as_slice() {
            [a, b] if a <= b && *b <= body.len() && b - a == n * size => *a..*b,
            _ => {
                return Err(bad(format!(
                    "tensor `{name}`: byte range {offs:?} does not hold {n} {dtype} values within {} data bytes",
                    body.len()
                )));
            }
        };
        let raw = &body[range];
        let values: Vec<f64> = match dtype {
            "F32" => raw
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default()) as f64)
                .collect(),
            "F64" => raw
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect(),
            _ => raw
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default()) as f64)
                .collect(),
        };
        if values.iter().any(|x| !x.is_finite()) {
            return Err(bad(format!(
                "tensor `{name}` has a value that is not finite"
            )));
        }
        tensors.insert(name.clone(), (shape, values));
    }
    let model = assemble(&mut tensors).map_err(bad)?;
    if let Some(extra) = tensors.keys().next() {
        return Err(bad(format!(
            "tensor `{extra}` is not part of the autoencoder"
        )));
    }
    check_dims(
        model.input_dim(),
        &model.encoder_dims(),
        &model.decoder_dims(),
    )
    .map_err(bad)?;
    Ok(ModelFile { model, metadata })
}

type Tensors = BTreeMap<String, (Vec<usize>, Vec<f64>)>;

fn take(t: &mut Tensors, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
    let (s, v) = t
        .remove(name)
        .ok_or_else(|| format!("tensor `{name}` is missing"))?;
    if s != shape {
        return Err(format!(
            "tensor `{name}` has shape {s:?}, expected {shape:?}"
        ));
    }
    Ok(v.into_iter().map(|x| x as f32).collect())
}

fn take_linear(t: &mut Tensors, p: &str, inputs: Option<usize>) -> Result<Linear, String> {
    let (outputs, found_in) = match t.get(&format!("{p}.weight")) {
        Some((s, _)) if s.len() == 2 => (s[0], s[1]),
        Some((s, _)) => return Err(format!("tensor `{p}.weight` has shape {s:?}, expected 2-D")),
        None => return Err(format!("tensor `{p}.weight` is missing")),
    };
    let inputs = inputs.unwrap_or(found_in);
    Ok(Linear {
        inputs,
        outputs,
        weight: take(t, &format!("{p}.weight"), &[outputs, inputs])?,
        bias: take(t, &format!("{p}.bias"), &[outputs])?,
    })
}

fn assemble(t: &mut Tensors) -> Result<Autoencoder, String> {
    let enc_first = take_linear(t, "encoder.0", None)?;
    let mut enc = Vec::new();
    let mut width = enc_first.outputs;
    while t.contains_key(&format!("encoder.{}.weight", enc_bn(enc.len()))) {
        let s = enc.len();
        let p = format!("encoder.{}", enc_bn(s));
        let batches_tracked = match t.remove(&format!("{p}.num_batches_tracked")) {
            Some((_, v)) => v.first().copied().unwrap_or(0.0) as i64,
            None => 0,
        };
        let bn = BatchNorm {
            dim: width,
            weight: take(t, &format!("{p}.weight"), &[width])?,
            bias: take(t, &format!("{p}.bias"), &[width])?,
            running_mean: take(t, &format!("{p}.running_mean"), &[width])?,
            running_var: take(t, &format!("{p}.running_var"), &[width])?,
            batches_tracked,
        };
        if bn.running_var.iter().any(|v| *v < 0.0) {
            return Err(format!("tensor `{p}.running_var` has a negative variance"));
        }
        let lin = take_linear(t, &format!("encoder.{}", enc_lin(s)), Some(width))?;
        width = lin.outputs;
        enc.push((bn, lin));
    }
    let dec_first = take_linear(t, "decoder.0", Some(width))?;
    let mut dec: Vec<Linear> = Vec::new();
    let mut width = dec_first.outputs;
    while t.contains_key(&format!("decoder.{}.weight", dec_lin(dec.len()))) {
        let lin = take_linear(t, &format!("decoder.{}", dec_lin(dec.len())), Some(width))?;
        width = lin.outputs;
        dec.push(lin);
    }
    Ok(Autoencoder {
        enc_first,
        enc,
        dec_first,
        dec,
    })
}

/// Reads a model file.
pub fn load_model(path: &Path) -> Result<ModelFile, AeError> {
    let bytes = std::fs::read(path).map_err(|error| AeError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    parse_model(&bytes, path)
}

/// Checks that a model reads `dim`-D features; the error names the model file and
/// `what` has that width.
pub fn check_input_dim(
    path: &Path,
    m: &Autoencoder,
    dim: usize,
    what: &str,
) -> Result<(), AeError> {
    if m.input_dim() != dim {
        return Err(AeError::model(
            path,
            format!(
                "the model is for {}-D features, but {what} {} {dim}-D",
                m.input_dim(),
                if what.ends_with('s') { "are" } else { "is" }
            ),
        ));
    }
    Ok(())
}

/// Checks that a model's codes are `dim`-D (the channels of a V1 run).
pub fn check_code_dim(path: &Path, m: &Autoencoder, dim: usize, what: &str) -> Result<(), AeError> {
    if m.code_dim() != dim {
        return Err(AeError::model(
            path,
            format!(
                "the model's codes are {}-D, but {what} has {dim} channels",
                m.code_dim()
            ),
        ));
    }
    Ok(())
}
