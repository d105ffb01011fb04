//! Whole-table access to a dataset's features, for tools that work on every row
//! (autoencoder training, encoding a dataset into another dimension).

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{FixedSizeListArray, Float32Array, RecordBatch};
use arrow_schema::{DataType, Field};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::schema::{
    Columns, FEATURES_FILE, FeatureColumn, MASKS_FILE, features_schema, masks_schema,
};
use super::write::Output;
use crate::DataError;

/// Every feature row of a dataset, in file order.
#[derive(Clone, Debug, PartialEq)]
pub struct FeatureRows {
    /// Feature dimension D.
    pub dim: usize,
    /// `[rows, D]` row-major.
    pub values: Vec<f32>,
    /// Images in the file.
    pub images: usize,
}

impl FeatureRows {
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.values.len() / self.dim.max(1)
    }
}

/// Calls `f` with each row group of a Parquet file as one record batch.
fn for_each_row_group(
    path: &Path,
    mut f: impl FnMut(&RecordBatch) -> Result<(), DataError>,
) -> Result<(), DataError> {
    let err = |e: String| DataError::format(path, format!("not a readable Parquet file: {e}"));
    let open = || File::open(path).map_err(|e| DataError::io(path, e));
    let groups = ParquetRecordBatchReaderBuilder::try_new(open()?)
        .map_err(|e| err(e.to_string()))?
        .metadata()
        .num_row_groups();
    for g in 0..groups {
        let reader = ParquetRecordBatchReaderBuilder::try_new(open()?)
            .map_err(|e| err(e.to_string()))?
            .with_row_groups(vec![g])
            .with_batch_size(usize::MAX >> 1)
            .build()
            .map_err(|e| err(e.to_string()))?;
        for batch in reader {
            f(&batch.map_err(|e| err(e.to_string()))?)?;
        }
    }
    Ok(())
}

/// Reads every feature row of `dataset_dir/features.parquet` (all images, all levels).
/// Non-finite values are errors naming the file.
pub fn read_feature_rows(dataset_dir: &Path) -> Result<FeatureRows, DataError> {
    let fp = dataset_dir.join(FEATURES_FILE);
    let mut dim = 0;
    let mut values = Vec::new();
    let mut images = 0;
    for_each_row_group(&fp, |b| {
        let c = Columns {
            batch: b,
            path: &fp,
        };
        let (feat, d) = c.features("feature")?;
        if dim != 0 && d != dim {
            return Err(DataError::format(
                &fp,
                format!("feature width changes from {dim} to {d}"),
            ));
        }
        dim = d;
        let v = flat_values(feat);
        if let Some(x) = v.iter().find(|x| !x.is_finite()) {
            return Err(DataError::format(
                &fp,
                format!("a feature value is not finite ({x})"),
            ));
        }
        values.extend_from_slice(v);
        images += 1;
        Ok(())
    })?;
    if values.is_empty() {
        return Err(DataError::format(&fp, "the dataset has no feature rows"));
    }
    Ok(FeatureRows {
        dim,
        values,
        images,
    })
}

/// The values of a checked feature column (fixed-size or equal-length lists), row-major.
fn flat_values(f: FeatureColumn<'_>) -> &[f32] {
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    let (values, start, end) = match f {
        FeatureColumn::Fixed(a) => {
            let d = a.value_length() as usize;
            let start = a.value_offset_at(0);
            (a.values(), start, start + a.len() * d)
        }
        FeatureColumn::List(a) => {
            let o = a.value_offsets();
            (a.values(), o[0] as usize, o[o.len() - 1] as usize)
        }
    };
    &values
        .as_primitive::<arrow_array::types::Float32Type>()
        .values()[start..end]
}

/// Writes a copy of a dataset whose features are `map(rows)` (`[rows, D]` →
/// `[rows, new_dim]`, called once per image's row group): the image, level and
/// `mask_id` columns and `masks.parquet` are kept as they are (its `lsplat.dim` is
/// updated). Both files appear only when everything was written.
pub fn map_dataset_features(
    src_dir: &Path,
    out_dir: &Path,
    new_dim: usize,
    mut map: impl FnMut(&[f32], usize) -> Result<Vec<f32>, DataError>,
) -> Result<usize, DataError> {
    if new_dim == 0 || new_dim > i32::MAX as usize {
        return Err(DataError::format(
            out_dir,
            format!("feature dimension {new_dim} is invalid"),
        ));
    }
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    };
    if same(src_dir, out_dir) {
        return Err(DataError::format(
            out_dir,
            "the output dataset must differ from the input",
        ));
    }
    let created = !out_dir.exists();
    std::fs::create_dir_all(out_dir).map_err(|e| DataError::io(out_dir, e))?;
    let result = (|| {
        let (sf, sm) = (src_dir.join(FEATURES_FILE), src_dir.join(MASKS_FILE));
        let mut features = Output::open(
            &out_dir.join(FEATURES_FILE),
            features_schema(new_dim),
            new_dim,
        )?;
        let mut rows = 0;
        for_each_row_group(&sf, |b| {
            let c = Columns {
                batch: b,
                path: &sf,
            };
            let (img, lv, ids) = (c.str("image")?, c.u8("level")?, c.u32("mask_id")?);
            let (feat, d) = c.features("feature")?;
            let mapped = map(flat_values(feat), d)?;
            if mapped.len() != b.num_rows() * new_dim {
                return Err(DataError::format(
                    &sf,
                    format!(
                        "mapping {} rows gave {} values, not rows of {new_dim}",
                        b.num_rows(),
                        mapped.len()
                    ),
                ));
            }
            rows += b.num_rows();
            let item = Arc::new(Field::new_list_field(DataType::Float32, false));
            let fsl = FixedSizeListArray::try_new(
                item,
                new_dim as i32,
                Arc::new(Float32Array::from(mapped)),
                None,
            )
            .map_err(|e| DataError::format(&sf, e.to_string()))?;
            features.write(vec![
                img.to_utf8(),
                Arc::new(lv.clone()),
                Arc::new(ids.clone()),
                Arc::new(fsl),
            ])
        })?;
        let mut masks = Output::open(&out_dir.join(MASKS_FILE), masks_schema(), new_dim)?;
        for_each_row_group(&sm, |b| {
            let batch = b
                .clone()
                .with_schema(Arc::new(masks_schema()))
                .map_err(|e| {
                    DataError::format(&sm, format!("columns do not match the masks schema: {e}"))
                })?;
            masks.write(batch.columns().to_vec())
        })?;
        features.commit()?;
        masks.commit()?;
        Ok(rows)
    })();
    if result.is_err() && created {
        // Only an empty folder is removed: nothing was committed.
        let _ = std::fs::remove_dir(out_dir);
    }
    result
}
