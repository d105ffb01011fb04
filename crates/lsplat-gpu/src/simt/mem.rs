//! Device memory of the simt runtime: host pages, each allocation ending against a
//! PROT_NONE page so that an overrun faults at the first byte past the buffer.

use std::collections::HashMap;
use std::sync::Mutex;

use lsplat_device::{DeviceError, Result};

struct Mapping {
    base: usize,
    len: usize,
}

/// Live allocations by address.
#[derive(Default)]
pub(crate) struct Memory {
    maps: Mutex<HashMap<u64, Mapping>>,
}

fn page() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

impl Memory {
    /// A zeroed allocation of `bytes` whose end touches a guard page.
    pub(crate) fn alloc(&self, bytes: usize) -> Result<u64> {
        let page = page();
        let data = bytes.max(1).next_multiple_of(4);
        let pages = data.div_ceil(page);
        let len = (pages + 1)
            .checked_mul(page)
            .ok_or(DeviceError::OutOfMemory { bytes })?;
        // SAFETY: an anonymous private mapping; no existing memory is touched.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(DeviceError::OutOfMemory { bytes });
        }
        let guard = base as usize + pages * page;
        // SAFETY: the last page of the mapping made above.
        unsafe { libc::mprotect(guard as *mut libc::c_void, page, libc::PROT_NONE) };
        let ptr = (guard - data) as u64;
        let mut maps = self.maps.lock().unwrap_or_else(|e| e.into_inner());
        maps.insert(
            ptr,
            Mapping {
                base: base as usize,
                len,
            },
        );
        Ok(ptr)
    }

    /// Unmaps an allocation.
    pub(crate) fn free(&self, ptr: u64) {
        let m = self
            .maps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&ptr);
        if let Some(m) = m {
            // SAFETY: the mapping was created by `alloc` and is removed from the table
            // before unmapping, so it is unmapped once.
            unsafe { libc::munmap(m.base as *mut libc::c_void, m.len) };
        }
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        let maps = std::mem::take(self.maps.get_mut().unwrap_or_else(|e| e.into_inner()));
        for (_, m) in maps {
            // SAFETY: every mapping in the table is live and owned by this table.
            unsafe { libc::munmap(m.base as *mut libc::c_void, m.len) };
        }
    }
}

/// Free and total host memory (`MemAvailable`, `MemTotal`).
pub(crate) fn host_memory() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    };
    Some((field("MemAvailable:")?, field("MemTotal:")?))
}
