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

/// Which heads take part in the output. `true` is active, `false` pruned.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HeadMask(Vec<bool>);

impl HeadMask {
    /// Every one of `num_heads` heads active.
    pub fn all(num_heads: usize) -> Self {
        HeadMask(vec![true; num_heads])
    }

    /// `num_heads` heads with those listed in `pruned` switched off (indices out of range are
    /// ignored, so a set chosen for a larger model stays usable).
    pub fn with_pruned(num_heads: usize, pruned: impl IntoIterator<Item = usize>) -> Self {
        let mut mask = HeadMask::all(num_heads);
        for h in pruned {
            if h < num_heads {
                mask.0[h] = false;
            }
        }
        mask
    }

    /// Number of heads, active or not.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are no heads at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether head `h` is active.
    pub fn is_active(&self, h: usize) -> bool {
        self.0[h]
    }

    /// Number of active heads.
    pub fn active_count(&self) -> usize {
        self.0.iter().filter(|&&a| a).count()
    }

    /// Switches head `h` on or off.
    pub fn set(&mut self, h: usize, active: bool) {
        self.0[h] = active;
    }

    /// Flips head `h`.
    pub fn toggle(&mut self, h: usize) {
        self.0[h] = !self.0[h];
    }
}

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
    /// head order so the result depends only on the mask, never on the order of toggles.
    pub fn recompose_into(&self, mask: &HeadMask, out: &mut [f32]) {
        assert_eq!(mask.len(), self.num_heads, "one mask entry per head");
        assert_eq!(out.len(), self.seq_len * self.d_model, "out must be seq_len x d_model");
        out.fill(0.0);
        for h in (0..self.num_heads).filter(|&h| mask.is_active(h)) {
            for (o, c) in out.iter_mut().zip(self.head(h)) {
                *o += c;
            }
        }
    }

    /// [`Self::recompose_into`] into a new buffer.
    pub fn recompose(&self, mask: &HeadMask) -> Vec<f32> {
        let mut out = vec![0.0; self.seq_len * self.d_model];
        self.recompose_into(mask, &mut out);
        out
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
