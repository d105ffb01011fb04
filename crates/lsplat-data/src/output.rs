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
    write_row_table(path, "gaussian", "feature", features, dim, metadata)
}

/// Writes `[N, dim]` rows to `path` as a `key` UInt32 column (0..N) and a `list`
/// FixedSizeList<Float32, dim> column (zstd, row groups of 64k rows), atomically.
pub fn write_row_table(
    path: &Path,
    key: &str,
    list: &str,
    values: &[f32],
    dim: usize,
    metadata: &[(&str, &str)],
) -> Result<(), DataError> {
    if dim == 0 || !values.len().is_multiple_of(dim) {
        return Err(DataError::format(
            path,
            format!("{} values are not rows of {dim}", values.len()),
        ));
    }
    let item = Arc::new(Field::new_list_field(DataType::Float32, false));
    let schema = Arc::new(Schema::new(vec![
        Field::new(key, DataType::UInt32, false),
        Field::new(
            list,
            DataType::FixedSizeList(item.clone(), dim as i32),
            false,
        ),
    ]));
    let n = values.len() / dim;
    write_batches(path, schema.clone(), metadata, n, |range| {
        let ids: ArrayRef = Arc::new(UInt32Array::from_iter_values(
            range.start as u32..range.end as u32,
        ));
        let flat = Arc::new(Float32Array::from(
            values[range.start * dim..range.end * dim].to_vec(),
        ));
        let l: ArrayRef = Arc::new(FixedSizeListArray::try_new(
            item.clone(),
            dim as i32,
            flat,
            None,
        )?);
        Ok(RecordBatch::try_new(schema.clone(), vec![ids, l])?)
    })
}

/// Writes per-Gaussian sparse codes: `gaussian` UInt32, `codes`
/// FixedSizeList<UInt32, k> and `weights` FixedSizeList<Float32, k> (`idx`, `val`:
/// `[N, k]`), atomically.
pub fn write_sparse_codes(
    path: &Path,
    idx: &[u32],
    val: &[f32],
    k: usize,
    metadata: &[(&str, &str)],
) -> Result<(), DataError> {
    if k == 0 || idx.len() != val.len() || !idx.len().is_multiple_of(k) {
        return Err(DataError::format(
            path,
            format!(
                "{} codes and {} weights are not rows of {k}",
                idx.len(),
                val.len()
            ),
        ));
    }
    let ui = Arc::new(Field::new_list_field(DataType::UInt32, false));
    let fi = Arc::new(Field::new_list_field(DataType::Float32, false));
    let schema = Arc::new(Schema::new(vec![
        Field::new("gaussian", DataType::UInt32, false),
        Field::new(
            "codes",
            DataType::FixedSizeList(ui.clone(), k as i32),
            false,
        ),
        Field::new(
            "weights",
            DataType::FixedSizeList(fi.clone(), k as i32),
            false,
        ),
    ]));
    write_batches(path, schema.clone(), metadata, idx.len() / k, |r| {
        let ids: ArrayRef = Arc::new(UInt32Array::from_iter_values(r.start as u32..r.end as u32));
        let ci = Arc::new(UInt32Array::from(idx[r.start * k..r.end * k].to_vec()));
        let wi = Arc::new(Float32Array::from(val[r.start * k..r.end * k].to_vec()));
        let c: ArrayRef = Arc::new(FixedSizeListArray::try_new(ui.clone(), k as i32, ci, None)?);
        let w: ArrayRef = Arc::new(FixedSizeListArray::try_new(fi.clone(), k as i32, wi, None)?);
        Ok(RecordBatch::try_new(schema.clone(), vec![ids, c, w])?)
    })
}

type BatchResult = Result<RecordBatch, Box<dyn std::error::Error>>;

/// Writes `rows` rows made 64k at a time by `batch` to `path` (zstd), atomically.
fn write_batches(
    path: &Path,
    schema: Arc<Schema>,
    metadata: &[(&str, &str)],
    rows: usize,
    batch: impl Fn(std::ops::Range<usize>) -> BatchResult,
) -> Result<(), DataError> {
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
        let mut w = ArrowWriter::try_new(file, schema, Some(props))?;
        let chunk = 65_536;
        for start in (0..rows).step_by(chunk) {
            w.write(&batch(start..(start + chunk).min(rows))?)?;
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
