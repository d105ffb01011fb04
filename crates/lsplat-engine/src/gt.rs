//! Ground truth: from compact host labels to the device layout (tile-major valid
//! pixels, their mask rows, the mask feature table).

use lsplat_core::TileGrid;
use lsplat_data::ImageLabels;
use lsplat_device::{Backend, GroundTruth, PixelSet, Result};

/// The valid pixels of `labels` in tile-major order with per-tile offsets, and the
/// mask row of each.
pub fn tile_major(
    labels: &ImageLabels,
    tile_size: u32,
) -> (TileGrid, Vec<u32>, Vec<u32>, Vec<u32>) {
    let grid = TileGrid::new(tile_size, labels.width, labels.height);
    let mut lookup = vec![0u32; grid.pixel_count()];
    for (&p, &m) in labels.valid.iter().zip(&labels.mask) {
        lookup[p as usize] = m + 1;
    }
    let (pixels, offsets) = grid.select_pixels(|p| lookup[p as usize] != 0);
    let mask = pixels.iter().map(|&p| lookup[p as usize] - 1).collect();
    (grid, pixels, offsets, mask)
}

/// Uploads a camera's ground truth.
pub fn upload<B: Backend>(dev: &B, labels: &ImageLabels, tile_size: u32) -> Result<GroundTruth<B>> {
    let (grid, pixels, offsets, mask) = tile_major(labels, tile_size);
    Ok(GroundTruth {
        pixels: PixelSet::upload(dev, grid, &pixels, &offsets)?,
        mask: dev.upload(&mask)?,
        table: dev.upload(&labels.features)?,
        rows: labels.rows(),
        channels: labels.dim,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_major_keeps_every_valid_pixel_with_its_mask() {
        let seg: Vec<i32> = (0..20 * 12)
            .map(|p: i32| if p % 3 == 0 { p % 5 } else { -1 })
            .collect();
        let labels = ImageLabels::from_seg_map("x", (20, 12), &seg, vec![0.0; 5 * 2], 2).unwrap();
        let (grid, pixels, offsets, mask) = tile_major(&labels, 8);
        assert_eq!(offsets.len(), grid.tile_count() + 1);
        assert_eq!(pixels.len(), labels.valid.len());
        for (&p, &m) in pixels.iter().zip(&mask) {
            assert_eq!(seg[p as usize], m as i32);
        }
    }
}
