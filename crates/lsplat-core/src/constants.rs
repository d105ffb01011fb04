//! Rasterizer constants, defined once.
//!
//! These follow the LangSplat rasterizer (Inria 3DGS) and gsplat; see
//! `shared/rasterizer-notes.md` §1. The CPU backend uses them directly, the GPU
//! backends receive them as `-D` defines through [`kernel_defines`], so there is a
//! single source of truth.

/// A pair is skipped when its alpha is below this value (1/255).
pub const ALPHA_THRESHOLD: f32 = 1.0 / 255.0;
/// Alpha is clamped to this value.
pub const MAX_ALPHA: f32 = 0.99;
/// Compositing stops (exclusively) when the transmittance would fall to or below this.
pub const TRANSMITTANCE_STOP: f32 = 1e-4;
/// Screen-space blur added to the diagonal of every projected covariance (pixels²).
pub const EPS2D: f32 = 0.3;
/// Maximum extent of a splat, in standard deviations.
pub const EXTENT_SIGMA: f32 = 3.33;
/// Field-of-view guard band for the projection Jacobian (as in 3DGS and gsplat).
pub const FOV_GUARD: f32 = 1.3;
/// Epsilon of the LangSplat V1 per-Gaussian normalisation f = x / (|x| + eps).
pub const NORM_EPS: f32 = 1e-9;
/// Floor of |F|·|G| in the cosine loss (as PyTorch's `cosine_similarity`).
pub const COS_EPS: f32 = 1e-8;
/// Default near plane (camera z) below which Gaussians are culled.
pub const DEFAULT_NEAR: f32 = 0.01;
/// Default far plane.
pub const DEFAULT_FAR: f32 = 1e10;
/// Tile sizes the engine supports.
pub const SUPPORTED_TILE_SIZES: [u32; 2] = [8, 16];

/// The constants as `(name, value)` pairs for kernel compilers (`-DNAME=value`).
/// Float values are written with enough digits to round-trip exactly.
pub fn kernel_defines() -> Vec<(&'static str, String)> {
    vec![
        ("LS_ALPHA_THRESHOLD", float_literal(ALPHA_THRESHOLD)),
        ("LS_MAX_ALPHA", float_literal(MAX_ALPHA)),
        ("LS_TRANSMITTANCE_STOP", float_literal(TRANSMITTANCE_STOP)),
        ("LS_EPS2D", float_literal(EPS2D)),
        ("LS_EXTENT_SIGMA", float_literal(EXTENT_SIGMA)),
        ("LS_FOV_GUARD", float_literal(FOV_GUARD)),
        ("LS_NORM_EPS", float_literal(NORM_EPS)),
        ("LS_COS_EPS", float_literal(COS_EPS)),
    ]
}

/// A C float literal that parses back to exactly `v`.
pub fn float_literal(v: f32) -> String {
    // `{:e}` on f32 prints the shortest representation that round-trips.
    format!("{v:e}f")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defines_round_trip() {
        for (name, lit) in kernel_defines() {
            let parsed: f32 = lit.trim_end_matches('f').parse().unwrap();
            let expect = match name {
                "LS_ALPHA_THRESHOLD" => ALPHA_THRESHOLD,
                "LS_MAX_ALPHA" => MAX_ALPHA,
                "LS_TRANSMITTANCE_STOP" => TRANSMITTANCE_STOP,
                "LS_EPS2D" => EPS2D,
                "LS_EXTENT_SIGMA" => EXTENT_SIGMA,
                "LS_FOV_GUARD" => FOV_GUARD,
                "LS_NORM_EPS" => NORM_EPS,
                "LS_COS_EPS" => COS_EPS,
                other => panic!("unexpected define {other}"),
            };
            assert_eq!(parsed.to_bits(), expect.to_bits(), "{name} = {lit}");
        }
    }

    #[test]
    fn transmittance_stop_is_square_of_one_minus_clamp() {
        let t = (1.0 - MAX_ALPHA) * (1.0 - MAX_ALPHA);
        assert!((t - TRANSMITTANCE_STOP).abs() < 1e-9);
    }
}
