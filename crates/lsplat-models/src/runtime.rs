//! The ONNX Runtime library: where it is, loading it once per process, what it offers.
//!
//! `ort` loads the library at run time (`load-dynamic`) into process-global state, so a
//! process holds at most one: [`load`] loads it the first time and hands back the same
//! [`Runtime`] afterwards; asking for a different file later is an error
//! ([`ModelError::RuntimeConflict`]).
//!
//! The library is, in order: the configuration's `onnx.runtime` (a file, or a folder
//! holding one), `ORT_DYLIB_PATH`, or the first found by a short search ([`search_places`]):
//! the active Python environment (`$VIRTUAL_ENV`), a `.venv` in the working directory or
//! beside the executable's repository, then the standard library folders.

use std::ffi::{CStr, c_char, c_int};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::ModelError;

/// The loaded ONNX Runtime.
#[derive(Debug)]
pub struct Runtime {
    /// The library file.
    pub path: PathBuf,
    /// Its version (`1.32.0`).
    pub version: String,
    /// The execution providers it was built with (`CPUExecutionProvider`, …).
    pub providers: Vec<String>,
    pub(crate) env: ort::environment::Environment,
}

impl Runtime {
    /// Whether the library offers the execution provider `name`.
    pub fn has_provider(&self, name: &str) -> bool {
        self.providers.iter().any(|p| p == name)
    }
}

static LOADED: Mutex<Option<&'static Runtime>> = Mutex::new(None);

/// The library named by `configured` (`onnx.runtime`), `ORT_DYLIB_PATH`, or the search,
/// loaded once per process.
pub fn load(configured: Option<&Path>) -> Result<&'static Runtime, ModelError> {
    let path = locate(configured)?;
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(rt) = *loaded {
        if same_file(&rt.path, &path) {
            return Ok(rt);
        }
        return Err(ModelError::RuntimeConflict {
            loaded: rt.path.clone(),
            requested: path,
        });
    }
    let rt: &'static Runtime = Box::leak(Box::new(open(&path)?));
    *loaded = Some(rt);
    Ok(rt)
}

/// The runtime already loaded in this process, if any.
pub fn loaded() -> Option<&'static Runtime> {
    *LOADED.lock().unwrap_or_else(|e| e.into_inner())
}

fn same_file(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// The library file to load: `configured`, else `ORT_DYLIB_PATH`, else the first found
/// by the search. A configured path or variable that names nothing is an error (no
/// silent fall-back to another library).
pub fn locate(configured: Option<&Path>) -> Result<PathBuf, ModelError> {
    let env = std::env::var_os("ORT_DYLIB_PATH").filter(|v| !v.is_empty());
    let named = configured
        .map(Path::to_path_buf)
        .or_else(|| env.map(PathBuf::from));
    if let Some(p) = named {
        if p.is_dir() {
            return library_in(&p).ok_or(ModelError::RuntimeNotFound { looked: vec![p] });
        }
        if !p.is_file() {
            return Err(ModelError::RuntimeNotFound { looked: vec![p] });
        }
        return Ok(p);
    }
    let places = search_places();
    for dir in &places {
        if let Some(lib) = library_in(dir) {
            return Ok(lib);
        }
    }
    Err(ModelError::RuntimeNotFound { looked: places })
}

/// `libonnxruntime.so` in `dir`, or a versioned `libonnxruntime.so.1.x.y` (the newest).
fn library_in(dir: &Path) -> Option<PathBuf> {
    let plain = dir.join(format!(
        "{}onnxruntime{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    if plain.is_file() {
        return Some(plain);
    }
    let prefix = format!(
        "{}onnxruntime{}.",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix))
        })
        .collect();
    found.sort();
    found.pop()
}

/// The folders searched when neither `onnx.runtime` nor `ORT_DYLIB_PATH` names the
/// library, in order: `onnxruntime/capi` of the Python environments (`$VIRTUAL_ENV`,
/// `.venv` in the working directory and in the folders above the executable), then
/// `LD_LIBRARY_PATH` and the standard library folders.
pub fn search_places() -> Vec<PathBuf> {
    let mut envs: Vec<PathBuf> = Vec::new();
    if let Some(v) = std::env::var_os("VIRTUAL_ENV").filter(|v| !v.is_empty()) {
        envs.push(PathBuf::from(v));
    }
    if let Ok(cwd) = std::env::current_dir() {
        envs.push(cwd.join(".venv"));
    }
    if let Ok(exe) = std::env::current_exe() {
        // target/<profile>/lsplat-engine: the repository is three folders up.
        for dir in exe.ancestors().skip(1).take(4) {
            let venv = dir.join(".venv");
            if !envs.contains(&venv) {
                envs.push(venv);
            }
        }
    }
    let mut places = Vec::new();
    for env in envs {
        places.extend(
            site_packages(&env)
                .into_iter()
                .map(|sp| sp.join("onnxruntime/capi")),
        );
    }
    if let Some(ld) = std::env::var_os("LD_LIBRARY_PATH") {
        places.extend(std::env::split_paths(&ld).filter(|p| !p.as_os_str().is_empty()));
    }
    for d in [
        "/usr/local/lib",
        "/usr/lib",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/opt/onnxruntime/lib",
    ] {
        places.push(PathBuf::from(d));
    }
    places
}

/// `lib/python3.*/site-packages` folders of a virtual environment (none when absent).
fn site_packages(env: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(env.join("lib"))
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("python"))
                })
                .map(|p| p.join("site-packages"))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    if out.is_empty() {
        // Name the usual place so the error lists where it looked.
        out.push(env.join("lib/python3/site-packages"));
    }
    out
}

/// Loads the library at `path` into `ort` (once per process; [`load`] guards that).
fn open(path: &Path) -> Result<Runtime, ModelError> {
    let bad = |problem: String| ModelError::RuntimeLoad {
        path: path.to_path_buf(),
        problem,
    };
    let version = probe_version(path).map_err(bad)?;
    let minor: u32 = version
        .split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if minor < ort::MINOR_VERSION {
        return Err(bad(format!(
            "version {version} is older than 1.{} (the oldest the engine supports)",
            ort::MINOR_VERSION
        )));
    }
    let env = ort::init_from(path)
        .map_err(|e| bad(e.to_string()))?
        .with_name("lsplat")
        .build()
        .map_err(|e| bad(e.to_string()))?;
    let providers = available_providers().map_err(bad)?;
    Ok(Runtime {
        path: path.to_path_buf(),
        version,
        providers,
        env,
    })
}

/// The version string of an ONNX Runtime library, read without handing it to `ort`, so
/// a wrong file is an error instead of a panic.
fn probe_version(path: &Path) -> Result<String, String> {
    // SAFETY: loading a shared library runs its initialisers; the file is the ONNX
    // Runtime library the user named or one found in an onnxruntime installation.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| e.to_string())?;
    // SAFETY: `OrtGetApiBase` has this signature in every ONNX Runtime release (C API).
    let get_base: libloading::Symbol<unsafe extern "C" fn() -> *const ort::sys::OrtApiBase> =
        unsafe { lib.get(b"OrtGetApiBase") }
            .map_err(|_| "it does not export `OrtGetApiBase`".to_string())?;
    // SAFETY: the function takes no arguments and returns a pointer to a static struct.
    let base = unsafe { get_base() };
    if base.is_null() {
        return Err("`OrtGetApiBase` returned null".into());
    }
    // SAFETY: `base` is non-null and points to the library's static `OrtApiBase`; the
    // version string it returns is a static NUL-terminated buffer.
    let version = unsafe { CStr::from_ptr(((*base).GetVersionString)()) }
        .to_string_lossy()
        .into_owned();
    // The library stays loaded: `ort` opens the same file next, and unloading an ONNX
    // Runtime is not supported.
    std::mem::forget(lib);
    Ok(version)
}

/// The execution providers compiled into the loaded library.
fn available_providers() -> Result<Vec<String>, String> {
    let api = ort::api();
    let mut list: *mut *mut c_char = std::ptr::null_mut();
    let mut n: c_int = 0;
    // SAFETY: both out-pointers are valid; the C API fills them with an array it owns.
    let status = unsafe { (api.GetAvailableProviders)(&mut list, &mut n) };
    if !status.0.is_null() {
        // SAFETY: a non-null status is an error object we own and release once.
        let msg = unsafe { CStr::from_ptr((api.GetErrorMessage)(status.0)) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: as above.
        unsafe { (api.ReleaseStatus)(status.0) };
        return Err(format!("listing its execution providers failed: {msg}"));
    }
    let mut out = Vec::with_capacity(n.max(0) as usize);
    for i in 0..n.max(0) as usize {
        // SAFETY: `list` holds `n` NUL-terminated strings.
        out.push(
            unsafe { CStr::from_ptr(*list.add(i)) }
                .to_string_lossy()
                .into_owned(),
        );
    }
    // SAFETY: releases the array returned above, exactly once.
    let status = unsafe { (api.ReleaseAvailableProviders)(list, n) };
    if !status.0.is_null() {
        // SAFETY: a non-null status is ours to release.
        unsafe { (api.ReleaseStatus)(status.0) };
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_library_that_is_missing_is_an_error_naming_it() {
        let e = locate(Some(Path::new("/nonexistent/libonnxruntime.so"))).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("/nonexistent/libonnxruntime.so")
                && msg.contains("pip install onnxruntime"),
            "{msg}"
        );
        assert!(
            msg.contains("onnxruntime-gpu") && msg.contains("onnxruntime-rocm"),
            "{msg}"
        );
    }

    #[test]
    fn a_folder_is_searched_for_a_versioned_library() {
        let dir = tempfile::tempdir().unwrap();
        assert!(library_in(dir.path()).is_none());
        std::fs::write(dir.path().join("libonnxruntime.so.1.31.0"), b"x").unwrap();
        std::fs::write(dir.path().join("libonnxruntime.so.1.32.0"), b"x").unwrap();
        std::fs::write(dir.path().join("libonnxruntime_providers_shared.so"), b"x").unwrap();
        assert_eq!(
            locate(Some(dir.path())).unwrap(),
            dir.path().join("libonnxruntime.so.1.32.0")
        );
    }

    #[test]
    fn a_file_that_is_not_onnx_runtime_is_refused_without_loading_it_into_ort() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("libonnxruntime.so");
        std::fs::write(&p, b"not a library").unwrap();
        let e = open(&p).unwrap_err().to_string();
        assert!(
            e.contains("libonnxruntime.so") && e.contains("not a usable ONNX Runtime"),
            "{e}"
        );
    }
}
