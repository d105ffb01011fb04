//! The embedded demo scene: a synthetic "teacher" with known features.
//!
//! A few ellipsoidal objects stand on a floor. Each object is covered with flat,
//! opaque surface splats; the floor is clutter that no mask covers. Every object is
//! split into segments per LangSplat level (level 3: the whole object, level 2: upper
//! and lower half, level 1: quarters), and every segment has a known unit feature.
//! The segmentation maps are made by ray casting the analytic ellipsoids (not by the
//! rasterizer), then eroded by two pixels so that masks, like SAM's, stay inside the
//! silhouettes. So the targets are independent of the renderer under test, and a
//! correct trainer can recover each segment's feature.

use glam::{Mat3, Quat, Vec3};
use lsplat_core::config::DemoConfig;
use lsplat_core::{Camera, Gaussians, Rng};

use crate::{DataError, ImageLabels, SceneData};

/// The embedded demo scene file (`scenes/demo.toml`): what `train` with no scene
/// file runs.
pub const DEMO_SCENE: &str = include_str!("../../../scenes/demo.toml");

/// Feature dimension of the demo (LangSplat V1's autoencoded codes).
pub const DEMO_DIM: usize = 3;

/// One ellipsoid object.
#[derive(Clone, Debug)]
pub struct DemoObject {
    /// Centre.
    pub centre: Vec3,
    /// Semi-axes along x, y, z.
    pub radii: Vec3,
}

/// The generated demo with its ground truth.
#[derive(Clone, Debug)]
pub struct Demo {
    /// Scene data for the requested level.
    pub scene: SceneData,
    /// The objects.
    pub objects: Vec<DemoObject>,
    /// Unit feature of every segment: `segment_features[level - 1][object * 4 + segment]`
    /// (levels with fewer segments repeat them).
    pub segment_features: Vec<Vec<[f32; 3]>>,
}

/// Segment of a point on object `o` at `level` (0..4; level 3 has one, level 2 two).
fn segment(obj: &DemoObject, p: Vec3, level: u8) -> u32 {
    let d = p - obj.centre;
    let upper = (d.z >= 0.0) as u32;
    let side = (d.x >= 0.0) as u32;
    match level {
        3 => 0,
        2 => upper,
        _ => upper * 2 + side,
    }
}

/// Generates the demo scene for `level` (1, 2 or 3).
pub fn generate(cfg: &DemoConfig, level: u8) -> Result<Demo, DataError> {
    let pixels = cfg.width as u64 * cfg.height as u64;
    if pixels > u32::MAX as u64 {
        return Err(DataError::Scene(format!(
            "demo images of {}x{} exceed 2^32 pixels, the largest image supported",
            cfg.width, cfg.height
        )));
    }
    // Labels of every image (8 bytes per valid pixel) plus two maps while one renders,
    // and the Gaussians (14 floats each, twice while generated, and their features,
    // gradients and Adam moments: about 160 bytes each).
    let bytes = (pixels * (cfg.cameras as u64 + 1))
        .saturating_mul(8)
        .saturating_add((cfg.gaussians as u64).saturating_mul(160));
    lsplat_core::memory::check_fits(
        &format!(
            "the demo's {} Gaussians and {} images of {}x{}",
            cfg.gaussians, cfg.cameras, cfg.width, cfg.height
        ),
        bytes,
        1,
    )?;
    let mut rng = Rng::new(cfg.seed);
    let k = cfg.objects.max(1) as usize;
    // Objects on a ring, standing on the floor z = 0.
    let ring = 0.9 + 0.25 * k as f32;
    let mut objects = Vec::with_capacity(k);
    for i in 0..k {
        let a = std::f32::consts::TAU * (i as f32 + 0.3 * rng.f32()) / k as f32;
        let r = ring * if k == 1 { 0.0 } else { rng.range(0.55, 1.0) };
        let radii = Vec3::new(
            rng.range(0.5, 0.8),
            rng.range(0.5, 0.8),
            rng.range(0.5, 0.9),
        );
        objects.push(DemoObject {
            centre: Vec3::new(r * a.cos(), r * a.sin(), radii.z),
            radii,
        });
    }
    // Segment features: independent random unit vectors.
    let segment_features: Vec<Vec<[f32; 3]>> = (0..3)
        .map(|_| (0..4 * k).map(|_| rng.unit3()).collect())
        .collect();

    let gaussians = make_gaussians(&mut rng, &objects, cfg.gaussians as usize, ring + 1.2);

    let mut cameras = Vec::new();
    let mut labels = Vec::new();
    let dist = 1.6 * ring + 1.6;
    for c in 0..cfg.cameras {
        let az = std::f32::consts::TAU * c as f32 / cfg.cameras as f32 + 0.1;
        let el = 0.35 + 0.3 * ((c as f32 * 0.7).sin() * 0.5 + 0.5);
        let eye = Vec3::new(
            dist * el.cos() * az.cos(),
            dist * el.cos() * az.sin(),
            dist * el.sin(),
        );
        let cam = Camera::look_at(
            format!("demo_{c:03}"),
            (cfg.width, cfg.height),
            0.75,
            eye,
            Vec3::new(0.0, 0.0, 0.35),
            Vec3::Z,
        );
        labels.push(label_image(
            &cam,
            &objects,
            level,
            &segment_features[level as usize - 1],
        )?);
        cameras.push(cam);
    }
    let scene = SceneData {
        gaussians,
        cameras,
        labels,
    };
    scene.validate()?;
    Ok(Demo {
        scene,
        objects,
        segment_features,
    })
}

impl Demo {
    /// The labels of another level for the same cameras (ray cast again; the scene's
    /// own labels are those of the level it was generated for).
    pub fn labels(&self, level: u8) -> Result<Vec<ImageLabels>, DataError> {
        if !(1..=3).contains(&level) {
            return Err(DataError::Scene(format!(
                "demo level {level} is not 1, 2 or 3"
            )));
        }
        self.scene
            .cameras
            .iter()
            .map(|cam| {
                label_image(
                    cam,
                    &self.objects,
                    level,
                    &self.segment_features[level as usize - 1],
                )
            })
            .collect()
    }
}

/// Object surface splats (85%) and floor clutter (15%).
fn make_gaussians(rng: &mut Rng, objects: &[DemoObject], n: usize, floor_radius: f32) -> Gaussians {
    let n_floor = (n * 15 / 100).max(1);
    let n_obj = n.saturating_sub(n_floor).max(objects.len());
    let area = |o: &DemoObject| {
        // Knud Thomsen's approximation of the ellipsoid surface area.
        let p = 1.6075f32;
        let (a, b, c) = (o.radii.x.powf(p), o.radii.y.powf(p), o.radii.z.powf(p));
        4.0 * std::f32::consts::PI * ((a * b + a * c + b * c) / 3.0).powf(1.0 / p)
    };
    let total_area: f32 = objects.iter().map(area).sum();
    let mut g = Gaussians::default();
    for o in objects {
        let count = ((n_obj as f32 * area(o) / total_area).round() as usize).max(1);
        let spacing = (area(o) / count as f32).sqrt();
        for _ in 0..count {
            let u = Vec3::from(rng.unit3());
            let p = o.centre + u * o.radii;
            // Outward normal of the ellipsoid at p.
            let normal = (u / o.radii).normalize();
            let opacity = rng.range(2.5, 4.0);
            push_disk(&mut g, rng, p, normal, spacing * 0.75, opacity);
        }
    }
    let floor_spacing =
        (std::f32::consts::PI * floor_radius * floor_radius / n_floor as f32).sqrt();
    for _ in 0..n_floor {
        let r = floor_radius * rng.f32().sqrt();
        let a = rng.range(0.0, std::f32::consts::TAU);
        let p = Vec3::new(r * a.cos(), r * a.sin(), 0.0);
        let opacity = rng.range(0.0, 2.0);
        push_disk(&mut g, rng, p, Vec3::Z, floor_spacing * 0.8, opacity);
    }
    g.normalize_rotations();
    g
}

/// Appends a flat splat at `p` facing `normal`, tangential size `s`.
fn push_disk(g: &mut Gaussians, rng: &mut Rng, p: Vec3, normal: Vec3, s: f32, opacity_logit: f32) {
    let q = Quat::from_rotation_arc(Vec3::Z, normal)
        * Quat::from_rotation_z(rng.range(0.0, std::f32::consts::TAU));
    let sx = s * rng.range(0.8, 1.25);
    let sy = s * rng.range(0.8, 1.25);
    g.means.push(p.to_array());
    g.log_scales.push([sx.ln(), sy.ln(), (0.15 * s).ln()]);
    g.rotations.push([q.w, q.x, q.y, q.z]);
    g.opacity_logits.push(opacity_logit);
}

/// Ray casts the ellipsoids through every pixel centre, keeps pixels whose 5×5
/// neighbourhood sees the same (object, segment), and labels them.
fn label_image(
    cam: &Camera,
    objects: &[DemoObject],
    level: u8,
    features: &[[f32; 3]],
) -> Result<ImageLabels, DataError> {
    let (w, h) = (cam.width as usize, cam.height as usize);
    let r_c2w: Mat3 = cam.rotation.transpose();
    let eye = cam.centre();
    let mut hit = vec![-1i32; w * h];
    for y in 0..h {
        for x in 0..w {
            let d_cam = Vec3::new(
                (x as f32 + 0.5 - cam.cx) / cam.fx,
                (y as f32 + 0.5 - cam.cy) / cam.fy,
                1.0,
            );
            let d = (r_c2w * d_cam).normalize();
            let mut best = (f32::INFINITY, -1i32);
            for (oi, o) in objects.iter().enumerate() {
                if let Some(t) = ray_ellipsoid(eye, d, o)
                    && t < best.0
                {
                    let s = segment(o, eye + d * t, level);
                    best = (t, (oi * 4) as i32 + s as i32);
                }
            }
            hit[y * w + x] = best.1;
        }
    }
    let r = 2i64;
    let mut seg = vec![-1i32; w * h];
    for y in 0..h as i64 {
        for x in 0..w as i64 {
            let id = hit[(y as usize) * w + x as usize];
            if id < 0 {
                continue;
            }
            let uniform = (-r..=r).all(|dy| {
                (-r..=r).all(|dx| {
                    let (xx, yy) = (x + dx, y + dy);
                    xx >= 0
                        && yy >= 0
                        && xx < w as i64
                        && yy < h as i64
                        && hit[yy as usize * w + xx as usize] == id
                })
            });
            if uniform {
                seg[y as usize * w + x as usize] = id;
            }
        }
    }
    // Local mask table: one row per (object, segment) present, in first-seen order.
    let mut local = vec![-1i32; features.len()];
    let mut table = Vec::new();
    for s in seg.iter_mut() {
        if *s >= 0 {
            let g = *s as usize;
            if local[g] < 0 {
                local[g] = (table.len() / DEMO_DIM) as i32;
                table.extend_from_slice(&features[g]);
            }
            *s = local[g];
        }
    }
    ImageLabels::from_seg_map(
        cam.name.clone(),
        (cam.width, cam.height),
        &seg,
        table,
        DEMO_DIM,
    )
}

/// Nearest positive ray parameter where `o + t·d` meets the ellipsoid surface.
fn ray_ellipsoid(o: Vec3, d: Vec3, obj: &DemoObject) -> Option<f32> {
    let oc = (o - obj.centre) / obj.radii;
    let dd = d / obj.radii;
    let a = dd.dot(dd);
    let b = 2.0 * oc.dot(dd);
    let c = oc.dot(oc) - 1.0;
    let disc = b * b - 4.0 * a * c;
    if disc < 0.0 {
        return None;
    }
    let sq = disc.sqrt();
    let t0 = (-b - sq) / (2.0 * a);
    let t1 = (-b + sq) / (2.0 * a);
    [t0, t1].into_iter().find(|&t| t > 0.0)
}

/// The demo's per-Gaussian teacher feature at `level`: the feature of the segment it
/// lies on, or `None` for floor clutter.
pub fn teacher_feature(demo: &Demo, gaussian: usize, level: u8) -> Option<[f32; 3]> {
    let p = Vec3::from(demo.scene.gaussians.means[gaussian]);
    demo.objects.iter().enumerate().find_map(|(oi, o)| {
        let u = (p - o.centre) / o.radii;
        ((u.length() - 1.0).abs() < 1e-3).then(|| {
            demo.segment_features[level as usize - 1][oi * 4 + segment(o, p, level) as usize]
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_is_deterministic_and_plausible() {
        let cfg = DemoConfig::default();
        let a = generate(&cfg, 1).unwrap();
        let b = generate(&cfg, 1).unwrap();
        assert_eq!(a.scene.gaussians, b.scene.gaussians);
        assert_eq!(a.scene.labels, b.scene.labels);
        let n = a.scene.gaussians.len();
        assert!((3500..4500).contains(&n), "{n} gaussians");
        let fracs: Vec<f64> = a.scene.labels.iter().map(|l| l.valid_fraction()).collect();
        let mean = fracs.iter().sum::<f64>() / fracs.len() as f64;
        eprintln!(
            "valid fraction mean {mean:.3} min {:.3}",
            fracs.iter().cloned().fold(1.0, f64::min)
        );
        assert!((0.2..=0.4).contains(&mean), "mean valid fraction {mean}");
        // Every mask feature is a unit vector and features are all from the teacher.
        for l in &a.scene.labels {
            for row in l.features.chunks(3) {
                let n = (row[0] * row[0] + row[1] * row[1] + row[2] * row[2]).sqrt();
                assert!((n - 1.0).abs() < 1e-5);
            }
        }
        let with_teacher = (0..n)
            .filter(|&i| teacher_feature(&a, i, 1).is_some())
            .count();
        assert!(
            with_teacher > n * 8 / 10,
            "{with_teacher} of {n} on objects"
        );
    }

    #[test]
    fn labels_of_another_level_match_a_scene_generated_for_it() {
        let cfg = DemoConfig {
            cameras: 3,
            width: 64,
            height: 48,
            ..DemoConfig::default()
        };
        let one = generate(&cfg, 1).unwrap();
        assert_eq!(
            one.labels(2).unwrap(),
            generate(&cfg, 2).unwrap().scene.labels
        );
        assert_eq!(one.labels(1).unwrap(), one.scene.labels);
        assert!(one.labels(0).is_err());
    }

    #[test]
    fn levels_have_fewer_segments_as_they_grow() {
        let cfg = DemoConfig {
            cameras: 4,
            ..DemoConfig::default()
        };
        let rows = |lvl| {
            let d = generate(&cfg, lvl).unwrap();
            d.scene.labels.iter().map(|l| l.rows()).max().unwrap()
        };
        assert!(
            rows(1) > rows(2) && rows(2) > rows(3),
            "{} {} {}",
            rows(1),
            rows(2),
            rows(3)
        );
    }
}
