//! Head pruning: which heads are on, the output rebuilt from per-head contributions, and how far
//! the pruned output drifts from the full one.
//!
//! The output projection is linear, so with `concat = [head_0 | ... | head_{H-1}]`:
//!
//! ```text
//! output = concat @ W_o = sum_h head_h @ W_o[h*d_k .. (h+1)*d_k, :] = sum_h C_h
//! ```
//!
//! Once each contribution `C_h` (`seq_len x d_model`) is known, removing or restoring heads is a
//! sum over the active ones: no projection or attention is recomputed.

use super::heads::HeadSet;

/// Per-head contributions to the output: `num_heads` blocks of `seq_len x d_model`, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Contributions {
    /// Number of heads.
    pub num_heads: usize,
    /// Number of tokens.
    pub seq_len: usize,
    /// Width of the residual stream.
    pub d_model: usize,
    /// `C_h[i][j]` at `(h * seq_len + i) * d_model + j`.
    pub data: Vec<f32>,
}

impl Contributions {
    /// Head `h`'s block, `seq_len x d_model`.
    pub fn head(&self, h: usize) -> &[f32] {
        let block = self.seq_len * self.d_model;
        &self.data[h * block..(h + 1) * block]
    }

    /// Writes `sum_h C_h` over the active heads into `out` (`seq_len x d_model`), summing in
    /// head order so the result depends only on the set, never on the order of toggles.
    pub fn recompose_into(&self, heads: &HeadSet, out: &mut [f32]) {
        assert_eq!(heads.len(), self.num_heads, "one entry per head");
        assert_eq!(out.len(), self.seq_len * self.d_model, "out must be seq_len x d_model");
        out.fill(0.0);
        for h in heads.active() {
            for (o, c) in out.iter_mut().zip(self.head(h)) {
                *o += c;
            }
        }
    }

    /// [`Self::recompose_into`] into a new buffer.
    pub fn recompose(&self, heads: &HeadSet) -> Vec<f32> {
        let mut out = vec![0.0; self.seq_len * self.d_model];
        self.recompose_into(heads, &mut out);
        out
    }

    /// The active heads' output as [`Self::recompose`] gives it, from `full` (every head's,
    /// `0 + C_0 + C_1 + ...`: the forward pass's output), reading whichever set is smaller:
    /// `full` itself when no head is pruned (the same bits), `full` less the pruned heads'
    /// contributions, in head order, when fewer are pruned than kept (the same value to
    /// rounding), else the sum of the active ones (the same bits). A toggle at 256 heads of
    /// 512 x 1024 then reads one head's 2 MiB, not 0.5 GiB in one call (BENCHMARKS.md section 20).
    pub fn recompose_from_full(&self, full: &[f32], heads: &HeadSet) -> Vec<f32> {
        assert_eq!(heads.len(), self.num_heads, "one entry per head");
        assert_eq!(full.len(), self.seq_len * self.d_model, "full must be seq_len x d_model");
        if heads.pruned_count() >= heads.active_count() {
            return self.recompose(heads);
        }
        let mut out = full.to_vec();
        for h in heads.pruned() {
            self.take_out(h, &mut out);
        }
        out
    }

    /// Subtracts head `h`'s contribution from `sum` (`seq_len x d_model`): one head pruned from
    /// a running sum.
    pub fn take_out(&self, h: usize, sum: &mut [f32]) {
        assert_eq!(sum.len(), self.seq_len * self.d_model, "sum must be seq_len x d_model");
        for (o, c) in sum.iter_mut().zip(self.head(h)) {
            *o -= c;
        }
    }
}

/// How far one token's pruned output moved from the full output.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenDrift {
    /// `|pruned - full| / |full|` (0 when both are zero).
    pub rel_l2: f64,
    /// Cosine similarity of the two vectors (1 when both are zero, 0 when only one is).
    pub cosine: f64,
}

/// Drift of a pruned output against the full one, per token and over the whole sequence.
#[derive(Clone, Debug, PartialEq)]
pub struct Drift {
    /// One entry per token.
    pub per_token: Vec<TokenDrift>,
    /// The same measures over the whole `seq_len x d_model` matrix, flattened.
    pub overall: TokenDrift,
}

/// Cosine similarity of two vectors of the same length, accumulated in f64 (1 when both are
/// zero, 0 when only one is): how close a pruned sentence embedding stays to the full one.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len(), "vectors must have the same length");
    Sums::of(a, b).drift().cosine
}

/// Compares `pruned` with `full`, both `seq_len x d_model`, accumulating in f64.
pub fn drift(full: &[f32], pruned: &[f32], d_model: usize) -> Drift {
    assert_eq!(full.len(), pruned.len(), "outputs must have the same shape");
    assert!(d_model > 0 && full.len().is_multiple_of(d_model), "outputs must be whole rows of d_model");
    let mut total = Sums::default();
    let per_token = full
        .chunks_exact(d_model)
        .zip(pruned.chunks_exact(d_model))
        .map(|(f, p)| {
            let s = Sums::of(f, p);
            total.add(&s);
            s.drift()
        })
        .collect();
    Drift { per_token, overall: total.drift() }
}

#[derive(Default)]
struct Sums {
    full_sq: f64,
    pruned_sq: f64,
    dot: f64,
    diff_sq: f64,
}

impl Sums {
    fn of(full: &[f32], pruned: &[f32]) -> Self {
        let mut s = Sums::default();
        for (&f, &p) in full.iter().zip(pruned) {
            let (f, p) = (f as f64, p as f64);
            s.full_sq += f * f;
            s.pruned_sq += p * p;
            s.dot += f * p;
            s.diff_sq += (p - f) * (p - f);
        }
        s
    }

    fn add(&mut self, o: &Sums) {
        self.full_sq += o.full_sq;
        self.pruned_sq += o.pruned_sq;
        self.dot += o.dot;
        self.diff_sq += o.diff_sq;
    }

    fn drift(&self) -> TokenDrift {
        let rel_l2 = if self.full_sq > 0.0 {
            (self.diff_sq / self.full_sq).sqrt()
        } else if self.diff_sq > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        let norms = (self.full_sq * self.pruned_sq).sqrt();
        let cosine = if norms > 0.0 {
            (self.dot / norms).clamp(-1.0, 1.0)
        } else if self.full_sq == self.pruned_sq {
            1.0 // both zero: nothing moved
        } else {
            0.0
        };
        TokenDrift { rel_l2, cosine }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Contributions of odd sizes and mixed signs, and their full sum as the forward pass makes it.
    fn layer(num_heads: usize, seq_len: usize, d_model: usize) -> (Contributions, Vec<f32>) {
        let n = num_heads * seq_len * d_model;
        let data = (0..n).map(|i| ((i * 7919 % 1009) as f32 - 504.0) / 97.0).collect();
        let c = Contributions { num_heads, seq_len, d_model, data };
        let full = c.recompose(&HeadSet::all(num_heads));
        (c, full)
    }

    /// From the full output the active heads' sum is the same bits where no head or most heads
    /// are pruned, and the same to rounding where a few are, on a table of shapes (one head, odd
    /// widths, many heads); every pruned set of a 5-head layer is tried.
    #[test]
    fn the_sum_from_the_full_output_is_the_active_heads_sum() {
        for (heads, n, d) in [(1, 1, 1), (1, 7, 3), (2, 3, 5), (5, 9, 13), (12, 33, 84), (64, 4, 17)] {
            let (c, full) = layer(heads, n, d);
            let sets: Vec<HeadSet> = if heads <= 5 {
                (0..1u32 << heads)
                    .map(|m| HeadSet::with_pruned(heads, (0..heads).filter(|h| m >> h & 1 == 1)))
                    .collect()
            } else {
                vec![
                    HeadSet::all(heads),
                    HeadSet::with_pruned(heads, [3]),
                    HeadSet::with_pruned(heads, [0, heads - 1, 5]),
                    HeadSet::with_pruned(heads, 1..heads),
                ]
            };
            for set in sets {
                let (got, want) = (c.recompose_from_full(&full, &set), c.recompose(&set));
                let tag = format!("{heads} heads, {n} x {d}, {} pruned", set.pruned_count());
                if set.pruned_count() == 0 || set.pruned_count() >= set.active_count() {
                    assert_eq!(got, want, "{tag}: the same bits");
                } else {
                    let scale = full.iter().fold(0f32, |m, v| m.max(v.abs())).max(1.0);
                    let worst = got.iter().zip(&want).fold(0f32, |m, (g, w)| m.max((g - w).abs()));
                    assert!(worst <= 1e-5 * scale * heads as f32, "{tag}: off by {worst} (scale {scale})");
                    assert_ne!(got, full, "{tag}: the pruned heads were taken out");
                }
            }
        }
    }
}
