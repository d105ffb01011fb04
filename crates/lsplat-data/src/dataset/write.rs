//! Streaming dataset writer: one Parquet row group per image in each file, written
//! to temporary files and renamed into place only when every image is in.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{ListBuilder, UInt32Builder};
use arrow_array::{
    ArrayRef, FixedSizeListArray, Float32Array, RecordBatch, StringArray, UInt8Array, UInt32Array,
    UInt64Array,
};
use arrow_schema::{Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use super::rle::Runs;
use super::schema::{FEATURES_FILE, FORMAT_VERSION, MASKS_FILE, features_schema, masks_schema};
use crate::DataError;
use crate::io::AtomicTarget;

/// What was written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportSummary {
    /// Images written.
    pub images: usize,
    /// Feature dimension D.
    pub dim: usize,
    /// Rows of `features.parquet`.
    pub feature_rows: usize,
    /// Per level: masks (distinct ids) used, summed over images.
    pub masks_per_level: [u64; 4],
    /// Per level: valid pixels, summed over images.
    pub valid_pixels_per_level: [u64; 4],
    /// Feature rows that no map references (kept, with their group's level).
    pub unused_rows: usize,
    /// The features file.
    pub features_path: PathBuf,
    /// The masks file.
    pub masks_path: PathBuf,
}

/// One open output: its pending target and Parquet writer.
pub(crate) struct Output {
    target: AtomicTarget,
    writer: ArrowWriter<File>,
    schema: SchemaRef,
}

impl Output {
    pub(crate) fn open(path: &Path, schema: Schema, dim: usize) -> Result<Output, DataError> {
        let meta = vec![
            KeyValue::new("lsplat.version".into(), FORMAT_VERSION.to_string()),
            KeyValue::new("lsplat.dim".into(), dim.to_string()),
        ];
        let zstd = ZstdLevel::try_new(3).map_err(|e| DataError::format(path, e.to_string()))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(zstd))
            .set_key_value_metadata(Some(meta))
            .build();
        let (target, file) = AtomicTarget::create(path)?;
        let schema = Arc::new(schema);
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(props))
            .map_err(|e| DataError::format(path, e.to_string()))?;
        Ok(Output {
            target,
            writer,
            schema,
        })
    }

    /// Writes one batch as its own row group.
    pub(crate) fn write(&mut self, columns: Vec<ArrayRef>) -> Result<(), DataError> {
        let path = self.target.path().to_path_buf();
        let err = |e: String| DataError::format(&path, e);
        let batch =
            RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| err(e.to_string()))?;
        self.writer.write(&batch).map_err(|e| err(e.to_string()))?;
        self.writer.flush().map_err(|e| err(e.to_string()))
    }

    pub(crate) fn commit(self) -> Result<(), DataError> {
        let file = self
            .writer
            .into_inner()
            .map_err(|e| DataError::format(self.target.path(), e.to_string()))?;
        self.target.commit(file)
    }
}

/// Writes `features.parquet` and `masks.parquet` image by image.
pub struct DatasetWriter {
    features: Output,
    masks: Output,
    names: Vec<String>,
    summary: ImportSummary,
}

impl DatasetWriter {
    /// Starts a dataset of feature dimension `dim` in `out_dir` (created if missing).
    /// Nothing appears there until [`DatasetWriter::finish`].
    pub fn create(out_dir: &Path, dim: usize) -> Result<DatasetWriter, DataError> {
        if dim == 0 || dim > i32::MAX as usize {
            return Err(DataError::format(
                out_dir,
                format!("feature dimension {dim} is invalid"),
            ));
        }
        std::fs::create_dir_all(out_dir).map_err(|e| DataError::io(out_dir, e))?;
        let (fp, mp) = (out_dir.join(FEATURES_FILE), out_dir.join(MASKS_FILE));
        let summary = ImportSummary {
            dim,
            features_path: fp.clone(),
            masks_path: mp.clone(),
            ..Default::default()
        };
        Ok(DatasetWriter {
            features: Output::open(&fp, features_schema(dim), dim)?,
            masks: Output::open(&mp, masks_schema(), dim)?,
            names: Vec::new(),
            summary,
        })
    }

    /// Feature dimension D.
    pub fn dim(&self) -> usize {
        self.summary.dim
    }

    /// Adds one image: its feature table `[rows, dim]` and one map per level
    /// (`levels[ℓ]`, `[height, width]`, `-1` or a row). Each row is stored once with
    /// `mask_id` = its row and `level` = the first level whose map uses it (unused
    /// rows: the level of the group they fall in, rows being grouped by level).
    pub fn add_image(
        &mut self,
        name: &str,
        (width, height): (u32, u32),
        features: &[f32],
        levels: &[&[i32]],
    ) -> Result<(), DataError> {
        let bad = |p: String| DataError::Labels {
            image: name.to_string(),
            problem: p,
        };
        let dim = self.summary.dim;
        if name.is_empty() || self.names.iter().any(|n| n == name) {
            return Err(bad("the image name is empty or repeated".into()));
        }
        if !features.len().is_multiple_of(dim) || levels.len() > 4 {
            return Err(bad(format!(
                "{} feature values are not rows of {dim}, or more than 4 levels",
                features.len()
            )));
        }
        let rows = features.len() / dim;
        if let Some(v) = features.iter().find(|v| !v.is_finite()) {
            return Err(bad(format!("feature value {v} is not finite")));
        }
        let n_px = width as usize * height as usize;
        let mut row_level = vec![u8::MAX; rows];
        let mut group_end = [0usize; 4];
        let mut runs = Vec::with_capacity(levels.len());
        for (l, map) in levels.iter().enumerate() {
            if map.len() != n_px {
                return Err(bad(format!(
                    "level {l} map has {} values, expected {width}x{height}",
                    map.len()
                )));
            }
            if let Some(v) = map.iter().find(|&&v| v < -1 || v as i64 >= rows as i64) {
                return Err(bad(format!(
                    "level {l} map value {v} is neither -1 nor one of the {rows} rows"
                )));
            }
            let r = Runs::encode(map);
            let mut used: Vec<u32> = r.masks.clone();
            used.sort_unstable();
            used.dedup();
            for &m in &used {
                let slot = &mut row_level[m as usize];
                *slot = (*slot).min(l as u8);
            }
            group_end[l] = used.last().map_or(0, |&m| m as usize + 1).max(if l > 0 {
                group_end[l - 1]
            } else {
                0
            });
            self.summary.masks_per_level[l] += used.len() as u64;
            self.summary.valid_pixels_per_level[l] += r.pixels();
            runs.push((r, used.len()));
        }
        for (r, lv) in row_level
            .iter_mut()
            .enumerate()
            .filter(|(_, lv)| **lv == u8::MAX)
        {
            self.summary.unused_rows += 1;
            *lv = group_end
                .iter()
                .position(|&e| r < e)
                .unwrap_or(levels.len().saturating_sub(1)) as u8;
        }
        let item = Arc::new(Field::new_list_field(
            arrow_schema::DataType::Float32,
            false,
        ));
        let values = Arc::new(Float32Array::from(features.to_vec()));
        let fsl = FixedSizeListArray::try_new(item, dim as i32, values, None)
            .map_err(|e| bad(e.to_string()))?;
        self.features.write(vec![
            Arc::new(StringArray::from(vec![name; rows])),
            Arc::new(UInt8Array::from(row_level)),
            Arc::new(UInt32Array::from((0..rows as u32).collect::<Vec<_>>())),
            Arc::new(fsl),
        ])?;
        let list = |pick: &dyn Fn(&Runs) -> &Vec<u32>| -> ArrayRef {
            let mut b = ListBuilder::new(UInt32Builder::new())
                .with_field(Field::new_list_field(arrow_schema::DataType::UInt32, false));
            for (r, _) in &runs {
                b.values().append_slice(pick(r));
                b.append(true);
            }
            Arc::new(b.finish())
        };
        let n = runs.len();
        self.masks.write(vec![
            Arc::new(StringArray::from(vec![name; n])),
            Arc::new(UInt8Array::from((0..n as u8).collect::<Vec<_>>())),
            Arc::new(UInt32Array::from(vec![height; n])),
            Arc::new(UInt32Array::from(vec![width; n])),
            Arc::new(UInt32Array::from(
                runs.iter().map(|(_, u)| *u as u32).collect::<Vec<_>>(),
            )),
            Arc::new(UInt64Array::from(
                runs.iter().map(|(r, _)| r.pixels()).collect::<Vec<_>>(),
            )),
            list(&|r| &r.starts),
            list(&|r| &r.lengths),
            list(&|r| &r.masks),
        ])?;
        self.names.push(name.to_string());
        self.summary.images += 1;
        self.summary.feature_rows += rows;
        Ok(())
    }

    /// Finalises both files and moves them into place.
    pub fn finish(self) -> Result<ImportSummary, DataError> {
        self.features.commit()?;
        self.masks.commit()?;
        Ok(self.summary)
    }
}
