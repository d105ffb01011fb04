//! The CUDA/HIP kernel sources of lsplat-engine and their compile-time defines.
//!
//! Kernels live as `.cu` files beside this crate, one per op family, plus the shared
//! headers `compat.h` (CUDA/HIP differences) and `walk.h` (the front-to-back tile
//! walk). Backends compile them at run time (NVRTC, hiprtc) with [`defines`]: the
//! rasterizer constants of [`lsplat_core::constants::kernel_defines`] plus the tile
//! size (`LS_TILE_SIZE`) and channel count (`LS_CHANNELS`) — the single source of
//! truth for every constant. [`Kernel::source`] returns a self-contained translation
//! unit with the headers spliced in (`#line` directives keep diagnostics pointing at
//! the original files), so no include path is needed.

/// The shared CUDA/HIP compatibility header.
pub const COMPAT_H: &str = include_str!("../compat.h");
/// The shared front-to-back tile walk.
pub const WALK_H: &str = include_str!("../walk.h");

/// Headers that `#include "..."` lines may name, in dependency order.
pub const HEADERS: [(&str, &str); 2] = [("compat.h", COMPAT_H), ("walk.h", WALK_H)];

/// One op family (one `.cu` file).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kernel {
    /// Fills, exclusive scans, segment offsets.
    Util,
    /// EWA projection.
    Project,
    /// Tile binning and the radix sort.
    Bins,
    /// Direct compositing and its feature-only backward.
    Raster,
    /// Operator build (count + fill to CSR, CSC copy) and SpMM.
    Operator,
    /// Masked L1 / cosine losses.
    Loss,
    /// Normalisation and fused Adam.
    Optim,
}

impl Kernel {
    /// Every family.
    pub const ALL: [Kernel; 7] = [
        Kernel::Util,
        Kernel::Project,
        Kernel::Bins,
        Kernel::Raster,
        Kernel::Operator,
        Kernel::Loss,
        Kernel::Optim,
    ];

    /// File name of the family's source.
    pub fn file_name(self) -> &'static str {
        match self {
            Kernel::Util => "util.cu",
            Kernel::Project => "project.cu",
            Kernel::Bins => "bins.cu",
            Kernel::Raster => "raster.cu",
            Kernel::Operator => "operator.cu",
            Kernel::Loss => "loss.cu",
            Kernel::Optim => "optim.cu",
        }
    }

    /// The raw source as written (with `#include` lines).
    pub fn raw_source(self) -> &'static str {
        match self {
            Kernel::Util => include_str!("../util.cu"),
            Kernel::Project => include_str!("../project.cu"),
            Kernel::Bins => include_str!("../bins.cu"),
            Kernel::Raster => include_str!("../raster.cu"),
            Kernel::Operator => include_str!("../operator.cu"),
            Kernel::Loss => include_str!("../loss.cu"),
            Kernel::Optim => include_str!("../optim.cu"),
        }
    }

    /// Whether the compiled code depends on `LS_TILE_SIZE`.
    pub fn uses_tile_size(self) -> bool {
        matches!(self, Kernel::Project | Kernel::Raster | Kernel::Operator)
    }

    /// Whether the compiled code depends on `LS_CHANNELS`.
    pub fn uses_channels(self) -> bool {
        matches!(self, Kernel::Raster)
    }

    /// A self-contained translation unit: the family's source with its headers
    /// spliced in (each once).
    pub fn source(self) -> String {
        let mut out = String::new();
        let mut seen = Vec::new();
        splice(self.file_name(), self.raw_source(), &mut seen, &mut out);
        out
    }
}

/// A plugin's kernel source made self-contained: its `#include "compat.h"` (and
/// the other engine headers) spliced in, `name` naming it in diagnostics.
pub fn plugin_source(name: &str, raw: &str) -> String {
    let mut out = String::new();
    let mut seen = Vec::new();
    splice(name, raw, &mut seen, &mut out);
    out
}

/// The `-D` defines every plugin kernel gets: the rasterizer constants, and
/// `LS_TILE_SIZE` / `LS_CHANNELS` at their defaults (16, 1), which `compat.h`
/// requires but plugin ops take as arguments instead.
pub fn plugin_defines() -> Vec<(String, String)> {
    defines(16, 1)
}

fn splice(name: &str, text: &str, seen: &mut Vec<&'static str>, out: &mut String) {
    out.push_str(&format!("#line 1 \"{name}\"\n"));
    for (i, line) in text.lines().enumerate() {
        let include = line
            .trim()
            .strip_prefix("#include \"")
            .and_then(|r| r.strip_suffix('"'));
        match include.and_then(|inc| HEADERS.iter().find(|(h, _)| *h == inc)) {
            Some(&(h, body)) => {
                if !seen.contains(&h) {
                    seen.push(h);
                    splice(h, body, seen, out);
                }
                out.push_str(&format!("#line {} \"{name}\"\n", i + 2));
            }
            None if line.trim() == "#pragma once" => out.push('\n'),
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
}

/// Tile sizes the kernels support (from `lsplat_core`).
pub const TILE_SIZES: [u32; 2] = lsplat_core::constants::SUPPORTED_TILE_SIZES;

/// The `-D` defines for a (tile size, channel count) pair: the rasterizer constants
/// plus `LS_TILE_SIZE` and `LS_CHANNELS`, as `(name, value)`.
pub fn defines(tile_size: u32, channels: u32) -> Vec<(String, String)> {
    let mut d: Vec<(String, String)> = lsplat_core::constants::kernel_defines()
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect();
    d.push(("LS_TILE_SIZE".into(), format!("{tile_size}u")));
    d.push(("LS_CHANNELS".into(), format!("{channels}u")));
    d
}

/// [`defines`] as compiler flags (`-DNAME=VALUE`).
pub fn define_flags(tile_size: u32, channels: u32) -> Vec<String> {
    defines(tile_size, channels)
        .into_iter()
        .map(|(n, v)| format!("-D{n}={v}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_self_contained() {
        for k in Kernel::ALL {
            let src = k.source();
            assert!(!src.contains("#include"), "{k:?} still includes a file");
            assert!(src.contains("ls_lane_mask"), "{k:?} lacks compat.h");
            assert_eq!(src.matches("typedef unsigned int u32;").count(), 1, "{k:?}");
        }
    }

    #[test]
    fn no_constant_is_hard_coded() {
        // The rasterizer constants may only reach the kernels as defines.
        for k in Kernel::ALL {
            for lit in ["255", "0.99", "1e-4", "0.0001", "3.33", "1e-9"] {
                assert!(
                    !k.raw_source().contains(lit),
                    "{} hard-codes {lit}",
                    k.file_name()
                );
            }
        }
    }

    #[test]
    fn defines_cover_tile_and_channels() {
        let f = define_flags(8, 64);
        assert!(f.contains(&"-DLS_TILE_SIZE=8u".to_string()));
        assert!(f.contains(&"-DLS_CHANNELS=64u".to_string()));
        assert!(f.iter().any(|d| d.starts_with("-DLS_MAX_ALPHA=")));
    }
}
