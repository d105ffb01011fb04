//! Arrays an operator keeps in memory or reads from a file mapped into memory.
//!
//! An operator spilled to disk is written once (after checking the disk has room),
//! mapped read-only, and the file is unlinked at once: the mapping keeps its pages
//! reachable, the disk space returns when the operator is dropped, and nothing is left
//! behind if the process dies. Products read a mapped operator like one in memory; the
//! pages they fault in are handed back to the kernel after each product
//! ([`Mapping::release`]), so they count against the process's resident memory only
//! while a product runs (the kernel's page cache may keep them, outside it).

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

/// A read-only memory mapping of a whole file.
#[derive(Debug)]
pub struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and private to this value; the pointer is only
// read through shared slices, which are Send and Sync for plain data.
unsafe impl Send for Mapping {}
// SAFETY: as above: nothing writes through the pointer.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `file` (its first `len` bytes, `len > 0`) read-only.
    fn map(file: &File, len: usize) -> std::io::Result<Mapping> {
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh private read-only mapping of an open file descriptor; the
        // result is checked against MAP_FAILED before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapping { ptr, len })
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: ptr..ptr + len is a live read-only mapping owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }

    /// Asks the kernel to read the file ahead (a hint; errors are ignored).
    pub fn will_need(&self) {
        // SAFETY: advice on our own live mapping; it never changes its contents.
        unsafe { libc::madvise(self.ptr, self.len, libc::MADV_WILLNEED) };
    }

    /// Drops the pages read so far from this process (they stay readable: the next
    /// read faults them in again from the page cache or the file).
    pub fn release(&self) {
        // SAFETY: MADV_DONTNEED on a private read-only file mapping only discards
        // our page-table entries; the contents (the file's) read the same afterwards.
        unsafe { libc::madvise(self.ptr, self.len, libc::MADV_DONTNEED) };
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `map`, once; no slice outlives self.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// Plain data that may be read from raw bytes (every bit pattern is a value).
///
/// # Safety
/// Implementors must be `Copy` types without padding or invalid bit patterns.
pub unsafe trait Pod: Copy + Send + Sync + 'static {}
// SAFETY: integers and floats have no padding and no invalid bit patterns.
unsafe impl Pod for u8 {}
// SAFETY: as above.
unsafe impl Pod for u16 {}
// SAFETY: as above.
unsafe impl Pod for u32 {}
// SAFETY: as above.
unsafe impl Pod for f32 {}
// SAFETY: half's types are `repr(transparent)` over u16.
unsafe impl Pod for half::f16 {}
// SAFETY: as above.
unsafe impl Pod for half::bf16 {}

/// An array in memory or in a mapped file.
#[derive(Debug)]
pub enum Store<T: Pod> {
    /// Owned memory.
    Owned(Vec<T>),
    /// `len` elements at byte `offset` of a mapping (aligned for `T`).
    Mapped {
        /// The file.
        map: Arc<Mapping>,
        /// Byte offset.
        offset: usize,
        /// Elements.
        len: usize,
    },
}

impl<T: Pod> Clone for Store<T> {
    fn clone(&self) -> Self {
        match self {
            Store::Owned(v) => Store::Owned(v.clone()),
            Store::Mapped { map, offset, len } => Store::Mapped {
                map: map.clone(),
                offset: *offset,
                len: *len,
            },
        }
    }
}

impl<T: Pod> Default for Store<T> {
    fn default() -> Self {
        Store::Owned(Vec::new())
    }
}

impl<T: Pod> From<Vec<T>> for Store<T> {
    fn from(v: Vec<T>) -> Self {
        Store::Owned(v)
    }
}

impl<T: Pod> std::ops::Deref for Store<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Store::Owned(v) => v,
            Store::Mapped { map, offset, len } => {
                let bytes = &map.bytes()[*offset..*offset + len * std::mem::size_of::<T>()];
                assert_eq!(bytes.as_ptr() as usize % std::mem::align_of::<T>(), 0);
                // SAFETY: the range lies inside the mapping (sliced above), is aligned
                // for T (checked), and T is plain data (Pod), so any bytes are values;
                // the mapping lives as long as self.
                unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), *len) }
            }
        }
    }
}

impl<T: Pod> Store<T> {
    /// Bytes of its elements.
    pub fn byte_len(&self) -> usize {
        self.len() * std::mem::size_of::<T>()
    }

    /// The elements as bytes.
    fn as_bytes(&self) -> &[u8] {
        let s: &[T] = self;
        // SAFETY: T is plain data without padding (Pod): its bytes are initialised.
        unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
    }
}

/// Where arrays go in a spill file: 64-byte aligned, one after the other.
#[derive(Default)]
pub struct Layout {
    len: usize,
}

impl Layout {
    /// Reserves room for `s`; returns its byte offset.
    pub fn add<T: Pod>(&mut self, s: &Store<T>) -> usize {
        let at = self.len.next_multiple_of(64);
        self.len = at + s.byte_len();
        at
    }

    /// Total bytes.
    pub fn len(&self) -> usize {
        self.len.max(1)
    }

    /// True when nothing was reserved.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Free bytes for an unprivileged user on the file system holding `dir`.
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c` is a valid NUL-terminated path and `st` points to writable memory
    // of the right type; statvfs writes it only on success (checked).
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs succeeded, so it filled the struct.
    let st = unsafe { st.assume_init() };
    // The field types differ between platforms (u64 on 64-bit Linux).
    #[allow(clippy::unnecessary_cast)]
    let free = st.f_bavail as u64 * st.f_frsize as u64;
    Ok(free)
}

/// A spill file being written: arrays at the offsets a [`Layout`] gave them.
pub struct SpillWriter {
    file: File,
    len: usize,
    written: usize,
    path: std::path::PathBuf,
}

impl SpillWriter {
    /// Creates a new file of `len` bytes in `dir`, refused before anything is written
    /// when the disk has less than `len` free (how much to keep free besides is the
    /// caller's policy: `lsplat_render::placement`).
    pub fn create(dir: &Path, stem: &str, len: usize) -> Result<SpillWriter, String> {
        let free = free_bytes(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if free < len as u64 {
            return Err(format!(
                "disk full: spilling an operator needs {:.3} GB in {} but only {:.3} GB are free; free disk space or lower render.disk_budget",
                len as f64 / 1e9,
                dir.display(),
                free as f64 / 1e9
            ));
        }
        let path = dir.join(format!("{stem}.{}.op", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(SpillWriter {
            file,
            len,
            written: 0,
            path,
        })
    }

    /// Writes `s` at `offset` (offsets must ascend).
    pub fn put<T: Pod>(&mut self, offset: usize, s: &Store<T>) -> Result<(), String> {
        let pad = vec![0u8; offset - self.written];
        let err = |e: std::io::Error| {
            let _ = std::fs::remove_file(&self.path);
            if e.raw_os_error() == Some(libc::ENOSPC) {
                format!(
                    "disk full while spilling an operator to {}",
                    self.path.display()
                )
            } else {
                format!("{}: {e}", self.path.display())
            }
        };
        self.file.write_all(&pad).map_err(err)?;
        self.file.write_all(s.as_bytes()).map_err(err)?;
        self.written = offset + s.byte_len();
        Ok(())
    }

    /// Finishes the file, maps it and unlinks it (the mapping keeps it). With
    /// `probe`, the file is first written through to the disk and dropped from the
    /// page cache, then read once through the mapping: the bytes per second of that
    /// read are returned (the disk's read bandwidth).
    pub fn finish(mut self, probe: bool) -> Result<(Arc<Mapping>, Option<f64>), String> {
        let path = self.path.clone();
        let fail = |e: String| {
            let _ = std::fs::remove_file(&path);
            e
        };
        if self.written < self.len {
            let pad = vec![0u8; self.len - self.written];
            self.file
                .write_all(&pad)
                .map_err(|e| fail(format!("{}: {e}", path.display())))?;
        }
        self.file
            .flush()
            .map_err(|e| fail(format!("{}: {e}", path.display())))?;
        if probe {
            use std::os::fd::AsRawFd;
            self.file
                .sync_data()
                .map_err(|e| fail(format!("{}: {e}", path.display())))?;
            // SAFETY: advice on our own open file descriptor (a hint; its result
            // only affects how fast the read below is).
            unsafe { libc::posix_fadvise(self.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
        let map = Mapping::map(&self.file, self.len)
            .map_err(|e| fail(format!("mapping {}: {e}", path.display())))?;
        std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let bandwidth = probe.then(|| {
            let t = std::time::Instant::now();
            let bytes = map.bytes();
            let mut sum = 0u8;
            for i in (0..bytes.len()).step_by(4096) {
                sum = sum.wrapping_add(bytes[i]);
            }
            std::hint::black_box(sum);
            let secs = t.elapsed().as_secs_f64().max(1e-9);
            map.release();
            bytes.len() as f64 / secs
        });
        Ok((Arc::new(map), bandwidth))
    }
}

/// `s` as a slice of `map` at `offset` (written there by a [`SpillWriter`]).
pub fn mapped<T: Pod>(map: &Arc<Mapping>, offset: usize, s: &Store<T>) -> Store<T> {
    Store::Mapped {
        map: map.clone(),
        offset,
        len: s.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_read_back_from_a_spill_file_that_is_gone() {
        let dir = std::env::temp_dir();
        let a: Store<u32> = (0..1000u32).collect::<Vec<_>>().into();
        let b: Store<u16> = (0..77u16).collect::<Vec<_>>().into();
        let c: Store<f32> = vec![1.5f32, -2.0, 3.25].into();
        let mut lay = Layout::default();
        let (oa, ob, oc) = (lay.add(&a), lay.add(&b), lay.add(&c));
        let mut w = SpillWriter::create(&dir, "store_test", lay.len()).unwrap();
        let path = w.path.clone();
        w.put(oa, &a).unwrap();
        w.put(ob, &b).unwrap();
        w.put(oc, &c).unwrap();
        let (map, bw) = w.finish(true).unwrap();
        assert!(bw.unwrap() > 0.0);
        assert!(!path.exists(), "the spill file is unlinked once mapped");
        let (ma, mb, mc) = (
            mapped(&map, oa, &a),
            mapped(&map, ob, &b),
            mapped(&map, oc, &c),
        );
        drop(map);
        assert_eq!(&ma[..], &a[..]);
        assert_eq!(&mb[..], &b[..]);
        assert_eq!(&mc[..], &c[..]);
        if let Store::Mapped { map, .. } = &ma {
            map.release();
        }
        assert_eq!(&ma[..], &a[..], "released pages read the same");
        assert!(matches!(ma.clone(), Store::Mapped { .. }));
    }

    /// A disk that fills up while the file is written (`/dev/full` answers every
    /// write with ENOSPC): a clear error, not a panic.
    #[test]
    fn a_disk_that_fills_up_gives_a_clear_error() {
        let Ok(file) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
            return;
        };
        let mut w = SpillWriter {
            file,
            len: 4096,
            written: 0,
            path: std::path::PathBuf::from("/dev/full-not-removed"),
        };
        let a: Store<u32> = vec![7u32; 1024].into();
        let e = w.put(0, &a).unwrap_err();
        assert!(e.contains("disk full"), "{e}");
    }

    #[test]
    fn a_spill_larger_than_the_free_disk_is_refused_before_writing() {
        let dir = std::env::temp_dir();
        let free = free_bytes(&dir).unwrap();
        let too_big = (free + 1) as usize;
        let e = SpillWriter::create(&dir, "too_big", too_big).err().unwrap();
        assert!(e.contains("disk full") && e.contains("GB"), "{e}");
        assert!(free_bytes(Path::new("/no/such/dir")).is_err());
    }
}
