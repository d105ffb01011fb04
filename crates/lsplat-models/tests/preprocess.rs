//! Image preprocessing against open_clip's transform computed with Pillow and NumPy
//! (tests/clip_pixels.py) on real images of the shared test data: PNGs of two scenes
//! and the 4032×3024 JPEGs of snowmiku.

mod common;

use std::path::PathBuf;

use lsplat_models::preprocess::{RgbImage, clip_pixels};

fn read_f32(p: &std::path::Path) -> Vec<f32> {
    std::fs::read(p)
        .unwrap()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[test]
fn pixels_equal_open_clips_transform_on_real_images() {
    let what = "preprocessing vs Pillow";
    let Some(data) = lsplat_data::testdata::test_data() else {
        return;
    };
    let Some(py) = common::python(what) else {
        return;
    };
    let mut images: Vec<PathBuf> = Vec::new();
    for (dir, take) in [
        ("fern_llff/images_8", 3),
        ("snowmiku/images_8", 3),
        ("snowmiku/input_samples", 2),
    ] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(data.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        images.extend(files.into_iter().take(take));
    }
    let out = tempfile::tempdir().unwrap();
    let mut args: Vec<&str> = vec![out.path().to_str().unwrap()];
    args.extend(images.iter().map(|p| p.to_str().unwrap()));
    let Some(()) = common::run_script(&py, "tests/clip_pixels.py", &args, what) else {
        return;
    };
    let mut jpeg_report = Vec::new();
    for (i, path) in images.iter().enumerate() {
        let want = read_f32(&out.path().join(format!("{i}.f32")));
        let pil_rgb = std::fs::read(out.path().join(format!("{i}.rgb"))).unwrap();
        let ours = RgbImage::open(path).unwrap();
        // The transform on Pillow's decoded pixels: the resize, crop and normalisation.
        let pil = RgbImage::new(ours.width, ours.height, pil_rgb).unwrap();
        let got = clip_pixels(&pil);
        assert_eq!(got.len(), want.len());
        let worst = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst <= 1e-5, "{}: differs by {worst}", path.display());
        // The decoder: PNG must be identical; JPEG is measured against libjpeg's output.
        let differing = ours
            .data
            .iter()
            .zip(&pil.data)
            .filter(|(a, b)| a != b)
            .count();
        let max = ours
            .data
            .iter()
            .zip(&pil.data)
            .map(|(a, b)| a.abs_diff(*b))
            .max()
            .unwrap_or(0);
        let is_jpeg = path.extension().is_some_and(|e| e == "jpg");
        if is_jpeg {
            let worst_end = clip_pixels(&ours)
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            jpeg_report.push(format!(
                "{}: {differing} of {} decoded bytes differ from Pillow's (max {max}); after the transform max |Δ| = {worst_end}",
                path.file_name().unwrap().to_string_lossy(),
                ours.data.len()
            ));
            assert!(
                max <= 8,
                "{}: the JPEG decoders differ by {max}",
                path.display()
            );
        } else {
            assert_eq!(differing, 0, "{}: PNG decoded differently", path.display());
        }
    }
    eprintln!(
        "{} images within 1e-5 of open_clip's transform",
        images.len()
    );
    for l in jpeg_report {
        eprintln!("{l}");
    }
}
