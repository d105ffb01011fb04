//! `impl Backend for GpuBackend<R>`: shape checks, then the kernels of each module.

use lsplat_core::config::{LossKind, WeightPrecision};
use lsplat_core::{Gaussians, TileGrid};
use lsplat_device::check::{at_least as check_min, exact as check};
use lsplat_device::{
    AdamParams, Backend, CameraParams, DeviceError, DeviceOp, Element, GroundTruth, MemoryInfo,
    OpArg, OperatorStats, PixelSet, Result,
};

use crate::buf::{self, GpuBuf};
use crate::geometry::{self, GpuBins, GpuGeometry, GpuProjection};
use crate::operator::{self, GpuOperator};
use crate::raster::{self, check_channels, parts};
use crate::runtime::Runtime;
use crate::{GpuBackend, ops};

/// `k` (column, value) pairs per Gaussian of a sparse-input product.
fn check_k(op: &'static str, k: usize) -> Result<()> {
    if (1..=raster::MAX_CHANNELS).contains(&k) {
        Ok(())
    } else {
        Err(DeviceError::shape(
            op,
            format!(
                "k = {k} non-zeros per Gaussian (supported: 1..={})",
                raster::MAX_CHANNELS
            ),
        ))
    }
}

impl<R: Runtime> Backend for GpuBackend<R> {
    type Buf<T: Element> = GpuBuf<R, T>;
    type Geometry = GpuGeometry<R>;
    type Projection = GpuProjection<R>;
    type Bins = GpuBins<R>;
    type Operator = GpuOperator<R>;

    fn describe(&self) -> String {
        let rt = self.gpu.runtime();
        format!(
            "{}: {} ({}, warp {})",
            R::NAME,
            rt.device_name(),
            rt.arch(),
            rt.warp_size()
        )
    }

    fn max_channels(&self) -> usize {
        raster::MAX_CHANNELS
    }

    fn alloc<T: Element>(&self, len: usize) -> Result<GpuBuf<R, T>> {
        buf::alloc(&self.gpu, len)
    }

    fn upload<T: Element>(&self, data: &[T]) -> Result<GpuBuf<R, T>> {
        buf::upload(&self.gpu, data)
    }

    fn download<T: Element>(&self, b: &GpuBuf<R, T>) -> Result<Vec<T>> {
        buf::download(&self.gpu, b)
    }

    fn download_into<T: Element>(&self, b: &GpuBuf<R, T>, out: &mut [T]) -> Result<()> {
        buf::download_into(&self.gpu, b, out)
    }

    fn upload_into<T: Element>(&self, b: &mut GpuBuf<R, T>, data: &[T]) -> Result<()> {
        buf::upload_into(&self.gpu, b, data)
    }

    fn buf_len<T: Element>(b: &GpuBuf<R, T>) -> usize {
        b.len()
    }

    fn fill<T: Element>(&self, b: &mut GpuBuf<R, T>, value: T) -> Result<()> {
        buf::fill(&self.gpu, b, value)
    }

    fn synchronize(&self) -> Result<()> {
        self.gpu.runtime().synchronize()
    }

    fn memory(&self) -> Option<MemoryInfo> {
        self.gpu.runtime().memory()
    }

    /// Measured on CUDA and HIP devices; simt's kernels run far below the host's
    /// memory bandwidth, so a floor from it would say nothing (None).
    fn read_bandwidth(&self) -> Option<f64> {
        if R::NAME == "simt" {
            return None;
        }
        crate::algo::read_bandwidth(&self.gpu).ok()
    }

    fn upload_geometry(&self, gaussians: &Gaussians) -> Result<GpuGeometry<R>> {
        geometry::upload_geometry(&self.gpu, gaussians)
    }

    fn project(
        &self,
        geom: &GpuGeometry<R>,
        camera: &CameraParams,
        grid: TileGrid,
        out: &mut GpuProjection<R>,
    ) -> Result<()> {
        if (grid.width, grid.height) != (camera.width, camera.height) {
            return Err(DeviceError::shape(
                "project",
                "tile grid and camera sizes differ",
            ));
        }
        if !lsplat_kernels::TILE_SIZES.contains(&grid.tile_size) {
            return Err(DeviceError::shape(
                "project",
                format!("tile size {} (supported: 8, 16)", grid.tile_size),
            ));
        }
        geometry::project(&self.gpu, geom, camera, grid, out)
    }

    fn bin_and_sort(
        &self,
        proj: &GpuProjection<R>,
        grid: TileGrid,
        out: &mut GpuBins<R>,
    ) -> Result<()> {
        geometry::bin_and_sort(&self.gpu, proj, grid, out)
    }

    fn rasterize(
        &self,
        proj: &GpuProjection<R>,
        bins: &GpuBins<R>,
        set: &PixelSet<Self>,
        features: &GpuBuf<R, f32>,
        channels: usize,
        out: &mut GpuBuf<R, f32>,
    ) -> Result<()> {
        check_channels("rasterize", channels)?;
        let (p, b) = parts("rasterize", proj, bins, set)?;
        check("rasterize", "features", features.len(), p.n * channels)?;
        check_min("rasterize", "output", out.len(), set.len * channels)?;
        raster::rasterize(&self.gpu, p, b, set, features, channels, out)
    }

    fn rasterize_backward(
        &self,
        proj: &GpuProjection<R>,
        bins: &GpuBins<R>,
        set: &PixelSet<Self>,
        d_out: &GpuBuf<R, f32>,
        channels: usize,
        d_features: &mut GpuBuf<R, f32>,
    ) -> Result<()> {
        check_channels("rasterize_backward", channels)?;
        let (p, b) = parts("rasterize_backward", proj, bins, set)?;
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
            p.n * channels,
        )?;
        raster::rasterize_backward(&self.gpu, p, b, set, d_out, channels, d_features)
    }

    fn build_operator(
        &self,
        proj: &GpuProjection<R>,
        bins: &GpuBins<R>,
        set: &PixelSet<Self>,
        gaussians: usize,
        precision: WeightPrecision,
    ) -> Result<GpuOperator<R>> {
        let (p, b) = parts("build_operator", proj, bins, set)?;
        check("build_operator", "projection", p.n, gaussians)?;
        operator::build(&self.gpu, p, b, set, precision)
    }

    fn operator_stats(&self, op: &GpuOperator<R>) -> OperatorStats {
        OperatorStats {
            rows: op.rows,
            nnz: op.nnz,
            bytes: op.bytes(),
            resident_bytes: op.bytes(),
            pass_bytes: op.pass_bytes(),
        }
    }

    fn geometry_cache_bytes(&self, proj: &GpuProjection<R>, bins: &GpuBins<R>) -> usize {
        let p = proj
            .data
            .as_ref()
            .map_or(0, |d| d.splats.bytes() + d.rects.bytes());
        let b = bins
            .data
            .as_ref()
            .map_or(0, |d| d.tile_offsets.bytes() + d.sorted.bytes());
        p + b
    }

    fn spmm(
        &self,
        op: &GpuOperator<R>,
        x: &GpuBuf<R, f32>,
        channels: usize,
        out: &mut GpuBuf<R, f32>,
    ) -> Result<()> {
        check_channels("spmm", channels)?;
        check("spmm", "x", x.len(), op.cols * channels)?;
        check_min("spmm", "output", out.len(), op.rows * channels)?;
        operator::product(
            &self.gpu,
            &op.row_ptr,
            &op.col_idx,
            &op.row_w,
            &op.row_long,
            x,
            channels,
            out,
            false,
        )
    }

    fn spmm_t(
        &self,
        op: &GpuOperator<R>,
        d_out: &GpuBuf<R, f32>,
        channels: usize,
        d_x: &mut GpuBuf<R, f32>,
    ) -> Result<()> {
        check_channels("spmm_t", channels)?;
        check_min("spmm_t", "d_out", d_out.len(), op.rows * channels)?;
        check("spmm_t", "d_x", d_x.len(), op.cols * channels)?;
        operator::product(
            &self.gpu,
            &op.col_ptr,
            &op.row_idx,
            &op.col_w,
            &op.col_long,
            d_out,
            channels,
            d_x,
            true,
        )
    }

    /// Checks shapes and `k` but not the columns: that would read `idx` back and wait
    /// for the device. The kernel skips a column `≥ channels` (it adds nothing).
    fn spmm_sparse(
        &self,
        op: &GpuOperator<R>,
        idx: &GpuBuf<R, u32>,
        val: &GpuBuf<R, f32>,
        k: usize,
        channels: usize,
        out: &mut GpuBuf<R, f32>,
    ) -> Result<()> {
        check_channels("spmm_sparse", channels)?;
        check_k("spmm_sparse", k)?;
        check("spmm_sparse", "idx", idx.len(), op.cols * k)?;
        check("spmm_sparse", "val", val.len(), op.cols * k)?;
        check_min("spmm_sparse", "output", out.len(), op.rows * channels)?;
        operator::product_sparse(&self.gpu, op, idx, val, k, channels, out)
    }

    /// Checks shapes and `k` but not the columns (see `spmm_sparse`): a pair whose
    /// column is `≥ channels` gets nothing.
    fn spmm_t_sparse(
        &self,
        op: &GpuOperator<R>,
        idx: &GpuBuf<R, u32>,
        d_out: &GpuBuf<R, f32>,
        k: usize,
        channels: usize,
        d_val: &mut GpuBuf<R, f32>,
    ) -> Result<()> {
        check_channels("spmm_t_sparse", channels)?;
        check_k("spmm_t_sparse", k)?;
        check("spmm_t_sparse", "idx", idx.len(), op.cols * k)?;
        check_min("spmm_t_sparse", "d_out", d_out.len(), op.rows * channels)?;
        check("spmm_t_sparse", "d_val", d_val.len(), op.cols * k)?;
        operator::product_t_sparse(&self.gpu, op, idx, d_out, k, channels, d_val)
    }

    fn normalize(
        &self,
        x: &GpuBuf<R, f32>,
        channels: usize,
        out: &mut GpuBuf<R, f32>,
    ) -> Result<()> {
        check_channels("normalize", channels)?;
        check("normalize", "output", out.len(), x.len())?;
        ops::normalize(&self.gpu, x, channels, out)
    }

    fn normalize_backward(
        &self,
        x: &GpuBuf<R, f32>,
        d_out: &GpuBuf<R, f32>,
        channels: usize,
        d_x: &mut GpuBuf<R, f32>,
    ) -> Result<()> {
        check_channels("normalize_backward", channels)?;
        check("normalize_backward", "d_out", d_out.len(), x.len())?;
        check("normalize_backward", "d_x", d_x.len(), x.len())?;
        ops::normalize_backward(&self.gpu, x, d_out, channels, d_x)
    }

    fn pixel_loss(
        &self,
        kind: LossKind,
        rendered: &GpuBuf<R, f32>,
        gt: &GroundTruth<Self>,
        weight: f32,
        d_rendered: &mut GpuBuf<R, f32>,
        loss: &mut GpuBuf<R, f32>,
        slot: usize,
        accumulate: bool,
    ) -> Result<()> {
        let (c, v) = (gt.channels, gt.pixels.len);
        check_channels("pixel_loss", c)?;
        check_min("pixel_loss", "rendered", rendered.len(), v * c)?;
        check_min("pixel_loss", "d_rendered", d_rendered.len(), v * c)?;
        check("pixel_loss", "mask", gt.mask.len(), v)?;
        check("pixel_loss", "table", gt.table.len(), gt.rows * c)?;
        if slot >= loss.len() {
            return Err(DeviceError::shape(
                "pixel_loss",
                format!("slot {slot} outside {} loss slots", loss.len()),
            ));
        }
        ops::pixel_loss(
            &self.gpu, kind, rendered, gt, weight, d_rendered, loss, slot, accumulate,
        )
    }

    fn mask_groups(
        &self,
        values: &mut GpuBuf<R, f32>,
        keep: &GpuBuf<R, u8>,
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
        ops::mask_groups(&self.gpu, values, keep, rows, groups, group_len)
    }

    fn run_op(&self, op: &dyn DeviceOp, items: usize, args: &mut [OpArg<'_, Self>]) -> Result<()> {
        ops::plugin_op(&self.gpu, op, items, args)
    }

    fn prepare_op(&self, op: &dyn DeviceOp) -> Result<()> {
        ops::plugin_function(&self.gpu, op).map(|_| ())
    }

    fn adam_step(
        &self,
        params: &mut GpuBuf<R, f32>,
        grads: &GpuBuf<R, f32>,
        m: &mut GpuBuf<R, f32>,
        v: &mut GpuBuf<R, f32>,
        hp: &AdamParams,
    ) -> Result<()> {
        let n = params.len();
        check("adam_step", "grads", grads.len(), n)?;
        check("adam_step", "m", m.len(), n)?;
        check("adam_step", "v", v.len(), n)?;
        ops::adam(&self.gpu, params, grads, m, v, hp)
    }
}
