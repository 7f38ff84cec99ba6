//! An attention matrix as RGBA pixels, one pixel per (query, key) pair.

use super::colormap::viridis;

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
    assert_eq!(weights.len(), n * n, "attention matrix must be n x n");
    let mut rgba = Vec::with_capacity(4 * n * n);
    for &w in weights {
        let [r, g, b] = viridis(w / scale.max);
        rgba.extend_from_slice(&[r, g, b, 255]);
    }
    rgba
}

#[cfg(test)]
mod tests {
    use super::*;

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
