//! Named text embeddings (e.g. CLIP text features of query phrases), for text queries
//! on rendered features. Two layouts (docs/formats.md):
//!
//! - Parquet: a `name` string column (Utf8, LargeUtf8 as pandas writes it, or Utf8View) and an `embedding` column, `FixedSizeList<Float32, D>`
//!   (or `Float64`, or a `List` whose rows all have D values), one row per phrase;
//! - NumPy: a `[P, D]` `.npy` and, beside it, a `.txt` of the same stem with the P
//!   names, one per line.
//!
//! Rows are L2-normalised on load (CLIP's text features are compared as unit vectors).

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type};
use arrow_array::{Array, ArrayRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::DataError;
use crate::dataset::schema::StrColumn;

/// Named unit embeddings.
#[derive(Clone, Debug, PartialEq)]
pub struct TextEmbeddings {
    /// The file they came from.
    pub path: PathBuf,
    /// Phrases, in file order.
    pub names: Vec<String>,
    /// Width D.
    pub dim: usize,
    /// `[P, D]` unit rows.
    pub values: Vec<f32>,
}

impl TextEmbeddings {
    /// The unit embedding of `name`.
    pub fn get(&self, name: &str) -> Option<&[f32]> {
        let i = self.names.iter().position(|n| n == name)?;
        Some(&self.values[i * self.dim..(i + 1) * self.dim])
    }

    /// The rows of `names`, stacked; the error lists every missing name.
    pub fn stack(&self, names: &[&str]) -> Result<Vec<f32>, DataError> {
        let missing: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| self.get(n).is_none())
            .collect();
        if !missing.is_empty() {
            return Err(DataError::format(
                &self.path,
                format!(
                    "no embedding for {} (the file has: {})",
                    missing
                        .iter()
                        .map(|m| format!("\"{m}\""))
                        .collect::<Vec<_>>()
                        .join(", "),
                    self.names.join(", ")
                ),
            ));
        }
        Ok(names
            .iter()
            .flat_map(|n| self.get(n).unwrap_or_default().iter().copied())
            .collect())
    }
}

/// Writes named embeddings as the Parquet layout (`name` Utf8, `embedding`
/// `FixedSizeList<Float32, D>`), atomically.
pub fn write_embeddings(
    path: &Path,
    names: &[String],
    dim: usize,
    values: &[f32],
) -> Result<(), DataError> {
    use std::sync::Arc;

    use arrow_array::{FixedSizeListArray, Float32Array, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    if dim == 0 || values.len() != names.len() * dim {
        return Err(DataError::format(
            path,
            format!(
                "{} values are not {} rows of {dim}",
                values.len(),
                names.len()
            ),
        ));
    }
    let item = Arc::new(Field::new_list_field(DataType::Float32, false));
    let schema = Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new(
            "embedding",
            DataType::FixedSizeList(item.clone(), dim as i32),
            false,
        ),
    ]));
    let bad = |e: String| DataError::format(path, e);
    let list = FixedSizeListArray::try_new(
        item,
        dim as i32,
        Arc::new(Float32Array::from(values.to_vec())),
        None,
    )
    .map_err(|e| bad(e.to_string()))?;
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(StringArray::from(names.to_vec())), Arc::new(list)],
    )
    .map_err(|e| bad(e.to_string()))?;
    let mut bytes = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut bytes, schema, None)
        .map_err(|e| bad(e.to_string()))?;
    w.write(&batch).map_err(|e| bad(e.to_string()))?;
    w.close().map_err(|e| bad(e.to_string()))?;
    crate::io::write_bytes_atomic(path, &bytes)
}

impl TextEmbeddings {
    /// The rows of the `queries` `[Q, D]` and of the `negatives` `[K, D]` (LangSplat's
    /// canonical phrases); one error lists every phrase missing from either.
    pub fn query_rows(
        &self,
        queries: &[String],
        negatives: &[&str],
    ) -> Result<(Vec<f32>, Vec<f32>), DataError> {
        let mut wanted: Vec<&str> = queries.iter().map(String::as_str).collect();
        wanted.extend(negatives);
        self.stack(&wanted)?;
        let q: Vec<&str> = queries.iter().map(String::as_str).collect();
        Ok((self.stack(&q)?, self.stack(negatives)?))
    }

    /// Named rows `[P, D]` given in memory (`origin` names them in errors), checked
    /// and L2-normalised as a file's are.
    pub fn from_rows(
        origin: &Path,
        names: Vec<String>,
        dim: usize,
        values: Vec<f32>,
    ) -> Result<TextEmbeddings, DataError> {
        if values.len() != names.len() * dim {
            return Err(DataError::format(
                origin,
                format!(
                    "{} values are not {} rows of {dim}",
                    values.len(),
                    names.len()
                ),
            ));
        }
        finish(origin, names, dim, values)
    }
}

/// Reads an embeddings file (`.parquet`, or `.npy` with its `.txt` of names).
pub fn read_embeddings(path: &Path) -> Result<TextEmbeddings, DataError> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let (names, dim, values) = match ext.as_str() {
        "parquet" => read_parquet(path)?,
        "npy" => read_npy_names(path)?,
        _ => {
            return Err(DataError::format(
                path,
                "text embeddings must be a .parquet file (name, embedding) or a .npy with a .txt of names",
            ));
        }
    };
    finish(path, names, dim, values)
}

fn finish(
    path: &Path,
    names: Vec<String>,
    dim: usize,
    mut values: Vec<f32>,
) -> Result<TextEmbeddings, DataError> {
    let bad = |p: String| DataError::format(path, p);
    if names.is_empty() || dim == 0 {
        return Err(bad("no embeddings".into()));
    }
    for (i, n) in names.iter().enumerate() {
        if n.trim().is_empty() {
            return Err(bad(format!("row {i} has an empty name")));
        }
        if names[..i].contains(n) {
            return Err(bad(format!("the name \"{n}\" appears twice")));
        }
    }
    for (row, n) in values.chunks_exact_mut(dim).zip(&names) {
        if row.iter().any(|v| !v.is_finite()) {
            return Err(bad(format!("the embedding of \"{n}\" is not finite")));
        }
        let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt();
        if norm <= 0.0 {
            return Err(bad(format!("the embedding of \"{n}\" is zero")));
        }
        row.iter_mut().for_each(|v| *v /= norm);
    }
    Ok(TextEmbeddings {
        path: path.to_path_buf(),
        names,
        dim,
        values,
    })
}

fn read_npy_names(path: &Path) -> Result<(Vec<String>, usize, Vec<f32>), DataError> {
    let arr = crate::npy::read_npy(path)?;
    let [p, d] = arr.shape[..] else {
        return Err(DataError::format(
            path,
            format!("shape {:?}; expected [phrases, D]", arr.shape),
        ));
    };
    let txt = path.with_extension("txt");
    let text = std::fs::read_to_string(&txt).map_err(|e| DataError::io(&txt, e))?;
    let names: Vec<String> = text
        .trim_end()
        .lines()
        .map(|l| l.trim_end_matches('\r').to_string())
        .collect();
    if names.len() != p {
        return Err(DataError::format(
            &txt,
            format!(
                "{} names for the {p} rows of {}",
                names.len(),
                path.display()
            ),
        ));
    }
    Ok((names, d, arr.data))
}

fn read_parquet(path: &Path) -> Result<(Vec<String>, usize, Vec<f32>), DataError> {
    let bad = |p: String| DataError::format(path, p);
    let file = File::open(path).map_err(|e| DataError::io(path, e))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .map_err(|e| bad(format!("not a readable Parquet file: {e}")))?;
    let (mut names, mut dim, mut values) = (Vec::new(), 0usize, Vec::new());
    for batch in reader {
        let b = batch.map_err(|e| bad(format!("not a readable Parquet file: {e}")))?;
        let col = |n: &str| {
            b.column_by_name(n)
                .filter(|c| c.null_count() == 0)
                .ok_or_else(|| bad(format!("no column `{n}` without nulls")))
        };
        let name = StrColumn::of(col("name")?).ok_or_else(|| {
            bad("column `name` is not a string column (Utf8, LargeUtf8 or Utf8View)".into())
        })?;
        names.extend((0..b.num_rows()).map(|i| name.value(i).to_string()));
        let emb = col("embedding")?;
        for i in 0..emb.len() {
            let row = list_row(emb, i).ok_or_else(|| {
                bad("column `embedding` is not a list of Float32 or Float64 without nulls".into())
            })?;
            if dim == 0 {
                dim = row.len();
            } else if row.len() != dim {
                return Err(bad(format!(
                    "embedding of row {} has {} values, earlier rows {dim}",
                    names.len() - emb.len() + i,
                    row.len()
                )));
            }
            values.extend(row);
        }
    }
    Ok((names, dim, values))
}

/// Row `i` of a (fixed-size) list column of floats.
fn list_row(col: &ArrayRef, i: usize) -> Option<Vec<f32>> {
    let item: ArrayRef = if let Some(l) = col.as_fixed_size_list_opt() {
        l.value(i)
    } else {
        col.as_list_opt::<i32>()?.value(i)
    };
    if item.null_count() > 0 {
        return None;
    }
    if let Some(a) = item.as_primitive_opt::<Float32Type>() {
        return Some(a.values().to_vec());
    }
    item.as_primitive_opt::<Float64Type>()
        .map(|a| a.values().iter().map(|v| *v as f32).collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{FixedSizeListArray, Float32Array, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    use super::*;

    fn write_parquet(path: &Path, names: &[&str], dim: usize, values: Vec<f32>) {
        let names: ArrayRef = Arc::new(StringArray::from(names.to_vec()));
        write_parquet_names(path, names, dim, values);
    }

    /// Writes `names` (a string column of any layout) and the embeddings.
    fn write_parquet_names(path: &Path, names: ArrayRef, dim: usize, values: Vec<f32>) {
        let item = Arc::new(Field::new_list_field(DataType::Float32, false));
        let schema = Arc::new(Schema::new(vec![
            Field::new("name", names.data_type().clone(), false),
            Field::new(
                "embedding",
                DataType::FixedSizeList(item.clone(), dim as i32),
                false,
            ),
        ]));
        let fsl = FixedSizeListArray::try_new(
            item,
            dim as i32,
            Arc::new(Float32Array::from(values)),
            None,
        )
        .unwrap();
        let batch = RecordBatch::try_new(schema.clone(), vec![names, Arc::new(fsl)]).unwrap();
        let f = File::create(path).unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(f, schema, None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }

    #[test]
    fn both_layouts_read_and_normalise() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("text.parquet");
        write_parquet(&p, &["object", "mug"], 2, vec![3.0, 4.0, 0.0, 2.0]);
        let e = read_embeddings(&p).unwrap();
        assert_eq!(e.dim, 2);
        assert_eq!(e.get("object").unwrap(), &[0.6, 0.8]);
        assert_eq!(e.stack(&["mug"]).unwrap(), vec![0.0, 1.0]);
        let err = e
            .stack(&["mug", "stuff", "texture"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("text.parquet") && err.contains("\"stuff\", \"texture\""),
            "{err}"
        );
        let n = dir.path().join("t.npy");
        crate::io::write_npy_f32(&n, &[2, 3], &[1.0, 0.0, 0.0, 0.0, 0.0, 2.0]).unwrap();
        let missing = read_embeddings(&n).unwrap_err().to_string();
        assert!(missing.contains("t.txt"), "{missing}");
        std::fs::write(dir.path().join("t.txt"), "a\nb c\n").unwrap();
        let e = read_embeddings(&n).unwrap();
        assert_eq!(e.names, ["a", "b c"]);
        assert_eq!(e.get("b c").unwrap(), &[0.0, 0.0, 1.0]);
        std::fs::write(dir.path().join("t.txt"), "a\n").unwrap();
        let e = read_embeddings(&n).unwrap_err().to_string();
        assert!(e.contains("1 names for the 2 rows"), "{e}");
        write_parquet(&p, &["x", "x"], 1, vec![1.0, 1.0]);
        let e = read_embeddings(&p).unwrap_err().to_string();
        assert!(e.contains("appears twice"), "{e}");
        write_parquet(&p, &["x", "y"], 1, vec![1.0, 0.0]);
        let e = read_embeddings(&p).unwrap_err().to_string();
        assert!(e.contains("\"y\" is zero"), "{e}");
        let names = vec!["object".to_string(), "mug".to_string()];
        write_embeddings(&p, &names, 2, &[0.6, 0.8, 0.0, 1.0]).unwrap();
        let e = read_embeddings(&p).unwrap();
        assert_eq!((e.names, e.values), (names, vec![0.6, 0.8, 0.0, 1.0]));
    }

    /// Names written as Utf8 (pyarrow), LargeUtf8 (pandas' `string[pyarrow]`) or
    /// Utf8View (pyarrow's `string_view`) all read; a column of another type is refused
    /// naming the file, the column and the layouts accepted.
    #[test]
    fn every_string_layout_of_names_reads() {
        use arrow_array::{LargeStringArray, StringViewArray, UInt32Array};
        let dir = tempfile::tempdir().unwrap();
        let names = ["object", "coffee mug"];
        let layouts: [(&str, ArrayRef); 3] = [
            ("utf8", Arc::new(StringArray::from(names.to_vec()))),
            ("large", Arc::new(LargeStringArray::from(names.to_vec()))),
            ("view", Arc::new(StringViewArray::from(names.to_vec()))),
        ];
        for (tag, col) in layouts {
            let p = dir.path().join(format!("{tag}.parquet"));
            write_parquet_names(&p, col, 2, vec![3.0, 4.0, 0.0, 2.0]);
            let e = read_embeddings(&p).unwrap_or_else(|e| panic!("{tag}: {e}"));
            assert_eq!(e.names, names, "{tag}");
            assert_eq!(e.get("coffee mug").unwrap(), &[0.0, 1.0], "{tag}");
        }
        let p = dir.path().join("ints.parquet");
        write_parquet_names(
            &p,
            Arc::new(UInt32Array::from(vec![1, 2])),
            1,
            vec![1.0, 1.0],
        );
        let e = read_embeddings(&p).unwrap_err().to_string();
        assert!(
            e.contains("ints.parquet")
                && e.contains("`name`")
                && e.contains("Utf8, LargeUtf8 or Utf8View"),
            "{e}"
        );
    }
}
