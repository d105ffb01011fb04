//! The screen tile grid and the tile-major pixel order.
//!
//! Pixel sets (valid pixels, operator rows, rendered values) are stored in
//! tile-major order: tiles row by row, and inside a tile pixels row by row. Then
//! every tile owns one contiguous range, which lets backends work tile-parallel
//! with disjoint outputs.

/// A grid of square tiles over a `width × height` image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileGrid {
    /// Tile edge in pixels (8 or 16).
    pub tile_size: u32,
    /// Image width.
    pub width: u32,
    /// Image height.
    pub height: u32,
}

impl TileGrid {
    /// A grid for an image.
    pub fn new(tile_size: u32, width: u32, height: u32) -> Self {
        TileGrid {
            tile_size,
            width,
            height,
        }
    }

    /// Number of tile columns.
    pub fn tiles_x(&self) -> u32 {
        self.width.div_ceil(self.tile_size)
    }

    /// Number of tile rows.
    pub fn tiles_y(&self) -> u32 {
        self.height.div_ceil(self.tile_size)
    }

    /// Number of tiles.
    pub fn tile_count(&self) -> usize {
        self.tiles_x() as usize * self.tiles_y() as usize
    }

    /// Number of pixels.
    pub fn pixel_count(&self) -> usize {
        self.width as usize * self.height as usize
    }

    /// Tile index of pixel `(x, y)`.
    pub fn tile_of(&self, x: u32, y: u32) -> u32 {
        (y / self.tile_size) * self.tiles_x() + x / self.tile_size
    }

    /// Every pixel index (`y·width + x`) in tile-major order, and the offsets of each
    /// tile's range (`tile_count + 1` entries).
    pub fn all_pixels(&self) -> (Vec<u32>, Vec<u32>) {
        self.select_pixels(|_| true)
    }

    /// The pixels for which `keep(pixel_index)` holds, in tile-major order, with the
    /// per-tile offsets.
    pub fn select_pixels(&self, mut keep: impl FnMut(u32) -> bool) -> (Vec<u32>, Vec<u32>) {
        let ts = self.tile_size;
        let mut pixels = Vec::new();
        let mut offsets = Vec::with_capacity(self.tile_count() + 1);
        offsets.push(0u32);
        for ty in 0..self.tiles_y() {
            for tx in 0..self.tiles_x() {
                for y in ty * ts..((ty + 1) * ts).min(self.height) {
                    for x in tx * ts..((tx + 1) * ts).min(self.width) {
                        let p = y * self.width + x;
                        if keep(p) {
                            pixels.push(p);
                        }
                    }
                }
                offsets.push(pixels.len() as u32);
            }
        }
        (pixels, offsets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_pixels_is_a_tile_major_permutation() {
        let g = TileGrid::new(8, 20, 10);
        assert_eq!((g.tiles_x(), g.tiles_y(), g.tile_count()), (3, 2, 6));
        let (px, off) = g.all_pixels();
        assert_eq!(off.len(), 7);
        assert_eq!(*off.last().unwrap() as usize, 200);
        let mut s = px.clone();
        s.sort();
        assert_eq!(s, (0..200).collect::<Vec<_>>());
        for t in 0..6 {
            for &p in &px[off[t] as usize..off[t + 1] as usize] {
                assert_eq!(g.tile_of(p % 20, p / 20), t as u32);
            }
        }
    }
}
