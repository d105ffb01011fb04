//! The stand-in for a backend that is not compiled in. It cannot be constructed
//! outside this crate, and every op reports that the backend is missing.

use lsplat_core::config::{LossKind, WeightPrecision};
use lsplat_core::{Gaussians, TileGrid};
use lsplat_device::{
    AdamParams, Backend, CameraParams, DeviceError, Element, GroundTruth, MemoryInfo,
    OperatorStats, PixelSet, Result,
};

/// A backend that is not compiled into this binary.
pub struct StubBackend {
    name: &'static str,
}

impl StubBackend {
    fn missing<T>(&self) -> Result<T> {
        Err(DeviceError::NotCompiled { backend: self.name })
    }
}

impl Backend for StubBackend {
    type Buf<T: Element> = Vec<T>;
    type Geometry = ();
    type Projection = ();
    type Bins = ();
    type Operator = ();

    fn describe(&self) -> String {
        format!("{} (not compiled in)", self.name)
    }
    fn alloc<T: Element>(&self, _: usize) -> Result<Vec<T>> {
        self.missing()
    }
    fn upload<T: Element>(&self, _: &[T]) -> Result<Vec<T>> {
        self.missing()
    }
    fn download<T: Element>(&self, _: &Vec<T>) -> Result<Vec<T>> {
        self.missing()
    }
    fn buf_len<T: Element>(buf: &Vec<T>) -> usize {
        buf.len()
    }
    fn fill<T: Element>(&self, _: &mut Vec<T>, _: T) -> Result<()> {
        self.missing()
    }
    fn synchronize(&self) -> Result<()> {
        self.missing()
    }
    fn memory(&self) -> Option<MemoryInfo> {
        None
    }
    fn upload_geometry(&self, _: &Gaussians) -> Result<()> {
        self.missing()
    }
    fn project(&self, _: &(), _: &CameraParams, _: TileGrid, _: &mut ()) -> Result<()> {
        self.missing()
    }
    fn bin_and_sort(&self, _: &(), _: TileGrid, _: &mut ()) -> Result<()> {
        self.missing()
    }
    fn rasterize(
        &self,
        _: &(),
        _: &(),
        _: &PixelSet<Self>,
        _: &Vec<f32>,
        _: usize,
        _: &mut Vec<f32>,
    ) -> Result<()> {
        self.missing()
    }
    fn rasterize_backward(
        &self,
        _: &(),
        _: &(),
        _: &PixelSet<Self>,
        _: &Vec<f32>,
        _: usize,
        _: &mut Vec<f32>,
    ) -> Result<()> {
        self.missing()
    }
    fn build_operator(
        &self,
        _: &(),
        _: &(),
        _: &PixelSet<Self>,
        _: usize,
        _: WeightPrecision,
    ) -> Result<()> {
        self.missing()
    }
    fn operator_stats(&self, _: &()) -> OperatorStats {
        OperatorStats::default()
    }
    fn geometry_cache_bytes(&self, _: &(), _: &()) -> usize {
        0
    }
    fn spmm(&self, _: &(), _: &Vec<f32>, _: usize, _: &mut Vec<f32>) -> Result<()> {
        self.missing()
    }
    fn spmm_t(&self, _: &(), _: &Vec<f32>, _: usize, _: &mut Vec<f32>) -> Result<()> {
        self.missing()
    }
    fn spmm_sparse(
        &self,
        _: &(),
        _: &Vec<u32>,
        _: &Vec<f32>,
        _: usize,
        _: usize,
        _: &mut Vec<f32>,
    ) -> Result<()> {
        self.missing()
    }
    fn spmm_t_sparse(
        &self,
        _: &(),
        _: &Vec<u32>,
        _: &Vec<f32>,
        _: usize,
        _: usize,
        _: &mut Vec<f32>,
    ) -> Result<()> {
        self.missing()
    }
    fn normalize(&self, _: &Vec<f32>, _: usize, _: &mut Vec<f32>) -> Result<()> {
        self.missing()
    }
    fn normalize_backward(
        &self,
        _: &Vec<f32>,
        _: &Vec<f32>,
        _: usize,
        _: &mut Vec<f32>,
    ) -> Result<()> {
        self.missing()
    }
    fn pixel_loss(
        &self,
        _: LossKind,
        _: &Vec<f32>,
        _: &GroundTruth<Self>,
        _: f32,
        _: &mut Vec<f32>,
        _: &mut Vec<f32>,
        _: usize,
        _: bool,
    ) -> Result<()> {
        self.missing()
    }
    fn adam_step(
        &self,
        _: &mut Vec<f32>,
        _: &Vec<f32>,
        _: &mut Vec<f32>,
        _: &mut Vec<f32>,
        _: &AdamParams,
    ) -> Result<()> {
        self.missing()
    }
}
