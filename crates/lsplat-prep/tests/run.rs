//! The folder runner with fake networks: LangSplat's files, resume after a failure,
//! and the bad inputs that must stop a run with one clear error.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use lsplat_core::preprocess::PreprocessConfig;
use lsplat_prep::fake::{FakeClip, FakeSam};
use lsplat_prep::image::Resolution;
use lsplat_prep::run::{FEATURES_DIR, Models, list_images, preprocess};

fn write_png(path: &Path, w: u32, h: u32, seed: u32) {
    let mut bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut bytes, w, h);
        enc.set_color(png::ColorType::Rgb);
        let mut wr = enc.write_header().unwrap();
        let data: Vec<u8> = (0..w * h * 3)
            .map(|i| ((i / 3 % w) * 3 + (i / 3 / w) * 5 + seed * 40 + i % 3 * 60) as u8)
            .collect();
        wr.write_image_data(&data).unwrap();
    }
    std::fs::write(path, bytes).unwrap();
}

fn small_cfg() -> PreprocessConfig {
    PreprocessConfig {
        points_per_side: 4,
        threads: 2,
        ..PreprocessConfig::default()
    }
}

fn run(
    images: &[PathBuf],
    out: &Path,
    sam: &mut FakeSam,
) -> Result<lsplat_prep::run::Summary, String> {
    run_until(images, out, sam, usize::MAX)
}

/// [`run`] whose progress callback stops the run once `stop_after` images are done.
fn run_until(
    images: &[PathBuf],
    out: &Path,
    sam: &mut FakeSam,
    stop_after: usize,
) -> Result<lsplat_prep::run::Summary, String> {
    let mut sam2 = sam.clone();
    let mut clip = FakeClip { dim: 8 };
    let mut models = Models {
        encoder: &mut sam2.clone(),
        decoder: &mut sam2,
        clip: &mut clip,
    };
    let r = preprocess(
        images,
        out,
        Resolution::Auto,
        &small_cfg(),
        &mut models,
        &mut |p| {
            if p.processed >= stop_after {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        },
    );
    r.map_err(|e| e.to_string())
}

/// Three 96×64 PNGs in `dir/images`, listed, and the output folder `dir/out`.
fn three_frames(dir: &Path) -> (Vec<PathBuf>, PathBuf) {
    let imgs = dir.join("images");
    std::fs::create_dir(&imgs).unwrap();
    for i in 0..3 {
        write_png(&imgs.join(format!("frame_{i:03}.png")), 96, 64, i);
    }
    (list_images(&imgs).unwrap(), dir.join("out"))
}

#[test]
fn writes_langsplat_files_and_resumes_after_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let (images, out) = three_frames(dir.path());
    // The decoder fails on the second image (5 crops × 1 batch per image).
    let mut failing = FakeSam {
        fail_at: Some(6),
        ..FakeSam::default()
    };
    let e = run(&images, &out, &mut failing).unwrap_err();
    assert!(e.contains("asked to fail"), "{e}");
    let lf = out.join(FEATURES_DIR);
    let mut names: Vec<String> = std::fs::read_dir(&lf)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with(".lock"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["frame_000_f.npy", "frame_000_s.npy"],
        "only the finished image"
    );
    let first = std::fs::read(lf.join("frame_000_f.npy")).unwrap();
    let s = run(&images, &out, &mut FakeSam::default()).unwrap();
    assert_eq!(
        (s.images, s.processed),
        (3, 2),
        "resumes at the first unfinished image"
    );
    assert_eq!(std::fs::read(lf.join("frame_000_f.npy")).unwrap(), first);
    for i in 0..3 {
        let img = lsplat_data::langsplat::read_image(&lf, &format!("frame_{i:03}")).unwrap();
        assert_eq!((img.width, img.height, img.dim), (96, 64, 8));
        assert!(img.rows() > 0);
        // Unit rows of float16 precision.
        for r in img.features.chunks_exact(8) {
            let n: f32 = r.iter().map(|v| v * v).sum::<f32>().sqrt();
            assert!((n - 1.0).abs() < 2e-3, "row length {n}");
            assert!(r.iter().all(|&v| half::f16::from_f32(v).to_f32() == v));
        }
    }
    // Everything done: a third run processes nothing.
    let s = run(&images, &out, &mut FakeSam::default()).unwrap();
    assert_eq!(s.processed, 0);
    assert!(!s.stopped);
}

#[test]
fn a_progress_callback_stops_the_run_between_images() {
    let dir = tempfile::tempdir().unwrap();
    let (images, out) = three_frames(dir.path());
    let s = run_until(&images, &out, &mut FakeSam::default(), 1).unwrap();
    assert_eq!((s.processed, s.stopped), (1, true));
    let lf = out.join(FEATURES_DIR);
    assert!(lf.join("frame_000_f.npy").is_file());
    assert!(!lf.join("frame_001_s.npy").exists());
    // Stopping before the first image processes none; then the rest resumes.
    let s = run_until(&images, &out, &mut FakeSam::default(), 0).unwrap();
    assert_eq!((s.processed, s.stopped), (0, true));
    let s = run(&images, &out, &mut FakeSam::default()).unwrap();
    assert_eq!((s.processed, s.stopped), (2, false));
    // The last image's callback asking to stop does not mark a finished run stopped.
    let s = run_until(&images, &out, &mut FakeSam::default(), 0).unwrap();
    assert_eq!((s.processed, s.stopped), (0, false));
}

#[test]
fn bad_inputs_fail_with_one_clear_error_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let imgs = dir.path().join("images");
    std::fs::create_dir(&imgs).unwrap();
    let e = list_images(&imgs).unwrap_err().to_string();
    assert!(e.contains("no .png"), "{e}");
    write_png(&imgs.join("a.png"), 96, 64, 0);
    write_png(&imgs.join("b.png"), 80, 64, 1);
    let images = list_images(&imgs).unwrap();
    let out = dir.path().join("out");
    let e = run(&images, &out, &mut FakeSam::default()).unwrap_err();
    assert!(
        e.contains("b.png") && e.contains("80x64") && e.contains("one size"),
        "{e}"
    );
    assert!(!out.join(FEATURES_DIR).join("a_f.npy").exists());
    // A truncated image is named.
    write_png(&imgs.join("b.png"), 96, 64, 1);
    let bytes = std::fs::read(imgs.join("b.png")).unwrap();
    std::fs::write(imgs.join("b.png"), &bytes[..bytes.len() - 40]).unwrap();
    let e = run(&images, &out, &mut FakeSam::default()).unwrap_err();
    assert!(e.contains("b.png"), "{e}");
    assert!(!out.join(FEATURES_DIR).join("b_f.npy").exists());
    // Two files with one stem.
    write_png(&imgs.join("a.x.png"), 96, 64, 2);
    let e = list_images(&imgs).unwrap_err().to_string();
    assert!(e.contains("same stem `a`"), "{e}");
}

/// A PNG whose header says `w × h` (one compressed row of data after it): readable
/// headers, but far too large to decode.
fn write_huge_png_header(path: &Path, w: u32, h: u32) {
    let mut bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut bytes, w, h);
        enc.set_color(png::ColorType::Rgb);
        let mut wr = enc.write_header().unwrap();
        // A stored (uncompressed) zlib block holding the filter byte of row 0.
        wr.write_chunk(
            png::chunk::IDAT,
            &[0x78, 0x01, 0x01, 0x01, 0x00, 0xfe, 0xff, 0x00],
        )
        .unwrap();
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn an_image_too_large_for_memory_is_named_before_decoding() {
    let dir = tempfile::tempdir().unwrap();
    let imgs = dir.path().join("images");
    std::fs::create_dir(&imgs).unwrap();
    // 200 000 × 200 000 pixels: at 64 bytes a pixel 2.56 TB, beyond any test machine.
    write_huge_png_header(&imgs.join("huge.png"), 200_000, 200_000);
    let images = list_images(&imgs).unwrap();
    assert_eq!(
        lsplat_prep::run::check_images(&images).unwrap(),
        (200_000, 200_000),
        "the header is readable"
    );
    let out = dir.path().join("out");
    let e = run(&images, &out, &mut FakeSam::default()).unwrap_err();
    eprintln!("{e}");
    assert!(
        e.contains("huge.png")
            && e.contains("200000x200000")
            && e.contains("needs 2560.0 GB but only"),
        "{e}"
    );
    let lf = out.join(FEATURES_DIR);
    assert!(!lf.join("huge_f.npy").exists() && !lf.join("huge_s.npy").exists());
}
