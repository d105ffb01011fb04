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

    /// A Utf8, LargeUtf8 (pandas writes it) or Utf8View column.
    pub fn str(&self, name: &str) -> Result<StrColumn<'a>, DataError> {
        StrColumn::of(self.col(name)?)
            .ok_or_else(|| self.wrong(name, "a string column (Utf8, LargeUtf8 or Utf8View)"))
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

    /// The feature column: FixedSizeList<Float32, D> (what the engine writes), or a
    /// List<Float32> whose rows all have the same length D (what pandas writes back).
    pub fn features(&self, name: &str) -> Result<(FeatureColumn<'a>, usize), DataError> {
        let want = "FixedSizeList<Float32, D> (or List<Float32> of equal lengths) without nulls";
        let c = self.col(name)?;
        let values_ok =
            |v: &ArrayRef| v.as_primitive_opt::<Float32Type>().is_some() && v.null_count() == 0;
        if let Some(f) = c.as_fixed_size_list_opt() {
            if !values_ok(f.values()) || f.value_length() <= 0 {
                return Err(self.wrong(name, want));
            }
            return Ok((FeatureColumn::Fixed(f), f.value_length() as usize));
        }
        let l = c
            .as_list_opt::<i32>()
            .ok_or_else(|| self.wrong(name, want))?;
        if !values_ok(l.values()) {
            return Err(self.wrong(name, want));
        }
        let offsets = l.value_offsets();
        let d = offsets
            .get(1)
            .zip(offsets.first())
            .map_or(0, |(b, a)| b - a);
        if d <= 0 || offsets.windows(2).any(|w| w[1] - w[0] != d) {
            return Err(DataError::format(
                self.path,
                format!("column `{name}`: feature rows differ in length (or are empty)"),
            ));
        }
        Ok((FeatureColumn::List(l), d as usize))
    }
}

/// A string column of any of Arrow's three string layouts: Utf8 (what the engine
/// and pyarrow write), LargeUtf8 (pandas' `string[pyarrow]` / `large_string`) and
/// Utf8View (pyarrow's `string_view`, polars).
#[derive(Clone, Copy)]
pub(crate) enum StrColumn<'a> {
    Utf8(&'a StringArray),
    Large(&'a arrow_array::LargeStringArray),
    View(&'a arrow_array::StringViewArray),
}

impl<'a> StrColumn<'a> {
    /// The column, when it is a string column of any layout.
    pub fn of(c: &'a ArrayRef) -> Option<StrColumn<'a>> {
        if let Some(a) = c.as_string_opt::<i32>() {
            return Some(StrColumn::Utf8(a));
        }
        if let Some(a) = c.as_string_opt::<i64>() {
            return Some(StrColumn::Large(a));
        }
        c.as_string_view_opt().map(StrColumn::View)
    }

    /// Row `i`.
    pub fn value(&self, i: usize) -> &'a str {
        match self {
            StrColumn::Utf8(a) => a.value(i),
            StrColumn::Large(a) => a.value(i),
            StrColumn::View(a) => a.value(i),
        }
    }

    /// The column as a Utf8 array (what the engine writes).
    pub fn to_utf8(self) -> ArrayRef {
        match self {
            StrColumn::Utf8(a) => Arc::new(a.clone()),
            StrColumn::Large(a) => Arc::new(StringArray::from_iter(a.iter())),
            StrColumn::View(a) => Arc::new(StringArray::from_iter(a.iter())),
        }
    }
}

/// A checked feature column.
#[derive(Clone, Copy)]
pub(crate) enum FeatureColumn<'a> {
    Fixed(&'a FixedSizeListArray),
    List(&'a ListArray),
}

/// The `u32` values of row `i` of a checked list column.
pub(crate) fn list_row(l: &ListArray, i: usize) -> Vec<u32> {
    l.value(i)
        .as_primitive_opt::<UInt32Type>()
        .map(|a| a.values().to_vec())
        .unwrap_or_default()
}

/// The `f32` values of row `i` of a checked feature column.
pub(crate) fn feature_row(f: FeatureColumn<'_>, i: usize) -> Vec<f32> {
    let row = match f {
        FeatureColumn::Fixed(a) => a.value(i),
        FeatureColumn::List(a) => a.value(i),
    };
    row.as_primitive_opt::<Float32Type>()
        .map(|a| a.values().to_vec())
        .unwrap_or_default()
}
