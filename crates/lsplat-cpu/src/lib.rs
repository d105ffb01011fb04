//! The CPU backend: the reference implementation of every op and a fast one.
//!
//! Work is split into contiguous tile (or row, or Gaussian) ranges balanced by
//! estimated cost and run on a bevy_tasks pool sized to the physical cores; tiny work
//! runs inline, since dispatching microsecond ops to threads costs more than it saves.
//! Every reduction has a fixed order, so results are bitwise reproducible.

pub mod bins;
pub mod channels;
pub(crate) mod format;
pub mod gemm;
pub mod operator;
#[cfg(test)]
mod operator_tests;
pub mod optim;
pub mod pool;
pub mod project;
pub mod raster;
mod recompute;
pub mod sparse_input;
pub mod store;
#[cfg(test)]
mod testing;
pub mod walk;

use std::sync::Mutex;

use lsplat_core::config::{LossKind, WeightPrecision};
use lsplat_core::{Gaussians, TileGrid};
use lsplat_device::check::{at_least as check_min, exact as check};
use lsplat_device::{
    AdamParams, Backend, CameraParams, DeviceError, DeviceOp, Element, GroundTruth, HostArg,
    HostArgs, MemoryInfo, OpArg, OperatorStats, PixelSet, Result,
};

use crate::bins::CpuBins;
use crate::channels::{MAX_CHANNELS, with_channels};
use crate::operator::{BuildScratch, CpuOperator, ProductScratch};
use crate::pool::Workers;
use crate::project::{CpuGeometry, CpuProjection};
use crate::raster::{Pixels, TileScratch};

/// The CPU device.
pub struct CpuBackend {
    workers: Workers,
    scratch: Mutex<raster::BackwardScratch>,
    tiles: TileScratch,
    pub(crate) products: ProductScratch,
    build: BuildScratch,
}

impl CpuBackend {
    /// A backend with `threads` workers (0 = one per physical core).
    pub fn new(threads: usize) -> Self {
        let workers = Workers::new(threads);
        // tile_ranges splits into at most 8 tasks per worker.
        let tiles = TileScratch::new(8 * workers.threads());
        let products = ProductScratch::new(8 * workers.threads());
        let build = BuildScratch::new(8 * workers.threads());
        CpuBackend {
            workers,
            scratch: Mutex::new(raster::BackwardScratch::default()),
            tiles,
            products,
            build,
        }
    }

    /// The worker pool.
    pub fn workers(&self) -> &Workers {
        &self.workers
    }
}

impl Default for CpuBackend {
    fn default() -> Self {
        CpuBackend::new(0)
    }
}

fn check_channels(op: &'static str, c: usize) -> Result<()> {
    if (1..=MAX_CHANNELS).contains(&c) {
        Ok(())
    } else {
        Err(DeviceError::shape(
            op,
            format!("{c} channels (supported: 1..={MAX_CHANNELS})"),
        ))
    }
}

/// `k` (column, value) pairs per Gaussian of a sparse-input product.
fn check_k(op: &'static str, k: usize) -> Result<()> {
    if (1..=MAX_CHANNELS).contains(&k) {
        Ok(())
    } else {
        Err(DeviceError::shape(
            op,
            format!("k = {k} non-zeros per Gaussian (supported: 1..={MAX_CHANNELS})"),
        ))
    }
}

fn pixels<'a>(set: &'a PixelSet<CpuBackend>) -> Pixels<'a> {
    Pixels {
        pixels: &set.pixels,
        tile_offsets: &set.tile_offsets,
        grid: set.grid,
    }
}

fn check_bins(
    op: &'static str,
    proj: &CpuProjection,
    bins: &CpuBins,
    set: &PixelSet<CpuBackend>,
) -> Result<()> {
    if bins.tile_offsets.len() != set.grid.tile_count() + 1
        || bins.by_gauss.len() != proj.splats.len() + 1
    {
        return Err(DeviceError::shape(
            op,
            "bins do not belong to this projection and pixel grid",
        ));
    }
    Ok(())
}

impl Backend for CpuBackend {
    type Buf<T: Element> = Vec<T>;
    type Geometry = CpuGeometry;
    type Projection = CpuProjection;
    type Bins = CpuBins;
    type Operator = CpuOperator;

    fn describe(&self) -> String {
        format!("cpu ({} threads)", self.workers.threads())
    }

    fn max_channels(&self) -> usize {
        MAX_CHANNELS
    }

    fn alloc<T: Element>(&self, len: usize) -> Result<Vec<T>> {
        lsplat_core::memory::try_filled("a CPU buffer", len, T::default()).map_err(|_| {
            DeviceError::OutOfMemory {
                bytes: len.saturating_mul(std::mem::size_of::<T>()),
            }
        })
    }

    fn upload<T: Element>(&self, data: &[T]) -> Result<Vec<T>> {
        let mut v = self.alloc(data.len())?;
        v.copy_from_slice(data);
        Ok(v)
    }

    fn download<T: Element>(&self, buf: &Vec<T>) -> Result<Vec<T>> {
        Ok(buf.clone())
    }

    fn download_into<T: Element>(&self, buf: &Vec<T>, out: &mut [T]) -> Result<()> {
        lsplat_device::check_same_len("download_into", buf.len(), out.len())?;
        out.copy_from_slice(buf);
        Ok(())
    }

    fn host_view<'b, T: Element>(&self, buf: &'b Vec<T>) -> Option<&'b [T]> {
        Some(buf)
    }

    fn upload_into<T: Element>(&self, buf: &mut Vec<T>, data: &[T]) -> Result<()> {
        lsplat_device::check_same_len("upload_into", buf.len(), data.len())?;
        buf.copy_from_slice(data);
        Ok(())
    }

    fn buf_len<T: Element>(buf: &Vec<T>) -> usize {
        buf.len()
    }

    fn fill<T: Element>(&self, buf: &mut Vec<T>, value: T) -> Result<()> {
        buf.fill(value);
        Ok(())
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    fn memory(&self) -> Option<MemoryInfo> {
        let text = std::fs::read_to_string("/proc/meminfo").ok()?;
        let field = |name: &str| {
            text.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
                .map(|kib| kib * 1024)
        };
        Some(MemoryInfo {
            free: field("MemAvailable:")?,
            total: field("MemTotal:")?,
        })
    }

    fn read_bandwidth(&self) -> Option<f64> {
        Some(pool::read_bandwidth(&self.workers, 5))
    }

    fn upload_geometry(&self, gaussians: &Gaussians) -> Result<CpuGeometry> {
        Ok(CpuGeometry::new(gaussians))
    }

    fn project(
        &self,
        geometry: &CpuGeometry,
        camera: &CameraParams,
        grid: TileGrid,
        out: &mut CpuProjection,
    ) -> Result<()> {
        if (grid.width, grid.height) != (camera.width, camera.height) {
            return Err(DeviceError::shape(
                "project",
                "tile grid and camera sizes differ",
            ));
        }
        project::project_all(&self.workers, geometry, camera, grid, out);
        Ok(())
    }

    fn bin_and_sort(
        &self,
        projection: &CpuProjection,
        grid: TileGrid,
        out: &mut CpuBins,
    ) -> Result<()> {
        bins::bin_and_sort(&self.workers, projection, grid, out)
    }

    fn rasterize(
        &self,
        projection: &CpuProjection,
        bins: &CpuBins,
        set: &PixelSet<Self>,
        features: &Vec<f32>,
        channels: usize,
        out: &mut Vec<f32>,
    ) -> Result<()> {
        check_channels("rasterize", channels)?;
        check_bins("rasterize", projection, bins, set)?;
        check(
            "rasterize",
            "features",
            features.len(),
            projection.splats.len() * channels,
        )?;
        check_min("rasterize", "output", out.len(), set.len * channels)?;
        let px = pixels(set);
        let out = &mut out[..set.len * channels];
        with_channels!(channels, ch => raster::rasterize(&self.workers, &self.tiles, &projection.splats, bins, px, features, ch, out));
        Ok(())
    }

    fn rasterize_backward(
        &self,
        projection: &CpuProjection,
        bins: &CpuBins,
        set: &PixelSet<Self>,
        d_out: &Vec<f32>,
        channels: usize,
        d_features: &mut Vec<f32>,
    ) -> Result<()> {
        check_channels("rasterize_backward", channels)?;
        check_bins("rasterize_backward", projection, bins, set)?;
        check_min(
            "rasterize_backward",
            "d_out",
            d_out.len(),
            set.len * channels,
        )?;
        check(
            "rasterize_backward",
            "d_features",
            d_features.len(),
            projection.splats.len() * channels,
        )?;
        let px = pixels(set);
        let mut scratch = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        with_channels!(channels, ch => raster::rasterize_backward(
            &self.workers, &self.tiles, &projection.splats, bins, px, d_out, ch, &mut scratch, d_features));
        Ok(())
    }

    fn build_operator(
        &self,
        projection: &CpuProjection,
        bins: &CpuBins,
        set: &PixelSet<Self>,
        gaussians: usize,
        precision: WeightPrecision,
    ) -> Result<CpuOperator> {
        check_bins("build_operator", projection, bins, set)?;
        check(
            "build_operator",
            "projection",
            projection.splats.len(),
            gaussians,
        )?;
        operator::build(
            &self.workers,
            &self.tiles,
            &self.build,
            &projection.splats,
            bins,
            pixels(set),
            gaussians,
            precision,
            projection.source.as_ref(),
        )
        .map_err(|e| DeviceError::shape("build_operator", e))
    }

    fn operator_stats(&self, op: &CpuOperator) -> OperatorStats {
        OperatorStats {
            rows: op.rows(),
            nnz: op.nnz(),
            bytes: op.bytes(),
            resident_bytes: op.resident_bytes(),
            pass_bytes: op.bytes(),
        }
    }

    fn spill_operator(
        &self,
        op: &CpuOperator,
        dir: &std::path::Path,
        stem: &str,
        probe: bool,
    ) -> Result<Option<(CpuOperator, Option<f64>)>> {
        op.spill(dir, stem, probe)
            .map(Some)
            .map_err(DeviceError::Spill)
    }

    fn geometry_cache_bytes(&self, projection: &CpuProjection, bins: &CpuBins) -> usize {
        projection.bytes() + bins.bytes()
    }

    fn spmm(
        &self,
        op: &CpuOperator,
        x: &Vec<f32>,
        channels: usize,
        out: &mut Vec<f32>,
    ) -> Result<()> {
        check_channels("spmm", channels)?;
        check("spmm", "x", x.len(), op.cols() * channels)?;
        check_min("spmm", "output", out.len(), op.rows() * channels)?;
        operator::spmm(
            &self.workers,
            &self.products,
            op,
            x,
            channels,
            &mut out[..op.rows() * channels],
        );
        Ok(())
    }

    fn spmm_t(
        &self,
        op: &CpuOperator,
        d_out: &Vec<f32>,
        channels: usize,
        d_x: &mut Vec<f32>,
    ) -> Result<()> {
        check_channels("spmm_t", channels)?;
        check_min("spmm_t", "d_out", d_out.len(), op.rows() * channels)?;
        check("spmm_t", "d_x", d_x.len(), op.cols() * channels)?;
        operator::spmm_t(&self.workers, &self.products, op, d_out, channels, d_x);
        Ok(())
    }

    fn spmm_sparse(
        &self,
        op: &CpuOperator,
        idx: &Vec<u32>,
        val: &Vec<f32>,
        k: usize,
        channels: usize,
        out: &mut Vec<f32>,
    ) -> Result<()> {
        check_channels("spmm_sparse", channels)?;
        check_k("spmm_sparse", k)?;
        check("spmm_sparse", "idx", idx.len(), op.cols() * k)?;
        check("spmm_sparse", "val", val.len(), op.cols() * k)?;
        check_min("spmm_sparse", "output", out.len(), op.rows() * channels)?;
        sparse_input::spmm_sparse(
            &self.workers,
            &self.products,
            op,
            idx,
            val,
            k,
            channels,
            out,
        )
        .map_err(|e| DeviceError::shape("spmm_sparse", e))
    }

    fn spmm_t_sparse(
        &self,
        op: &CpuOperator,
        idx: &Vec<u32>,
        d_out: &Vec<f32>,
        k: usize,
        channels: usize,
        d_val: &mut Vec<f32>,
    ) -> Result<()> {
        check_channels("spmm_t_sparse", channels)?;
        check_k("spmm_t_sparse", k)?;
        check("spmm_t_sparse", "idx", idx.len(), op.cols() * k)?;
        check_min("spmm_t_sparse", "d_out", d_out.len(), op.rows() * channels)?;
        check("spmm_t_sparse", "d_val", d_val.len(), op.cols() * k)?;
        sparse_input::spmm_t_sparse(
            &self.workers,
            &self.products,
            op,
            idx,
            d_out,
            k,
            channels,
            d_val,
        )
        .map_err(|e| DeviceError::shape("spmm_t_sparse", e))
    }

    fn mask_groups(
        &self,
        values: &mut Vec<f32>,
        keep: &Vec<u8>,
        rows: usize,
        groups: usize,
        group_len: usize,
    ) -> Result<()> {
        check_min(
            "mask_groups",
            "values",
            values.len(),
            rows * groups * group_len,
        )?;
        check_min("mask_groups", "keep", keep.len(), rows * groups)?;
        lsplat_device::host::mask_groups(values, keep, rows, groups, group_len);
        Ok(())
    }

    fn operator_loss_step(
        &self,
        kind: LossKind,
        op: &CpuOperator,
        x: &Vec<f32>,
        gt: &GroundTruth<Self>,
        weight: f32,
        _work: (&mut Vec<f32>, &mut Vec<f32>),
        d_x: &mut Vec<f32>,
        loss: &mut Vec<f32>,
        slot: usize,
        accumulate: bool,
    ) -> Result<()> {
        let c = gt.channels;
        check_channels("operator_loss_step", c)?;
        check("operator_loss_step", "x", x.len(), op.cols() * c)?;
        check("operator_loss_step", "d_x", d_x.len(), op.cols() * c)?;
        check("operator_loss_step", "mask", gt.mask.len(), op.rows())?;
        check(
            "operator_loss_step",
            "valid pixels",
            gt.pixels.len,
            op.rows(),
        )?;
        check("operator_loss_step", "table", gt.table.len(), gt.rows * c)?;
        if slot >= loss.len() {
            return Err(DeviceError::shape(
                "operator_loss_step",
                format!("slot {slot} outside {} loss slots", loss.len()),
            ));
        }
        let hw = gt.pixels.grid.pixel_count();
        let scales = optim::LossScales::new(kind, c, hw, weight);
        let sums = operator::fused_loss_step(
            &self.workers,
            &self.products,
            op,
            x,
            &gt.mask,
            &gt.table,
            c,
            &scales,
            d_x,
        );
        let value = scales.value(sums, weight) as f32;
        if accumulate {
            loss[slot] += value;
        } else {
            loss[slot] = value;
        }
        Ok(())
    }

    fn normalize(&self, x: &Vec<f32>, channels: usize, out: &mut Vec<f32>) -> Result<()> {
        check_channels("normalize", channels)?;
        check("normalize", "output", out.len(), x.len())?;
        optim::normalize(&self.workers, x, channels, out);
        Ok(())
    }

    fn normalize_backward(
        &self,
        x: &Vec<f32>,
        d_out: &Vec<f32>,
        channels: usize,
        d_x: &mut Vec<f32>,
    ) -> Result<()> {
        check_channels("normalize_backward", channels)?;
        check("normalize_backward", "d_out", d_out.len(), x.len())?;
        check("normalize_backward", "d_x", d_x.len(), x.len())?;
        optim::normalize_backward(&self.workers, x, d_out, channels, d_x);
        Ok(())
    }

    fn pixel_loss(
        &self,
        kind: LossKind,
        rendered: &Vec<f32>,
        gt: &GroundTruth<Self>,
        weight: f32,
        d_rendered: &mut Vec<f32>,
        loss: &mut Vec<f32>,
        slot: usize,
        accumulate: bool,
    ) -> Result<()> {
        let c = gt.channels;
        let v = gt.pixels.len;
        check_min("pixel_loss", "rendered", rendered.len(), v * c)?;
        check_min("pixel_loss", "d_rendered", d_rendered.len(), v * c)?;
        if slot >= loss.len() {
            return Err(DeviceError::shape(
                "pixel_loss",
                format!("slot {slot} outside {} loss slots", loss.len()),
            ));
        }
        let hw = gt.pixels.grid.pixel_count();
        let (mask, table) = (&gt.mask[..], &gt.table[..]);
        let scales = optim::LossScales::new(kind, c, hw, weight);
        let mut sums = (0.0f64, 0.0f64);
        for (i, &m) in mask.iter().enumerate() {
            let m = m as usize;
            scales.row(
                &rendered[i * c..i * c + c],
                &table[m * c..m * c + c],
                &mut d_rendered[i * c..i * c + c],
                &mut sums,
            );
        }
        let value = scales.value(sums, weight) as f32;
        if accumulate {
            loss[slot] += value;
        } else {
            loss[slot] = value;
        }
        Ok(())
    }

    fn run_op(&self, op: &dyn DeviceOp, items: usize, args: &mut [OpArg<'_, Self>]) -> Result<()> {
        lsplat_device::op::check_call(op, items, args)?;
        let host = args.iter_mut().map(|a| match a {
            OpArg::F32(b) => HostArg::F32(b.as_slice()),
            OpArg::F32Mut(b) => HostArg::F32Mut(b.as_mut_slice()),
            OpArg::U32(b) => HostArg::U32(b.as_slice()),
            OpArg::U32Mut(b) => HostArg::U32Mut(b.as_mut_slice()),
            OpArg::F64(b) => HostArg::F64(b.as_slice()),
            OpArg::F64Mut(b) => HostArg::F64Mut(b.as_mut_slice()),
            OpArg::Scalar(s) => HostArg::Scalar(*s),
        });
        op.run_cpu(items, &mut HostArgs::new(op.name(), host), &self.workers)
    }

    fn adam_step(
        &self,
        params: &mut Vec<f32>,
        grads: &Vec<f32>,
        m: &mut Vec<f32>,
        v: &mut Vec<f32>,
        hp: &AdamParams,
    ) -> Result<()> {
        let n = params.len();
        check("adam_step", "grads", grads.len(), n)?;
        check("adam_step", "m", m.len(), n)?;
        check("adam_step", "v", v.len(), n)?;
        optim::adam(&self.workers, params, grads, m, v, hp);
        Ok(())
    }
}
