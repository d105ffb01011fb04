//! The `hip` runtime: the HIP runtime API and hiprtc, both loaded at run time
//! ([`api`]), so a binary built with `--features hip` runs (and says what is missing) on
//! machines without ROCm. Kernels are compiled by hiprtc to a code object for the
//! device's own architecture (`gfx90a`, `gfx942`, `gfx1100`, …, read from the device)
//! and wavefront size (the device's `warpSize` attribute, passed as `LS_WARP_SIZE` and
//! checked at open time by a probe kernel), and cached on disk ([`crate::kcache`]).

pub mod api;
pub mod hiprtc;

use std::ffi::{CString, c_char, c_int, c_void};
use std::sync::Arc;

use lsplat_device::{DeviceError, MemoryInfo, Result};

use crate::runtime::{DevicePtr, LaunchDims, Runtime};
use api::{SUCCESS, Status};

/// A kernel that reports the wavefront size its code object runs with.
pub const WARP_PROBE: &str =
    "extern \"C\" __global__ void ls_warp_probe(unsigned* out) { out[threadIdx.x] = warpSize; }";

/// One AMD GPU with its stream.
pub struct Hip {
    api: &'static api::Hip,
    extra: &'static api::Extra,
    device: c_int,
    stream: usize,
    name: String,
    arch: String,
    warp: u32,
    async_alloc: bool,
}

/// A loaded code object.
pub struct HipModule {
    api: &'static api::Hip,
    module: usize,
}

/// A kernel of a module.
#[derive(Clone)]
pub struct HipFunction {
    f: usize,
    label: Arc<str>,
}

fn unavailable(reason: impl Into<String>) -> DeviceError {
    DeviceError::Unavailable {
        backend: "hip",
        reason: reason.into(),
    }
}

fn status_name(api: &api::Hip, s: Status) -> String {
    // SAFETY: hipGetErrorName returns a static string for any status.
    let name = unsafe { api::c_text((api.hipGetErrorName)(s)) };
    format!("{name} ({s})")
}

fn check(api: &api::Hip, what: &str, s: Status) -> Result<()> {
    match s {
        SUCCESS => Ok(()),
        api::ERROR_OUT_OF_MEMORY => Err(DeviceError::OutOfMemory { bytes: 0 }),
        _ => Err(DeviceError::Driver {
            backend: "hip",
            message: format!("{what}: {}", status_name(api, s)),
        }),
    }
}

/// The HIP runtime's version and library, e.g. `HIP 5.2.21153 (libamdhip64.so)`.
pub fn runtime_version() -> Result<String> {
    let (hip, _) = api::hip().map_err(unavailable)?;
    let mut v = 0;
    // SAFETY: `v` is a valid out pointer; the call needs no initialised device.
    let s = unsafe { (hip.hipRuntimeGetVersion)(&mut v) };
    let path = api::hip_path().unwrap_or("libamdhip64");
    Ok(if s == SUCCESS {
        // HIP_VERSION = major · 10⁷ + minor · 10⁵ + patch.
        format!(
            "HIP {}.{}.{} ({path})",
            v / 10_000_000,
            v / 100_000 % 100,
            v % 100_000
        )
    } else {
        format!("HIP ({path})")
    })
}

/// The runtime, initialised, and the number of devices.
fn init() -> Result<(&'static api::Hip, &'static api::Extra, c_int)> {
    let (hip, extra) = api::hip().map_err(unavailable)?;
    // SAFETY: hipInit takes flags 0; it may be called more than once.
    let s = unsafe { (hip.hipInit)(0) };
    if s != SUCCESS {
        return Err(unavailable(format!(
            "no usable AMD GPU: hipInit failed with {} ({}; is the amdgpu driver loaded \
             and /dev/kfd accessible?)",
            status_name(hip, s),
            runtime_version()?
        )));
    }
    let mut count = 0;
    // SAFETY: `count` is a valid out pointer.
    let s = unsafe { (hip.hipGetDeviceCount)(&mut count) };
    if s != SUCCESS || count <= 0 {
        return Err(unavailable(format!(
            "no AMD GPU found (hipGetDeviceCount: {}; {})",
            status_name(hip, s),
            runtime_version()?
        )));
    }
    Ok((hip, extra, count))
}

/// Name, architecture and wavefront size of device `d`.
fn describe(hip: &api::Hip, extra: &api::Extra, d: c_int) -> Result<(String, String, u32)> {
    let mut name = [0 as c_char; 256];
    // SAFETY: `name` holds 256 bytes, the length passed.
    check(hip, "hipDeviceGetName", unsafe {
        (hip.hipDeviceGetName)(name.as_mut_ptr(), name.len() as c_int, d)
    })?;
    // SAFETY: the runtime NUL-terminates within the buffer it was given.
    let name = unsafe { api::c_text(name.as_ptr()) };
    let mut warp = 0;
    // SAFETY: `warp` is a valid out pointer.
    check(hip, "hipDeviceGetAttribute(warpSize)", unsafe {
        (hip.hipDeviceGetAttribute)(&mut warp, api::ATTR_WARP_SIZE, d)
    })?;
    Ok((name, arch(hip, extra, d)?, warp as u32))
}

/// The device's `gcnArchName` without target features (`gfx90a`), read through
/// `hipGetDevicePropertiesR0600` where the runtime has it (ROCm ≥ 6), else through the
/// ROCm 5 entry point; `LSPLAT_HIP_ARCH` overrides it.
fn arch(hip: &api::Hip, extra: &api::Extra, d: c_int) -> Result<String> {
    if let Ok(a) = std::env::var("LSPLAT_HIP_ARCH")
        && !a.trim().is_empty()
    {
        return Ok(a.trim().to_string());
    }
    let get = extra.props_r0600.or(extra.props_r0000).ok_or_else(|| {
        unavailable("the HIP runtime exports no hipGetDeviceProperties (set LSPLAT_HIP_ARCH)")
    })?;
    let mut props = vec![0u8; api::DEVICE_PROP_BYTES];
    // SAFETY: the buffer is larger than any hipDeviceProp_t layout.
    check(hip, "hipGetDeviceProperties", unsafe {
        get(props.as_mut_ptr().cast(), d)
    })?;
    api::arch_from_props(&props).ok_or_else(|| {
        unavailable(format!(
            "device {d} reports no gfx architecture name (set LSPLAT_HIP_ARCH=gfxNNN)"
        ))
    })
}

/// One line per AMD device: name, architecture, wavefront size and memory.
pub fn list_devices() -> Result<Vec<String>> {
    let (hip, extra, count) = init()?;
    let rt = runtime_version()?;
    let rtc = match hiprtc::hiprtc_version() {
        Ok((_, path)) => format!("hiprtc from {path}"),
        Err(e) => format!("no hiprtc: {e}"),
    };
    (0..count)
        .map(|d| {
            let (name, arch, warp) = describe(hip, extra, d)?;
            Ok(format!("{name}, {arch}, wave{warp}; {rt}, {rtc}"))
        })
        .collect()
}

impl Hip {
    /// Opens device `ordinal` and checks that hiprtc's code objects run with the
    /// wavefront size the device reports.
    pub fn new(ordinal: usize) -> Result<Hip> {
        let (hip, extra, count) = init()?;
        if ordinal >= count as usize {
            return Err(unavailable(format!(
                "no HIP device {ordinal} ({count} found)"
            )));
        }
        hiprtc::hiprtc_version()?;
        let d = ordinal as c_int;
        // SAFETY: `d` is a valid ordinal (checked above).
        check(hip, "hipSetDevice", unsafe { (hip.hipSetDevice)(d) })?;
        let (name, arch, warp) = describe(hip, extra, d)?;
        if warp != 32 && warp != 64 {
            return Err(unavailable(format!("{name} reports warpSize {warp}")));
        }
        let mut pools = 0;
        // SAFETY: `pools` is a valid out pointer.
        let pools_ok =
            unsafe { (hip.hipDeviceGetAttribute)(&mut pools, api::ATTR_MEMORY_POOLS_SUPPORTED, d) }
                == SUCCESS
                && pools == 1;
        let mut stream: api::Handle = std::ptr::null_mut();
        // SAFETY: `stream` is a valid out pointer; the current device is `d`.
        check(hip, "hipStreamCreate", unsafe {
            (hip.hipStreamCreate)(&mut stream)
        })?;
        let rt = Hip {
            api: hip,
            extra,
            device: d,
            stream: stream as usize,
            name,
            arch,
            warp,
            async_alloc: pools_ok && extra.malloc_async.is_some() && extra.free_async.is_some(),
        };
        rt.check_warp()?;
        Ok(rt)
    }

    fn stream(&self) -> api::Handle {
        self.stream as api::Handle
    }

    fn bind(&self) -> Result<()> {
        // SAFETY: the ordinal was valid when the runtime was opened.
        check(self.api, "hipSetDevice", unsafe {
            (self.api.hipSetDevice)(self.device)
        })
    }

    /// Runs [`WARP_PROBE`] and compares what the code object sees with the device's
    /// `warpSize` attribute (a wave64 code object on a wave32 device, or the reverse,
    /// would compute wrong scans and ballots silently).
    fn check_warp(&self) -> Result<()> {
        let m = self.compile("warp probe", WARP_PROBE, &[])?;
        let f = self.function(&m, "warp probe", "ls_warp_probe")?;
        let out = self.alloc(4 * self.warp as usize)?;
        let mut ptr = out;
        let mut params = [(&mut ptr as *mut DevicePtr).cast::<c_void>()];
        // SAFETY: `ls_warp_probe(unsigned*)` with one slot per thread of the block.
        let launched = unsafe { self.launch(&f, LaunchDims::grid(1, self.warp), &mut params) };
        let mut seen = vec![0u8; 4 * self.warp as usize];
        // SAFETY: `out` holds that many bytes.
        let copied = launched.and_then(|_| unsafe { self.copy_to_host(out, &mut seen) });
        // SAFETY: allocated above with this size, freed once.
        unsafe { self.free(out, 4 * self.warp as usize) };
        copied?;
        let lanes: Vec<u32> = bytemuck::cast_slice(&seen).to_vec();
        if lanes.iter().any(|&w| w != self.warp) {
            return Err(unavailable(format!(
                "{} ({}) reports warpSize {}, but hiprtc's code object runs with {:?}",
                self.name, self.arch, self.warp, lanes[0]
            )));
        }
        Ok(())
    }
}

impl Drop for Hip {
    fn drop(&mut self) {
        // SAFETY: the stream was created in `new` and is destroyed once, after its work.
        unsafe {
            let _ = (self.api.hipStreamSynchronize)(self.stream());
            let _ = (self.api.hipStreamDestroy)(self.stream());
        }
    }
}

impl Drop for HipModule {
    fn drop(&mut self) {
        // SAFETY: the module was loaded by hipModuleLoadData and is unloaded once.
        let _ = unsafe { (self.api.hipModuleUnload)(self.module as api::Handle) };
    }
}

impl Runtime for Hip {
    type Module = HipModule;
    type Function = HipFunction;
    const NAME: &'static str = "hip";

    fn device_name(&self) -> String {
        self.name.clone()
    }

    fn arch(&self) -> String {
        self.arch.clone()
    }

    fn warp_size(&self) -> u32 {
        self.warp
    }

    fn compile(
        &self,
        label: &str,
        source: &str,
        defines: &[(String, String)],
    ) -> Result<HipModule> {
        let flags = hiprtc::flags(defines, &self.arch, self.warp)?;
        let version = hiprtc::hiprtc_version()?;
        // hiprtcVersion alone does not tell ROCm releases apart (ROCm 5.2's says 9.0).
        let key = crate::kcache::key((source, &flags, version, runtime_version().ok()));
        let path = crate::kcache::dir("hip").join(format!("{}-{key:016x}.hsaco", self.arch));
        let code = crate::kcache::bytes(&path, || {
            Ok(hiprtc::compile_source(label, label, source, &flags)?.code)
        })?;
        self.bind()?;
        let mut module: api::Handle = std::ptr::null_mut();
        // SAFETY: `code` is a complete code object for this device's architecture and
        // outlives the call (the runtime copies it).
        let s = unsafe { (self.api.hipModuleLoadData)(&mut module, code.as_ptr().cast()) };
        if s != SUCCESS {
            return Err(DeviceError::Kernel {
                kernel: label.to_string(),
                message: format!(
                    "loading the {} code object failed: {}",
                    self.arch,
                    status_name(self.api, s)
                ),
            });
        }
        Ok(HipModule {
            api: self.api,
            module: module as usize,
        })
    }

    fn function(&self, module: &HipModule, label: &str, name: &str) -> Result<HipFunction> {
        let kernel = format!("{label}::{name}");
        let cname = CString::new(name).map_err(|_| DeviceError::Kernel {
            kernel: kernel.clone(),
            message: "name contains NUL".into(),
        })?;
        let mut f: api::Handle = std::ptr::null_mut();
        // SAFETY: the module is loaded; `cname` is NUL-terminated.
        let s = unsafe {
            (self.api.hipModuleGetFunction)(&mut f, module.module as api::Handle, cname.as_ptr())
        };
        if s != SUCCESS {
            return Err(DeviceError::Kernel {
                kernel,
                message: status_name(self.api, s),
            });
        }
        Ok(HipFunction {
            f: f as usize,
            label: kernel.into(),
        })
    }

    unsafe fn launch(
        &self,
        f: &HipFunction,
        dims: LaunchDims,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        let [gx, gy, gz] = dims.grid;
        let [bx, by, bz] = dims.block;
        // SAFETY: the caller guarantees that `params` fits the kernel's signature and
        // that the buffers are large enough; the function belongs to this device.
        let s = unsafe {
            (self.api.hipModuleLaunchKernel)(
                f.f as api::Handle,
                gx,
                gy,
                gz,
                bx,
                by,
                bz,
                dims.shared_bytes,
                self.stream(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        if s != SUCCESS {
            return Err(DeviceError::Kernel {
                kernel: f.label.to_string(),
                message: format!("launch {dims:?} failed: {}", status_name(self.api, s)),
            });
        }
        Ok(())
    }

    fn alloc(&self, bytes: usize) -> Result<DevicePtr> {
        self.bind()?;
        let bytes = bytes.max(1);
        let mut p: *mut c_void = std::ptr::null_mut();
        let s = match (self.async_alloc, self.extra.malloc_async) {
            // SAFETY: stream-ordered allocation on this runtime's only stream.
            (true, Some(malloc)) => unsafe { malloc(&mut p, bytes, self.stream()) },
            // SAFETY: `p` is a valid out pointer.
            _ => unsafe { (self.api.hipMalloc)(&mut p, bytes) },
        };
        check(self.api, "hipMalloc", s).map_err(|e| match e {
            DeviceError::OutOfMemory { .. } => DeviceError::OutOfMemory { bytes },
            other => other,
        })?;
        // SAFETY: `p` holds `bytes` bytes; zeroed on the stream before any use.
        check(self.api, "hipMemsetAsync", unsafe {
            (self.api.hipMemsetAsync)(p, 0, bytes, self.stream())
        })?;
        Ok(p as DevicePtr)
    }

    unsafe fn free(&self, ptr: DevicePtr, _bytes: usize) {
        if self.bind().is_err() {
            return;
        }
        let p = ptr as *mut c_void;
        match (self.async_alloc, self.extra.free_async) {
            // SAFETY: `ptr` came from hipMallocAsync on this stream and is freed once
            // (the caller's contract); the free is ordered after queued work.
            (true, Some(free)) => unsafe {
                let _ = free(p, self.stream());
            },
            // SAFETY: as above, from hipMalloc; hipFree waits for the device first.
            _ => unsafe {
                let _ = (self.api.hipFree)(p);
            },
        }
    }

    unsafe fn copy_to_device(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        // SAFETY: `dst` holds `src.len()` bytes (caller's contract). From pageable host
        // memory HIP copies synchronously, so `src` may be reused on return.
        check(self.api, "hipMemcpyHtoDAsync", unsafe {
            (self.api.hipMemcpyHtoDAsync)(
                dst as *mut c_void,
                src.as_ptr() as *mut c_void,
                src.len(),
                self.stream(),
            )
        })
    }

    unsafe fn copy_to_host(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()> {
        // SAFETY: `src` holds `dst.len()` bytes (caller's contract); the stream is
        // synchronised before `dst` is read.
        check(self.api, "hipMemcpyDtoHAsync", unsafe {
            (self.api.hipMemcpyDtoHAsync)(
                dst.as_mut_ptr().cast(),
                src as *mut c_void,
                dst.len(),
                self.stream(),
            )
        })?;
        self.synchronize()
    }

    fn synchronize(&self) -> Result<()> {
        // SAFETY: the stream is live.
        check(self.api, "hipStreamSynchronize", unsafe {
            (self.api.hipStreamSynchronize)(self.stream())
        })
    }

    fn memory(&self) -> Option<MemoryInfo> {
        self.bind().ok()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: both are valid out pointers.
        let s = unsafe { (self.api.hipMemGetInfo)(&mut free, &mut total) };
        (s == SUCCESS).then_some(MemoryInfo {
            free: free as u64,
            total: total as u64,
        })
    }
}
