//! The device context shared by every op: the runtime, and the kernels compiled so far.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use lsplat_device::Result;
use lsplat_kernels::Kernel;

use crate::runtime::{KernelArgs, LaunchDims, Runtime};

type FamilyKey = (Kernel, u32, u32);

/// A runtime with its module and function caches.
pub struct Gpu<R: Runtime> {
    pub(crate) rt: Arc<R>,
    families: Mutex<HashMap<FamilyKey, Arc<R::Module>>>,
    sources: Mutex<HashMap<u64, Arc<R::Module>>>,
    functions: Mutex<HashMap<(FamilyKey, &'static str), R::Function>>,
    /// Plugin ops' kernels by (plugin, op) with their block size: a launch after the
    /// first builds no source, define list or label and hashes no source.
    pub(crate) plugin_fns: Mutex<HashMap<(&'static str, &'static str), (R::Function, u32)>>,
    /// Per-block partial sums of the loss kernels, kept between steps (grown only when
    /// a larger camera needs more), so a warm step allocates nothing.
    pub(crate) partials: Mutex<Option<crate::buf::GpuBuf<R, f64>>>,
    /// Per-kernel launch counts and device time, kept only under `LSPLAT_GPU_PROFILE=1`.
    profile: Option<Mutex<crate::profile::Profile>>,
    /// Whether SpMM sums narrow rows with a group of lanes (shuffles) rather than a
    /// thread per (row, channel): [`Runtime::CHEAP_SHUFFLES`] unless set otherwise.
    pub(crate) grouped_spmm: std::sync::atomic::AtomicBool,
    /// Rows with more entries than this get a block each in the grouped SpMM; read
    /// when an operator is built.
    pub(crate) spmm_long_min: std::sync::atomic::AtomicU32,
}

impl<R: Runtime> Gpu<R> {
    /// A context over `rt`.
    pub fn new(rt: R) -> Self {
        Gpu {
            rt: Arc::new(rt),
            families: Mutex::new(HashMap::new()),
            sources: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
            plugin_fns: Mutex::new(HashMap::new()),
            partials: Mutex::new(None),
            profile: crate::profile::Profile::requested().then(Default::default),
            grouped_spmm: R::CHEAP_SHUFFLES.into(),
            spmm_long_min: crate::operator::SPMM_LONG_MIN.into(),
        }
    }

    /// Runs `launch` (one kernel launch named `name`); under `LSPLAT_GPU_PROFILE=1` the
    /// device is synchronised before and after it and the time is added to `name`'s
    /// row of the table printed when the context is dropped.
    pub(crate) fn timed(&self, name: &str, launch: impl FnOnce() -> Result<()>) -> Result<()> {
        let Some(profile) = &self.profile else {
            return launch();
        };
        self.rt.synchronize()?;
        let start = std::time::Instant::now();
        launch()?;
        self.rt.synchronize()?;
        lock(profile).add(name, start.elapsed());
        Ok(())
    }

    /// The runtime.
    pub fn runtime(&self) -> &R {
        &self.rt
    }

    /// Kernel `name` of `kernel` compiled for `(tile_size, channels)` (ignored where the
    /// family does not depend on them); compiled on first use.
    pub fn function(
        &self,
        kernel: Kernel,
        tile_size: u32,
        channels: u32,
        name: &'static str,
    ) -> Result<R::Function> {
        let key: FamilyKey = (
            kernel,
            if kernel.uses_tile_size() {
                tile_size
            } else {
                16
            },
            if kernel.uses_channels() { channels } else { 1 },
        );
        if let Some(f) = lock(&self.functions).get(&(key, name)) {
            return Ok(f.clone());
        }
        let cached = lock(&self.families).get(&key).cloned();
        let module = match cached {
            Some(m) => m,
            None => {
                let label = format!("{} (tile {}, {} ch)", kernel.file_name(), key.1, key.2);
                let defines = lsplat_kernels::defines(key.1, key.2);
                let m = Arc::new(self.rt.compile(&label, &kernel.source(), &defines)?);
                lock(&self.families).insert(key, m.clone());
                m
            }
        };
        let f = self.rt.function(&module, kernel.file_name(), name)?;
        lock(&self.functions).insert((key, name), f.clone());
        Ok(f)
    }

    /// Compiles (once) a self-contained source with `defines` and returns kernel
    /// `name` of it — for device code that is not one of the engine's families.
    pub fn source_function(
        &self,
        label: &str,
        source: &str,
        defines: &[(String, String)],
        name: &str,
    ) -> Result<R::Function> {
        let mut h = std::hash::DefaultHasher::new();
        (source, defines).hash(&mut h);
        let key = h.finish();
        let cached = lock(&self.sources).get(&key).cloned();
        let module = match cached {
            Some(m) => m,
            None => {
                let m = Arc::new(self.rt.compile(label, source, defines)?);
                lock(&self.sources).insert(key, m.clone());
                m
            }
        };
        self.rt.function(&module, label, name)
    }

    /// Launches kernel `name` of a family.
    ///
    /// # Safety
    /// As [`Runtime::launch`]: `args` matches the kernel's parameters, and every buffer
    /// it names is large enough for the launch.
    pub unsafe fn launch(
        &self,
        kernel: Kernel,
        tile_size: u32,
        channels: u32,
        name: &'static str,
        dims: LaunchDims,
        args: &mut KernelArgs,
    ) -> Result<()> {
        let f = self.function(kernel, tile_size, channels, name)?;
        let n = args.len();
        let mut p = args.pointers();
        // SAFETY: the caller guarantees that the arguments fit the kernel.
        self.timed(name, || unsafe { self.rt.launch(&f, dims, &mut p[..n]) })
    }
}

impl<R: Runtime> Drop for Gpu<R> {
    fn drop(&mut self) {
        if let Some(profile) = &self.profile {
            eprint!("{}", lock(profile).table(&self.rt.device_name()));
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
