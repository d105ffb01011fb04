//! Run-time kernel compilation with hiprtc (loaded dynamically): a code object for the
//! device's exact architecture (`--offload-arch=gfxNNN`). Needs no GPU, so CI compiles
//! every kernel for gfx90a.

use std::ffi::{CString, c_char, c_int};
use std::sync::Mutex;

use lsplat_device::DeviceError;
use lsplat_kernels::Kernel;

use super::api::{self, Handle, SUCCESS, Status};

/// A compiled kernel family.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The code object.
    pub code: Vec<u8>,
    /// hiprtc's log (warnings); empty when clean.
    pub log: String,
}

fn unavailable(reason: impl Into<String>) -> DeviceError {
    DeviceError::Unavailable {
        backend: "hip",
        reason: reason.into(),
    }
}

/// Whether hiprtc can be loaded.
pub fn hiprtc_available() -> bool {
    api::rtc().is_ok()
}

/// hiprtc's version `(major, minor)` and the library it was loaded from.
pub fn hiprtc_version() -> Result<((i32, i32), &'static str), DeviceError> {
    let (rtc, path) = api::rtc().map_err(unavailable)?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: both pointers are valid for one c_int each.
    let status = unsafe { (rtc.hiprtcVersion)(&mut major, &mut minor) };
    if status != SUCCESS {
        return Err(unavailable(format!("hiprtcVersion failed ({status})")));
    }
    Ok(((major, minor), path))
}

/// The wavefront flag that makes the code object run with `warp` lanes, as the device
/// reports it: RDNA (gfx10 and later) runs wave32 or wave64, so the choice is explicit;
/// GCN and CDNA (gfx9 and earlier) run wave64 only.
pub fn wave_flag(arch: &str, warp: u32) -> Result<Option<&'static str>, DeviceError> {
    // gfx<major><minor><stepping>: the last two characters are minor and stepping.
    let generation: u32 = arch
        .strip_prefix("gfx")
        .filter(|r| r.len() >= 3 && r.bytes().all(|b| b.is_ascii_alphanumeric()))
        .and_then(|r| r[..r.len() - 2].parse().ok())
        .ok_or_else(|| unavailable(format!("unrecognised AMD architecture `{arch}`")))?;
    match (generation >= 10, warp) {
        (true, 32) => Ok(Some("-mno-wavefrontsize64")),
        (true, 64) => Ok(Some("-mwavefrontsize64")),
        (false, 64) => Ok(None),
        _ => Err(unavailable(format!(
            "{arch} has no {warp}-lane wavefronts (the device reports warpSize {warp})"
        ))),
    }
}

/// The compiler flags for one compilation: target architecture and wavefront size,
/// C++17, no contraction of multiply-adds (losses, normalise and Adam then match the
/// CPU backend bitwise; raster and operator ops match within tolerance either way), and
/// the defines with `LS_WARP_SIZE`.
pub fn flags(
    defines: &[(String, String)],
    arch: &str,
    warp: u32,
) -> Result<Vec<String>, DeviceError> {
    let mut f = vec![
        format!("--offload-arch={arch}"),
        "-std=c++17".to_string(),
        "-ffp-contract=off".to_string(),
        format!("-DLS_WARP_SIZE={warp}"),
    ];
    f.extend(wave_flag(arch, warp)?.map(str::to_string));
    f.extend(defines.iter().map(|(n, v)| format!("-D{n}={v}")));
    Ok(f)
}

/// Compiles one family for `arch` (e.g. `gfx90a`) and wavefront size `warp` with the
/// defines of `(tile_size, channels)` and `extra` flags (e.g. `-Wall -Werror`).
/// Compile errors come back as [`DeviceError::Kernel`] with hiprtc's log.
pub fn compile(
    kernel: Kernel,
    tile_size: u32,
    channels: u32,
    arch: &str,
    warp: u32,
    extra: &[&str],
) -> Result<Compiled, DeviceError> {
    let label = format!(
        "{} ({arch}, wave{warp}, tile {tile_size}, {channels} ch)",
        kernel.file_name()
    );
    let mut opts = flags(&lsplat_kernels::defines(tile_size, channels), arch, warp)?;
    opts.extend(extra.iter().map(|s| s.to_string()));
    compile_source(&label, kernel.file_name(), &kernel.source(), &opts)
}

/// Compiles a self-contained source with explicit flags (which must name an
/// architecture, `--offload-arch=gfxNNN`). `label` names it in errors.
pub fn compile_source(
    label: &str,
    file_name: &str,
    source: &str,
    opts: &[String],
) -> Result<Compiled, DeviceError> {
    let (rtc, _) = api::rtc().map_err(unavailable)?;
    let kerr = |message: String| DeviceError::Kernel {
        kernel: label.to_string(),
        message,
    };
    let what = |s: Status| {
        // SAFETY: hiprtcGetErrorString returns a static string for any status.
        let text = unsafe { api::c_text((rtc.hiprtcGetErrorString)(s)) };
        format!("{text} ({s})")
    };
    let src = CString::new(source).map_err(|_| kerr("source contains NUL".into()))?;
    let name = CString::new(file_name).map_err(|_| kerr("bad file name".into()))?;
    let copts: Vec<CString> = opts
        .iter()
        .map(|o| CString::new(o.as_str()))
        .collect::<Result<_, _>>()
        .map_err(|_| kerr("an option contains NUL".into()))?;
    let ptrs: Vec<*const c_char> = copts.iter().map(|o| o.as_ptr()).collect();
    // hiprtc (at least ROCm 5.2's, through comgr) crashes when programs are compiled on
    // several threads at once, so compilations are serialised process-wide.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut prog: Handle = std::ptr::null_mut();
    // SAFETY: `src` and `name` are NUL-terminated and outlive the program; no headers.
    let status = unsafe {
        (rtc.hiprtcCreateProgram)(
            &mut prog,
            src.as_ptr(),
            name.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    if status != SUCCESS {
        return Err(kerr(format!("hiprtcCreateProgram: {}", what(status))));
    }
    let guard = Program(prog, rtc);
    // SAFETY: the program exists until `guard` drops; `ptrs` holds `ptrs.len()` valid
    // NUL-terminated strings that outlive the call.
    let compiled =
        unsafe { (rtc.hiprtcCompileProgram)(guard.0, ptrs.len() as c_int, ptrs.as_ptr()) };
    let log = read(
        rtc.hiprtcGetProgramLogSize,
        rtc.hiprtcGetProgramLog,
        guard.0,
    )
    .map(|b| {
        String::from_utf8_lossy(&b)
            .trim_end_matches('\0')
            .trim()
            .to_string()
    })
    .unwrap_or_default();
    if compiled != SUCCESS {
        return Err(kerr(format!("{} with {opts:?}:\n{log}", what(compiled))));
    }
    let code = read(rtc.hiprtcGetCodeSize, rtc.hiprtcGetCode, guard.0)
        .map_err(|s| kerr(format!("hiprtcGetCode: {}", what(s))))?;
    if code.is_empty() {
        return Err(kerr("hiprtc returned an empty code object".into()));
    }
    Ok(Compiled { code, log })
}

/// Reads a sized byte result of a program (log or code).
fn read(
    size: unsafe extern "C" fn(Handle, *mut usize) -> Status,
    get: unsafe extern "C" fn(Handle, *mut c_char) -> Status,
    prog: Handle,
) -> Result<Vec<u8>, Status> {
    let mut n = 0usize;
    // SAFETY: `prog` is a live program; `n` is a valid out pointer.
    let s = unsafe { size(prog, &mut n) };
    if s != SUCCESS {
        return Err(s);
    }
    let mut buf = vec![0u8; n];
    if n > 0 {
        // SAFETY: `buf` holds exactly the `n` bytes hiprtc reported.
        let s = unsafe { get(prog, buf.as_mut_ptr().cast()) };
        if s != SUCCESS {
            return Err(s);
        }
    }
    Ok(buf)
}

struct Program(Handle, &'static api::Rtc);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program was created by hiprtcCreateProgram and is destroyed once.
        let _ = unsafe { (self.1.hiprtcDestroyProgram)(&mut self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wavefront_flags_follow_the_architecture() {
        assert_eq!(wave_flag("gfx90a", 64).unwrap(), None);
        assert_eq!(wave_flag("gfx942", 64).unwrap(), None);
        assert!(wave_flag("gfx90a", 32).is_err());
        assert_eq!(
            wave_flag("gfx1100", 32).unwrap(),
            Some("-mno-wavefrontsize64")
        );
        assert_eq!(wave_flag("gfx1030", 64).unwrap(), Some("-mwavefrontsize64"));
        assert_eq!(
            wave_flag("gfx1201", 32).unwrap(),
            Some("-mno-wavefrontsize64")
        );
        assert!(wave_flag("sm_90", 32).is_err());
    }
}
