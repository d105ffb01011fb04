//! What a training run writes: per-Gaussian features as Parquet, and the input
//! splats with `f_lang_*` properties as a PLY.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, FixedSizeListArray, Float32Array, RecordBatch, UInt32Array};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::DataError;
use crate::ply::{SplatPly, lang_property_names, write_ply_with_comments};

/// Schema of the output `features.parquet`: `gaussian` UInt32, `feature`
/// FixedSizeList<Float32, dim>.
pub fn gaussian_features_schema(dim: usize) -> Schema {
    let item = Arc::new(Field::new_list_field(DataType::Float32, false));
    Schema::new(vec![
        Field::new("gaussian", DataType::UInt32, false),
        Field::new("feature", DataType::FixedSizeList(item, dim as i32), false),
    ])
}

/// What a run's per-Gaussian features are, for the metadata of its outputs: the
/// features as the renderer composites them (render them without normalisation).
pub const FEATURES_NOTE: &str = "per-Gaussian features as composited: F(pixel) = sum of alpha*T*feature; render them as stored, without per-Gaussian normalisation";

/// Writes `[N, dim]` features to `path` (zstd, row groups of 64k Gaussians), atomically;
/// `metadata` becomes the file's key-value metadata.
pub fn write_gaussian_features(
    path: &Path,
    features: &[f32],
    dim: usize,
    metadata: &[(&str, &str)],
) -> Result<(), DataError> {
    if dim == 0 || !features.len().is_multiple_of(dim) {
        return Err(DataError::format(
            path,
            format!("{} values are not rows of {dim}", features.len()),
        ));
    }
    let schema = Arc::new(gaussian_features_schema(dim));
    let (target, file) = crate::io::AtomicTarget::create(path)?;
    let result = (|| -> Result<File, Box<dyn std::error::Error>> {
        let kv = metadata
            .iter()
            .map(|(k, v)| parquet::file::metadata::KeyValue::new(k.to_string(), v.to_string()))
            .collect();
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
            .set_key_value_metadata(Some(kv))
            .build();
        let mut w = ArrowWriter::try_new(file, schema.clone(), Some(props))?;
        let n = features.len() / dim;
        let chunk = 65_536;
        for start in (0..n).step_by(chunk) {
            let end = (start + chunk).min(n);
            let ids: ArrayRef = Arc::new(UInt32Array::from_iter_values(start as u32..end as u32));
            let values = Arc::new(Float32Array::from(
                features[start * dim..end * dim].to_vec(),
            ));
            let item = Arc::new(Field::new_list_field(DataType::Float32, false));
            let list: ArrayRef =
                Arc::new(FixedSizeListArray::try_new(item, dim as i32, values, None)?);
            w.write(&RecordBatch::try_new(schema.clone(), vec![ids, list])?)?;
        }
        Ok(w.into_inner()?)
    })();
    let file = result.map_err(|e| DataError::format(path, format!("writing Parquet: {e}")))?;
    target.commit(file)
}

/// Writes the input splats in the Inria layout with `f_lang_0..dim-1` appended
/// (replacing any `f_lang_*` the input had) and `comments` in the header, atomically.
pub fn write_splats_with_features(
    path: &Path,
    input: &SplatPly,
    features: &[f32],
    dim: usize,
    comments: &[&str],
) -> Result<(), DataError> {
    let n = input.gaussians.len();
    if features.len() != n * dim {
        return Err(DataError::format(
            path,
            format!(
                "{} feature values for {n} Gaussians of dim {dim}",
                features.len()
            ),
        ));
    }
    let keep: Vec<usize> = (0..input.extra_names.len())
        .filter(|&k| !input.extra_names[k].starts_with("f_lang_"))
        .collect();
    let mut out = input.clone();
    out.extra_names = keep.iter().map(|&k| input.extra_names[k].clone()).collect();
    out.extra_names.extend(lang_property_names(dim));
    let width = input.extra_names.len();
    out.extra = Vec::with_capacity(n * out.extra_names.len());
    for i in 0..n {
        for &k in &keep {
            out.extra.push(input.extra[i * width + k]);
        }
        out.extra
            .extend_from_slice(&features[i * dim..(i + 1) * dim]);
    }
    write_ply_with_comments(path, &out, comments)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_parquet_round_trip() {
        use arrow_array::cast::AsArray;
        use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.parquet");
        let feats: Vec<f32> = (0..30).map(|v| v as f32 * 0.5).collect();
        write_gaussian_features(&p, &feats, 3, &[("lsplat.features", "composited")]).unwrap();
        let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(&p).unwrap()).unwrap();
        let kv = builder
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .unwrap();
        assert!(
            kv.iter()
                .any(|e| e.key == "lsplat.features" && e.value.as_deref() == Some("composited"))
        );
        let r = builder.build().unwrap();
        let mut got = Vec::new();
        let mut ids = Vec::new();
        for b in r {
            let b = b.unwrap();
            ids.extend(
                b.column(0)
                    .as_primitive::<arrow_array::types::UInt32Type>()
                    .values()
                    .iter()
                    .copied(),
            );
            let l = b.column(1).as_fixed_size_list();
            got.extend(
                l.values()
                    .as_primitive::<arrow_array::types::Float32Type>()
                    .values()
                    .iter()
                    .copied(),
            );
        }
        assert_eq!(ids, (0..10).collect::<Vec<u32>>());
        assert_eq!(got, feats);
        assert!(write_gaussian_features(&p, &feats[..4], 3, &[]).is_err());
    }

    #[test]
    fn splats_ply_carries_features() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.ply");
        let mut input = SplatPly::default();
        for i in 0..4 {
            input.gaussians.means.push([i as f32, 0.0, 0.0]);
            input.gaussians.log_scales.push([0.0; 3]);
            input.gaussians.rotations.push([1.0, 0.0, 0.0, 0.0]);
            input.gaussians.opacity_logits.push(0.5);
            input.sh_dc.push([0.1, 0.2, 0.3]);
        }
        input.extra_names = vec!["f_lang_0".into(), "semantic".into()];
        input.extra = vec![9.0, 1.0, 9.0, 2.0, 9.0, 3.0, 9.0, 4.0];
        let feats: Vec<f32> = (0..8).map(|v| v as f32).collect();
        write_splats_with_features(&p, &input, &feats, 2, &["made by a test"]).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        let header = String::from_utf8_lossy(
            &bytes[..bytes.windows(10).position(|w| w == b"end_header").unwrap()],
        );
        assert!(
            header.lines().any(|l| l.starts_with("comment")
                && l.contains("unit quaternions")
                && l.contains("normalised")),
            "{header}"
        );
        assert!(
            header.lines().any(|l| l == "comment made by a test"),
            "{header}"
        );
        let back = crate::ply::read_ply(&p).unwrap();
        assert_eq!(back.gaussians, input.gaussians);
        assert_eq!(
            back.extra_column("semantic").unwrap(),
            vec![1.0, 2.0, 3.0, 4.0]
        );
        assert_eq!(
            back.extra_column("f_lang_1").unwrap(),
            vec![1.0, 3.0, 5.0, 7.0]
        );
    }
}
