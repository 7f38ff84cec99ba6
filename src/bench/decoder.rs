//! Where a decoder's pass goes: its stages timed one by one over a text ([`pass_profile`]), for
//! `bench/decoder-speed.mjs`, which prints it beside the pass it times against transformers.js.

use super::median;
use crate::attention::turns::{at_once, AtOnce};
use crate::cpu::gelu::gelu_tanh_in_place;
use crate::cpu::{attend_in_turns, Kernel, Mask};
use crate::model::decoder::gpt2::{Gpt2, READ_OUT_ROWS};
use crate::model::decoder::next_token::loss;
use crate::model::layers::{layer_norm, linear};

/// Stages of a pass, in the order they run.
const STAGES: [&str; 9] = [
    "LayerNorms and residuals",
    "W_attn: Q, K, V (n x d x 3d)",
    "causal attention: every head's Q K^T, softmax, P V",
    "W_proj (n x d x d)",
    "W_fc (n x d x 4d)",
    "tanh-GELU (n x 4d)",
    "W_mlp (n x 4d x d)",
    "output head: every position's logits (n x d x vocab)",
    "every position's loss (log-sum-exp over the vocabulary)",
];

/// Every layer of `gpt2` over `ids` (every head), each stage timed on `now` and summed over the
/// layers, then the output head and the losses a [`READ_OUT_ROWS`]-row block at a time, as the
/// page's pass runs them; the median of `rounds` after 300 ms of warm-up, as a table.
pub fn pass_profile(now: &dyn Fn() -> f64, gpt2: &Gpt2, ids: &[u32], rounds: usize) -> String {
    let spec = gpt2.spec;
    let (n, d, ffn, k) = (ids.len(), spec.d_model, spec.ffn, Kernel::Simd);
    let (nf, df, ff, vf) = (n as f64, d as f64, ffn as f64, spec.vocab as f64);
    let flops = [
        0.0,
        6.0 * nf * df * df,
        2.0 * nf * nf * df,
        2.0 * nf * df * df,
        2.0 * nf * df * ff,
        0.0,
        2.0 * nf * ff * df,
        2.0 * nf * df * vf,
        0.0,
    ];
    let round = || {
        let mut t = [0.0f64; 9];
        let mut time = |i: usize, f: &mut dyn FnMut()| {
            let t0 = now();
            f();
            t[i] += now() - t0;
        };
        let mut x = gpt2.embed(ids);
        let (mut a, mut qkv, mut att, mut concat) =
            (vec![0.0; n * d], vec![0.0; n * 3 * d], vec![0.0; n * n], vec![0.0; n * d]);
        let (mut branch, mut hidden) = (vec![0.0; n * d], vec![0.0; n * ffn]);
        for b in &gpt2.blocks {
            time(0, &mut || {
                a.copy_from_slice(&x);
                layer_norm(&mut a, &b.ln1, spec.layer_norm_eps);
            });
            time(1, &mut || linear(k, &a, n, &b.qkv, &mut qkv, 3 * d));
            // As the page's pass that keeps no attention: one head's weights at a time.
            time(2, &mut || {
                let (h, d_k) = (spec.heads, spec.d_k());
                at_once(attend_in_turns(k, &qkv, n, h, d_k, Mask::Causal, &mut att, &mut concat, &AtOnce))
            });
            time(3, &mut || linear(k, &concat, n, &b.out, &mut branch, d));
            time(0, &mut || {
                x.iter_mut().zip(&branch).for_each(|(x, t)| *x += t);
                a.copy_from_slice(&x);
                layer_norm(&mut a, &b.ln2, spec.layer_norm_eps);
            });
            time(4, &mut || linear(k, &a, n, &b.ffn_in, &mut hidden, ffn));
            time(5, &mut || gelu_tanh_in_place(k, &mut hidden));
            time(6, &mut || linear(k, &hidden, n, &b.ffn_out, &mut branch, d));
            time(0, &mut || x.iter_mut().zip(&branch).for_each(|(x, t)| *x += t));
        }
        time(0, &mut || layer_norm(&mut x, &gpt2.ln_f, spec.layer_norm_eps));
        for (c, rows) in x.chunks(READ_OUT_ROWS * d).enumerate() {
            let mut logits = Vec::new();
            time(7, &mut || logits = gpt2.logits(k, rows));
            time(8, &mut || {
                for (r, row) in logits.chunks_exact(spec.vocab).enumerate() {
                    if let Some(&next) = ids.get(c * READ_OUT_ROWS + r + 1) {
                        std::hint::black_box(loss(k, row, next as usize));
                    }
                }
            });
        }
        t
    };
    let t0 = now();
    while now() - t0 < 300.0 {
        round();
    }
    let samples: Vec<[f64; 9]> = (0..rounds.max(1)).map(|_| round()).collect();
    let ms: Vec<f64> = (0..9).map(|i| median(samples.iter().map(|s| s[i]).collect())).collect();
    let total: f64 = ms.iter().sum();
    let mut text = format!(
        "A pass over {n} tokens, {} layers, {}, {}, median of {rounds}\n| stage | ms | share | GFLOP/s |\n|---|---:|---:|---:|\n",
        spec.layers,
        k.describe(),
        gpt2.precision().label()
    );
    for ((name, ms), f) in STAGES.iter().zip(&ms).zip(flops) {
        let f = f * if f > 0.0 && !name.starts_with("output") { spec.layers as f64 } else { 1.0 };
        let rate = if f > 0.0 { format!("{:.1}", f / 1e6 / ms) } else { "-".into() };
        text += &format!("| {name} | {ms:.1} | {:.0} % | {rate} |\n", 100.0 * ms / total);
    }
    text + &format!("| pass | {total:.1} | 100 % | |")
}
