//! Frames as bytes a browser decodes: JPEG for the stream, PNG when the exact pixels
//! matter (saving a picture, tests), and the quality policy of the stream.

use crate::{Result, ViewError};

/// How a frame is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Lossy, small, fast.
    Jpeg,
    /// Lossless.
    Png,
}

impl Format {
    /// The MIME type.
    pub fn mime(self) -> &'static str {
        match self {
            Format::Jpeg => "image/jpeg",
            Format::Png => "image/png",
        }
    }
}

/// Encodes an RGB8 frame (`quality` 1–100 applies to JPEG) on `threads` threads
/// (the bytes do not depend on them): JPEG through [`crate::jpeg::encode`], the
/// encoder a device runs too, so every backend sends the same bytes for a picture.
pub fn encode(
    rgb: &[u8],
    width: u32,
    height: u32,
    format: Format,
    quality: u8,
    threads: usize,
) -> Result<Vec<u8>> {
    match format {
        Format::Png => lsplat_query::picture::png_rgb(width, height, rgb)
            .map_err(|e| ViewError::Encode(e.to_string())),
        Format::Jpeg => crate::jpeg::encode(rgb, width, height, quality.clamp(1, 100), threads),
    }
}

/// The stream's JPEG quality, adapted to how long frames take: when a full frame
/// (render + encode) takes longer than the budget the quality steps down (to
/// `min`), when it takes less than half the budget it steps back up (to `max`).
/// Previews use a fixed lower quality.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quality {
    /// The current full-frame quality.
    pub full: u8,
    /// The previews' quality.
    pub preview: u8,
    /// Lowest full-frame quality.
    pub min: u8,
    /// Highest full-frame quality.
    pub max: u8,
    /// The full-frame budget in milliseconds.
    pub budget_ms: f64,
}

impl Quality {
    /// Starts at `max`.
    pub fn new(min: u8, max: u8, preview: u8, budget_ms: f64) -> Quality {
        Quality {
            full: max,
            preview,
            min,
            max,
            budget_ms,
        }
    }

    /// Updates the quality after a full frame that took `ms` milliseconds.
    pub fn after_full_frame(&mut self, ms: f64) {
        if ms > self.budget_ms {
            self.full = self.full.saturating_sub(5).max(self.min);
        } else if ms < 0.5 * self.budget_ms {
            self.full = (self.full + 5).min(self.max);
        }
    }
}

/// The preview scale: the largest of 1/2, 1/3, … 1/8 whose frame is predicted to
/// take at most `budget_ms`, from the milliseconds per pixel of recent frames.
pub fn preview_divisor(ms_per_pixel: f64, width: u32, height: u32, budget_ms: f64) -> u32 {
    let px = width as f64 * height as f64;
    (2..=8)
        .find(|d| ms_per_pixel * px / (d * d) as f64 <= budget_ms)
        .unwrap_or(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jpeg_and_png_round_trip_and_quality_adapts() {
        let (w, h) = (40u32, 24u32);
        let rgb: Vec<u8> = (0..w * h * 3).map(|i| ((i * 7) % 256) as u8).collect();
        let png = encode(&rgb, w, h, Format::Png, 0, 1).unwrap();
        let dec = png::Decoder::new(std::io::Cursor::new(png));
        let mut r = dec.read_info().unwrap();
        let mut buf = vec![0; r.output_buffer_size().unwrap()];
        r.next_frame(&mut buf).unwrap();
        assert_eq!(buf, rgb);
        let jpg = encode(&rgb, w, h, Format::Jpeg, 80, 2).unwrap();
        assert_eq!(&jpg[..2], &[0xff, 0xd8], "a JPEG starts with SOI");
        assert!(encode(&rgb, 70_000, 1, Format::Jpeg, 80, 1).is_err());
        let mut q = Quality::new(60, 90, 50, 100.0);
        q.after_full_frame(150.0);
        q.after_full_frame(150.0);
        assert_eq!(q.full, 80);
        q.after_full_frame(70.0);
        assert_eq!(q.full, 80, "within the budget: unchanged");
        for _ in 0..10 {
            q.after_full_frame(20.0);
        }
        assert_eq!(q.full, 90);
        assert_eq!(preview_divisor(1e-4, 1280, 720, 30.0), 2);
        assert_eq!(preview_divisor(1e-3, 1280, 720, 30.0), 6);
        assert_eq!(preview_divisor(1.0, 1280, 720, 30.0), 8);
    }
}
