//! What a decoder's passes cost, counted from the shape: every head is computed in every pass
//! (a pruned head's output is zeroed before the output projection), so pruning changes no count.

use crate::model::spec::ModelSpec;

/// FLOPs of one block over `n` tokens: the fused QKV product, every head's scores and weighted
/// sums (the full `n x n`, as the kernel computes it), the output projection and the
/// feed-forward layer.
pub fn block_flops(spec: &ModelSpec, n: usize) -> u64 {
    let (n, d, ffn) = (n as u64, spec.d_model as u64, spec.ffn as u64);
    2 * n * d * 3 * d + 2 * 2 * n * n * d + 2 * n * d * d + 2 * 2 * n * d * ffn
}

/// FLOPs of a pass over `n` tokens: its blocks and every position's logits (the losses read
/// them all).
pub fn pass_flops(spec: &ModelSpec, n: usize) -> u64 {
    spec.layers as u64 * block_flops(spec, n) + 2 * (n * spec.d_model * spec.vocab) as u64
}

/// FLOPs of the next token's logits after `n` tokens from the stream entering block `from` on:
/// the blocks from there and the last position's logits.
pub fn next_logits_flops(spec: &ModelSpec, n: usize, from: usize) -> u64 {
    spec.layers.saturating_sub(from) as u64 * block_flops(spec, n) + 2 * (spec.d_model * spec.vocab) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_is_its_blocks_and_its_logits() {
        let gpt2 = ModelSpec {
            layers: 12,
            heads: 12,
            d_model: 768,
            ffn: 3072,
            vocab: 50257,
            positions: 1024,
            ..ModelSpec::MINILM_L6_V2
        };
        // 85 M weights in the blocks, two FLOPs each per token, and the attention's n^2 terms.
        let block = block_flops(&gpt2, 1) as f64;
        assert_eq!(block, 2.0 * (3.0 * 768.0 * 768.0 + 768.0 * 768.0 + 2.0 * 768.0 * 3072.0) + 4.0 * 768.0);
        assert_eq!(pass_flops(&gpt2, 128), 12 * block_flops(&gpt2, 128) + 2 * 128 * 768 * 50257);
        assert_eq!(
            next_logits_flops(&gpt2, 128, 0) - next_logits_flops(&gpt2, 128, 11),
            11 * block_flops(&gpt2, 128)
        );
        assert_eq!(next_logits_flops(&gpt2, 5, 12), 2 * 768 * 50257, "nothing pruned: the logits alone");
    }
}
