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
