//! Memory checks before large allocations: a buffer that cannot fit is an error
//! naming it, never an aborted process.

use crate::CoreError;

/// Bytes of memory available to this process now: the least of `MemAvailable` of
/// `/proc/meminfo`, the room left under this process's cgroup (v2) memory limit (a
/// container, a Slurm job) and `LSPLAT_MEMORY_LIMIT` (bytes, e.g. `8e9`: a cap a
/// user sets, and what tests use for a machine-independent limit); `None` where none
/// is known.
pub fn available_bytes() -> Option<u64> {
    [meminfo_available(), cgroup_room(), env_limit()]
        .into_iter()
        .flatten()
        .min()
}

fn meminfo_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib = line.split_whitespace().nth(1)?.parse::<u64>().ok()?;
    Some(kib * 1024)
}

/// `memory.max − memory.current` of this process's cgroup (v2), when limited.
fn cgroup_room() -> Option<u64> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cg.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let max = read("memory.max")?.trim().parse::<u64>().ok()?;
    let current = read("memory.current")?.trim().parse::<u64>().ok()?;
    Some(max.saturating_sub(current))
}

fn env_limit() -> Option<u64> {
    let v = std::env::var("LSPLAT_MEMORY_LIMIT").ok()?;
    let b = v.trim().parse::<f64>().ok()?;
    (b.is_finite() && b >= 0.0).then_some(b as u64)
}

/// `count` elements of `elem_bytes` each, or an error when the product overflows or
/// exceeds the available memory. `what` names the buffer in the error.
pub fn check_fits(what: &str, count: u64, elem_bytes: u64) -> Result<u64, CoreError> {
    let bytes = count
        .checked_mul(elem_bytes)
        .filter(|b| *b <= isize::MAX as u64);
    let available = available_bytes();
    match (bytes, available) {
        (Some(b), Some(a)) if b > a => Err(CoreError::OutOfMemory {
            what: what.into(),
            bytes: Some(b),
            available,
        }),
        (Some(b), _) => Ok(b),
        (None, _) => Err(CoreError::OutOfMemory {
            what: what.into(),
            bytes: None,
            available,
        }),
    }
}

/// A vector of `count` copies of `value`, after [`check_fits`] and a fallible
/// reservation (an allocation the system refuses is an error, not an abort).
pub fn try_filled<T: Clone>(what: &str, count: usize, value: T) -> Result<Vec<T>, CoreError> {
    let elem = std::mem::size_of::<T>() as u64;
    let bytes = check_fits(what, count as u64, elem)?;
    let mut v = Vec::new();
    v.try_reserve_exact(count)
        .map_err(|_| CoreError::OutOfMemory {
            what: what.into(),
            bytes: Some(bytes),
            available: available_bytes(),
        })?;
    v.resize(count, value);
    Ok(v)
}

/// `GB` with one decimal, for messages.
pub fn gb(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impossible_buffers_are_errors() {
        let e = check_fits("the frame", u64::MAX / 2, 4)
            .unwrap_err()
            .to_string();
        assert!(e.contains("the frame") && e.contains("too large"), "{e}");
        if available_bytes().is_some() {
            let e = try_filled::<f32>("a camera", 1 << 60, 0.0)
                .unwrap_err()
                .to_string();
            assert!(e.contains("a camera") && e.contains("available"), "{e}");
        }
        assert_eq!(try_filled("small", 3, 7u8).unwrap(), [7, 7, 7]);
    }
}
