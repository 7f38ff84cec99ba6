//! One forward pass cut into shards of heads, for threads that share no memory (web workers,
//! each with its own wasm instance): every shard computes its heads from the whole input and
//! the weights it holds, and the pass is assembled from the shards' flat buffers.
//!
//! A shard of heads `a..b` (width `w = (b - a) d_k`) computes
//!
//! ```text
//! QKV_s = x @ [W_q[:, a..b] | W_k[:, a..b] | W_v[:, a..b]]      (n x 3w, one product per block)
//! P_h, O_h, C_h as in the full pass, for h in a..b
//! ```
//!
//! and [`assemble`] adds the shards' `C_h` in head order, `0 + C_0 + C_1 + ...`, as
//! [`super::forward_into`] does. Every element of `QKV_s` is the same dot product over the same
//! `d` terms as in the wide projection, so the assembled pass equals the single-thread one (the
//! tests check it to the bit on both kernels).
//!
//! A shard travels as one `Vec<f32>` ([`HeadShard::data`]): `[attention | concat | contributions]`,
//! `len x n x n`, `n x w` and `len x n x d`.

use std::ops::Range;

use super::gemm::{sgemm, MatMut, MatRef};
use super::{attend, Forward, Kernel};
use crate::attention::{ModelConfig, Weights};

/// What one shard of heads computed, in one flat buffer (the layout in the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct HeadShard {
    /// The heads this shard computed.
    pub heads: Range<usize>,
    /// `[attention | concat | contributions]`.
    pub data: Vec<f32>,
}

/// Sizes of a shard's three parts: attention, concatenated head outputs, contributions.
fn parts(config: &ModelConfig, heads: &Range<usize>) -> [usize; 3] {
    let (n, d, len) = (config.seq_len, config.d_model, heads.len());
    [len * n * n, n * len * config.d_k(), len * n * d]
}

impl HeadShard {
    /// The length of the flat buffer of a shard of `heads`.
    pub fn len_for(config: &ModelConfig, heads: &Range<usize>) -> usize {
        parts(config, heads).iter().sum()
    }
}

/// `0..len` cut into `count` ranges as even as possible (the first ones one longer): the heads
/// of a pass, or the trained model's feed-forward units. Fewer ranges when `len < count`;
/// `count` must be positive.
pub fn even_ranges(len: usize, count: usize) -> Vec<Range<usize>> {
    assert!(count > 0, "a pass needs at least one shard");
    let count = count.min(len.max(1));
    let (base, extra) = (len / count, len % count);
    let mut start = 0;
    (0..count)
        .map(|s| {
            let len = base + usize::from(s < extra);
            start += len;
            start - len..start
        })
        .collect()
}

/// Heads `heads` of one forward pass of `config` on `x` with `weights`.
pub fn forward_heads(
    kernel: Kernel,
    config: &ModelConfig,
    x: &[f32],
    weights: &Weights,
    heads: Range<usize>,
) -> HeadShard {
    let (n, d, d_k) = (config.seq_len, config.d_model, config.d_k());
    assert_eq!(x.len(), n * d, "x must be seq_len x d_model");
    assert_eq!(weights.d_model, d, "weights are for another d_model");
    assert!(heads.end <= config.num_heads, "heads {heads:?} out of {}", config.num_heads);
    let [attention, concat, _] = parts(config, &heads);
    let (len, w) = (heads.len(), heads.len() * d_k);
    let mut data = vec![0.0f32; parts(config, &heads).iter().sum()];
    let mut qkv = vec![0.0f32; n * 3 * w];
    for block in 0..3 {
        sgemm(
            kernel,
            1.0,
            MatRef::row_major(x, n, d),
            MatRef::new(&weights.w_qkv[block * d + heads.start * d_k..], d, w, 3 * d, 1),
            0.0,
            MatMut::new(&mut qkv[block * w..], n, w, 3 * w, 1),
        );
    }
    let (probs, rest) = data.split_at_mut(attention);
    let (heads_out, contributions) = rest.split_at_mut(concat);
    attend(kernel, &qkv, n, len, d_k, probs, heads_out);
    // Head `i` of the shard: its columns of the shard's `w`-wide concatenation times its rows of
    // `W_o` (the shard's rows start at its first head), as `project_head` does for the full pass.
    for (i, block) in contributions.chunks_exact_mut(n * d).enumerate() {
        sgemm(
            kernel,
            1.0,
            MatRef::new(&heads_out[i * d_k..], n, d_k, w, 1),
            MatRef::new(&weights.w_o[(heads.start + i) * d_k * d..], d_k, d, d, 1),
            0.0,
            MatMut::row_major(block, n, d),
        );
    }
    HeadShard { heads, data }
}

/// The forward pass from shards that together hold every head of `config` once, in any order;
/// `None` if they do not.
pub fn assemble(config: &ModelConfig, shards: &[HeadShard]) -> Option<Forward> {
    let mut sorted: Vec<&HeadShard> = shards.iter().collect();
    sorted.sort_by_key(|s| s.heads.start);
    let mut next = 0;
    for s in &sorted {
        if s.heads.start != next || s.data.len() != HeadShard::len_for(config, &s.heads) {
            return None;
        }
        next = s.heads.end;
    }
    if next != config.num_heads {
        return None;
    }
    // NaN until placed: a gap in the shards would show in every comparison.
    let mut out = Forward::filled(config, f32::NAN);
    sorted.iter().for_each(|s| place(config, &s.heads, &s.data, &mut out));
    sum_contributions(&mut out);
    Some(out)
}

/// Copies the flat buffer of the shard of `heads` (its length is [`HeadShard::len_for`]) into
/// its places in `out`: attention, columns of the concatenation, contributions.
pub fn place(config: &ModelConfig, heads: &Range<usize>, data: &[f32], out: &mut Forward) {
    let (n, d, d_k) = (config.seq_len, config.d_model, config.d_k());
    let [attention, concat, _] = parts(config, heads);
    assert_eq!(data.len(), HeadShard::len_for(config, heads), "a shard of heads {heads:?} of another length");
    let w = heads.len() * d_k;
    let (probs, rest) = data.split_at(attention);
    let (heads_out, contributions) = rest.split_at(concat);
    out.attention[heads.start * n * n..heads.end * n * n].copy_from_slice(probs);
    if w > 0 {
        for (row, part) in out.heads.chunks_exact_mut(d).zip(heads_out.chunks_exact(w)) {
            row[heads.start * d_k..heads.end * d_k].copy_from_slice(part);
        }
    }
    out.contributions.data[heads.start * n * d..heads.end * n * d].copy_from_slice(contributions);
}

/// The output from every head's contribution once all are placed: `0 + C_0 + C_1 + ...`, the
/// sums of [`super::forward_into`] in its order.
pub fn sum_contributions(out: &mut Forward) {
    let block = out.config.seq_len * out.config.d_model;
    out.output.fill(0.0);
    for c in out.contributions.data.chunks_exact(block) {
        out.output.iter_mut().zip(c).for_each(|(o, c)| *o += c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::Inputs;

    #[test]
    fn heads_are_cut_evenly_and_the_first_shards_take_the_rest() {
        assert_eq!(even_ranges(12, 2), vec![0..6, 6..12]);
        assert_eq!(even_ranges(12, 5), vec![0..3, 3..6, 6..8, 8..10, 10..12]);
        assert_eq!(even_ranges(3, 8), vec![0..1, 1..2, 2..3]);
        assert_eq!(even_ranges(1, 1), vec![0..1]);
    }

    /// Shapes with odd lengths and head widths (d_k 1, 5, 7, 16, 64), cut into 1, 2, 3 and H shards.
    #[test]
    fn the_assembled_pass_is_the_single_thread_pass_to_the_bit() {
        for (d, h, n) in [(8, 8, 1), (10, 2, 3), (21, 3, 17), (64, 4, 33), (768, 12, 40)] {
            let config = ModelConfig { d_model: d, num_heads: h, seq_len: n };
            let weights = Weights::generate(d, 7);
            let x = Inputs::generate(&config, 7).x;
            for kernel in Kernel::ALL {
                let mut whole = Forward::filled(&config, f32::NAN);
                super::super::forward_into(kernel, &config, &x, &weights, &mut whole);
                for shards in [1, 2, 3, h] {
                    let cut: Vec<HeadShard> = even_ranges(h, shards)
                        .into_iter()
                        .rev()
                        .map(|r| forward_heads(kernel, &config, &x, &weights, r))
                        .collect();
                    let assembled = assemble(&config, &cut).expect("every head once");
                    let same =
                        |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits());
                    let at = format!("{kernel:?} d {d} h {h} n {n} in {shards} shards");
                    assert!(same(&assembled.output, &whole.output), "output differs: {at}");
                    assert!(same(&assembled.attention, &whole.attention), "attention differs: {at}");
                    assert!(same(&assembled.heads, &whole.heads), "heads differ: {at}");
                    assert!(
                        same(&assembled.contributions.data, &whole.contributions.data),
                        "C_h differ: {at}"
                    );
                }
            }
        }
    }

    #[test]
    fn shards_that_miss_or_repeat_a_head_are_refused() {
        let config = ModelConfig { d_model: 16, num_heads: 4, seq_len: 5 };
        let weights = Weights::generate(16, 1);
        let x = Inputs::generate(&config, 1).x;
        let shard = |r: Range<usize>| forward_heads(Kernel::Scalar, &config, &x, &weights, r);
        assert!(assemble(&config, &[shard(0..2)]).is_none());
        assert!(assemble(&config, &[shard(0..2), shard(1..4)]).is_none());
        assert!(assemble(&config, &[shard(0..2), shard(2..4), shard(3..4)]).is_none());
        assert!(assemble(&config, &[shard(2..4), shard(0..2)]).is_some());
        let mut short = shard(2..4);
        short.data.pop();
        assert!(assemble(&config, &[shard(0..2), short]).is_none());
    }
}
