use lsplat_core::{Camera, TileGrid};

use crate::Backend;

/// Plain element types that device buffers hold.
pub trait Element: bytemuck::Pod + Default + Send + Sync + std::fmt::Debug + 'static {}

impl Element for f32 {}
impl Element for f64 {}
impl Element for u32 {}
impl Element for i32 {}
impl Element for u16 {}
impl Element for u8 {}
impl Element for u64 {}
impl Element for half::f16 {}
impl Element for half::bf16 {}

/// A camera as the kernels see it: row-major world-to-camera `[R | t]`, intrinsics,
/// image size and clip planes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CameraParams {
    /// Row-major 3×4 `[R | t]`.
    pub view: [f32; 12],
    /// Focal length x.
    pub fx: f32,
    /// Focal length y.
    pub fy: f32,
    /// Principal point x.
    pub cx: f32,
    /// Principal point y.
    pub cy: f32,
    /// Image width.
    pub width: u32,
    /// Image height.
    pub height: u32,
    /// Near plane.
    pub near: f32,
    /// Far plane.
    pub far: f32,
}

impl CameraParams {
    /// Kernel parameters of `cam` with the given clip planes.
    pub fn new(cam: &Camera, near: f32, far: f32) -> Self {
        let r = cam.rotation;
        let t = cam.translation;
        CameraParams {
            view: [
                r.x_axis.x, r.y_axis.x, r.z_axis.x, t.x, //
                r.x_axis.y, r.y_axis.y, r.z_axis.y, t.y, //
                r.x_axis.z, r.y_axis.z, r.z_axis.z, t.z,
            ],
            fx: cam.fx,
            fy: cam.fy,
            cx: cam.cx,
            cy: cam.cy,
            width: cam.width,
            height: cam.height,
            near,
            far,
        }
    }
}

/// A set of pixels of one image in tile-major order (see [`TileGrid`]); every tile
/// owns the contiguous range `tile_offsets[t]..tile_offsets[t + 1]`. Per-pixel
/// buffers (rendered values, gradients, operator rows) follow this order.
pub struct PixelSet<B: Backend> {
    /// The tile grid of the image.
    pub grid: TileGrid,
    /// Pixel indices `y·width + x`.
    pub pixels: B::Buf<u32>,
    /// Offsets per tile, `tile_count + 1` entries.
    pub tile_offsets: B::Buf<u32>,
    /// Number of pixels.
    pub len: usize,
}

impl<B: Backend> PixelSet<B> {
    /// Uploads host pixel lists (as made by [`TileGrid::select_pixels`]).
    pub fn upload(
        dev: &B,
        grid: TileGrid,
        pixels: &[u32],
        tile_offsets: &[u32],
    ) -> crate::Result<Self> {
        if tile_offsets.len() != grid.tile_count() + 1
            || *tile_offsets.last().unwrap_or(&0) as usize != pixels.len()
        {
            return Err(crate::DeviceError::shape(
                "PixelSet::upload",
                "tile offsets do not match the grid and pixels",
            ));
        }
        Ok(PixelSet {
            grid,
            pixels: dev.upload(pixels)?,
            tile_offsets: dev.upload(tile_offsets)?,
            len: pixels.len(),
        })
    }

    /// Every pixel of the image.
    pub fn full(dev: &B, grid: TileGrid) -> crate::Result<Self> {
        let (p, o) = grid.all_pixels();
        Self::upload(dev, grid, &p, &o)
    }
}

/// Device-resident ground truth of one camera at the trained level: the valid pixels
/// (tile-major), each pixel's row in the mask feature table, and the table.
pub struct GroundTruth<B: Backend> {
    /// The valid pixels.
    pub pixels: PixelSet<B>,
    /// Row of `table` for each valid pixel.
    pub mask: B::Buf<u32>,
    /// Mask features, `[rows, channels]`.
    pub table: B::Buf<f32>,
    /// Rows in `table`.
    pub rows: usize,
    /// Channels per feature.
    pub channels: usize,
}

impl<B: Backend> GroundTruth<B> {
    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        self.pixels.len * 12
            + (self.pixels.grid.tile_count() + 1) * 4
            + self.rows * self.channels * 4
    }
}

/// Adam hyper-parameters for one step (PyTorch's formulation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamParams {
    /// Learning rate.
    pub lr: f32,
    /// β₁.
    pub beta1: f32,
    /// β₂.
    pub beta2: f32,
    /// ε (added to √v̂).
    pub eps: f32,
    /// 1-based step number (for bias correction).
    pub step: u32,
    /// Gradients are multiplied by this first (1/batch for a mean).
    pub grad_scale: f32,
}

/// Size of a cached operator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OperatorStats {
    /// Rows (valid pixels).
    pub rows: usize,
    /// Non-zero weights.
    pub nnz: usize,
    /// Bytes held (every orientation kept, indices and weights).
    pub bytes: usize,
    /// Bytes of it in memory: `bytes`, or only its small tables once spilled to a
    /// file mapped into memory ([`crate::Backend::spill_operator`]).
    pub resident_bytes: usize,
    /// Bytes one product (`spmm`, `spmm_t` or the fused step) reads from the operator.
    pub pass_bytes: usize,
}

/// Device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Free bytes.
    pub free: u64,
    /// Total bytes.
    pub total: u64,
}
