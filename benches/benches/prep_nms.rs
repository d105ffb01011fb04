//! Preprocessing's mask NMS and clean-up against the straightforward version, on the
//! same 200 masks of a 1264×832 image, plus the per-step seconds of a whole image.
//!
//! The masks come from the real generator driven by the fake SAM (blobs around a
//! 32×32 prompt grid per crop) on fern's first image resized to 1264×832. "Fast" is
//! the engine: clean-up on padded box crops of bit masks, box NMS, `mask_nms` on bit
//! masks at `nms_max_dim` 1024. "Straightforward" is the original's way: full-frame
//! byte masks, connected components on the whole frame, the O(M²) pair loop scanning
//! the frame. Each method runs in its own process, so its peak resident memory
//! (VmHWM after resetting it, minus the resident size before the step) is its own.
//!
//! `cargo bench -p lsplat-benches --bench prep_nms`

use std::process::Command;
use std::time::Instant;

use lsplat_core::preprocess::PreprocessConfig;
use lsplat_prep::bitmask::BitMask;
use lsplat_prep::boxes::nms;
use lsplat_prep::ccl::remove_small_regions;
use lsplat_prep::cleanup::clean_mask;
use lsplat_prep::fake::{FakeClip, FakeSam};
use lsplat_prep::mask_nms::{MaskNmsParams, mask_nms, mask_nms_reference};
use lsplat_prep::resize::Image8;
use lsplat_prep::resize::cv::resize_linear;
use lsplat_prep::{Timings, amg, levels};

const W: usize = 1264;
const H: usize = 832;
const MASKS: usize = 200;

fn image() -> Image8 {
    let src = lsplat_data::testdata::data_dir().join("fern_llff/images_8/image000.png");
    match lsplat_prep::image::read_rgb(&src) {
        Ok(im) => resize_linear(&im, W, H),
        Err(_) => {
            let mut im = Image8::zeros(W, H, 3);
            for (i, v) in im.data.iter_mut().enumerate() {
                *v = ((i / 3 % W) ^ (i / 3 / W)) as u8;
            }
            im
        }
    }
}

fn cfg() -> PreprocessConfig {
    PreprocessConfig {
        threads: 1,
        ..PreprocessConfig::default()
    }
}

/// The generator's default list (before clean-up), the first 200 masks.
fn masks(img: &Image8, t: &mut Timings) -> (Vec<BitMask>, Vec<f64>, levels::LangSplatArrays) {
    let mut sam = FakeSam::default();
    let mut dec = FakeSam::default();
    let g = amg::generate(img, &cfg(), &mut sam, &mut dec, t).unwrap();
    let lists = levels::finish_lists(&g, &cfg(), t);
    let arrays = levels::arrays(img, &lists, &mut FakeClip { dim: 512 }, &cfg(), t).unwrap();
    let ids: Vec<usize> = g.lists[0].iter().copied().take(MASKS).collect();
    assert_eq!(
        ids.len(),
        MASKS,
        "the generator made fewer than {MASKS} masks"
    );
    let m = ids.iter().map(|&i| g.records[i].mask.clone()).collect();
    let s = ids
        .iter()
        .map(|&i| g.records[i].stability as f64 * g.records[i].iou as f64)
        .collect();
    (m, s, arrays)
}

fn status(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// Bytes the fast method's masks hold: the cleaned bit masks and their downsampled
/// copies for the NMS (the rest is per-mask scratch).
fn fast_bytes(m: &[BitMask]) -> usize {
    let (w, h) = lsplat_prep::mask_nms::work_size(W as u32, H as u32, 1024);
    m.iter()
        .map(|x| {
            let c = clean_mask(x, 100).mask;
            c.heap_bytes() + lsplat_prep::mask_nms::downsample(&c, w, h).heap_bytes()
        })
        .sum()
}

fn fast(m: &[BitMask], s: &[f64]) -> Vec<usize> {
    let cleaned: Vec<_> = m.iter().map(|x| clean_mask(x, 100)).collect();
    let boxes: Vec<_> = cleaned.iter().map(|c| c.mask.bbox()).collect();
    let sc: Vec<f32> = cleaned.iter().map(|c| (!c.changed) as u8 as f32).collect();
    let keep = nms(&boxes, &sc, 0.7);
    let kept: Vec<&BitMask> = keep.iter().map(|&i| &cleaned[i].mask).collect();
    let ks: Vec<f64> = keep.iter().map(|&i| s[i]).collect();
    mask_nms(&kept, &ks, &MaskNmsParams::LANGSPLAT, 1024, 1)
}

fn straightforward(m: &[BitMask], s: &[f64]) -> Vec<usize> {
    let full: Vec<Vec<u8>> = m.iter().map(|x| x.to_bytes()).collect();
    let mut changed = Vec::new();
    let mut cleaned = Vec::new();
    for f in &full {
        let (a, c1) = remove_small_regions(f, W, H, 100, true);
        let (b, c2) = remove_small_regions(&a, W, H, 100, false);
        changed.push(c1 || c2);
        cleaned.push(b);
    }
    drop(full);
    let boxes: Vec<_> = cleaned
        .iter()
        .map(|c| BitMask::from_bytes(W as u32, H as u32, c).bbox())
        .collect();
    let sc: Vec<f32> = changed.iter().map(|&c| (!c) as u8 as f32).collect();
    let keep = nms(&boxes, &sc, 0.7);
    let kept: Vec<Vec<u8>> = keep
        .iter()
        .map(|&i| std::mem::take(&mut cleaned[i]))
        .collect();
    drop(cleaned);
    let ks: Vec<f64> = keep.iter().map(|&i| s[i]).collect();
    mask_nms_reference(&kept, &ks, &MaskNmsParams::LANGSPLAT)
}

fn child(mode: &str) {
    let img = image();
    let (m, s, _) = masks(&img, &mut Timings::default());
    drop(img);
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let base = status("VmRSS:");
    let reps = if mode == "fast" { 3 } else { 1 };
    let mut best = f64::MAX;
    let mut kept = 0;
    for _ in 0..reps {
        let t = Instant::now();
        kept = if mode == "fast" {
            fast(&m, &s)
        } else {
            straightforward(&m, &s)
        }
        .len();
        best = best.min(t.elapsed().as_secs_f64());
    }
    let peak = status("VmHWM:").saturating_sub(base);
    println!("RESULT {mode} {best:.4} {peak} {kept}");
}

fn main() {
    if let Ok(mode) = std::env::var("PREP_NMS_MODE") {
        return child(&mode);
    }
    let img = image();
    let mut t = Timings::default();
    let (m, s, a) = masks(&img, &mut t);
    let n_fast = fast(&m, &s);
    // Equal at full resolution: the fast method with nms_max_dim 0 keeps what the
    // straightforward one keeps.
    let cleaned: Vec<_> = m.iter().map(|x| clean_mask(x, 100)).collect();
    let bytes: Vec<Vec<u8>> = cleaned.iter().map(|c| c.mask.to_bytes()).collect();
    let refs: Vec<&BitMask> = cleaned.iter().map(|c| &c.mask).collect();
    assert_eq!(
        mask_nms(&refs, &s, &MaskNmsParams::LANGSPLAT, 0, 1),
        mask_nms_reference(&bytes, &s, &MaskNmsParams::LANGSPLAT)
    );
    println!(
        "one {W}x{H} image, fake SAM (points 32, 5 crops), fake CLIP (crops real), 1 thread:\n  masks from logits {:.2} s, box+mask NMS {:.2} s, clean-up {:.2} s, crops+fake CLIP {:.2} s; rows per level {:?}",
        t.masks, t.nms, t.cleanup, t.clip, a.lengths
    );
    let exe = std::env::current_exe().unwrap();
    let mut res = Vec::new();
    for mode in ["fast", "straightforward"] {
        let out = Command::new(&exe)
            .env("PREP_NMS_MODE", mode)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.starts_with("RESULT"))
            .expect("child result")
            .to_string();
        let f: Vec<&str> = line.split_whitespace().collect();
        let (secs, kib, kept): (f64, u64, usize) = (
            f[2].parse().unwrap(),
            f[3].parse().unwrap(),
            f[4].parse().unwrap(),
        );
        println!(
            "  {mode:>15}: {secs:8.3} s, peak +{:7.1} MB, {kept} of {MASKS} masks kept",
            kib as f64 / 1024.0
        );
        res.push((secs, kib));
    }
    println!(
        "  speed-up {:.1}x, peak memory ratio {:.3} (fast kept {} masks); the fast method's masks hold {:.1} MB, the full-frame byte masks {:.1} MB",
        res[1].0 / res[0].0,
        res[0].1 as f64 / res[1].1.max(1) as f64,
        n_fast.len(),
        fast_bytes(&m) as f64 / 1e6,
        (MASKS * W * H) as f64 / 1e6
    );
}
