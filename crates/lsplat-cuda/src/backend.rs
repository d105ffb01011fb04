//! `impl Backend for CudaBackend`: shape checks, then the kernels of each module.

use lsplat_core::config::{LossKind, WeightPrecision};
use lsplat_core::{Gaussians, TileGrid};
use lsplat_device::check::{at_least as check_min, exact as check};
use lsplat_device::{
    AdamParams, Backend, CameraParams, DeviceError, Element, GroundTruth, MemoryInfo,
    OperatorStats, PixelSet, Result,
};

use crate::buf::{self, CudaBuf};
use crate::geometry::{self, CudaBins, CudaGeometry, CudaProjection};
use crate::operator::{self, CudaOperator};
use crate::raster::{self, check_channels, parts};
use crate::{CudaBackend, gpu, ops};

impl Backend for CudaBackend {
    type Buf<T: Element> = CudaBuf<T>;
    type Geometry = CudaGeometry;
    type Projection = CudaProjection;
    type Bins = CudaBins;
    type Operator = CudaOperator;

    fn describe(&self) -> String {
        format!("cuda:{} {} ({})", self.ordinal, self.name, self.gpu.arch)
    }

    fn alloc<T: Element>(&self, len: usize) -> Result<CudaBuf<T>> {
        buf::alloc(&self.gpu, len)
    }

    fn upload<T: Element>(&self, data: &[T]) -> Result<CudaBuf<T>> {
        buf::upload(&self.gpu, data)
    }

    fn download<T: Element>(&self, b: &CudaBuf<T>) -> Result<Vec<T>> {
        buf::download(&self.gpu, b)
    }

    fn buf_len<T: Element>(b: &CudaBuf<T>) -> usize {
        b.len()
    }

    fn fill<T: Element>(&self, b: &mut CudaBuf<T>, value: T) -> Result<()> {
        buf::fill(&self.gpu, b, value)
    }

    fn synchronize(&self) -> Result<()> {
        self.gpu.stream.synchronize().map_err(gpu::drv)
    }

    fn memory(&self) -> Option<MemoryInfo> {
        let (free, total) = self.gpu.ctx.mem_get_info().ok()?;
        Some(MemoryInfo {
            free: free as u64,
            total: total as u64,
        })
    }

    fn upload_geometry(&self, gaussians: &Gaussians) -> Result<CudaGeometry> {
        geometry::upload_geometry(&self.gpu, gaussians)
    }

    fn project(
        &self,
        geom: &CudaGeometry,
        camera: &CameraParams,
        grid: TileGrid,
        out: &mut CudaProjection,
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
        proj: &CudaProjection,
        grid: TileGrid,
        out: &mut CudaBins,
    ) -> Result<()> {
        geometry::bin_and_sort(&self.gpu, proj, grid, out)
    }

    fn rasterize(
        &self,
        proj: &CudaProjection,
        bins: &CudaBins,
        set: &PixelSet<Self>,
        features: &CudaBuf<f32>,
        channels: usize,
        out: &mut CudaBuf<f32>,
    ) -> Result<()> {
        check_channels("rasterize", channels)?;
        let (p, b) = parts("rasterize", proj, bins, set)?;
        check("rasterize", "features", features.len(), p.n * channels)?;
        check_min("rasterize", "output", out.len(), set.len * channels)?;
        raster::rasterize(&self.gpu, p, b, set, features, channels, out)
    }

    fn rasterize_backward(
        &self,
        proj: &CudaProjection,
        bins: &CudaBins,
        set: &PixelSet<Self>,
        d_out: &CudaBuf<f32>,
        channels: usize,
        d_features: &mut CudaBuf<f32>,
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
        proj: &CudaProjection,
        bins: &CudaBins,
        set: &PixelSet<Self>,
        gaussians: usize,
        precision: WeightPrecision,
    ) -> Result<CudaOperator> {
        let (p, b) = parts("build_operator", proj, bins, set)?;
        check("build_operator", "projection", p.n, gaussians)?;
        operator::build(&self.gpu, p, b, set, precision)
    }

    fn operator_stats(&self, op: &CudaOperator) -> OperatorStats {
        OperatorStats {
            rows: op.rows,
            nnz: op.nnz,
            bytes: op.bytes(),
        }
    }

    fn geometry_cache_bytes(&self, proj: &CudaProjection, bins: &CudaBins) -> usize {
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
        op: &CudaOperator,
        x: &CudaBuf<f32>,
        channels: usize,
        out: &mut CudaBuf<f32>,
    ) -> Result<()> {
        check_channels("spmm", channels)?;
        check("spmm", "x", x.len(), op.cols * channels)?;
        check_min("spmm", "output", out.len(), op.rows * channels)?;
        operator::product(
            &self.gpu,
            &op.row_ptr,
            &op.col_idx,
            &op.row_w,
            x,
            channels,
            out,
            false,
        )
    }

    fn spmm_t(
        &self,
        op: &CudaOperator,
        d_out: &CudaBuf<f32>,
        channels: usize,
        d_x: &mut CudaBuf<f32>,
    ) -> Result<()> {
        check_channels("spmm_t", channels)?;
        check_min("spmm_t", "d_out", d_out.len(), op.rows * channels)?;
        check("spmm_t", "d_x", d_x.len(), op.cols * channels)?;
        operator::product(
            &self.gpu,
            &op.col_ptr,
            &op.row_idx,
            &op.col_w,
            d_out,
            channels,
            d_x,
            true,
        )
    }

    fn normalize(&self, x: &CudaBuf<f32>, channels: usize, out: &mut CudaBuf<f32>) -> Result<()> {
        check_channels("normalize", channels)?;
        check("normalize", "output", out.len(), x.len())?;
        ops::normalize(&self.gpu, x, channels, out)
    }

    fn normalize_backward(
        &self,
        x: &CudaBuf<f32>,
        d_out: &CudaBuf<f32>,
        channels: usize,
        d_x: &mut CudaBuf<f32>,
    ) -> Result<()> {
        check_channels("normalize_backward", channels)?;
        check("normalize_backward", "d_out", d_out.len(), x.len())?;
        check("normalize_backward", "d_x", d_x.len(), x.len())?;
        ops::normalize_backward(&self.gpu, x, d_out, channels, d_x)
    }

    fn pixel_loss(
        &self,
        kind: LossKind,
        rendered: &CudaBuf<f32>,
        gt: &GroundTruth<Self>,
        weight: f32,
        d_rendered: &mut CudaBuf<f32>,
        loss: &mut CudaBuf<f32>,
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

    fn adam_step(
        &self,
        params: &mut CudaBuf<f32>,
        grads: &CudaBuf<f32>,
        m: &mut CudaBuf<f32>,
        v: &mut CudaBuf<f32>,
        hp: &AdamParams,
    ) -> Result<()> {
        let n = params.len();
        check("adam_step", "grads", grads.len(), n)?;
        check("adam_step", "m", m.len(), n)?;
        check("adam_step", "v", v.len(), n)?;
        ops::adam(&self.gpu, params, grads, m, v, hp)
    }
}
