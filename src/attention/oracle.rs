//! The naive f64 oracle every backend is compared with.
//!
//! A plain transcription of the seed's `efficient_multihead_attention` (batch of one): triple
//! loops, f64 accumulation, explicit indices mirroring the seed's reshape and transpose. It is
//! deliberately never optimised: its only job is to be obviously right.

use super::config::ModelConfig;
use super::heads::HeadSet;

/// What the oracle computes.
#[derive(Clone, Debug, PartialEq)]
pub struct OracleOutput {
    /// `seq_len x d_model`, row-major: `concat(heads) @ W_o` with pruned heads zeroed.
    pub output: Vec<f64>,
    /// `num_heads x seq_len x seq_len`: each head's softmax weights (rows are queries).
    pub attention: Vec<f64>,
}

/// Multi-head attention of `x` (`seq_len x d_model`) with the seed's weight layout.
/// Heads switched off in `heads` contribute zeros to the concatenation, as if pruned.
pub fn multihead_attention(
    config: &ModelConfig,
    x: &[f32],
    w_qkv: &[f32],
    w_o: &[f32],
    heads: &HeadSet,
) -> OracleOutput {
    let (n, d, h_count, d_k) = (config.seq_len, config.d_model, config.num_heads, config.d_k());
    assert_eq!(x.len(), n * d, "x must be seq_len x d_model");
    assert_eq!(w_qkv.len(), d * 3 * d, "W_qkv must be d_model x 3*d_model");
    assert_eq!(w_o.len(), d * d, "W_o must be d_model x d_model");
    assert_eq!(heads.len(), h_count, "one entry per head");

    // qkv = x @ W_qkv: (seq, 3*d_model)
    let mut qkv = vec![0.0f64; n * 3 * d];
    for i in 0..n {
        for j in 0..3 * d {
            let mut s = 0.0;
            for c in 0..d {
                s += x[i * d + c] as f64 * w_qkv[c * 3 * d + j] as f64;
            }
            qkv[i * 3 * d + j] = s;
        }
    }
    // reshape (seq, 3, heads, d_k), transpose to (3, heads, seq, d_k)
    let at = |which: usize, head: usize, i: usize, c: usize| qkv[i * 3 * d + which * d + head * d_k + c];

    let scale = 1.0 / (d_k as f64).sqrt();
    let mut attention = vec![0.0f64; h_count * n * n];
    // attn_output transposed back to (seq, heads * d_k)
    let mut concat = vec![0.0f64; n * d];
    for head in 0..h_count {
        for i in 0..n {
            // scores = Q @ K^T / sqrt(d_k)
            let mut scores = vec![0.0f64; n];
            for (j, score) in scores.iter_mut().enumerate() {
                let mut s = 0.0;
                for c in 0..d_k {
                    s += at(0, head, i, c) * at(1, head, j, c);
                }
                *score = s * scale;
            }
            // weights = softmax(scores), max-subtracted
            let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let exps: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let sum: f64 = exps.iter().sum();
            for j in 0..n {
                attention[(head * n + i) * n + j] = exps[j] / sum;
            }
            // attn_output = weights @ V
            if heads.is_active(head) {
                for c in 0..d_k {
                    let mut s = 0.0;
                    for j in 0..n {
                        s += attention[(head * n + i) * n + j] * at(2, head, j, c);
                    }
                    concat[i * d + head * d_k + c] = s;
                }
            }
        }
    }
    // output = concat @ W_o
    let mut output = vec![0.0f64; n * d];
    for i in 0..n {
        for j in 0..d {
            let mut s = 0.0;
            for c in 0..d {
                s += concat[i * d + c] * w_o[c * d + j] as f64;
            }
            output[i * d + j] = s;
        }
    }
    OracleOutput { output, attention }
}
