//! Cost of one plugin op call (`Backend::run_op`) beyond its work: LangSplatV2's
//! `lv2_vis_or` over 64 Gaussians, on the CPU backend and on the simt runtime (skipped
//! with a message when simt cannot run here). On simt most of it is the runtime's
//! launch; the engine's part is the kernel lookup and the argument list.

use criterion::{Criterion, criterion_group, criterion_main};
use langsplat_v2::ops::{VisOrOp, vis_words};
use lsplat_device::{Backend, OpArg};

const N: usize = 64;

fn launches<B: Backend>(crit: &mut Criterion, name: &str, dev: &B) {
    let bits = dev.upload(&vec![0u32; vis_words(N)]).unwrap();
    let mut vis = dev.alloc::<f32>(N).unwrap();
    let op = VisOrOp { gaussians: N };
    crit.bench_function(&format!("plugin_op_call/{name}"), |b| {
        b.iter(|| {
            dev.run_op(&op, N, &mut [OpArg::U32(&bits), OpArg::F32Mut(&mut vis)])
                .unwrap()
        })
    });
}

fn bench_launch(crit: &mut Criterion) {
    launches(crit, "cpu", &lsplat_cpu::CpuBackend::new(2));
    let options = lsplat_gpu::simt::SimtOptions {
        warp: 32,
        schedule: lsplat_gpu::simt::Schedule::InOrder,
        seed: 1,
        threads: 2,
    };
    match lsplat_gpu::simt::Simt::new(options) {
        Ok(rt) => launches(crit, "simt", &lsplat_gpu::GpuBackend::new(rt)),
        Err(e) => eprintln!("plugin_op_call/simt skipped: {e}"),
    }
}

criterion_group!(benches, bench_launch);
criterion_main!(benches);
