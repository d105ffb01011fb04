//! Host reference versions of small ops, shared by the trait's default methods and
//! by backends whose buffers live on the host.

/// See [`crate::Backend::mask_groups`].
pub fn mask_groups(values: &mut [f32], keep: &[u8], rows: usize, groups: usize, group_len: usize) {
    let row_len = groups * group_len;
    for (r, row) in values[..rows * row_len]
        .chunks_exact_mut(row_len)
        .enumerate()
    {
        for (g, group) in row.chunks_exact_mut(group_len).enumerate() {
            if keep[r * groups + g] == 0 {
                group.fill(0.0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_whole_groups() {
        let mut v: Vec<f32> = (1..=12).map(|i| i as f32).collect();
        // 2 rows × 3 groups × 2 channels.
        mask_groups(&mut v, &[1, 0, 1, 0, 1, 1], 2, 3, 2);
        assert_eq!(v, [1., 2., 0., 0., 5., 6., 0., 0., 9., 10., 11., 12.]);
        assert_eq!(crate::channel_chunks(5, 2), vec![0..2, 2..4, 4..5]);
        assert_eq!(crate::channel_chunks(4, 4), vec![0..4]);
    }
}
