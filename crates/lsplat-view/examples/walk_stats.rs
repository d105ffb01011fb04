use lsplat_core::TileGrid;
use lsplat_cpu::CpuBackend;
use lsplat_cpu::walk::TileWalker;
use lsplat_device::{Backend, CameraParams};
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}
fn main() {
    let ply = lsplat_data::ply::read_ply(std::path::Path::new(
        "/work/shared/data/splats/playcanvas_biker.inria_sh0.ply",
    ))
    .unwrap();
    let cams =
        lsplat_data::cameras::load_cameras(std::path::Path::new("/tmp/i33/biker3/cameras.json"))
            .unwrap();
    let cam = &cams[0];
    let dev = CpuBackend::new(2);
    let geom = dev.upload_geometry(&ply.gaussians).unwrap();
    let grid = TileGrid::new(16, cam.width, cam.height);
    let mut proj = Default::default();
    let mut bins = Default::default();
    let t = std::time::Instant::now();
    dev.project(&geom, &CameraParams::new(cam, 0.01, 1e10), grid, &mut proj)
        .unwrap();
    let tp = t.elapsed();
    dev.bin_and_sort(&proj, grid, &mut bins).unwrap();
    println!("project {:?} bin {:?}", tp, t.elapsed() - tp);
    let proj: &lsplat_cpu::project::CpuProjection = &proj;
    let bins: &lsplat_cpu::bins::CpuBins = &bins;
    let c0 = cpu_ns();
    let tw = std::time::Instant::now();
    let mut w = TileWalker::default();
    let (mut list_total, mut contrib, mut pixels) = (0u64, 0u64, 0u64);
    let mut maxlist = 0;
    for ty in 0..grid.tiles_y() {
        for tx in 0..grid.tiles_x() {
            let t = (ty * grid.tiles_x() + tx) as usize;
            let list =
                &bins.sorted[bins.tile_offsets[t] as usize..bins.tile_offsets[t + 1] as usize];
            list_total += list.len() as u64;
            maxlist = maxlist.max(list.len());
            w.gather(&proj.splats, list);
            for y in ty * 16..((ty + 1) * 16).min(cam.height) {
                for x in tx * 16..((tx + 1) * 16).min(cam.width) {
                    pixels += 1;
                    w.walk(list, x as f64 + 0.5, y as f64 + 0.5, |_, _, _| contrib += 1);
                }
            }
        }
    }
    println!(
        "walk: cpu {:.1} ms, wall {:?}",
        (cpu_ns() - c0) as f64 / 1e6,
        tw.elapsed()
    );
    // Candidates per row and interval hits per pixel (the walk's own rules, counted).
    let (mut rows, mut cands, mut hits, mut exps) = (0u64, 0u64, 0u64, 0u64);
    for ty in 0..grid.tiles_y() {
        for tx in 0..grid.tiles_x() {
            let t = (ty * grid.tiles_x() + tx) as usize;
            let list =
                &bins.sorted[bins.tile_offsets[t] as usize..bins.tile_offsets[t + 1] as usize];
            for y in ty * 16..((ty + 1) * 16).min(cam.height) {
                let py = y as f64 + 0.5;
                rows += 1;
                let mut c: Vec<usize> = Vec::new();
                for &g in list {
                    let s = &proj.splats[g as usize];
                    let [a, b, cc] = s.conic;
                    let det = a * cc - b * b;
                    let cut = (255.0 * s.opacity as f64).ln();
                    if a > 0.0 && det > 0.0 {
                        let e = (2.0 * a * cut / det).max(0.0).sqrt();
                        if (py - s.xy[1]).abs() <= e {
                            c.push(g as usize);
                        }
                    }
                }
                cands += c.len() as u64;
                for x in tx * 16..((tx + 1) * 16).min(cam.width) {
                    let px = x as f64 + 0.5;
                    let mut tt = 1.0f32;
                    for &g in &c {
                        let s = &proj.splats[g];
                        let dx = s.xy[0] - px;
                        let dy = s.xy[1] - py;
                        let sigma = 0.5 * (s.conic[0] * dx * dx + s.conic[2] * dy * dy)
                            + s.conic[1] * dx * dy;
                        if sigma < 0.0 || sigma > (255.0 * s.opacity as f64).ln() {
                            continue;
                        }
                        hits += 1;
                        exps += 1;
                        let al = (s.opacity * (-(sigma as f32)).exp()).min(0.99);
                        if al < 1.0 / 255.0 {
                            continue;
                        }
                        let nt = tt * (1.0 - al);
                        if nt <= 1e-4 {
                            break;
                        }
                        tt = nt;
                    }
                }
            }
        }
    }
    println!(
        "rows {rows} candidates/row {:.1} sigma-passing/pixel {:.1}",
        cands as f64 / rows as f64,
        hits as f64 / pixels as f64
    );
    let _ = exps;
    println!(
        "tiles {} intersections {} (max list {}) pixels {} contributions {} ({:.1}/px) in {:?}",
        grid.tile_count(),
        list_total,
        maxlist,
        pixels,
        contrib,
        contrib as f64 / pixels as f64,
        t.elapsed()
    );
}
