//! The messages between the page and the server (JSON text frames on the
//! WebSocket; rendered frames are binary: a 4-byte little-endian header length, the
//! header as JSON, then the image bytes).

use glam::{Mat3, Vec3};
use lsplat_core::Camera;
use serde::{Deserialize, Serialize};

use crate::encode::Format;
use crate::frame::{Mode, Timings};
use crate::table::DecodeStats;

/// A camera as JSON: what "copy camera" gives and `render --pose` reads. The
/// rotation maps world to camera (rows; OpenCV axes: x right, y down, z forward),
/// so a world point X is at `rotation·X + translation` in the camera.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pose {
    /// A name (a training camera's when snapped to it).
    #[serde(default)]
    pub name: String,
    /// Image width.
    pub width: u32,
    /// Image height.
    pub height: u32,
    /// Focal length along x, pixels.
    pub fx: f32,
    /// Focal length along y, pixels.
    pub fy: f32,
    /// Principal point x.
    pub cx: f32,
    /// Principal point y.
    pub cy: f32,
    /// World-to-camera rotation, rows.
    pub rotation: [[f32; 3]; 3],
    /// World-to-camera translation.
    pub translation: [f32; 3],
}

impl Pose {
    /// The pose of a camera.
    pub fn of(cam: &Camera) -> Pose {
        let r = cam.rotation;
        Pose {
            name: cam.name.clone(),
            width: cam.width,
            height: cam.height,
            fx: cam.fx,
            fy: cam.fy,
            cx: cam.cx,
            cy: cam.cy,
            rotation: [0, 1, 2].map(|i| r.row(i).to_array()),
            translation: cam.translation.to_array(),
        }
    }

    /// The camera, after checking it (sizes, intrinsics, an orthonormal rotation).
    pub fn camera(&self) -> Result<Camera, String> {
        let cam = Camera {
            name: if self.name.is_empty() {
                "view".to_string()
            } else {
                self.name.clone()
            },
            width: self.width,
            height: self.height,
            fx: self.fx,
            fy: self.fy,
            cx: self.cx,
            cy: self.cy,
            rotation: Mat3::from_cols_array_2d(&self.rotation).transpose(),
            translation: Vec3::from_array(self.translation),
        };
        cam.validate().map_err(|e| format!("camera: {e}"))?;
        if self.width > MAX_SIDE || self.height > MAX_SIDE {
            return Err(format!(
                "camera: {}x{} is larger than {MAX_SIDE} pixels a side",
                self.width, self.height
            ));
        }
        Ok(cam)
    }
}

/// Reads cameras from a JSON file: one [`Pose`] or a list of them.
pub fn read_poses(path: &std::path::Path) -> Result<Vec<Camera>, lsplat_data::DataError> {
    let bytes = std::fs::read(path).map_err(|e| lsplat_data::DataError::io(path, e))?;
    let bad = |m: String| lsplat_data::DataError::format(path, m);
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
    let poses: Vec<Pose> = if v.is_array() {
        serde_json::from_value(v)
    } else {
        serde_json::from_value(v).map(|p| vec![p])
    }
    .map_err(|e| bad(format!("not a camera pose (or a list of them): {e}")))?;
    if poses.is_empty() {
        return Err(bad("no camera".into()));
    }
    let mut cams = Vec::new();
    for (i, p) in poses.iter().enumerate() {
        let mut c = p.camera().map_err(|e| bad(format!("pose {i}: {e}")))?;
        if p.name.is_empty() {
            c.name = if poses.len() == 1 {
                "pose".to_string()
            } else {
                format!("pose_{i:03}")
            };
        }
        cams.push(c);
    }
    let mut names: Vec<&str> = cams.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(bad(format!("two poses are named `{}`", w[0])));
    }
    Ok(cams)
}

/// Largest frame side served.
pub const MAX_SIDE: u32 = 4096;

/// What the page asks for.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum ClientMessage {
    /// The view to show (the latest replaces any not yet rendered).
    View(ViewState),
    /// Embed a phrase for later views.
    Query {
        /// The phrase.
        text: String,
    },
    /// A lossless frame of the last view (for "save PNG").
    Save,
}

/// The view state the page sends.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViewState {
    /// The page's sequence number, echoed in the frame.
    pub seq: u64,
    /// The camera.
    pub camera: Pose,
    /// The mode.
    pub mode: Mode,
    /// The level.
    pub level: u8,
    /// The query (relevancy and segmentation).
    #[serde(default)]
    pub query: Option<String>,
    /// Segmentation threshold.
    #[serde(default = "default_threshold")]
    pub threshold: f32,
    /// Exact per-pixel decoding (V1).
    #[serde(default)]
    pub exact: bool,
    /// The camera is moving: send previews only.
    #[serde(default)]
    pub moving: bool,
    /// Lossless frames (PNG) instead of JPEG.
    #[serde(default)]
    pub lossless: bool,
}

fn default_threshold() -> f32 {
    0.4
}

/// A frame's header.
#[derive(Clone, Debug, Serialize)]
pub struct FrameHeader {
    /// The view's sequence number.
    pub seq: u64,
    /// "preview", "full" or "save".
    pub kind: &'static str,
    /// Width of the image.
    pub width: u32,
    /// Height of the image.
    pub height: u32,
    /// How the image is compressed.
    pub format: Format,
    /// JPEG quality (0 for PNG).
    pub quality: u8,
    /// The mode.
    pub mode: Mode,
    /// The level.
    pub level: u8,
    /// The query shown.
    pub query: Option<String>,
    /// The camera the frame was rendered for (full size, before a preview's scaling).
    pub camera: Pose,
    /// Stage times, ms.
    pub timings: Timings,
    /// Encoding time, ms.
    pub encode_ms: f64,
    /// Decoding work (V1).
    pub decode: DecodeStats,
    /// The largest relevancy in the frame.
    pub top: Option<f32>,
}

/// Server events (JSON text).
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ServerMessage {
    /// What the page needs to start.
    Hello(Box<Hello>),
    /// The answer to a [`ClientMessage::Query`].
    Query {
        /// The phrase.
        text: String,
        /// Whether it can be shown.
        ok: bool,
        /// Why not.
        message: String,
    },
    /// A request that failed.
    Error {
        /// The sequence number of the view it concerns (0: none).
        seq: u64,
        /// What went wrong.
        message: String,
    },
}

/// The run, its levels, cameras and capabilities.
#[derive(Clone, Debug, Serialize)]
pub struct Hello {
    /// The run shown.
    pub run: String,
    /// Every run the server shows.
    pub runs: Vec<String>,
    /// Levels and what each holds.
    pub levels: Vec<LevelInfo>,
    /// Training cameras.
    pub cameras: Vec<Pose>,
    /// The scene's centre (median of the means) and a radius holding 90% of them.
    pub centre: [f32; 3],
    /// See `centre`.
    pub radius: f32,
    /// The world's up direction: the mean of the training cameras' up vectors.
    pub up: [f32; 3],
    /// The splats' colours ("SH degree 3", "grey").
    pub colours: String,
    /// Where query embeddings come from (empty: no queries).
    pub text: String,
    /// The phrases an embeddings file knows (empty for free text).
    pub phrases: Vec<String>,
    /// The backend.
    pub backend: String,
}

/// One level.
#[derive(Clone, Debug, Serialize)]
pub struct LevelInfo {
    /// Its number.
    pub level: u8,
    /// What it holds.
    pub describe: String,
    /// Whether it answers queries.
    pub queries: bool,
    /// Whether exact decoding differs from the default (a V1 table).
    pub table: bool,
}

/// A binary frame message: header length, header, image.
pub fn frame_message(header: &FrameHeader, image: &[u8]) -> Vec<u8> {
    let h = serde_json::to_vec(header).unwrap_or_default();
    let mut out = Vec::with_capacity(4 + h.len() + image.len());
    out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(image);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pose_round_trips_through_json_bit_for_bit() {
        let cam = Camera::look_at(
            "c",
            (64, 48),
            0.9,
            Vec3::new(0.3, -1.7, 2.9),
            Vec3::new(0.1, 0.2, 0.0),
            Vec3::Z,
        );
        let p = Pose::of(&cam);
        let back: Pose = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        let c2 = back.camera().unwrap();
        assert_eq!(c2.rotation, cam.rotation);
        assert_eq!(c2.translation, cam.translation);
        assert_eq!((c2.fx, c2.cx, c2.width), (cam.fx, cam.cx, cam.width));
        let mut bad = p.clone();
        bad.rotation[0][0] = 3.0;
        assert!(bad.camera().unwrap_err().contains("camera"));
        let msg: ClientMessage = serde_json::from_str(&format!(
            r#"{{"type":"view","seq":3,"camera":{},"mode":"relevancy","level":1,"query":"mug"}}"#,
            serde_json::to_string(&p).unwrap()
        ))
        .unwrap();
        let ClientMessage::View(v) = msg else {
            panic!("a view")
        };
        assert_eq!((v.seq, v.mode, v.threshold), (3, Mode::Relevancy, 0.4));
        assert!(serde_json::from_str::<ClientMessage>(r#"{"type":"fly"}"#).is_err());
    }
}
