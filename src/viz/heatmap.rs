//! An attention matrix as RGBA pixels, one pixel per (query, key) pair.

use super::colormap::{diverging, viridis};
use crate::attention::Mask;

/// The colour of a cell a mask hides (a decoder's later keys): a neutral grey, outside the
/// colour map, so that "cannot read" is never taken for "reads with weight 0" (viridis' purple).
pub const MASKED_RGB: [u8; 3] = [190, 190, 190];

/// Colour scale of one heatmap: weights from 0 to `max` map onto the whole colour map.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scale {
    /// The weight drawn in the brightest colour.
    pub max: f32,
}

impl Scale {
    /// Scaled to the largest weight in `weights`, so that each head's own pattern is visible
    /// even when its attention is nearly uniform (a tiny positive floor avoids dividing by 0).
    pub fn fit(weights: &[f32]) -> Self {
        let max = weights.iter().copied().filter(|w| w.is_finite()).fold(0.0f32, f32::max);
        Scale { max: max.max(f32::MIN_POSITIVE) }
    }
}

/// RGBA bytes (row-major, rows are queries) for an `n x n` attention matrix.
pub fn rasterize(weights: &[f32], n: usize, scale: Scale) -> Vec<u8> {
    rasterize_masked(weights, n, scale, Mask::None)
}

/// [`rasterize`] with the cells `mask` hides (under [`Mask::Causal`], key `j > i` of query `i`)
/// drawn in [`MASKED_RGB`].
pub fn rasterize_masked(weights: &[f32], n: usize, scale: Scale, mask: Mask) -> Vec<u8> {
    assert_eq!(weights.len(), n * n, "attention matrix must be n x n");
    let mut rgba = Vec::with_capacity(4 * n * n);
    for (x, &w) in weights.iter().enumerate() {
        let hidden = mask == Mask::Causal && x % n > x / n;
        let [r, g, b] = if hidden { MASKED_RGB } else { viridis(w / scale.max) };
        rgba.extend_from_slice(&[r, g, b, 255]);
    }
    rgba
}

/// RGBA bytes for an `n x n` matrix of signed values (a difference of two attention maps): white
/// at 0, blue for positive, red for negative, full colour at `max_abs` (the largest magnitude).
pub fn rasterize_signed(values: &[f32], n: usize) -> Vec<u8> {
    assert_eq!(values.len(), n * n, "an n x n matrix");
    let max_abs = values.iter().copied().filter(|v| v.is_finite()).fold(0.0f32, |m, v| m.max(v.abs()));
    let max_abs = max_abs.max(f32::MIN_POSITIVE);
    values
        .iter()
        .flat_map(|&v| {
            let [r, g, b] = diverging(v / max_abs);
            [r, g, b, 255]
        })
        .collect()
}

/// An `n x n` matrix shrunk to `m x m` (`m <= n`) by the largest value in each block, so that a
/// small picture of a long sequence still shows every sharp weight: block `(I, J)` covers rows
/// `I n / m .. (I + 1) n / m` and the columns likewise. With `m >= n`, the matrix as it is.
pub fn pool_max(weights: &[f32], n: usize, m: usize) -> (Vec<f32>, usize) {
    assert_eq!(weights.len(), n * n, "an n x n matrix");
    if m >= n || m == 0 {
        return (weights.to_vec(), n);
    }
    let edge = |i: usize| i * n / m;
    let mut pooled = vec![f32::NEG_INFINITY; m * m];
    for big_i in 0..m {
        for i in edge(big_i)..edge(big_i + 1) {
            let row = &weights[i * n..(i + 1) * n];
            for (big_j, cell) in pooled[big_i * m..(big_i + 1) * m].iter_mut().enumerate() {
                *cell = row[edge(big_j)..edge(big_j + 1)].iter().fold(*cell, |a, &w| a.max(w));
            }
        }
    }
    (pooled, m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_keeps_each_blocks_largest_weight_for_even_and_odd_sizes() {
        // 5 x 5 into 2 x 2: blocks of rows 0..2 and 2..5, columns likewise.
        let mut w = vec![0.0f32; 25];
        w[4] = 0.9; // (0, 4): block (0, 1)
        w[2 * 5 + 1] = 0.5; // (2, 1): block (1, 0)
        w[24] = 0.7; // (4, 4): block (1, 1)
        assert_eq!(pool_max(&w, 5, 2), (vec![0.0, 0.9, 0.5, 0.7], 2));
        assert_eq!(pool_max(&w, 5, 5), (w.clone(), 5));
        assert_eq!(pool_max(&w, 5, 9), (w, 5));
        // Element by element: each weight raises the block it falls in, found by its edges.
        for (n, m) in [(1023, 256), (1024, 256), (300, 7), (257, 256)] {
            let w: Vec<f32> = (0..n * n).map(|i| ((i * 7919) % 1009) as f32).collect();
            let (pooled, got_m) = pool_max(&w, n, m);
            let block = |i: usize| (0..m).find(|&b| i < (b + 1) * n / m).unwrap();
            let mut want = vec![f32::NEG_INFINITY; m * m];
            for i in 0..n {
                for j in 0..n {
                    let cell = &mut want[block(i) * m + block(j)];
                    *cell = cell.max(w[i * n + j]);
                }
            }
            assert_eq!((got_m, pooled), (m, want), "{n} into {m}");
        }
    }

    #[test]
    fn a_causal_maps_later_keys_are_grey_and_its_zero_weights_are_the_colour_maps() {
        let w = [1.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 1.0];
        let px = rasterize_masked(&w, 3, Scale::fit(&w), Mask::Causal);
        let cell =
            |i: usize, j: usize| [px[4 * (i * 3 + j)], px[4 * (i * 3 + j) + 1], px[4 * (i * 3 + j) + 2]];
        assert_eq!([cell(0, 1), cell(0, 2), cell(1, 2)], [MASKED_RGB; 3]);
        assert_eq!((cell(1, 0), cell(2, 0), cell(2, 2)), (viridis(0.0), viridis(0.0), viridis(1.0)));
        assert_eq!(
            rasterize(&w, 3, Scale::fit(&w))[4..7],
            viridis(0.0),
            "unmasked, the same cell is a weight of 0"
        );
    }

    #[test]
    fn signed_values_are_white_at_zero_and_full_at_the_largest_magnitude() {
        let px = rasterize_signed(&[0.0, 0.5, -0.25, f32::NAN], 2);
        assert_eq!(px.len(), 16);
        assert_eq!(&px[0..4], &[255, 255, 255, 255]);
        assert_eq!([px[4], px[5], px[6]], diverging(1.0));
        assert_eq!([px[8], px[9], px[10]], diverging(-0.5));
        assert_eq!([px[12], px[13], px[14]], [255, 255, 255], "NaN is drawn as no difference");
    }

    #[test]
    fn one_pixel_per_weight_scaled_to_the_max() {
        let w = [0.0, 0.5, 0.25, 0.25];
        let px = rasterize(&w, 2, Scale::fit(&w));
        assert_eq!(px.len(), 16);
        assert_eq!(&px[0..4], &[68, 1, 84, 255]); // 0 -> darkest
        assert_eq!(&px[4..8], &[253, 231, 37, 255]); // max -> brightest
        assert_eq!(&px[8..12], &px[12..16]);
    }

    #[test]
    fn empty_and_all_zero_matrices_do_not_divide_by_zero() {
        assert!(rasterize(&[], 0, Scale::fit(&[])).is_empty());
        let px = rasterize(&[0.0; 4], 2, Scale::fit(&[0.0; 4]));
        assert!(px.chunks(4).all(|p| p == [68, 1, 84, 255]));
    }
}
