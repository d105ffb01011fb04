//! The HIP runtime and hiprtc, loaded at run time with libloading: a binary built with
//! `--features hip` starts on machines without ROCm and reports what is missing.
//!
//! `libamdhip64` is searched under its sonames (ROCm 7, 6, 5) on the loader path and in
//! `$ROCM_PATH/lib` (default `/opt/rocm/lib`). hiprtc is a library of its own from ROCm 6
//! on (`libhiprtc.so.N`); in ROCm 5 (Debian's HIP 5.2 included) its entry points live in
//! `libamdhip64`, which is the fallback. Only the entry points this crate calls are bound;
//! all of them exist, with these signatures, in ROCm 5.2 and later.

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

/// `hipError_t` / `hiprtcResult`.
pub type Status = c_int;
/// An opaque handle (`hipModule_t`, `hipFunction_t`, `hipStream_t`, `hiprtcProgram`).
pub type Handle = *mut c_void;

/// `hipSuccess` / `HIPRTC_SUCCESS`.
pub const SUCCESS: Status = 0;
/// `hipErrorOutOfMemory`.
pub const ERROR_OUT_OF_MEMORY: Status = 2;
/// `hipDeviceAttributeMaxThreadsPerBlock` (same value in ROCm 5 and 6).
pub const ATTR_MAX_THREADS_PER_BLOCK: c_int = 56;
/// `hipDeviceAttributeWarpSize` (same value in ROCm 5 and 6).
pub const ATTR_WARP_SIZE: c_int = 87;
/// `hipDeviceAttributeMemoryPoolsSupported` (same value in ROCm 5 and 6).
pub const ATTR_MEMORY_POOLS_SUPPORTED: c_int = 88;
/// Bytes reserved for a `hipDeviceProp_t` of any ROCm version (R0000: 792 bytes in
/// ROCm 5.2; R0600: about 1.5 KiB); the runtime writes only its own struct's size.
pub const DEVICE_PROP_BYTES: usize = 16 * 1024;

macro_rules! entry_points {
    ($table:ident { $($name:ident: fn($($arg:ty),*) $(-> $ret:ty)?;)* }) => {
        /// Entry points bound from the library (function pointers stay valid while
        /// `_lib` is alive, i.e. for the life of the process).
        #[allow(non_snake_case)]
        pub struct $table {
            $(pub $name: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
            _lib: libloading::Library,
        }

        impl $table {
            fn bind(lib: libloading::Library, what: &str) -> Result<Self, String> {
                // SAFETY: each symbol is looked up by its exported C name and given the
                // signature of the HIP headers (ROCm 5.2 and later).
                unsafe {
                    Ok($table {
                        $($name: *lib
                            .get(concat!(stringify!($name), "\0").as_bytes())
                            .map_err(|e| format!("{what} lacks {}: {e}", stringify!($name)))?,)*
                        _lib: lib,
                    })
                }
            }
        }
    };
}

entry_points!(Hip {
    hipInit: fn(c_uint) -> Status;
    hipGetDeviceCount: fn(*mut c_int) -> Status;
    hipDeviceGetName: fn(*mut c_char, c_int, c_int) -> Status;
    hipDeviceGetAttribute: fn(*mut c_int, c_int, c_int) -> Status;
    hipRuntimeGetVersion: fn(*mut c_int) -> Status;
    hipGetErrorName: fn(Status) -> *const c_char;
    hipSetDevice: fn(c_int) -> Status;
    hipStreamCreate: fn(*mut Handle) -> Status;
    hipStreamSynchronize: fn(Handle) -> Status;
    hipStreamDestroy: fn(Handle) -> Status;
    hipModuleLoadData: fn(*mut Handle, *const c_void) -> Status;
    hipModuleUnload: fn(Handle) -> Status;
    hipModuleGetFunction: fn(*mut Handle, Handle, *const c_char) -> Status;
    hipModuleLaunchKernel: fn(
        Handle, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, Handle,
        *mut *mut c_void, *mut *mut c_void
    ) -> Status;
    hipMalloc: fn(*mut *mut c_void, usize) -> Status;
    hipFree: fn(*mut c_void) -> Status;
    hipMemsetAsync: fn(*mut c_void, c_int, usize, Handle) -> Status;
    hipMemcpyHtoDAsync: fn(*mut c_void, *mut c_void, usize, Handle) -> Status;
    hipMemcpyDtoHAsync: fn(*mut c_void, *mut c_void, usize, Handle) -> Status;
    hipMemGetInfo: fn(*mut usize, *mut usize) -> Status;
});

entry_points!(Rtc {
    hiprtcCreateProgram: fn(
        *mut Handle, *const c_char, *const c_char, c_int, *const *const c_char,
        *const *const c_char
    ) -> Status;
    hiprtcCompileProgram: fn(Handle, c_int, *const *const c_char) -> Status;
    hiprtcGetProgramLogSize: fn(Handle, *mut usize) -> Status;
    hiprtcGetProgramLog: fn(Handle, *mut c_char) -> Status;
    hiprtcGetCodeSize: fn(Handle, *mut usize) -> Status;
    hiprtcGetCode: fn(Handle, *mut c_char) -> Status;
    hiprtcDestroyProgram: fn(*mut Handle) -> Status;
    hiprtcGetErrorString: fn(Status) -> *const c_char;
    hiprtcVersion: fn(*mut c_int, *mut c_int) -> Status;
});

/// Optional entry points (newer runtimes).
pub struct Extra {
    /// `hipGetDevicePropertiesR0600` (ROCm ≥ 6: the current `hipDeviceProp_t` layout;
    /// the plain `hipGetDeviceProperties` symbol keeps the ROCm 5 layout).
    pub props_r0600: Option<unsafe extern "C" fn(*mut c_void, c_int) -> Status>,
    /// `hipGetDeviceProperties` (the ROCm 5 layout; `…R0000` where only that exists).
    pub props_r0000: Option<unsafe extern "C" fn(*mut c_void, c_int) -> Status>,
    /// `hipMallocAsync` / `hipFreeAsync` (stream-ordered allocation).
    pub malloc_async: Option<unsafe extern "C" fn(*mut *mut c_void, usize, Handle) -> Status>,
    /// See `malloc_async`.
    pub free_async: Option<unsafe extern "C" fn(*mut c_void, Handle) -> Status>,
}

/// The message when the HIP runtime cannot be loaded.
pub const NO_HIP: &str = "libamdhip64 could not be loaded (no ROCm / HIP runtime on this \
     machine): install ROCm, or Debian's `libamdhip64-5 libhiprtc-builtins5`, or set \
     ROCM_PATH to the ROCm installation";

fn candidates(stem: &str, versions: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = versions.iter().map(|v| format!("{stem}.so{v}")).collect();
    let rocm = std::env::var("ROCM_PATH").unwrap_or_else(|_| "/opt/rocm".into());
    names.extend(versions.iter().map(|v| format!("{rocm}/lib/{stem}.so{v}")));
    names
}

/// Opens the first library of `names` that loads; the error lists what was tried.
pub fn open_first(names: &[String]) -> Result<(libloading::Library, String), String> {
    let mut tried = Vec::new();
    for n in names {
        // SAFETY: loading a vendor library runs its initialisers, which is what any
        // HIP program does; nothing else is called here.
        match unsafe { libloading::Library::new(n) } {
            Ok(lib) => return Ok((lib, n.clone())),
            Err(e) => tried.push(format!("{n}: {e}")),
        }
    }
    Err(tried.join("; "))
}

struct Loaded {
    hip: Hip,
    extra: Extra,
    path: String,
}

fn hip_library() -> Result<&'static Loaded, String> {
    static LOADED: OnceLock<Result<Loaded, String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let names = candidates("libamdhip64", &["", ".7", ".6", ".5"]);
            let (lib, path) = open_first(&names).map_err(|e| format!("{NO_HIP} (tried {e})"))?;
            // SAFETY: optional symbols with the signatures of the HIP headers; the
            // pointers are copied out while `lib` is alive and kept only beside it.
            let extra = unsafe {
                Extra {
                    props_r0600: lib.get(b"hipGetDevicePropertiesR0600\0").ok().map(|s| *s),
                    props_r0000: lib
                        .get(b"hipGetDeviceProperties\0")
                        .or_else(|_| lib.get(b"hipGetDevicePropertiesR0000\0"))
                        .ok()
                        .map(|s| *s),
                    malloc_async: lib.get(b"hipMallocAsync\0").ok().map(|s| *s),
                    free_async: lib.get(b"hipFreeAsync\0").ok().map(|s| *s),
                }
            };
            let hip = Hip::bind(lib, &path)?;
            Ok(Loaded { hip, extra, path })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The HIP runtime's entry points, loaded once per process.
pub fn hip() -> Result<(&'static Hip, &'static Extra), String> {
    hip_library().map(|l| (&l.hip, &l.extra))
}

/// The file the HIP runtime was loaded from.
pub fn hip_path() -> Option<&'static str> {
    hip_library().ok().map(|l| l.path.as_str())
}

/// The message when hiprtc cannot be loaded.
pub const NO_HIPRTC: &str = "hiprtc could not be loaded (libhiprtc.so of ROCm ≥ 6, or \
     libamdhip64.so.5 of ROCm 5): install ROCm, or Debian's `libamdhip64-5 \
     libhiprtc-builtins5`, or set ROCM_PATH";

/// hiprtc's entry points and the library they came from, loaded once per process.
pub fn rtc() -> Result<(&'static Rtc, &'static str), String> {
    static LOADED: OnceLock<Result<(Rtc, String), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let mut names = candidates("libhiprtc", &["", ".7", ".6"]);
            names.extend(candidates("libamdhip64", &[".5", ""]));
            let mut errors = Vec::new();
            for n in names {
                match open_first(std::slice::from_ref(&n)) {
                    Ok((lib, path)) => match Rtc::bind(lib, &path) {
                        Ok(rtc) => return Ok((rtc, path)),
                        Err(e) => errors.push(e),
                    },
                    Err(e) => errors.push(e),
                }
            }
            Err(format!("{NO_HIPRTC} (tried {})", errors.join("; ")))
        })
        .as_ref()
        .map(|(r, p)| (r, p.as_str()))
        .map_err(Clone::clone)
}

/// The text of a NUL-terminated C string returned by the runtime (empty for null).
///
/// # Safety
/// `p` is null or points at a NUL-terminated string that outlives the call.
pub unsafe fn c_text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the caller's contract.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

/// The architecture named in a `hipDeviceProp_t` of unknown layout: its `gcnArchName`,
/// the one field holding a NUL-terminated string that starts with `gfx` and a digit
/// (e.g. `gfx90a:sramecc+:xnack-`), with the target features after `:` dropped. The
/// layout changed between ROCm 5 and 6 (and may again), so no offset is assumed.
pub fn arch_from_props(props: &[u8]) -> Option<String> {
    let mut i = 0;
    while i + 4 <= props.len() {
        let at_start = i == 0 || props[i - 1] == 0;
        if at_start && props[i..].starts_with(b"gfx") && props[i + 3].is_ascii_digit() {
            let end = props[i..].iter().position(|&b| b == 0)? + i;
            let text = std::str::from_utf8(&props[i..end]).ok()?;
            let name = text.split(':').next()?;
            if name[3..].bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Some(name.to_string());
            }
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_is_found_in_any_layout() {
        let mut p = vec![0u8; 2048];
        p[..19].copy_from_slice(b"AMD Instinct MI250X");
        p[396..396 + 22].copy_from_slice(b"gfx90a:sramecc+:xnack-");
        assert_eq!(arch_from_props(&p).as_deref(), Some("gfx90a"));
        let mut q = vec![0u8; 2048];
        q[1100..1107].copy_from_slice(b"gfx1100");
        assert_eq!(arch_from_props(&q).as_deref(), Some("gfx1100"));
        // A name that merely contains "gfx" mid-string, or no arch at all.
        let mut r = vec![0u8; 512];
        r[..10].copy_from_slice(b"Radeon gfx");
        assert_eq!(arch_from_props(&r), None);
    }

    #[test]
    fn a_missing_library_lists_what_was_tried() {
        let e = open_first(&["libno-such-lsplat-lib.so.1".to_string()])
            .err()
            .unwrap();
        assert!(e.contains("libno-such-lsplat-lib.so.1"), "{e}");
    }
}
