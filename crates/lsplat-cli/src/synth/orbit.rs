//! `synth`'s orbit cameras, framed so the subject fits: the orbit's radius is the
//! smallest at which at least [`FRAMED`] of the opaque Gaussians' centres project
//! inside every image.

use anyhow::{Result, bail};
use glam::Vec3;
use lsplat_core::{Camera, Gaussians};

/// Share of the opaque Gaussians' centres each orbit image must hold (a few stray
/// floaters may fall outside; the bound is 99 %).
pub const FRAMED: f64 = 0.995;
/// Opacity from which a Gaussian counts as part of the subject.
pub const OPAQUE: f32 = 0.5;
/// Elevation of the orbit above the centre's horizontal plane.
const ELEVATION_DEG: f32 = 25.0;
/// Vertical field of view of the orbit cameras (radians).
pub const FOV_Y: f32 = 0.9;

/// The orbit's settings.
pub struct Orbit {
    /// Cameras.
    pub count: u32,
    /// Image size.
    pub size: (u32, u32),
    /// The up axis, e.g. `-y`.
    pub up: String,
}

/// The up vector named by `up` (`x`, `y`, `z` with an optional `-`) and the axis.
pub(crate) fn up_axis(up: &str) -> Result<(Vec3, usize)> {
    let axis = match up.trim_start_matches('-') {
        "x" => 0,
        "y" => 1,
        "z" => 2,
        other => bail!("--up {other}: expected x, y, z, -x, -y or -z"),
    };
    let mut v = Vec3::ZERO;
    v[axis] = if up.starts_with('-') { -1.0 } else { 1.0 };
    Ok((v, axis))
}

/// The centres of the subject: the Gaussians with opacity ≥ [`OPAQUE`] (all of them
/// when fewer than 1 % are).
pub fn subject(g: &Gaussians) -> Vec<Vec3> {
    let opaque: Vec<Vec3> = (0..g.len())
        .filter(|&i| g.opacity(i) >= OPAQUE)
        .map(|i| Vec3::from(g.means[i]))
        .collect();
    if opaque.len() * 100 >= g.len() && !opaque.is_empty() {
        opaque
    } else {
        g.means.iter().map(|m| Vec3::from(*m)).collect()
    }
}

/// Middle of the range between the 0.5th and 99.5th percentile of each coordinate.
fn robust_centre(pts: &[Vec3]) -> Vec3 {
    let mut c = Vec3::ZERO;
    for k in 0..3 {
        let mut v: Vec<f32> = pts.iter().map(|p| p[k]).collect();
        v.sort_by(f32::total_cmp);
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        c[k] = 0.5 * (at(0.005) + at(0.995));
    }
    c
}

/// Orbit cameras `frame_00001…` around the subject, all at one radius: per camera the
/// smallest distance at which [`FRAMED`] of the subject's centres project inside the
/// image (from each centre's own bound, `max(|x|/tan_x, |y|/tan_y) − z` in the
/// camera's axes), the largest over the cameras, times 1.02.
pub fn cameras(g: &Gaussians, o: &Orbit) -> Result<Vec<Camera>> {
    if g.is_empty() {
        bail!("the splat has no Gaussians to orbit");
    }
    let (up, axis) = up_axis(&o.up)?;
    let e1 = {
        let mut e = Vec3::ZERO;
        e[(axis + 1) % 3] = 1.0;
        e
    };
    let e2 = up.cross(e1);
    let pts = subject(g);
    let centre = robust_centre(&pts);
    let (w, h) = o.size;
    let f = 0.5 * h as f32 / (0.5 * FOV_Y).tan();
    let (tan_x, tan_y) = (0.5 * w as f32 / f, 0.5 * h as f32 / f);
    let el = ELEVATION_DEG.to_radians();
    let dirs: Vec<Vec3> = (0..o.count)
        .map(|c| {
            let az = std::f32::consts::TAU * c as f32 / o.count as f32;
            az.cos() * el.cos() * e1 + az.sin() * el.cos() * e2 + el.sin() * up
        })
        .collect();
    let mut radius = 0f32;
    let mut need = Vec::with_capacity(pts.len());
    for &d in &dirs {
        // The camera looks along −d; its axes as Camera::look_at builds them.
        let fwd = -d;
        let right = fwd.cross(up).normalize();
        let down = fwd.cross(right);
        need.clear();
        need.extend(pts.iter().map(|p| {
            let q = *p - centre;
            let (x, y, z) = (q.dot(right), q.dot(down), q.dot(fwd));
            (x.abs() / tan_x).max(y.abs() / tan_y) - z
        }));
        let k = ((need.len() as f64 * FRAMED).ceil() as usize).clamp(1, need.len()) - 1;
        let (_, at, _) = need.select_nth_unstable_by(k, f32::total_cmp);
        radius = radius.max(*at);
    }
    // A subject of one point (or all on the axis) still gets a distance.
    let extent = pts
        .iter()
        .map(|p| (*p - centre).length())
        .fold(0f32, f32::max);
    let radius = (1.02 * radius).max(1e-3 * extent.max(1.0));
    let mut cams = Vec::with_capacity(dirs.len());
    for (c, &d) in dirs.iter().enumerate() {
        let cam = Camera::look_at(
            format!("frame_{:05}", c + 1),
            (w, h),
            FOV_Y,
            centre + radius * d,
            centre,
            up,
        );
        cam.validate()?;
        cams.push(cam);
    }
    Ok(cams)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Share of `pts` that project inside `cam`'s image (in front of it).
    pub fn inside_share(cam: &Camera, pts: &[Vec3]) -> f64 {
        let inside = pts
            .iter()
            .filter(|p| {
                let c = cam.rotation * **p + cam.translation;
                if c.z <= 0.0 {
                    return false;
                }
                let u = cam.fx * c.x / c.z + cam.cx;
                let v = cam.fy * c.y / c.z + cam.cy;
                (0.0..=cam.width as f32).contains(&u) && (0.0..=cam.height as f32).contains(&v)
            })
            .count();
        inside as f64 / pts.len().max(1) as f64
    }

    /// A long thin subject off the origin is framed in every view: ≥ 99.5 % of its
    /// centres inside each image, and it fills a good part of the image (the radius is
    /// not simply large).
    #[test]
    fn an_elongated_subject_is_framed_in_every_view() {
        let mut rng = lsplat_core::Rng::new(2);
        let n = 4000;
        let mut g = Gaussians::default();
        for _ in 0..n {
            g.means.push([
                5.0 + 0.2 * rng.normal(),
                3.0 * rng.normal(),
                0.3 * rng.normal(),
            ]);
            g.log_scales.push([-4.0; 3]);
            g.rotations.push([1.0, 0.0, 0.0, 0.0]);
            g.opacity_logits.push(2.0);
        }
        let o = Orbit {
            count: 12,
            size: (64, 48),
            up: "-y".into(),
        };
        let cams = cameras(&g, &o).unwrap();
        let pts = subject(&g);
        for cam in &cams {
            let share = inside_share(cam, &pts);
            assert!(share >= 0.995, "{}: {share}", cam.name);
        }
        // Tight: at the radius of 80 % of the framed one, some view loses ≥ 1 %.
        let tighter: Vec<Camera> = cams
            .iter()
            .map(|c| {
                let centre = robust_centre(&pts);
                let eye = centre + 0.8 * (c.centre() - centre);
                Camera::look_at(
                    &c.name,
                    (64, 48),
                    FOV_Y,
                    eye,
                    centre,
                    Vec3::new(0.0, -1.0, 0.0),
                )
            })
            .collect();
        assert!(tighter.iter().any(|c| inside_share(c, &pts) < 0.99));
    }
}
