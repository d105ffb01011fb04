//! Where the operators of many cameras live when they do not all fit the memory
//! budget: the first ones in memory, the rest spilled to disk (files mapped into
//! memory, see `lsplat_cpu::store`) or rebuilt on every use, whichever a simple cost
//! model finds cheaper: a spilled operator costs `bytes / read bandwidth` per use
//! (the bandwidth measured once, on the first spill), a rebuilt one its measured
//! build time.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use lsplat_core::config::WeightPrecision;
use lsplat_device::{Backend, DeviceError, Result};

/// Where spilled operators go.
#[derive(Clone, Debug, PartialEq)]
pub struct SpillTarget {
    /// The run's cache folder (created when the first operator is spilled).
    pub dir: PathBuf,
    /// Bytes the spilled operators may take (unset: the free space less `keep_free`).
    pub disk_budget: Option<u64>,
    /// Bytes always left free on the disk besides the spilled operators.
    pub keep_free: u64,
    /// The disk's read bandwidth (bytes per second) to assume; unset: measured on
    /// the first operator spilled.
    pub read_bandwidth: Option<f64>,
}

/// How many cameras' operators are held in memory, on disk and rebuilt per use.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Placement {
    /// Cameras with an operator.
    pub cameras: usize,
    /// Held in memory.
    pub memory: usize,
    /// Spilled to disk.
    pub disk: usize,
    /// Rebuilt on every use.
    pub rebuilt: usize,
    /// Bytes on disk.
    pub disk_bytes: u64,
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gb = self.disk_bytes as f64 / 1e9;
        let digits = if gb >= 10.0 || gb == 0.0 { 0 } else { 2 };
        write!(
            f,
            "caching {} of {} cameras in memory, {} on disk ({gb:.digits$} GB), {} rebuilt per step",
            self.memory, self.cameras, self.disk, self.rebuilt
        )
    }
}

/// What the cost model is given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Costs {
    /// Cameras with an operator.
    pub cameras: usize,
    /// Bytes of one operator (measured on the first camera).
    pub bytes: u64,
    /// Bytes the operators may hold in memory.
    pub memory_budget: u64,
    /// Bytes the spilled operators may take on disk (0: no spilling).
    pub disk_room: u64,
    /// Seconds to build one operator (measured).
    pub build_seconds: f64,
    /// The disk's read bandwidth in bytes per second (`None`: not measured, no
    /// spilling).
    pub read_bandwidth: Option<f64>,
}

/// What to tell a user whose plan rebuilds operators that store their weights: the
/// CPU's `recompute` layout holds each in about a fifth of the bytes.
pub fn recompute_hint(plan: &Placement, precision: WeightPrecision) -> Option<&'static str> {
    (plan.rebuilt > 0 && precision != WeightPrecision::Recompute).then_some(
        "on the CPU, `render.operator_precision = \"recompute\"` holds an operator in \
         about a fifth of f32's bytes (two fifths of compact's), its weights recomputed \
         exactly in each product, so fewer cameras would be rebuilt",
    )
}

/// The planned placement: memory first, then disk when reading an operator back
/// is faster than building it again, the rest rebuilt.
pub fn plan(c: &Costs) -> Placement {
    let bytes = c.bytes.max(1);
    let memory = ((c.memory_budget / bytes) as usize).min(c.cameras);
    let rest = c.cameras - memory;
    let reading_is_cheaper = c
        .read_bandwidth
        .is_some_and(|bw| bw > 0.0 && (bytes as f64 / bw) < c.build_seconds);
    let disk = if reading_is_cheaper {
        ((c.disk_room / bytes) as usize).min(rest)
    } else {
        0
    };
    Placement {
        cameras: c.cameras,
        memory,
        disk,
        rebuilt: rest - disk,
        disk_bytes: disk as u64 * bytes,
    }
}

/// Places operators one by one as they are built: in memory while the budget
/// allows, then on disk up to the plan's disk share and the disk room, the rest
/// dropped (to be rebuilt on use). Made with the first operator, which also
/// measures the disk when some cameras will not fit in memory.
pub struct Placer {
    target: Option<SpillTarget>,
    budget: u64,
    plan: Placement,
    disk_room: u64,
    /// Counts as placed so far.
    pub placed: Placement,
    held: u64,
}

impl Placer {
    /// Plans from the first operator built (`bytes`, built in `build`): when the
    /// `cameras` will not all fit `budget` and there is a spill target with room,
    /// spills `op` once to measure the disk's read bandwidth (that copy is dropped).
    pub fn new<B: Backend>(
        dev: &B,
        target: Option<SpillTarget>,
        cameras: usize,
        budget: u64,
        op: &B::Operator,
        build: Duration,
    ) -> Result<Placer> {
        let bytes = dev.operator_stats(op).bytes as u64;
        let mut disk_room = 0;
        let mut bandwidth = None;
        if let Some(t) = &target
            && (cameras as u64).saturating_mul(bytes) > budget
            && t.disk_budget != Some(0)
        {
            std::fs::create_dir_all(&t.dir)
                .map_err(|e| DeviceError::Spill(format!("{}: {e}", t.dir.display())))?;
            let free = lsplat_cpu::store::free_bytes(&t.dir)
                .map_err(|e| DeviceError::Spill(format!("{}: {e}", t.dir.display())))?
                .saturating_sub(t.keep_free);
            disk_room = t.disk_budget.map_or(free, |b| b.min(free));
            if let Some(bw) = t.read_bandwidth {
                bandwidth = Some(bw);
            } else if disk_room >= bytes
                && let Some((_, bw)) = dev.spill_operator(op, &t.dir, "probe", true)?
            {
                bandwidth = bw;
            }
        }
        let plan = plan(&Costs {
            cameras,
            bytes,
            memory_budget: budget,
            disk_room,
            build_seconds: build.as_secs_f64(),
            read_bandwidth: bandwidth,
        });
        Ok(Placer {
            target,
            budget,
            plan,
            disk_room,
            placed: Placement {
                cameras,
                ..Default::default()
            },
            held: 0,
        })
    }

    /// The plan made from the first operator (what is announced at start).
    pub fn plan(&self) -> &Placement {
        &self.plan
    }

    /// Bytes held in memory by the operators placed there.
    pub fn held(&self) -> u64 {
        self.held
    }

    /// Places the operator of the camera `stem` names: `Some` (itself, or its
    /// spilled copy) to keep, `None` to rebuild on every use.
    pub fn place<B: Backend>(
        &mut self,
        dev: &B,
        op: B::Operator,
        stem: &str,
    ) -> Result<Option<B::Operator>> {
        let bytes = dev.operator_stats(&op).bytes as u64;
        if self.held + bytes <= self.budget {
            self.held += bytes;
            self.placed.memory += 1;
            return Ok(Some(op));
        }
        if let Some(spilled) = self.try_spill(dev, &op, stem)? {
            return Ok(Some(spilled));
        }
        self.placed.rebuilt += 1;
        Ok(None)
    }

    /// `op`, an operator held in memory, moved to disk to make room under the memory
    /// budget: when the plan spills at all and the disk room allows, whatever the
    /// plan's count of cameras on disk (operators that came out larger than the first,
    /// and the spilled ones' resident parts, leave fewer in memory than planned).
    pub fn demote<B: Backend>(
        &mut self,
        dev: &B,
        op: &B::Operator,
        stem: &str,
    ) -> Result<Option<B::Operator>> {
        let allowed = self.plan.disk > 0;
        self.spill_if(allowed, dev, op, stem)
    }

    /// `op` spilled to disk when the plan's disk share and the disk room allow.
    pub fn try_spill<B: Backend>(
        &mut self,
        dev: &B,
        op: &B::Operator,
        stem: &str,
    ) -> Result<Option<B::Operator>> {
        let allowed = self.placed.disk < self.plan.disk;
        self.spill_if(allowed, dev, op, stem)
    }

    /// `op` spilled when `allowed`, spilling is on and the disk room holds it.
    fn spill_if<B: Backend>(
        &mut self,
        allowed: bool,
        dev: &B,
        op: &B::Operator,
        stem: &str,
    ) -> Result<Option<B::Operator>> {
        let bytes = dev.operator_stats(op).bytes as u64;
        if let Some(t) = &self.target
            && allowed
            && self.placed.disk_bytes + bytes <= self.disk_room
            && let Some((spilled, _)) = dev.spill_operator(op, &t.dir, stem, false)?
        {
            self.placed.disk += 1;
            self.placed.disk_bytes += bytes;
            return Ok(Some(spilled));
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recompute_hint_comes_only_with_operators_rebuilt() {
        let mut p = Placement {
            cameras: 10,
            memory: 6,
            disk: 4,
            ..Placement::default()
        };
        assert_eq!(recompute_hint(&p, WeightPrecision::F32), None);
        p.disk = 0;
        p.rebuilt = 4;
        for w in [WeightPrecision::F32, WeightPrecision::Compact] {
            assert!(recompute_hint(&p, w).is_some_and(|h| h.contains("\"recompute\"")));
        }
        assert_eq!(recompute_hint(&p, WeightPrecision::Recompute), None);
    }

    fn costs() -> Costs {
        Costs {
            cameras: 299,
            bytes: 170_000_000,
            memory_budget: 61 * 170_000_000 + 5,
            disk_room: 100_000_000_000,
            build_seconds: 1.2,
            read_bandwidth: Some(1e9),
        }
    }

    #[test]
    fn memory_first_then_disk_when_reading_is_cheaper_than_building() {
        let p = plan(&costs());
        assert_eq!((p.memory, p.disk, p.rebuilt), (61, 238, 0));
        assert_eq!(
            p.to_string(),
            "caching 61 of 299 cameras in memory, 238 on disk (40 GB), 0 rebuilt per step"
        );
        // A slow disk (0.2 s to read against 0.1 s to build): rebuilt.
        let slow = plan(&Costs {
            build_seconds: 0.1,
            read_bandwidth: Some(0.85e9),
            ..costs()
        });
        assert_eq!((slow.memory, slow.disk, slow.rebuilt), (61, 0, 238));
        // No measured disk, or not enough room: the rest rebuilt.
        let none = plan(&Costs {
            read_bandwidth: None,
            ..costs()
        });
        assert_eq!(none.rebuilt, 238);
        let small = plan(&Costs {
            disk_room: 10 * 170_000_000 + 1,
            ..costs()
        });
        assert_eq!((small.disk, small.rebuilt), (10, 228));
        assert_eq!(
            small.to_string(),
            "caching 61 of 299 cameras in memory, 10 on disk (1.70 GB), 228 rebuilt per step"
        );
        // Everything fits.
        let all = plan(&Costs {
            memory_budget: u64::MAX,
            ..costs()
        });
        assert_eq!((all.memory, all.disk, all.rebuilt), (299, 0, 0));
    }
}
