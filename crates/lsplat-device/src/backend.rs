use lsplat_core::config::{LossKind, WeightPrecision};
use lsplat_core::{Gaussians, TileGrid};

use crate::{
    AdamParams, CameraParams, Element, GroundTruth, MemoryInfo, OperatorStats, PixelSet, Result,
};

/// The op set of a device.
///
/// Conventions shared by every op:
/// - Feature matrices are row-major `[rows, channels]` (`channels` = C).
/// - Per-pixel buffers follow the tile-major order of their [`PixelSet`]; they may be
///   longer than `len · C` (buffers sized for the largest camera), and elements
///   past `len · C` are neither read nor written.
/// - Compositing is front to back with the constants of `lsplat_core::constants`:
///   a pair is skipped when α < 1/255, α is clamped to 0.99, and a pixel stops
///   *before* the pair that would bring its transmittance to ≤ 1e-4. There is no
///   background term.
/// - Ops named `*_backward` / `spmm_t` / `spmm_t_sparse` **accumulate** into their
///   output; every other op overwrites its output.
pub trait Backend: Send + Sync + Sized + 'static {
    /// A typed device buffer.
    type Buf<T: Element>: Send + Sync + 'static;
    /// Frozen geometry resident on the device.
    type Geometry: Send + Sync + 'static;
    /// Projected 2D splats of one camera.
    type Projection: Default + Send + Sync + 'static;
    /// Tile lists of one camera, sorted by (tile, depth).
    type Bins: Default + Send + Sync + 'static;
    /// The cached sparse operator W (valid-pixel rows) of one camera.
    type Operator: Send + Sync + 'static;

    /// Human-readable description (device name, threads).
    fn describe(&self) -> String;

    /// Most channels one `rasterize`, `rasterize_backward`, `spmm` or `spmm_t` call
    /// (and their sparse-input forms) takes; callers with more split them (see
    /// `lsplat_device::channel_chunks`).
    fn max_channels(&self) -> usize {
        1024
    }

    /// A zeroed buffer of `len` elements.
    fn alloc<T: Element>(&self, len: usize) -> Result<Self::Buf<T>>;
    /// A buffer holding a copy of `data`.
    fn upload<T: Element>(&self, data: &[T]) -> Result<Self::Buf<T>>;
    /// Copies a buffer to the host (waits for the device).
    fn download<T: Element>(&self, buf: &Self::Buf<T>) -> Result<Vec<T>>;
    /// Copies a buffer into `out` (same length; waits for the device). Unlike
    /// [`Backend::download`] it allocates nothing: for per-step host exchanges such as
    /// a host all-reduce.
    fn download_into<T: Element>(&self, buf: &Self::Buf<T>, out: &mut [T]) -> Result<()> {
        check_same_len("download_into", Self::buf_len(buf), out.len())?;
        out.copy_from_slice(&self.download(buf)?);
        Ok(())
    }
    /// The buffer's elements where the host can read them in place (a backend whose
    /// buffers live in host memory), without a copy; `None` elsewhere (callers then
    /// use [`Backend::download_into`]).
    fn host_view<'b, T: Element>(&self, _buf: &'b Self::Buf<T>) -> Option<&'b [T]> {
        None
    }
    /// The buffer's elements on the host: lent in place where [`Backend::host_view`]
    /// can, else downloaded into `scratch` (resized to fit; no allocation once it is
    /// large enough).
    fn read_host<'b, T: Element>(
        &self,
        buf: &'b Self::Buf<T>,
        scratch: &'b mut Vec<T>,
    ) -> Result<&'b [T]> {
        if let Some(v) = self.host_view(buf) {
            return Ok(v);
        }
        scratch.resize(Self::buf_len(buf), T::default());
        self.download_into(buf, scratch)?;
        Ok(scratch)
    }
    /// Overwrites a buffer with `data` (same length), allocating nothing.
    fn upload_into<T: Element>(&self, buf: &mut Self::Buf<T>, data: &[T]) -> Result<()> {
        check_same_len("upload_into", Self::buf_len(buf), data.len())?;
        *buf = self.upload(data)?;
        Ok(())
    }
    /// Number of elements of a buffer.
    fn buf_len<T: Element>(buf: &Self::Buf<T>) -> usize;
    /// Sets every element to `value`.
    fn fill<T: Element>(&self, buf: &mut Self::Buf<T>, value: T) -> Result<()>;
    /// Waits until all queued work is done.
    fn synchronize(&self) -> Result<()>;
    /// Free and total memory, where the device can tell.
    fn memory(&self) -> Option<MemoryInfo>;
    /// Measured read bandwidth of the device's memory in bytes per second, where the
    /// backend can measure it (takes a moment: for benchmarks).
    fn read_bandwidth(&self) -> Option<f64> {
        None
    }

    /// Makes the geometry resident.
    fn upload_geometry(&self, gaussians: &Gaussians) -> Result<Self::Geometry>;
    /// EWA projection of every Gaussian for `camera` (culling, conics, tile rects).
    fn project(
        &self,
        geometry: &Self::Geometry,
        camera: &CameraParams,
        grid: TileGrid,
        out: &mut Self::Projection,
    ) -> Result<()>;
    /// Tile binning and sort by (tile, depth).
    fn bin_and_sort(
        &self,
        projection: &Self::Projection,
        grid: TileGrid,
        out: &mut Self::Bins,
    ) -> Result<()>;
    /// Direct C-channel compositing of `features` (`[N, C]`) at `pixels`; writes
    /// `out` (`[pixels.len, C]`).
    fn rasterize(
        &self,
        projection: &Self::Projection,
        bins: &Self::Bins,
        pixels: &PixelSet<Self>,
        features: &Self::Buf<f32>,
        channels: usize,
        out: &mut Self::Buf<f32>,
    ) -> Result<()>;
    /// Feature-only backward of [`Backend::rasterize`]: `d_features += Wᵀ·d_out`
    /// through the same weights (no geometry gradients).
    fn rasterize_backward(
        &self,
        projection: &Self::Projection,
        bins: &Self::Bins,
        pixels: &PixelSet<Self>,
        d_out: &Self::Buf<f32>,
        channels: usize,
        d_features: &mut Self::Buf<f32>,
    ) -> Result<()>;
    /// Builds the operator W for `pixels` (CSR rows front to back, plus whatever the
    /// backend needs for the transposed product) with the rasterizer's exact rules.
    fn build_operator(
        &self,
        projection: &Self::Projection,
        bins: &Self::Bins,
        pixels: &PixelSet<Self>,
        gaussians: usize,
        precision: WeightPrecision,
    ) -> Result<Self::Operator>;
    /// Size of an operator.
    fn operator_stats(&self, op: &Self::Operator) -> OperatorStats;
    /// The same operator read from a file written in `dir` (`stem` names it) and
    /// mapped into memory, so it holds almost no memory and its products give the
    /// same bits; `None` where the backend cannot spill. The disk's free space is
    /// checked before writing (a full disk is a [`DeviceError::Spill`] saying so).
    /// With `probe`, also the disk's read bandwidth in bytes per second, measured on
    /// the file.
    fn spill_operator(
        &self,
        op: &Self::Operator,
        dir: &std::path::Path,
        stem: &str,
        probe: bool,
    ) -> Result<Option<(Self::Operator, Option<f64>)>> {
        let _ = (op, dir, stem, probe);
        Ok(None)
    }
    /// Bytes held by a projection and its bins (the `geometry` cache level).
    fn geometry_cache_bytes(&self, projection: &Self::Projection, bins: &Self::Bins) -> usize;
    /// `out = W·x` (`x`: `[N, C]`, `out`: `[rows, C]`).
    fn spmm(
        &self,
        op: &Self::Operator,
        x: &Self::Buf<f32>,
        channels: usize,
        out: &mut Self::Buf<f32>,
    ) -> Result<()>;
    /// `d_x += Wᵀ·d_out`.
    fn spmm_t(
        &self,
        op: &Self::Operator,
        d_out: &Self::Buf<f32>,
        channels: usize,
        d_x: &mut Self::Buf<f32>,
    ) -> Result<()>;
    /// `out = W·x` where `x` (`[N, channels]`) is k-sparse: row g holds `val[g·k + j]`
    /// at column `idx[g·k + j]` (j < k) and zeros elsewhere (`idx`, `val`: `[N, k]`;
    /// `out`: `[rows, channels]`, overwritten). Pairs of a row with the same column
    /// add. Equals [`Backend::spmm`] of the scattered dense `x` (bitwise where a row
    /// has no repeated column) while reading only the `k` pairs of each Gaussian.
    ///
    /// `1 ≤ k ≤ max_channels`, channels as for `spmm`. A column `≥ channels` is an
    /// error where the backend checks it cheaply (the CPU); a GPU backend does not
    /// read the indices back (that would wait for the device) and skips such pairs
    /// instead: they add nothing.
    fn spmm_sparse(
        &self,
        op: &Self::Operator,
        idx: &Self::Buf<u32>,
        val: &Self::Buf<f32>,
        k: usize,
        channels: usize,
        out: &mut Self::Buf<f32>,
    ) -> Result<()>;
    /// The transpose of [`Backend::spmm_sparse`] restricted to its non-zeros:
    /// `d_val[g·k + j] += Σ_r W[r, g] · d_out[r·channels + idx[g·k + j]]` (`d_out`:
    /// `[rows, channels]`, `d_val`: `[N, k]`, accumulated). Equals [`Backend::spmm_t`]
    /// into a zeroed dense `d_x` gathered at `idx`. Checks as for `spmm_sparse`; on a
    /// GPU a pair whose column is `≥ channels` gets nothing.
    fn spmm_t_sparse(
        &self,
        op: &Self::Operator,
        idx: &Self::Buf<u32>,
        d_out: &Self::Buf<f32>,
        k: usize,
        channels: usize,
        d_val: &mut Self::Buf<f32>,
    ) -> Result<()>;
    /// LangSplat V1 normalisation of each row: `out_i = x_i / (|x_i| + 1e-9)`.
    fn normalize(
        &self,
        x: &Self::Buf<f32>,
        channels: usize,
        out: &mut Self::Buf<f32>,
    ) -> Result<()>;
    /// Backward of [`Backend::normalize`]: `d_x = J(x)ᵀ·d_out` (overwrites `d_x`).
    fn normalize_backward(
        &self,
        x: &Self::Buf<f32>,
        d_out: &Self::Buf<f32>,
        channels: usize,
        d_x: &mut Self::Buf<f32>,
    ) -> Result<()>;
    /// A loss over the valid pixels of `gt`. `rendered` is `[gt.pixels.len, C]`.
    /// Writes `d_rendered` (same shape) = `weight · ∂L/∂rendered` and adds
    /// `weight · L` to `loss[slot]` (or stores it when `accumulate` is false).
    /// The loss is normalised by the full image (`C·H·W` for L1, `H·W` for cosine).
    fn pixel_loss(
        &self,
        kind: LossKind,
        rendered: &Self::Buf<f32>,
        gt: &GroundTruth<Self>,
        weight: f32,
        d_rendered: &mut Self::Buf<f32>,
        loss: &mut Self::Buf<f32>,
        slot: usize,
        accumulate: bool,
    ) -> Result<()>;
    /// Zeroes groups of channels row by row: `values` is `[rows, groups·group_len]`,
    /// and group `g` of row `r` is set to 0 where `keep[r·groups + g] == 0` (used to
    /// apply per-level valid masks to products over a union of pixel sets).
    ///
    /// The default copies through the host; backends override it.
    fn mask_groups(
        &self,
        values: &mut Self::Buf<f32>,
        keep: &Self::Buf<u8>,
        rows: usize,
        groups: usize,
        group_len: usize,
    ) -> Result<()> {
        crate::check::at_least(
            "mask_groups",
            "values",
            Self::buf_len(values),
            rows * groups * group_len,
        )?;
        crate::check::at_least("mask_groups", "keep", Self::buf_len(keep), rows * groups)?;
        let keep = self.download(keep)?;
        let mut host = self.download(values)?;
        crate::host::mask_groups(&mut host, &keep, rows, groups, group_len);
        *values = self.upload(&host)?;
        Ok(())
    }

    /// One camera's forward, per-pixel loss and backward through its cached operator
    /// (whose rows are `gt.pixels`): `F = W·x`, the loss of [`Backend::pixel_loss`]
    /// (`weight · L` into `loss[slot]`, added when `accumulate`), and
    /// `d_x += Wᵀ·(weight · ∂L/∂F)`. `rendered` and `d_rendered` are work buffers
    /// (`[gt.pixels.len, C]` or longer) whose contents afterwards are unspecified.
    ///
    /// The default runs the three ops one after the other; a backend may fuse them
    /// into one pass over the operator. Results equal the default's to float rounding
    /// (the order of the sums in `Wᵀ` differs).
    fn operator_loss_step(
        &self,
        kind: LossKind,
        op: &Self::Operator,
        x: &Self::Buf<f32>,
        gt: &GroundTruth<Self>,
        weight: f32,
        work: (&mut Self::Buf<f32>, &mut Self::Buf<f32>),
        d_x: &mut Self::Buf<f32>,
        loss: &mut Self::Buf<f32>,
        slot: usize,
        accumulate: bool,
    ) -> Result<()> {
        let (rendered, d_rendered) = work;
        self.spmm(op, x, gt.channels, rendered)?;
        self.pixel_loss(
            kind, rendered, gt, weight, d_rendered, loss, slot, accumulate,
        )?;
        self.spmm_t(op, d_rendered, gt.channels, d_x)
    }

    /// Runs a plugin's op (see [`crate::op`]) over `items` work items: its kernel on a
    /// GPU, its native implementation on the CPU. The default copies the buffers
    /// through the host and runs the CPU implementation on one thread.
    fn run_op(
        &self,
        op: &dyn crate::op::DeviceOp,
        items: usize,
        args: &mut [crate::op::OpArg<'_, Self>],
    ) -> Result<()> {
        crate::op::run_through_host(self, op, items, args)
    }

    /// Makes `op` ready to run: GPU backends compile (and cache) its kernel, so a
    /// kernel that does not compile is reported before any step runs. The default
    /// has nothing to prepare.
    fn prepare_op(&self, op: &dyn crate::op::DeviceOp) -> Result<()> {
        let _ = op;
        Ok(())
    }

    /// One fused Adam step over a parameter buffer.
    fn adam_step(
        &self,
        params: &mut Self::Buf<f32>,
        grads: &Self::Buf<f32>,
        m: &mut Self::Buf<f32>,
        v: &mut Self::Buf<f32>,
        hp: &AdamParams,
    ) -> Result<()>;
}

/// The error of a host copy whose two sides differ in length.
pub fn check_same_len(op: &'static str, buf: usize, host: usize) -> Result<()> {
    if buf == host {
        Ok(())
    } else {
        Err(crate::DeviceError::shape(
            op,
            format!("the buffer holds {buf} elements, the host slice {host}"),
        ))
    }
}
