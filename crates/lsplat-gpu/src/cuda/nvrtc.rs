//! Run-time kernel compilation with the machine's NVRTC (loaded dynamically).
//!
//! Kernels are compiled to a CUBIN for the device's exact architecture (`sm_XY`),
//! not to PTX: a CUBIN from a newer NVRTC still loads on an older driver of the same
//! major version, whereas PTX from a newer NVRTC is rejected as too new.

use std::ffi::{CStr, CString, c_char};

use cudarc::nvrtc::{result, sys};
use lsplat_device::DeviceError;
use lsplat_kernels::Kernel;

/// A compiled kernel family.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The CUBIN image.
    pub cubin: Vec<u8>,
    /// NVRTC's log (warnings); empty when clean.
    pub log: String,
}

/// Whether a libnvrtc can be loaded (the usual sonames, searched on the library path).
pub fn nvrtc_available() -> bool {
    // SAFETY: only tries to dlopen the candidate library names and drops the handle;
    // no symbol is called.
    unsafe { sys::is_culib_present() }
}

fn unavailable(reason: impl Into<String>) -> DeviceError {
    DeviceError::Unavailable {
        backend: "cuda",
        reason: reason.into(),
    }
}

/// NVRTC's version `(major, minor)`.
pub fn nvrtc_version() -> Result<(i32, i32), DeviceError> {
    if !nvrtc_available() {
        return Err(unavailable(NO_NVRTC));
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present (checked above); both pointers are valid for
    // writes of one c_int each.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| unavailable(format!("nvrtcVersion failed: {e:?}")))?;
    Ok((major, minor))
}

/// The message when libnvrtc cannot be loaded.
pub const NO_NVRTC: &str = "libnvrtc could not be loaded; install the CUDA toolkit's NVRTC \
     (e.g. `pip install nvidia-cuda-nvrtc`) and put its lib folder on LD_LIBRARY_PATH";

/// The compiler flags for one compilation: target architecture, C++17, FMA
/// contraction (off where the CPU backend is matched bitwise: losses, normalise and Adam;
/// raster and operator ops match within tolerance either way), and the defines
/// (with `LS_WARP_SIZE=32`).
pub fn flags(defines: &[(String, String)], arch: &str, fmad: bool) -> Vec<String> {
    let mut f = vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
        format!("--fmad={fmad}"),
        "-DLS_WARP_SIZE=32".to_string(),
    ];
    f.extend(defines.iter().map(|(n, v)| format!("-D{n}={v}")));
    f
}

/// Compiles one family for `arch` (e.g. `sm_90`) with the defines of
/// `(tile_size, channels)`. Compile errors come back as [`DeviceError::Kernel`]
/// carrying NVRTC's log; warnings are returned in [`Compiled::log`].
pub fn compile(
    kernel: Kernel,
    tile_size: u32,
    channels: u32,
    arch: &str,
    fmad: bool,
) -> Result<Compiled, DeviceError> {
    if !nvrtc_available() {
        return Err(unavailable(NO_NVRTC));
    }
    let label = format!(
        "{} ({arch}, tile {tile_size}, {channels} ch)",
        kernel.file_name()
    );
    compile_source(
        &label,
        kernel.file_name(),
        &kernel.source(),
        &flags(&lsplat_kernels::defines(tile_size, channels), arch, fmad),
    )
}

/// Compiles a self-contained source with explicit flags (which must name a real
/// architecture, `--gpu-architecture=sm_XY`). `label` names it in errors.
pub fn compile_source(
    label: &str,
    file_name: &str,
    source: &str,
    opts: &[String],
) -> Result<Compiled, DeviceError> {
    if !nvrtc_available() {
        return Err(unavailable(NO_NVRTC));
    }
    let kerr = |message: String| DeviceError::Kernel {
        kernel: label.to_string(),
        message,
    };
    let src = CString::new(source).map_err(|_| kerr("source contains NUL".into()))?;
    let name = CString::new(file_name).map_err(|_| kerr("bad file name".into()))?;
    let prog = result::create_program(&src, Some(&name))
        .map_err(|e| kerr(format!("nvrtcCreateProgram: {e:?}")))?;
    let guard = Program(prog);
    // SAFETY: `guard.0` was created above and is destroyed only by `Program::drop`;
    // `src` and `name` outlive it.
    let compiled = unsafe { result::compile_program(guard.0, opts) };
    // SAFETY: as above; the program exists until `guard` drops.
    let log = unsafe { result::get_program_log(guard.0) }
        .map(|raw| c_chars_to_string(&raw))
        .unwrap_or_default();
    if let Err(e) = compiled {
        return Err(kerr(format!("{e:?} with {opts:?}:\n{log}")));
    }
    let mut size = 0usize;
    // SAFETY: the program compiled for a real architecture, so it has a CUBIN; `size`
    // is a valid out pointer.
    unsafe { sys::nvrtcGetCUBINSize(guard.0, &mut size) }
        .result()
        .map_err(|e| kerr(format!("nvrtcGetCUBINSize: {e:?}")))?;
    let mut cubin = vec![0u8; size];
    // SAFETY: `cubin` has exactly the `size` bytes NVRTC reported.
    unsafe { sys::nvrtcGetCUBIN(guard.0, cubin.as_mut_ptr().cast::<c_char>()) }
        .result()
        .map_err(|e| kerr(format!("nvrtcGetCUBIN: {e:?}")))?;
    Ok(Compiled {
        cubin,
        log: log.trim().to_string(),
    })
}

struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program was created by `create_program` and is destroyed once.
        let _ = unsafe { result::destroy_program(self.0) };
    }
}

fn c_chars_to_string(raw: &[c_char]) -> String {
    let bytes: Vec<u8> = raw.iter().map(|&c| c as u8).collect();
    match CStr::from_bytes_until_nul(&bytes) {
        Ok(s) => s.to_string_lossy().into_owned(),
        Err(_) => String::from_utf8_lossy(&bytes).into_owned(),
    }
}
