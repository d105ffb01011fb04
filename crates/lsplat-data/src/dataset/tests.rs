//! Dataset round trips against the direct LangSplat reader, and bad input.

use std::path::Path;

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::RowAccessor;

use super::*;
use crate::io::write_npy_f32;
use crate::langsplat::{image_paths, load_langsplat_labels};

/// A LangSplat-like image: rows grouped by level, later masks painted over earlier.
fn write_image(
    dir: &Path,
    stem: &str,
    seed: u64,
    dim: usize,
    (w, h): (usize, usize),
    empty_level: Option<usize>,
) {
    let mut rng = lsplat_core::Rng::new(seed);
    let mut seg = vec![-1f32; 4 * w * h];
    let mut rows = 0usize;
    for l in 0..4 {
        let count = if Some(l) == empty_level {
            0
        } else {
            2 + (seed as usize + l) % 5
        };
        for _ in 0..count {
            let (x0, y0) = (
                (rng.next_u64() % w as u64) as usize,
                (rng.next_u64() % h as u64) as usize,
            );
            let (x1, y1) = ((x0 + 1 + w / 3).min(w), (y0 + 1 + h / 3).min(h));
            for y in y0..y1 {
                seg[l * w * h + y * w + x0..l * w * h + y * w + x1].fill(rows as f32);
            }
            rows += 1;
        }
    }
    let f: Vec<f32> = (0..rows * dim)
        .map(|_| rng.next_u64() as f32 / u64::MAX as f32 - 0.5)
        .collect();
    let (fp, sp) = image_paths(dir, stem);
    write_npy_f32(&fp, &[rows, dim], &f).unwrap();
    write_npy_f32(&sp, &[4, h, w], &seg).unwrap();
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn import_then_load_matches_the_langsplat_reader() {
    for dim in [3, 512] {
        let src = tempfile::tempdir().unwrap();
        write_image(src.path(), "frame_002", 1, dim, (40, 30), None);
        write_image(src.path(), "frame_001", 2, dim, (40, 30), Some(2));
        write_image(src.path(), "frame_003", 3, dim, (40, 30), None);
        let out = tempfile::tempdir().unwrap();
        let ds = out.path().join("ds");
        let s = import_langsplat(src.path(), &ds).unwrap();
        assert_eq!(
            (s.images, s.dim, s.masks_per_level[2] > 0, s.unused_rows),
            (3, dim, true, s.unused_rows)
        );
        let cams = names(&["frame_003", "frame_001", "frame_002"]);
        for level in 1..=3 {
            let a = load_dataset_labels(&ds, level, &cams).unwrap();
            let b = load_langsplat_labels(src.path(), level, &cams).unwrap();
            assert_eq!(a, b, "level {level}");
        }
        // Cameras of a subset of the images (`synth --subsets`): their labels alone, in
        // camera order, the same from both readers.
        let sub = names(&["frame_003", "frame_001"]);
        let a = load_dataset_labels(&ds, 1, &sub).unwrap();
        assert_eq!(a, load_langsplat_labels(src.path(), 1, &sub).unwrap());
        let full = load_dataset_labels(&ds, 1, &cams).unwrap();
        assert_eq!(a, full[..2].to_vec());
        // Several levels in one pass equal the levels loaded one by one.
        let all = load_dataset_levels(&ds, &[3, 1, 2], &cams).unwrap();
        for (labels, level) in all.iter().zip([3, 1, 2]) {
            assert_eq!(labels, &load_dataset_labels(&ds, level, &cams).unwrap());
        }
        let reader =
            SerializedFileReader::new(std::fs::File::open(ds.join(FEATURES_FILE)).unwrap())
                .unwrap();
        assert_eq!(
            reader.metadata().num_row_groups(),
            3,
            "one row group per image"
        );
        assert_eq!(
            reader.metadata().file_metadata().num_rows() as usize,
            s.feature_rows
        );
        let left: Vec<_> = std::fs::read_dir(&ds)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 2, "{left:?}");
    }
}

#[test]
fn load_errors_name_the_problem() {
    let src = tempfile::tempdir().unwrap();
    write_image(src.path(), "a", 4, 3, (20, 10), Some(3));
    write_image(src.path(), "b", 5, 3, (20, 10), Some(3));
    let ds = src.path().join("ds");
    import_langsplat(src.path(), &ds).unwrap();
    let e = load_dataset_labels(&ds, 3, &names(&["a", "b"]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("level 3 has no masks in any of the 2 images"),
        "{e}"
    );
    let e = load_dataset_labels(&ds, 1, &names(&["a", "c"]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("masks.parquet")
            && e.contains("without labels: [c]")
            && e.contains("without a camera: [b]"),
        "{e}"
    );
    assert!(
        load_dataset_labels(&ds, 7, &names(&["a"]))
            .unwrap_err()
            .to_string()
            .contains("level 7")
    );
    std::fs::write(ds.join(FEATURES_FILE), b"PAR1 garbage").unwrap();
    let e = load_dataset_labels(&ds, 1, &names(&["a", "b"]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("features.parquet") && e.contains("Parquet"),
        "{e}"
    );
    std::fs::remove_file(ds.join(MASKS_FILE)).unwrap();
    let e = load_dataset_labels(&ds, 1, &names(&["a", "b"]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("masks.parquet"), "{e}");
}

#[test]
fn failed_import_leaves_nothing() {
    let src = tempfile::tempdir().unwrap();
    write_image(src.path(), "a", 6, 3, (20, 10), None);
    write_image(src.path(), "b", 7, 4, (20, 10), None);
    let out = src.path().join("out");
    let e = import_langsplat(src.path(), &out).unwrap_err().to_string();
    assert!(
        e.contains("b_f.npy") && e.contains("dimension 4 differs from 3"),
        "{e}"
    );
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
    write_image(src.path(), "b", 7, 3, (20, 10), None);
    write_npy_f32(&src.path().join("b_s.npy"), &[4, 10, 20], &vec![99.0; 800]).unwrap();
    assert!(
        import_langsplat(src.path(), &out)
            .unwrap_err()
            .to_string()
            .contains("out of range")
    );
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
    let empty = tempfile::tempdir().unwrap();
    assert!(import_langsplat(empty.path(), &out).is_err());
}

#[test]
fn writer_assigns_levels_and_rejects_bad_maps() {
    let out = tempfile::tempdir().unwrap();
    let mut w = DatasetWriter::create(out.path(), 2).unwrap();
    let f = [0.0f32; 10];
    // Rows 0 (levels 0 and 2), 1 unused (inside level 1's group), 2 (level 1), 3 (level 2),
    // 4 unused after every group (the last level).
    let maps: [&[i32]; 4] = [&[0, 0], &[2, -1], &[3, 0], &[-1, -1]];
    w.add_image("x", (2, 1), &f, &maps).unwrap();
    assert!(
        w.add_image("x", (2, 1), &f, &maps)
            .unwrap_err()
            .to_string()
            .contains("repeated")
    );
    assert!(
        w.add_image("y", (3, 1), &f, &maps)
            .unwrap_err()
            .to_string()
            .contains("expected 3x1")
    );
    let bad: [&[i32]; 1] = [&[-2, 0]];
    assert!(
        w.add_image("y", (2, 1), &f, &bad)
            .unwrap_err()
            .to_string()
            .contains("-2")
    );
    let s = w.finish().unwrap();
    assert_eq!(
        (s.feature_rows, s.unused_rows, s.valid_pixels_per_level),
        (5, 2, [2, 1, 2, 0])
    );
    let r = SerializedFileReader::new(std::fs::File::open(out.path().join(FEATURES_FILE)).unwrap())
        .unwrap();
    let mut levels = Vec::new();
    for row in r.get_row_iter(None).unwrap() {
        let row = row.unwrap();
        levels.push(row.get_ubyte(1).unwrap());
    }
    assert_eq!(levels, vec![0, 1, 1, 2, 3]);
}
