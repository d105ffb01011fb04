//! Throughput of CLIP's encoders through ONNX Runtime: text phrases/s and image
//! crops/s (preprocessed 224×224), the best of several timed rounds after a warm-up.
//!
//! cargo run --release -p lsplat-models --example clip_throughput -- MODEL_DIR
//!     [--threads N] [--batch B] [--phrases P] [--crops C] [--rounds R] [--backend cpu|cuda|hip]
//!
//! `benches/clip_onnx.sh` builds ViT-B/16-sized models with random weights and runs it.

use std::path::PathBuf;
use std::time::Instant;

use lsplat_core::config::BackendKind;
use lsplat_models::clip::{ClipImage, ClipModel, ClipText};
use lsplat_models::{Accelerator, SessionOptions, runtime};

/// CPU seconds this process has used (user + system, all threads; Linux), so figures
/// taken on a busy machine can be read as per-core costs.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses): utime is the 12th, stime
    // the 13th of them, in clock ticks (100 per second on Linux).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| {
        f.get(i)
            .and_then(|x| x.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (tick(11) + tick(12)) / 100.0
}

/// Runs `f` `rounds` times: the shortest wall time and the CPU time of that round.
fn best_of(
    rounds: usize,
    mut f: impl FnMut() -> Result<(), Box<dyn std::error::Error>>,
) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let mut best = (f64::INFINITY, f64::NAN);
    for _ in 0..rounds {
        let (t0, c0) = (Instant::now(), cpu_seconds());
        f()?;
        let wall = t0.elapsed().as_secs_f64();
        if wall < best.0 {
            best = (wall, cpu_seconds() - c0);
        }
    }
    Ok(best)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(
        args.next()
            .ok_or("usage: clip_throughput MODEL_DIR [options]")?,
    );
    let (mut threads, mut batch, mut phrases, mut crops, mut rounds) =
        (0u32, 32usize, 128usize, 32usize, 3usize);
    let mut backend = BackendKind::Cpu;
    while let Some(flag) = args.next() {
        let v = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--threads" => threads = v.parse()?,
            "--batch" => batch = v.parse()?,
            "--phrases" => phrases = v.parse()?,
            "--crops" => crops = v.parse()?,
            "--rounds" => rounds = v.parse()?,
            "--backend" => {
                backend = match v.as_str() {
                    "cpu" => BackendKind::Cpu,
                    "cuda" => BackendKind::Cuda,
                    "hip" => BackendKind::Hip,
                    _ => return Err(format!("unknown backend {v}").into()),
                }
            }
            _ => return Err(format!("unknown option {flag}").into()),
        }
    }
    let rt = runtime::load(None)?;
    let opts = SessionOptions {
        accelerator: Accelerator::from_backend(backend),
        ordinal: 0,
        threads,
    };
    let clip = ClipModel::at(&dir, None)?;
    println!(
        "ONNX Runtime {} ({}); intra-op threads {}; batch {batch}",
        rt.version,
        rt.path.display(),
        if threads == 0 {
            "default (physical cores)".to_string()
        } else {
            threads.to_string()
        }
    );

    let mut text = ClipText::load(&clip, rt, &opts)?;
    text.batch = batch;
    let words = [
        "red", "apple", "wooden", "mug", "teddy", "bear", "shiny", "glass", "plant", "table",
    ];
    let list: Vec<String> = (0..phrases)
        .map(|i| {
            format!(
                "a photo of a {} {} {}",
                words[i % 10],
                words[(i / 10) % 10],
                words[(i / 100) % 10]
            )
        })
        .collect();
    let refs: Vec<&str> = list.iter().map(String::as_str).collect();
    text.encode(&refs[..batch.min(phrases)], &mut |_, _| {})?; // warm-up
    let (wall, cpu) = best_of(rounds, || {
        text.encode(&refs, &mut |_, _| {})?;
        Ok(())
    })?;
    println!(
        "text  ({}): {phrases} phrases in {wall:.3} s = {:.1} phrases/s; {cpu:.2} CPU s = {:.1} phrases per CPU second (tokenizing included)",
        text.model().provider(),
        phrases as f64 / wall,
        phrases as f64 / cpu
    );

    let mut image = ClipImage::load(&clip, rt, &opts)?;
    image.batch = batch;
    let per = 3 * 224 * 224;
    let pixels: Vec<f32> = (0..crops * per)
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
        .collect();
    image.encode_pixels(&pixels[..per * batch.min(crops)], &mut |_, _| {})?; // warm-up
    let (wall, cpu) = best_of(rounds, || {
        image.encode_pixels(&pixels, &mut |_, _| {})?;
        Ok(())
    })?;
    println!(
        "image ({}): {crops} crops in {wall:.3} s = {:.2} crops/s; {cpu:.2} CPU s = {:.2} crops per CPU second",
        image.model().provider(),
        crops as f64 / wall,
        crops as f64 / cpu
    );
    Ok(())
}
