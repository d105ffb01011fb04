//! `lsplat-engine info`.

use anyhow::Result;
use lsplat_render::Device;

/// Prints the backends compiled in and the devices found.
pub fn run() -> Result<()> {
    println!("lsplat-engine {}", env!("CARGO_PKG_VERSION"));
    println!("backends compiled in: {}", Device::compiled().join(", "));
    for (backend, devices) in Device::list() {
        match devices {
            Ok(list) if list.is_empty() => println!("{backend}: no device found"),
            Ok(list) => {
                for (i, d) in list.iter().enumerate() {
                    println!("{backend}:{i}: {d}");
                }
            }
            Err(e) => println!("{backend}: {e}"),
        }
    }
    let launcher = match lsplat_dist::detect() {
        Some(l) => format!("started by {} as rank {} of {}", l.name, l.rank, l.ranks),
        None => "no launcher (one rank)".into(),
    };
    println!(
        "collectives: {} ({launcher})",
        if lsplat_dist::MPI_COMPILED {
            "MPI compiled in"
        } else {
            "MPI not compiled in (feature `mpi`)"
        }
    );
    println!("{}", crate::clip::describe_runtime());
    for line in crate::plugins::describe() {
        println!("{line}");
    }
    Ok(())
}
