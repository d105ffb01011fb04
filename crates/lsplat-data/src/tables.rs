//! Reading back the Parquet tables runs write ([`crate::output`]): row tables (a
//! `key` UInt32 column 0..N and a `list` of floats per row, such as a LangSplatV2
//! `codebook.parquet`) and per-Gaussian sparse codes (`codes.parquet`).

use std::fs::File;
use std::path::Path;

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, UInt32Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::DataError;
use crate::dataset::schema::{Columns, feature_row};

/// Every batch of the Parquet file at `path`, in order.
fn batches(path: &Path) -> Result<Vec<RecordBatch>, DataError> {
    let bad = |e: String| DataError::format(path, format!("not a readable Parquet file: {e}"));
    let file = File::open(path).map_err(|e| DataError::io(path, e))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .map_err(|e| bad(e.to_string()))?;
    reader.map(|b| b.map_err(|e| bad(e.to_string()))).collect()
}

/// Checks that the `key` column of `batch` numbers its rows from `first` on.
fn keys_in_order(c: &Columns<'_>, key: &str, first: usize) -> Result<(), DataError> {
    let keys = c.u32(key)?;
    match (0..keys.len()).find(|&i| keys.value(i) as usize != first + i) {
        None => Ok(()),
        Some(i) => Err(DataError::format(
            c.path,
            format!(
                "row {} has `{key}` {}; rows must be numbered 0, 1, 2, … in order",
                first + i,
                keys.value(i)
            ),
        )),
    }
}

/// A row table's `[rows, dim]` values and dim: the `key` column numbers the rows
/// 0..N in order, `list` holds `dim` finite floats per row.
pub fn read_row_table(path: &Path, key: &str, list: &str) -> Result<(Vec<f32>, usize), DataError> {
    let (mut values, mut dim, mut rows) = (Vec::new(), 0usize, 0usize);
    for batch in batches(path)? {
        let c = Columns {
            batch: &batch,
            path,
        };
        keys_in_order(&c, key, rows)?;
        let (col, d) = c.features(list)?;
        if dim != 0 && d != dim {
            return Err(DataError::format(
                path,
                format!("`{list}` has {d} values per row after {dim}"),
            ));
        }
        dim = d;
        for i in 0..batch.num_rows() {
            values.extend(feature_row(col, i));
        }
        rows += batch.num_rows();
    }
    if rows == 0 {
        return Err(DataError::format(path, "no rows"));
    }
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(DataError::format(
            path,
            format!("row {} of `{list}` holds {}", i / dim, values[i]),
        ));
    }
    Ok((values, dim))
}

/// Per-Gaussian sparse codes ([`crate::output::write_sparse_codes`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SparseCodes {
    /// `[N, k]` code indices.
    pub codes: Vec<u32>,
    /// `[N, k]` their weights (finite).
    pub weights: Vec<f32>,
    /// Codes per Gaussian k.
    pub k: usize,
}

impl SparseCodes {
    /// Gaussians N.
    pub fn rows(&self) -> usize {
        self.codes.len() / self.k.max(1)
    }

    /// The `[N, width]` dense rows: each Gaussian's weights at its codes (repeated
    /// codes add up); an error naming `path` when a code is not below `width`.
    pub fn dense(&self, width: usize, path: &Path) -> Result<Vec<f32>, DataError> {
        let mut out = vec![0.0f32; self.rows() * width];
        for (g, (c, w)) in self
            .codes
            .chunks_exact(self.k)
            .zip(self.weights.chunks_exact(self.k))
            .enumerate()
        {
            for (&c, &w) in c.iter().zip(w) {
                if c as usize >= width {
                    return Err(DataError::format(
                        path,
                        format!("Gaussian {g} has code {c}, not below {width}"),
                    ));
                }
                out[g * width + c as usize] += w;
            }
        }
        Ok(out)
    }
}

/// Reads `codes.parquet`-style sparse codes: `gaussian` 0..N in order, `codes`
/// FixedSizeList<UInt32, k>, `weights` FixedSizeList<Float32, k> (finite).
pub fn read_sparse_codes(path: &Path) -> Result<SparseCodes, DataError> {
    let mut out = SparseCodes {
        codes: Vec::new(),
        weights: Vec::new(),
        k: 0,
    };
    let mut rows = 0;
    for batch in batches(path)? {
        let c = Columns {
            batch: &batch,
            path,
        };
        keys_in_order(&c, "gaussian", rows)?;
        let wrong = |name: &str, ty: &str| {
            DataError::format(
                path,
                format!("column `{name}` is not FixedSizeList<{ty}, k> without nulls"),
            )
        };
        let fixed = |name: &str| {
            batch
                .column_by_name(name)
                .filter(|c| c.null_count() == 0)
                .and_then(|c| c.as_fixed_size_list_opt())
                .filter(|l| l.values().null_count() == 0 && l.value_length() > 0)
        };
        let codes = fixed("codes").ok_or_else(|| wrong("codes", "UInt32"))?;
        let weights = fixed("weights").ok_or_else(|| wrong("weights", "Float32"))?;
        let k = codes.value_length() as usize;
        if weights.value_length() as usize != k || (out.k != 0 && out.k != k) {
            return Err(DataError::format(
                path,
                "`codes` and `weights` differ in length per row",
            ));
        }
        out.k = k;
        for i in 0..batch.num_rows() {
            let (ci, wi) = (codes.value(i), weights.value(i));
            let ci = ci
                .as_primitive_opt::<UInt32Type>()
                .ok_or_else(|| wrong("codes", "UInt32"))?;
            let wi = wi
                .as_primitive_opt::<Float32Type>()
                .ok_or_else(|| wrong("weights", "Float32"))?;
            out.codes.extend_from_slice(ci.values());
            out.weights.extend_from_slice(wi.values());
        }
        rows += batch.num_rows();
    }
    if rows == 0 {
        return Err(DataError::format(path, "no rows"));
    }
    if let Some(i) = out.weights.iter().position(|v| !v.is_finite()) {
        return Err(DataError::format(
            path,
            format!("Gaussian {} has weight {}", i / out.k, out.weights[i]),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::{write_row_table, write_sparse_codes};

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("lsplat-tables-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d.join(name)
    }

    #[test]
    fn written_tables_read_back() {
        let p = tmp("rows.parquet");
        let values: Vec<f32> = (0..5 * 3).map(|i| i as f32 * 0.5 - 2.0).collect();
        write_row_table(&p, "code", "feature", &values, 3, &[]).unwrap();
        assert_eq!(read_row_table(&p, "code", "feature").unwrap(), (values, 3));
        let e = read_row_table(&p, "gaussian", "feature")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("rows.parquet") && e.contains("`gaussian`"),
            "{e}"
        );
        let p = tmp("codes.parquet");
        let (codes, weights) = (
            vec![3u32, 1, 0, 0, 2, 7],
            vec![0.5f32, 0.25, 1.0, 0.0, 0.5, 0.5],
        );
        write_sparse_codes(&p, &codes, &weights, 2, &[]).unwrap();
        let got = read_sparse_codes(&p).unwrap();
        assert_eq!(
            got,
            SparseCodes {
                codes,
                weights,
                k: 2
            }
        );
        let dense = got.dense(8, &p).unwrap();
        assert_eq!(&dense[..8], &[0.0, 0.25, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(dense[8], 1.0);
        let e = got.dense(7, &p).unwrap_err().to_string();
        assert!(e.contains("Gaussian 2 has code 7"), "{e}");
    }

    #[test]
    fn bad_tables_are_named_errors() {
        let p = tmp("bad.parquet");
        write_sparse_codes(&p, &[1, 2], &[f32::NAN, 1.0], 2, &[]).unwrap();
        let e = read_sparse_codes(&p).unwrap_err().to_string();
        assert!(e.contains("bad.parquet") && e.contains("weight NaN"), "{e}");
        write_row_table(&p, "code", "feature", &[1.0, 2.0], 2, &[]).unwrap();
        let e = read_sparse_codes(&p).unwrap_err().to_string();
        assert!(e.contains("`gaussian`"), "{e}");
        std::fs::write(&p, b"PAR1 truncated").unwrap();
        let e = read_row_table(&p, "code", "feature")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a readable Parquet file"), "{e}");
    }
}
