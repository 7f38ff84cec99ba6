//! Rotary position embeddings (RoPE, Su et al. 2021), as Llama, Qwen2/Qwen3 and SmolLM apply them
//! to each head's queries and keys: position `p` turns the pair of features `(i, i + d/2)` of a
//! head of width `d` by the angle `p θ_i`, with `θ_i = base^(-2i/d)` (`rope_theta`):
//!
//! ```text
//! x'[i]       = x[i] cos(p θ_i) - x[i + d/2] sin(p θ_i)
//! x'[i + d/2] = x[i + d/2] cos(p θ_i) + x[i] sin(p θ_i)        i < d/2
//! ```
//!
//! Pairs half a head apart are the Hugging Face checkpoints' order (their `rotate_half`); a GGUF
//! file's query and key rows are permuted so that llama.cpp can turn adjacent pairs instead, and
//! are put back in this order when read. The score of a query at `p` and a key at `p'` then
//! depends on `p - p'` alone.
//!
//! Llama 3's `rope_scaling` (`"rope_type": "llama3"`) stretches the slow frequencies for a longer
//! context ([`Llama3Scaling`]): a frequency whose wavelength `2π / θ_i` is shorter than
//! `original / high_freq_factor` is kept; one longer than `original / low_freq_factor` is divided
//! by `factor`; between them the two are mixed by
//! `s = (original / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)`:
//! `θ (1 - s) / factor + θ s`. The angles are computed in f64 and turned into f32 once per
//! position and frequency.

/// The `rope_scaling` of a Llama 3 config.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Llama3Scaling {
    /// How much slower the slowest frequencies turn (`factor`).
    pub factor: f64,
    /// `low_freq_factor`.
    pub low_freq_factor: f64,
    /// `high_freq_factor`, above `low_freq_factor`.
    pub high_freq_factor: f64,
    /// The context the model was first trained at (`original_max_position_embeddings`).
    pub original_positions: f64,
}

/// The frequencies of a head of width `head_dim`.
#[derive(Clone, Debug, PartialEq)]
pub struct Rotary {
    head_dim: usize,
    /// `θ_i` for `i < head_dim / 2`, scaled.
    frequencies: Vec<f64>,
}

impl Rotary {
    /// The frequencies for heads of even width `head_dim` and base `theta`, scaled by `scaling`.
    pub fn new(head_dim: usize, theta: f64, scaling: Option<Llama3Scaling>) -> Result<Rotary, String> {
        if head_dim == 0 || !head_dim.is_multiple_of(2) {
            return Err(format!("a head of width {head_dim} has no pairs of features to turn"));
        }
        if !(theta.is_finite() && theta > 1.0) {
            return Err(format!("rope_theta is {theta}; it must be a finite number above 1"));
        }
        if let Some(s) = scaling {
            let finite = [s.factor, s.low_freq_factor, s.high_freq_factor, s.original_positions]
                .iter()
                .all(|v| v.is_finite() && *v > 0.0);
            if !finite || s.high_freq_factor <= s.low_freq_factor {
                return Err(format!(
                    "rope_scaling {s:?} needs positive values and high_freq_factor above low_freq_factor"
                ));
            }
        }
        let half = head_dim / 2;
        let frequencies = (0..half)
            .map(|i| {
                let f = theta.powf(-2.0 * i as f64 / head_dim as f64);
                scaling.map_or(f, |s| s.scale(f))
            })
            .collect();
        Ok(Rotary { head_dim, frequencies })
    }

    /// `θ_i`, scaled.
    pub fn frequencies(&self) -> &[f64] {
        &self.frequencies
    }

    /// Turns `x` (`n` rows of `heads` heads of `head_dim`, row `r` at position `first + r`) in
    /// place.
    pub fn rotate(&self, x: &mut [f32], heads: usize, first: usize) {
        let (d, half) = (self.head_dim, self.head_dim / 2);
        let width = heads * d;
        assert!(width > 0 && x.len().is_multiple_of(width), "rows of {heads} heads of {d}");
        let (mut cos, mut sin) = (vec![0.0f32; half], vec![0.0f32; half]);
        for (r, row) in x.chunks_exact_mut(width).enumerate() {
            let p = (first + r) as f64;
            for (i, &f) in self.frequencies.iter().enumerate() {
                let (s, c) = (p * f).sin_cos();
                (cos[i], sin[i]) = (c as f32, s as f32);
            }
            for head in row.chunks_exact_mut(d) {
                let (a, b) = head.split_at_mut(half);
                for i in 0..half {
                    let (x0, x1) = (a[i], b[i]);
                    a[i] = x0 * cos[i] - x1 * sin[i];
                    b[i] = x1 * cos[i] + x0 * sin[i];
                }
            }
        }
    }
}

impl Llama3Scaling {
    /// The frequency `f` as Llama 3 scales it.
    fn scale(self, f: f64) -> f64 {
        let wavelength = 2.0 * std::f64::consts::PI / f;
        let (low, high) = (self.low_freq_factor, self.high_freq_factor);
        if wavelength < self.original_positions / high {
            f
        } else if wavelength > self.original_positions / low {
            f / self.factor
        } else {
            let s = (self.original_positions / wavelength - low) / (high - low);
            (1.0 - s) * f / self.factor + s * f
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::layers::seeded;

    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// Each value from the formula in f64, element by element (no table of frequencies).
    fn oracle(x: &[f32], heads: usize, d: usize, first: usize, theta: f64) -> Vec<f64> {
        let half = d / 2;
        let mut out = vec![0.0; x.len()];
        for (r, row) in x.chunks_exact(heads * d).enumerate() {
            let p = (first + r) as f64;
            for h in 0..heads {
                for i in 0..half {
                    let angle = p / theta.powf(2.0 * i as f64 / d as f64);
                    let (x0, x1) = (row[h * d + i] as f64, row[h * d + i + half] as f64);
                    let at = r * heads * d + h * d;
                    out[at + i] = x0 * angle.cos() - x1 * angle.sin();
                    out[at + i + half] = x1 * angle.cos() + x0 * angle.sin();
                }
            }
        }
        out
    }

    #[test]
    fn rotations_match_the_f64_formula_on_a_table_of_shapes() {
        // (rows, heads, width, first position, base): one of each, SmolLM2's, Llama's, far positions.
        let cases = [
            (1, 1, 2, 0, 10000.0),
            (3, 2, 8, 5, 10000.0),
            (7, 9, 64, 0, 100000.0),
            (4, 3, 128, 1000, 500000.0),
            (2, 1, 64, 8190, 10000.0),
        ];
        for (c, &(n, heads, d, first, theta)) in cases.iter().enumerate() {
            let x = seeded(c as u32, 5)(n * heads * d, 2.0);
            let want = oracle(&x, heads, d, first, theta);
            let mut got = x.clone();
            Rotary::new(d, theta, None).unwrap().rotate(&mut got, heads, first);
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                // The angle rounds to f32 once: its sine and cosine carry 2^-24 relative error,
                // the products and the sum a few more.
                assert!(
                    (g as f64 - w).abs() <= 1e-6 * (1.0 + w.abs()) * 4.0,
                    "case {c} value {i}: {g} against {w}"
                );
            }
        }
    }

    /// A rotation keeps each pair's length, and a query's score against a key depends on how far
    /// apart they are, not where.
    #[test]
    fn scores_depend_on_the_distance_alone() {
        let (d, theta) = (64, 10000.0);
        let rope = Rotary::new(d, theta, None).unwrap();
        let (q, k) = (seeded(1, 1)(d, 1.0), seeded(2, 1)(d, 1.0));
        let at = |v: &[f32], p: usize| {
            let mut v = v.to_vec();
            rope.rotate(&mut v, 1, p);
            v
        };
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum::<f64>();
        for distance in [0, 1, 7, 300] {
            let scores: Vec<f64> =
                [0, 13, 2000].iter().map(|&p| dot(&at(&q, p + distance), &at(&k, p))).collect();
            assert!(scores.iter().all(|s| (s - scores[0]).abs() < 1e-4), "distance {distance}: {scores:?}");
        }
        let turned = at(&q, 77);
        for i in 0..d / 2 {
            let len = |v: &[f32]| (v[i] as f64).hypot(v[i + d / 2] as f64);
            assert!((len(&turned) - len(&q)).abs() < 1e-6, "pair {i}");
        }
    }

    /// Llama 3.2's scaling (factor 32, low 1, high 4, 8192 positions, base 500000): the fast
    /// frequencies kept, the slow ones divided by the factor, and between them a mix that falls
    /// from one to the other without a jump.
    #[test]
    fn llama3_scaling_keeps_fast_frequencies_and_slows_slow_ones() {
        let scaling = Llama3Scaling {
            factor: 32.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_positions: 8192.0,
        };
        let (plain, scaled) =
            (Rotary::new(64, 500000.0, None).unwrap(), Rotary::new(64, 500000.0, Some(scaling)).unwrap());
        let (mut kept, mut slowed, mut mixed) = (0, 0, 0);
        for (&f, &g) in plain.frequencies().iter().zip(scaled.frequencies()) {
            let wavelength = 2.0 * std::f64::consts::PI / f;
            if wavelength < 8192.0 / 4.0 {
                assert_eq!(g, f);
                kept += 1;
            } else if wavelength > 8192.0 {
                assert!((g - f / 32.0).abs() <= 1e-15 * f);
                slowed += 1;
            } else {
                assert!(g < f && g > f / 32.0, "{g} between {f} and {}", f / 32.0);
                mixed += 1;
            }
        }
        assert!(kept > 0 && slowed > 0 && mixed > 0, "{kept} kept, {slowed} slowed, {mixed} mixed");
        // At the band's edges the mix meets each side.
        let edge = |wavelength: f64| {
            scaling.scale(2.0 * std::f64::consts::PI / wavelength) * wavelength / (2.0 * std::f64::consts::PI)
        };
        assert!((edge(2048.0) - 1.0).abs() < 1e-12 && (edge(8192.0) - 1.0 / 32.0).abs() < 1e-12);
    }

    #[test]
    fn odd_widths_and_bad_bases_are_refused() {
        assert!(Rotary::new(7, 10000.0, None).unwrap_err().contains("width 7"));
        assert!(Rotary::new(0, 10000.0, None).is_err());
        assert!(Rotary::new(8, f64::NAN, None).unwrap_err().contains("rope_theta"));
        let bad = Llama3Scaling {
            factor: 8.0,
            low_freq_factor: 4.0,
            high_freq_factor: 1.0,
            original_positions: 8192.0,
        };
        assert!(Rotary::new(8, 10000.0, Some(bad)).unwrap_err().contains("high_freq_factor above"));
    }
}
