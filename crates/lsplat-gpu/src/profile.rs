//! A per-kernel time table for finding where a GPU step goes, switched on with
//! `LSPLAT_GPU_PROFILE=1`. Each launch is then bracketed by two synchronisations, so
//! the step gets slower and its host↔device overlap is lost: use it to rank kernels,
//! and `bench` without it for step times.

use std::collections::HashMap;
use std::time::Duration;

/// Launch count and summed wall time per kernel name.
#[derive(Default)]
pub(crate) struct Profile {
    rows: HashMap<String, (u64, Duration)>,
}

impl Profile {
    /// Whether `LSPLAT_GPU_PROFILE=1` is set.
    pub(crate) fn requested() -> bool {
        std::env::var("LSPLAT_GPU_PROFILE").is_ok_and(|v| v == "1")
    }

    pub(crate) fn add(&mut self, name: &str, took: Duration) {
        let row = self.rows.entry(name.to_string()).or_default();
        row.0 += 1;
        row.1 += took;
    }

    /// The table, slowest kernel first: total ms, share, launches, µs per launch.
    pub(crate) fn table(&self, device: &str) -> String {
        let mut rows: Vec<_> = self.rows.iter().collect();
        rows.sort_by(|a, b| b.1.1.cmp(&a.1.1).then(a.0.cmp(b.0)));
        let total: f64 = rows.iter().map(|r| r.1.1.as_secs_f64()).sum();
        let mut out = format!("kernel time on {device} (LSPLAT_GPU_PROFILE=1)\n");
        out += &format!(
            "{:>10} {:>6} {:>8} {:>10}  kernel\n",
            "total ms", "share", "launches", "µs/launch"
        );
        for (name, (n, t)) in rows {
            let s = t.as_secs_f64();
            out += &format!(
                "{:>10.2} {:>5.1}% {:>8} {:>10.1}  {name}\n",
                s * 1e3,
                100.0 * s / total.max(f64::MIN_POSITIVE),
                n,
                s * 1e6 / *n as f64
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_ranks_kernels_by_total_time() {
        let mut p = Profile::default();
        p.add("fast", Duration::from_micros(10));
        p.add("slow", Duration::from_micros(300));
        p.add("fast", Duration::from_micros(30));
        let t = p.table("dev");
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[2].ends_with("slow"), "{t}");
        assert!(lines[3].ends_with("fast"), "{t}");
        assert!(lines[3].contains(" 2 ") && lines[3].contains("20.0"), "{t}");
    }
}
