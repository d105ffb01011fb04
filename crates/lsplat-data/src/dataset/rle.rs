//! Run-length encoding of segmentation maps.
//!
//! A map (`-1` = no mask, otherwise a mask id) is read in row-major order
//! (`pixel = y·width + x`) and stored as its maximal runs of equal mask ids, skipping
//! `-1`: three equally long lists `starts`, `lengths`, `masks`. Runs are strictly
//! increasing and do not overlap; pixels outside every run are `-1`.

/// The runs of one map.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Runs {
    /// First pixel of each run.
    pub starts: Vec<u32>,
    /// Length of each run (≥ 1).
    pub lengths: Vec<u32>,
    /// Mask id of each run.
    pub masks: Vec<u32>,
}

impl Runs {
    /// Encodes a map; every value must be `-1` or non-negative.
    pub fn encode(map: &[i32]) -> Runs {
        let mut r = Runs::default();
        let mut prev = -1i32;
        for (p, &m) in map.iter().enumerate() {
            if m >= 0 && m == prev {
                if let Some(l) = r.lengths.last_mut() {
                    *l += 1;
                }
            } else if m >= 0 {
                r.starts.push(p as u32);
                r.lengths.push(1);
                r.masks.push(m as u32);
            }
            prev = m;
        }
        r
    }

    /// Number of covered pixels.
    pub fn pixels(&self) -> u64 {
        self.lengths.iter().map(|&l| l as u64).sum()
    }

    /// Checks the lists against an image of `n_pixels`; errors are problem texts.
    pub fn check(&self, n_pixels: u64) -> Result<(), String> {
        if self.starts.len() != self.lengths.len() || self.starts.len() != self.masks.len() {
            return Err(format!(
                "run lists differ in length ({}, {}, {})",
                self.starts.len(),
                self.lengths.len(),
                self.masks.len()
            ));
        }
        let mut end = 0u64;
        for (i, (&s, &l)) in self.starts.iter().zip(&self.lengths).enumerate() {
            if l == 0 || (s as u64) < end || s as u64 + l as u64 > n_pixels {
                return Err(format!(
                    "run {i} (start {s}, length {l}) overlaps, is empty or leaves the image"
                ));
            }
            end = s as u64 + l as u64;
        }
        Ok(())
    }

    /// Expands checked runs into valid pixels and their mask ids.
    pub fn expand(&self, valid: &mut Vec<u32>, mask: &mut Vec<u32>) {
        for ((&s, &l), &m) in self.starts.iter().zip(&self.lengths).zip(&self.masks) {
            valid.extend(s..s + l);
            mask.extend(std::iter::repeat_n(m, l as usize));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_checks() {
        let map = [-1, 3, 3, 3, -1, -1, 0, 0, 1, -1, 1, 1];
        let r = Runs::encode(&map);
        assert_eq!(r.starts, vec![1, 6, 8, 10]);
        assert_eq!(r.lengths, vec![3, 2, 1, 2]);
        assert_eq!(r.masks, vec![3, 0, 1, 1]);
        assert_eq!(r.pixels(), 8);
        r.check(12).unwrap();
        assert!(r.check(11).is_err());
        let (mut v, mut m) = (vec![], vec![]);
        r.expand(&mut v, &mut m);
        let mut back = vec![-1; 12];
        v.iter()
            .zip(&m)
            .for_each(|(&p, &k)| back[p as usize] = k as i32);
        assert_eq!(back, map);
        let mut bad = r.clone();
        bad.starts[1] = 2;
        assert!(bad.check(12).unwrap_err().contains("run 1"));
        bad.lengths.pop();
        assert!(bad.check(12).unwrap_err().contains("differ"));
        assert_eq!(Runs::encode(&[-1, -1]), Runs::default());
    }
}
