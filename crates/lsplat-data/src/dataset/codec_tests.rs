//! Datasets written by other tools: every Parquet compression pyarrow and pandas
//! write, and `lsplat.dim` metadata that disagrees with the data.

use std::fs::File;
use std::path::Path;

use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{BrotliLevel, Compression, GzipLevel, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use super::*;

/// Rewrites a Parquet file with `codec` and the given key-value metadata (as another
/// writer would), keeping its schema and rows.
fn rewrite(path: &Path, codec: Compression, meta: Option<Vec<KeyValue>>) {
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let schema = arrow_array::RecordBatchReader::schema(&reader);
    let batches: Vec<_> = reader.map(|b| b.unwrap()).collect();
    let props = WriterProperties::builder()
        .set_compression(codec)
        .set_key_value_metadata(meta)
        .build();
    let mut w = ArrowWriter::try_new(File::create(path).unwrap(), schema, Some(props)).unwrap();
    for b in &batches {
        w.write(b).unwrap();
    }
    w.close().unwrap();
}

/// A small dataset of two images and what loading its level 1 gives.
fn dataset(dir: &Path) -> (Vec<String>, Vec<crate::ImageLabels>) {
    let mut w = DatasetWriter::create(dir, 3).unwrap();
    let names = vec!["a".to_string(), "b".to_string()];
    for (k, name) in names.iter().enumerate() {
        let (wd, ht) = (6u32, 4u32);
        let map: Vec<i32> = (0..24).map(|p| ((p + k) % 3) as i32 - 1).collect();
        let features: Vec<f32> = (0..12).map(|v| v as f32 * 0.25 - k as f32).collect();
        let maps = [&map[..], &map[..], &map[..], &map[..]];
        w.add_image(name, (wd, ht), &features, &maps).unwrap();
    }
    w.finish().unwrap();
    let labels = load_dataset_labels(dir, 1, &names).unwrap();
    (names, labels)
}

#[test]
fn every_common_compression_reads_back_the_same_labels() {
    let codecs = [
        ("uncompressed", Compression::UNCOMPRESSED),
        ("snappy", Compression::SNAPPY),
        ("gzip", Compression::GZIP(GzipLevel::default())),
        ("lz4 (raw)", Compression::LZ4_RAW),
        ("lz4 (hadoop)", Compression::LZ4),
        ("zstd", Compression::ZSTD(ZstdLevel::default())),
        ("brotli", Compression::BROTLI(BrotliLevel::default())),
    ];
    for (name, codec) in codecs {
        let t = tempfile::tempdir().unwrap();
        let (names, want) = dataset(t.path());
        for f in [FEATURES_FILE, MASKS_FILE] {
            rewrite(&t.path().join(f), codec, None);
        }
        let got =
            load_dataset_labels(t.path(), 1, &names).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn dim_metadata_must_match_the_features() {
    let t = tempfile::tempdir().unwrap();
    let (names, _) = dataset(t.path());
    let meta = |d: &str| Some(vec![KeyValue::new("lsplat.dim".into(), d.to_string())]);
    rewrite(
        &t.path().join(FEATURES_FILE),
        Compression::SNAPPY,
        meta("512"),
    );
    let e = load_dataset_labels(t.path(), 1, &names)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("features.parquet")
            && e.contains("lsplat.dim")
            && e.contains("512")
            && e.contains('3'),
        "{e}"
    );
    rewrite(
        &t.path().join(FEATURES_FILE),
        Compression::SNAPPY,
        meta("3"),
    );
    rewrite(
        &t.path().join(MASKS_FILE),
        Compression::SNAPPY,
        meta("three"),
    );
    let e = load_dataset_labels(t.path(), 1, &names)
        .unwrap_err()
        .to_string();
    assert!(e.contains("masks.parquet") && e.contains("three"), "{e}");
    // Without the metadata (a file another tool wrote from scratch) it loads.
    rewrite(&t.path().join(MASKS_FILE), Compression::SNAPPY, None);
    load_dataset_labels(t.path(), 1, &names).unwrap();
}

/// Rewrites `features.parquet` as pandas writes it back: LargeUtf8 names and the
/// features as variable-length lists (`rows` may change a row's values).
fn rewrite_like_pandas(path: &Path, edit: impl Fn(usize, &mut Vec<f32>)) {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Float32Type;
    use arrow_array::{ArrayRef, LargeStringArray, ListArray, RecordBatch};
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let mut out = Vec::new();
    let mut k = 0;
    for b in reader {
        let b = b.unwrap();
        let names: Vec<&str> = (0..b.num_rows())
            .map(|i| b.column(0).as_string::<i32>().value(i))
            .collect();
        let f = b.column(3).as_fixed_size_list();
        let rows: Vec<Option<Vec<Option<f32>>>> = (0..b.num_rows())
            .map(|i| {
                let mut r: Vec<f32> = f.value(i).as_primitive::<Float32Type>().values().to_vec();
                edit(k, &mut r);
                k += 1;
                Some(r.into_iter().map(Some).collect())
            })
            .collect();
        let cols: Vec<ArrayRef> = vec![
            std::sync::Arc::new(LargeStringArray::from(names)),
            b.column(1).clone(),
            b.column(2).clone(),
            std::sync::Arc::new(ListArray::from_iter_primitive::<Float32Type, _, _>(rows)),
        ];
        out.push(
            RecordBatch::try_from_iter(
                ["image", "level", "mask_id", "feature"]
                    .into_iter()
                    .zip(cols),
            )
            .unwrap(),
        );
    }
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut w =
        ArrowWriter::try_new(File::create(path).unwrap(), out[0].schema(), Some(props)).unwrap();
    for b in &out {
        w.write(b).unwrap();
    }
    w.close().unwrap();
}

#[test]
fn pandas_style_columns_read_back() {
    let t = tempfile::tempdir().unwrap();
    let (names, want) = dataset(t.path());
    let fp = t.path().join(FEATURES_FILE);
    rewrite_like_pandas(&fp, |_, _| {});
    assert_eq!(load_dataset_labels(t.path(), 1, &names).unwrap(), want);
    dataset(t.path());
    rewrite_like_pandas(&fp, |k, r| {
        if k == 2 {
            r.pop();
        }
    });
    let e = load_dataset_labels(t.path(), 1, &names)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("features.parquet") && e.contains("differ in length"),
        "{e}"
    );
}

/// Rewrites the `image` column of a Parquet file with `layout` (`large` or `view`),
/// keeping every other column.
fn rewrite_image_column(path: &Path, layout: &str) {
    use arrow_array::cast::AsArray;
    use arrow_array::{ArrayRef, LargeStringArray, RecordBatch, StringViewArray};
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let mut out = Vec::new();
    for b in reader {
        let b = b.unwrap();
        let schema = b.schema();
        let cols: Vec<(String, ArrayRef)> = schema
            .fields()
            .iter()
            .zip(b.columns())
            .map(|(f, c)| {
                if f.name() != "image" {
                    return (f.name().clone(), c.clone());
                }
                let v: Vec<&str> = c.as_string::<i32>().iter().map(Option::unwrap).collect();
                let c: ArrayRef = match layout {
                    "large" => std::sync::Arc::new(LargeStringArray::from(v)),
                    _ => std::sync::Arc::new(StringViewArray::from(v)),
                };
                (f.name().clone(), c)
            })
            .collect();
        out.push(RecordBatch::try_from_iter(cols).unwrap());
    }
    let mut w = ArrowWriter::try_new(File::create(path).unwrap(), out[0].schema(), None).unwrap();
    for b in &out {
        w.write(b).unwrap();
    }
    w.close().unwrap();
}

/// Image names as LargeUtf8 (pandas) or Utf8View (pyarrow's `string_view`, polars) in
/// either file load the same labels and feature rows as Utf8.
#[test]
fn every_string_layout_of_image_names_reads_back() {
    for layout in ["large", "view"] {
        let t = tempfile::tempdir().unwrap();
        let (names, want) = dataset(t.path());
        let rows = read_feature_rows(t.path()).unwrap();
        let sizes = crate::run_dir::image_sizes(t.path()).unwrap();
        for f in [FEATURES_FILE, MASKS_FILE] {
            rewrite_image_column(&t.path().join(f), layout);
        }
        let got =
            load_dataset_labels(t.path(), 1, &names).unwrap_or_else(|e| panic!("{layout}: {e}"));
        assert_eq!(got, want, "{layout}");
        let back = read_feature_rows(t.path()).unwrap_or_else(|e| panic!("{layout}: {e}"));
        // (The rewrite keeps the rows, not the row groups that count as images.)
        assert_eq!(
            (back.dim, &back.values),
            (rows.dim, &rows.values),
            "{layout}"
        );
        assert_eq!(crate::run_dir::image_sizes(t.path()).unwrap(), sizes);
    }
}
