//! Which launcher started this process, read from the environment it sets.

/// A launcher's announcement: who started us, how many ranks, and which we are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launcher {
    /// `Open MPI mpirun`, `MPICH/Intel MPI (PMI)`, `Slurm srun`.
    pub name: &'static str,
    /// World size announced.
    pub ranks: usize,
    /// This process's rank, as announced.
    pub rank: usize,
}

/// (launcher, size variable, rank variable), in the order they are trusted.
const VARS: [(&str, &str, &str); 4] = [
    (
        "Open MPI mpirun",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_RANK",
    ),
    ("MPICH/Intel MPI (PMI)", "PMI_SIZE", "PMI_RANK"),
    ("MVAPICH", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK"),
    // Set by `srun` for each task of a job step (not by `sbatch` for the batch script).
    ("Slurm srun", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID"),
];

/// The launcher that started this process, if any (from its environment variables).
pub fn detect() -> Option<Launcher> {
    detect_in(|k| std::env::var(k).ok())
}

/// This process's rank among the ranks of its node (0 without a launcher): which
/// GPU of the node a rank uses.
pub fn local_rank() -> usize {
    [
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "MPI_LOCALRANKID",
        "MV2_COMM_WORLD_LOCAL_RANK",
        "SLURM_LOCALID",
    ]
    .iter()
    .find_map(|k| std::env::var(k).ok()?.trim().parse().ok())
    .unwrap_or(0)
}

fn detect_in(get: impl Fn(&str) -> Option<String>) -> Option<Launcher> {
    VARS.iter().find_map(|&(name, size, rank)| {
        let ranks = get(size)?.trim().parse().ok()?;
        let rank = get(rank).and_then(|r| r.trim().parse().ok()).unwrap_or(0);
        Some(Launcher { name, ranks, rank })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launchers_are_read_from_their_variables() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|p| p.0 == k).map(|p| p.1.to_string())
        };
        assert_eq!(detect_in(env(&[])), None);
        assert_eq!(
            detect_in(env(&[
                ("OMPI_COMM_WORLD_SIZE", "4"),
                ("OMPI_COMM_WORLD_RANK", "3")
            ])),
            Some(Launcher {
                name: "Open MPI mpirun",
                ranks: 4,
                rank: 3
            })
        );
        let srun = detect_in(env(&[("SLURM_STEP_NUM_TASKS", "8"), ("SLURM_PROCID", "5")]));
        assert_eq!(srun.map(|l| (l.ranks, l.rank)), Some((8, 5)));
        // A garbled size is no announcement.
        assert_eq!(detect_in(env(&[("PMI_SIZE", "x")])), None);
    }
}
