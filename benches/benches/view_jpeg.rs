//! The viewer's JPEG of a 1280×720 frame on the host: the `jpeg-encoder` crate (SIMD,
//! one thread) against `lsplat_view::jpeg` (integer blocks and restart intervals, the
//! steps the device runs) on 1 and 2 threads, at quality 90 (4:4:4, the `--bench`
//! quality) and 75 (4:2:0). The picture is fern's first photo resized to 1280×720.
//!
//! `cargo bench -p lsplat-benches --bench view_jpeg`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lsplat_prep::resize::Image8;
use lsplat_prep::resize::cv::resize_linear;

const W: usize = 1280;
const H: usize = 720;

fn picture() -> Vec<u8> {
    let src = lsplat_data::testdata::data_dir().join("fern_llff/images_8/image000.png");
    match lsplat_prep::image::read_rgb(&src) {
        Ok(im) => resize_linear(&im, W, H).data,
        Err(_) => {
            let mut im = Image8::zeros(W, H, 3);
            for (i, v) in im.data.iter_mut().enumerate() {
                *v = ((i / 3 % W) ^ (i / 3 / W)) as u8;
            }
            im.data
        }
    }
}

fn bench_jpeg(crit: &mut Criterion) {
    let rgb = picture();
    let mut group = crit.benchmark_group("view_jpeg");
    group.throughput(Throughput::Elements((W * H) as u64));
    for quality in [90u8, 75] {
        group.bench_function(format!("jpeg_encoder_q{quality}"), |b| {
            b.iter(|| {
                let mut out = Vec::with_capacity(1 << 20);
                jpeg_encoder::Encoder::new(&mut out, quality)
                    .encode(&rgb, W as u16, H as u16, jpeg_encoder::ColorType::Rgb)
                    .unwrap();
                out
            })
        });
        for threads in [1, 2] {
            group.bench_function(format!("lsplat_q{quality}_t{threads}"), |b| {
                b.iter(|| {
                    lsplat_view::jpeg::encode(&rgb, W as u32, H as u32, quality, threads).unwrap()
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_jpeg);
criterion_main!(benches);
