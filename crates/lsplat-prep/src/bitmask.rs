//! Binary masks stored as bits over their bounding box's rows, on the frame's grid
//! of 64-pixel words (word `k` of a row holds pixels `64k..64k+64`), so two masks of
//! the same frame intersect word by word without shifts and a mask costs its box, not
//! the frame.

/// A binary mask of a `width × height` frame.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BitMask {
    width: u32,
    height: u32,
    /// Box (inclusive); meaningless when `area == 0`.
    x0: u32,
    y0: u32,
    x1: u32,
    y1: u32,
    /// First word column and words per stored row.
    w0: u32,
    wn: u32,
    /// Rows `y0..=y1`, `wn` words each.
    bits: Vec<u64>,
    area: u64,
}

/// A box in SAM's convention: `[x0, y0, x1, y1]` with the last column and row
/// included (`x1 - x0` is one less than the box's width in pixels).
pub type BoxXyxy = [u32; 4];

impl BitMask {
    /// An empty mask.
    pub fn empty(width: u32, height: u32) -> BitMask {
        BitMask {
            width,
            height,
            x0: 0,
            y0: 0,
            x1: 0,
            y1: 0,
            w0: 0,
            wn: 0,
            bits: Vec::new(),
            area: 0,
        }
    }

    /// Builds a mask from full rows of bits: `rows` holds rows `y_start..` of the
    /// frame, `words_per_row(width)` words each. Trailing bits past `width` must be 0.
    pub fn from_frame_rows(width: u32, height: u32, y_start: u32, rows: &[u64]) -> BitMask {
        let wpr = words_per_row(width);
        debug_assert_eq!(rows.len() % wpr.max(1), 0);
        let n = rows.len().checked_div(wpr).unwrap_or(0);
        let (mut ya, mut yb) = (u32::MAX, 0);
        let (mut wa, mut wb) = (usize::MAX, 0);
        let mut area = 0u64;
        for r in 0..n {
            let row = &rows[r * wpr..(r + 1) * wpr];
            for (k, &w) in row.iter().enumerate().filter(|(_, w)| **w != 0) {
                area += w.count_ones() as u64;
                wa = wa.min(k);
                wb = wb.max(k);
                ya = ya.min(y_start + r as u32);
                yb = yb.max(y_start + r as u32);
            }
        }
        if area == 0 {
            return BitMask::empty(width, height);
        }
        let wn = wb - wa + 1;
        let mut bits = Vec::with_capacity(wn * (yb - ya + 1) as usize);
        let (mut xa, mut xb) = (u32::MAX, 0u32);
        for y in ya..=yb {
            let r = (y - y_start) as usize;
            let row = &rows[r * wpr + wa..r * wpr + wb + 1];
            bits.extend_from_slice(row);
            if row[0] != 0 {
                xa = xa.min((wa * 64) as u32 + row[0].trailing_zeros());
            }
            if row[wn - 1] != 0 {
                xb = xb.max((wb * 64) as u32 + 63 - row[wn - 1].leading_zeros());
            }
        }
        BitMask {
            width,
            height,
            x0: xa,
            y0: ya,
            x1: xb,
            y1: yb,
            w0: wa as u32,
            wn: wn as u32,
            bits,
            area,
        }
    }

    /// Builds a mask from a full frame of 0/1 bytes (row-major).
    pub fn from_bytes(width: u32, height: u32, pixels: &[u8]) -> BitMask {
        let wpr = words_per_row(width);
        let w = width as usize;
        let mut rows = vec![0u64; wpr * height as usize];
        for (y, line) in pixels
            .chunks_exact(w.max(1))
            .enumerate()
            .take(height as usize)
        {
            for (x, _) in line.iter().enumerate().filter(|(_, v)| **v != 0) {
                rows[y * wpr + x / 64] |= 1 << (x % 64);
            }
        }
        BitMask::from_frame_rows(width, height, 0, &rows)
    }

    /// The full frame as 0/1 bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let w = self.width as usize;
        let mut out = vec![0u8; w * self.height as usize];
        for y in self.rows() {
            for x in self.x0..=self.x1 {
                if self.get(x, y) {
                    out[y as usize * w + x as usize] = 1;
                }
            }
        }
        out
    }

    /// Frame width.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Frame height.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// Number of pixels set.
    pub fn area(&self) -> u64 {
        self.area
    }

    /// SAM's box of the mask (`[0, 0, 0, 0]` when empty).
    pub fn bbox(&self) -> BoxXyxy {
        if self.area == 0 {
            return [0; 4];
        }
        [self.x0, self.y0, self.x1, self.y1]
    }

    /// Rows holding pixels (empty when the mask is).
    pub fn rows(&self) -> std::ops::Range<u32> {
        if self.area == 0 {
            0..0
        } else {
            self.y0..self.y1 + 1
        }
    }

    /// The stored words of row `y` (first word column [`Self::first_word`]); empty
    /// outside the box.
    pub fn row_words(&self, y: u32) -> &[u64] {
        if self.area == 0 || y < self.y0 || y > self.y1 {
            return &[];
        }
        let r = (y - self.y0) as usize * self.wn as usize;
        &self.bits[r..r + self.wn as usize]
    }

    /// Word column of the first stored word of each row.
    pub fn first_word(&self) -> u32 {
        self.w0
    }

    /// Pixel `(x, y)`.
    pub fn get(&self, x: u32, y: u32) -> bool {
        let k = x / 64;
        if k < self.w0 || k >= self.w0 + self.wn {
            return false;
        }
        self.row_words(y)
            .get((k - self.w0) as usize)
            .is_some_and(|w| w >> (x % 64) & 1 == 1)
    }

    /// Number of pixels set in both masks (same frame).
    pub fn intersection(&self, other: &BitMask) -> u64 {
        if self.area == 0 || other.area == 0 {
            return 0;
        }
        let (ya, yb) = (self.y0.max(other.y0), self.y1.min(other.y1));
        let (ka, kb) = (
            self.w0.max(other.w0),
            (self.w0 + self.wn).min(other.w0 + other.wn),
        );
        if ya > yb || ka >= kb {
            return 0;
        }
        let mut n = 0u64;
        for y in ya..=yb {
            let a = &self.row_words(y)[(ka - self.w0) as usize..(kb - self.w0) as usize];
            let b = &other.row_words(y)[(ka - other.w0) as usize..(kb - other.w0) as usize];
            n += a
                .iter()
                .zip(b)
                .map(|(x, y)| (x & y).count_ones() as u64)
                .sum::<u64>();
        }
        n
    }

    /// Bytes held by the mask's bits.
    pub fn heap_bytes(&self) -> usize {
        self.bits.len() * 8
    }
}

/// Words of a full frame row.
pub fn words_per_row(width: u32) -> usize {
    (width as usize).div_ceil(64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(w: u32, h: u32, f: impl Fn(u32, u32) -> bool) -> Vec<u8> {
        (0..h)
            .flat_map(|y| (0..w).map(move |x| (x, y)))
            .map(|(x, y)| f(x, y) as u8)
            .collect()
    }

    #[test]
    fn round_trip_box_area_and_intersection() {
        let (w, h) = (150, 40);
        let a = frame(w, h, |x, y| {
            (60..=130).contains(&x) && (3..=20).contains(&y) && x != 100
        });
        let b = frame(w, h, |x, y| {
            (x as i32 - 90).pow(2) + (y as i32 - 15).pow(2) < 200
        });
        let (ma, mb) = (BitMask::from_bytes(w, h, &a), BitMask::from_bytes(w, h, &b));
        assert_eq!(ma.to_bytes(), a);
        assert_eq!(mb.to_bytes(), b);
        assert_eq!(ma.bbox(), [60, 3, 130, 20]);
        assert_eq!(ma.area(), a.iter().map(|&v| v as u64).sum::<u64>());
        let both = a
            .iter()
            .zip(&b)
            .filter(|(x, y)| **x == 1 && **y == 1)
            .count() as u64;
        assert_eq!(ma.intersection(&mb), both);
        assert_eq!(mb.intersection(&ma), both);
        let e = BitMask::from_bytes(w, h, &vec![0; (w * h) as usize]);
        assert_eq!((e.area(), e.bbox(), e.intersection(&ma)), (0, [0; 4], 0));
    }
}
