//! Arrow schemas of the two dataset files and typed column access.

use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, UInt8Type, UInt32Type};
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, ListArray, PrimitiveArray, RecordBatch, StringArray,
};
use arrow_schema::{DataType, Field, Schema};

use crate::DataError;

/// File name of the feature table.
pub const FEATURES_FILE: &str = "features.parquet";
/// File name of the segmentation maps.
pub const MASKS_FILE: &str = "masks.parquet";
/// Format version stored in the Parquet key-value metadata (`lsplat.version`).
pub const FORMAT_VERSION: &str = "1";

fn u32_list() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::UInt32, false)))
}

/// Schema of `features.parquet`: `image` Utf8, `level` UInt8, `mask_id` UInt32,
/// `feature` FixedSizeList<Float32, dim>; no nulls.
pub fn features_schema(dim: usize) -> Schema {
    let item = Arc::new(Field::new_list_field(DataType::Float32, false));
    Schema::new(vec![
        Field::new("image", DataType::Utf8, false),
        Field::new("level", DataType::UInt8, false),
        Field::new("mask_id", DataType::UInt32, false),
        Field::new("feature", DataType::FixedSizeList(item, dim as i32), false),
    ])
}

/// Schema of `masks.parquet`: `image` Utf8, `level` UInt8, `height`/`width` UInt32,
/// `masks` UInt32 (distinct mask ids used), `valid_pixels` UInt64, and the runs
/// `run_start`, `run_length`, `run_mask` as List<UInt32>; no nulls.
pub fn masks_schema() -> Schema {
    Schema::new(vec![
        Field::new("image", DataType::Utf8, false),
        Field::new("level", DataType::UInt8, false),
        Field::new("height", DataType::UInt32, false),
        Field::new("width", DataType::UInt32, false),
        Field::new("masks", DataType::UInt32, false),
        Field::new("valid_pixels", DataType::UInt64, false),
        Field::new("run_start", u32_list(), false),
        Field::new("run_length", u32_list(), false),
        Field::new("run_mask", u32_list(), false),
    ])
}

/// Typed, null-checked access to the columns of a batch read from `path`.
pub(crate) struct Columns<'a> {
    pub batch: &'a RecordBatch,
    pub path: &'a Path,
}

impl<'a> Columns<'a> {
    fn col(&self, name: &str) -> Result<&'a ArrayRef, DataError> {
        let c = self
            .batch
            .column_by_name(name)
            .ok_or_else(|| DataError::format(self.path, format!("no column `{name}`")))?;
        if c.null_count() > 0 {
            return Err(DataError::format(
                self.path,
                format!("column `{name}` has nulls"),
            ));
        }
        Ok(c)
    }

    fn wrong(&self, name: &str, ty: &str) -> DataError {
        DataError::format(self.path, format!("column `{name}` is not {ty}"))
    }

    pub fn str(&self, name: &str) -> Result<&'a StringArray, DataError> {
        self.col(name)?
            .as_string_opt::<i32>()
            .ok_or_else(|| self.wrong(name, "Utf8"))
    }

    pub fn u8(&self, name: &str) -> Result<&'a PrimitiveArray<UInt8Type>, DataError> {
        self.col(name)?
            .as_primitive_opt::<UInt8Type>()
            .ok_or_else(|| self.wrong(name, "UInt8"))
    }

    pub fn u32(&self, name: &str) -> Result<&'a PrimitiveArray<UInt32Type>, DataError> {
        self.col(name)?
            .as_primitive_opt::<UInt32Type>()
            .ok_or_else(|| self.wrong(name, "UInt32"))
    }

    pub fn u32_list(&self, name: &str) -> Result<&'a ListArray, DataError> {
        let l = self
            .col(name)?
            .as_list_opt::<i32>()
            .ok_or_else(|| self.wrong(name, "List<UInt32>"))?;
        if l.values().as_primitive_opt::<UInt32Type>().is_none() || l.values().null_count() > 0 {
            return Err(self.wrong(name, "List<UInt32> without nulls"));
        }
        Ok(l)
    }

    pub fn features(&self, name: &str) -> Result<(&'a FixedSizeListArray, usize), DataError> {
        let f = self
            .col(name)?
            .as_fixed_size_list_opt()
            .ok_or_else(|| self.wrong(name, "FixedSizeList<Float32>"))?;
        let ok =
            f.values().as_primitive_opt::<Float32Type>().is_some() && f.values().null_count() == 0;
        if !ok || f.value_length() <= 0 {
            return Err(self.wrong(name, "FixedSizeList<Float32, D> without nulls"));
        }
        Ok((f, f.value_length() as usize))
    }
}

/// The `u32` values of row `i` of a checked list column.
pub(crate) fn list_row(l: &ListArray, i: usize) -> Vec<u32> {
    l.value(i)
        .as_primitive_opt::<UInt32Type>()
        .map(|a| a.values().to_vec())
        .unwrap_or_default()
}

/// The `f32` values of row `i` of a checked fixed-size-list column.
pub(crate) fn feature_row(f: &FixedSizeListArray, i: usize) -> Vec<f32> {
    f.value(i)
        .as_primitive_opt::<Float32Type>()
        .map(|a| a.values().to_vec())
        .unwrap_or_default()
}
