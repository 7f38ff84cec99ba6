//! The CPU kernels against the f64 oracle. Runs natively (`cargo test`) and, unchanged, as wasm
//! with simd128 inside headless Chromium (`wasm-pack test --headless --chrome`).

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;
#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

use common::{assert_close, shape_table, trial, TOLERANCE};
use headlab::attention::{oracle, HeadSet, Inputs, ModelConfig, Weights};
use headlab::cpu::gemm::{sgemm, MatMut, MatRef};
use headlab::cpu::softmax::softmax_rows;
use headlab::cpu::{self, Kernel};

#[test]
fn vector_path_is_the_one_compiled_for_this_target() {
    let described = Kernel::Simd.describe();
    say!("CPU vector kernel under test: {described}");
    if cfg!(all(target_arch = "wasm32", feature = "relaxed-simd")) {
        // The relaxed-SIMD build's run (scripts/test.sh) must exercise its own micro-kernel.
        assert_eq!(described, "wasm simd128 + relaxed SIMD");
    } else if cfg!(target_arch = "wasm32") {
        // The browser run must exercise simd128, not a silently scalar build (see describe()).
        assert_eq!(described, "wasm simd128");
    }
}

#[test]
fn forward_matches_oracle_on_the_shape_table() {
    for kernel in Kernel::ALL {
        let mut worst = 0.0f64;
        for config in shape_table() {
            worst = worst.max(trial(kernel, &config, 7));
        }
        say!("{kernel:?} ({}): worst relative error vs f64 oracle {worst:.2e}", kernel.describe());
        assert!(worst < TOLERANCE);
    }
}

#[test]
fn forward_survives_scores_that_would_overflow_exp() {
    // Scale every input by 300: scores reach ~1e4, where exp() without max subtraction is inf.
    let config = ModelConfig { d_model: 15, num_heads: 3, seq_len: 9 };
    let weights = Weights::generate(config.d_model, 3);
    let mut inputs = Inputs::generate(&config, 3);
    inputs.x.iter_mut().for_each(|v| *v *= 300.0);
    let want =
        oracle::multihead_attention(&config, &inputs.x, &weights.w_qkv, &weights.w_o, &HeadSet::all(3));
    for kernel in Kernel::ALL {
        let got = cpu::forward(kernel, &config, &inputs.x, &weights);
        assert_close(&format!("{kernel:?} attention"), &got.attention, &want.attention, TOLERANCE);
        assert_close(&format!("{kernel:?} output"), &got.output, &want.output, 1e-4);
    }
}

/// Naive f64 `alpha * A @ B + beta * C` on strided inputs.
fn gemm_oracle(alpha: f64, a: &MatRef, b: &MatRef, beta: f64, c0: &[f32]) -> Vec<f64> {
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    let mut c = vec![0.0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            let s: f64 = (0..k).map(|p| a.at(i, p) as f64 * b.at(p, j) as f64).sum();
            c[i * n + j] = alpha * s + if beta == 0.0 { 0.0 } else { beta * c0[i * n + j] as f64 };
        }
    }
    c
}

fn filled(len: usize, seed: u32) -> Vec<f32> {
    let s = headlab::attention::synthetic::Stream::new(seed, headlab::attention::synthetic::StreamId::Wo);
    (0..len).map(|i| s.symmetric(i as u32)).collect()
}

#[test]
fn gemm_matches_oracle_on_odd_empty_and_strided_shapes() {
    let sizes = [
        (0, 0, 0),
        (0, 3, 5),
        (4, 0, 3),
        (3, 4, 0),
        (1, 1, 1),
        (1, 7, 1),
        (2, 3, 5),
        (7, 5, 3),
        (8, 8, 8),
        (9, 17, 33),
        (63, 1, 65),
        (64, 64, 64),
        (129, 65, 63),
    ];
    for kernel in Kernel::ALL {
        for (m, k, n) in sizes {
            for transpose_b in [false, true] {
                let a_data = filled(m * k, 1);
                let b_data = filled(k * n, 2);
                let a = MatRef::row_major(&a_data, m, k);
                // B stored either row-major k x n, or as the transpose of a row-major n x k.
                let b = if transpose_b {
                    MatRef::row_major(&b_data, n, k).t()
                } else {
                    MatRef::row_major(&b_data, k, n)
                };
                let want = gemm_oracle(0.5, &a, &b, 0.0, &[]);
                let mut c = vec![f32::NAN; m * n];
                sgemm(kernel, 0.5, a, b, 0.0, MatMut::row_major(&mut c, m, n));
                assert_close(&format!("{kernel:?} {m}x{k}x{n} bt={transpose_b}"), &c, &want, 1e-5);
            }
        }
    }
}

#[test]
fn gemm_accumulates_with_nonzero_beta_into_a_strided_block() {
    // C is a 5x3 block inside a 5x8 buffer at column 2; the columns around it must stay untouched.
    let (m, k, n, ld) = (5, 6, 3, 8);
    let a_data = filled(m * k, 4);
    let b_data = filled(k * n, 5);
    let c0 = filled(m * ld, 6);
    for kernel in Kernel::ALL {
        let mut buf = c0.clone();
        let (a, b) = (MatRef::row_major(&a_data, m, k), MatRef::row_major(&b_data, k, n));
        sgemm(kernel, 2.0, a, b, -1.5, MatMut::new(&mut buf[2..], m, n, ld, 1));
        let block0: Vec<f32> = (0..m).flat_map(|i| c0[i * ld + 2..i * ld + 2 + n].to_vec()).collect();
        let want = gemm_oracle(2.0, &a, &b, -1.5, &block0);
        let got: Vec<f32> = (0..m).flat_map(|i| buf[i * ld + 2..i * ld + 2 + n].to_vec()).collect();
        assert_close(&format!("{kernel:?} block"), &got, &want, 1e-5);
        for i in 0..m {
            for j in (0..ld).filter(|j| !(2..2 + n).contains(j)) {
                assert_eq!(
                    buf[i * ld + j].to_bits(),
                    c0[i * ld + j].to_bits(),
                    "{kernel:?} wrote outside the block at ({i},{j})"
                );
            }
        }
    }
}

#[test]
fn softmax_rows_match_f64_for_every_tail_length() {
    for kernel in Kernel::ALL {
        for row_len in [1, 2, 3, 4, 5, 7, 8, 9, 17, 64, 129] {
            // Magnitudes up to 1e3: exp without max subtraction would overflow.
            let scores: Vec<f32> = filled(3 * row_len, row_len as u32).iter().map(|v| v * 1e3).collect();
            let mut got = scores.clone();
            softmax_rows(kernel, &mut got, row_len);
            let want: Vec<f64> = scores
                .chunks(row_len)
                .flat_map(|row| {
                    let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
                    let e: Vec<f64> = row.iter().map(|&v| (v as f64 - max).exp()).collect();
                    let s: f64 = e.iter().sum();
                    e.into_iter().map(move |v| v / s)
                })
                .collect();
            assert_close(&format!("{kernel:?} softmax len {row_len}"), &got, &want, 1e-6);
            for row in got.chunks(row_len) {
                let sum: f32 = row.iter().sum();
                assert!((sum - 1.0).abs() < 1e-5, "{kernel:?} len {row_len}: row sums to {sum}");
            }
        }
        softmax_rows(kernel, &mut [], 0); // nothing to do, must not panic
    }
}

#[test]
fn toggling_heads_then_recomposing_equals_a_full_recompute_with_those_heads_zeroed() {
    let config = ModelConfig { d_model: 84, num_heads: 12, seq_len: 33 };
    let weights = Weights::generate(config.d_model, 11);
    let inputs = Inputs::generate(&config, 11);
    for kernel in Kernel::ALL {
        let fwd = cpu::forward(kernel, &config, &inputs.x, &weights);
        let mut mask = HeadSet::all(config.num_heads);
        // A walk of toggles, including re-enabling heads and pruning all of them.
        let walk = [3, 0, 11, 3, 5, 6, 7, 0, 1, 2, 4, 8, 9, 10, 11, 5, 6, 7, 3];
        for (step, &h) in walk.iter().enumerate() {
            mask.toggle(h);
            let recomposed = fwd.contributions.recompose(&mask);
            let full = cpu::project_masked(kernel, &config, &fwd.heads, &weights.w_o, &mask);
            let oracle = oracle::multihead_attention(&config, &inputs.x, &weights.w_qkv, &weights.w_o, &mask);
            let tag = format!("{kernel:?} step {step} ({} active)", mask.active_count());
            if mask.active_count() == 0 {
                assert!(recomposed.iter().chain(&full).all(|&v| v == 0.0), "{tag}: no heads must give zeros");
            } else {
                assert_close(&format!("{tag} recomposed vs oracle"), &recomposed, &oracle.output, TOLERANCE);
                let full64: Vec<f64> = full.iter().map(|&v| v as f64).collect();
                assert_close(&format!("{tag} recomposed vs full recompute"), &recomposed, &full64, TOLERANCE);
                let from_full = fwd.contributions.recompose_from_full(&fwd.output, &mask);
                assert_close(
                    &format!("{tag} from the full output vs oracle"),
                    &from_full,
                    &oracle.output,
                    TOLERANCE,
                );
            }
        }
    }
}

#[test]
fn generated_weights_give_the_stored_weights_forward_on_the_shape_table() {
    use common::check_forward;
    use headlab::attention::GeneratedWeights;
    use headlab::attention::LayerWeights;
    use headlab::cpu::stepped::SteppedPass;
    let mut worst = 0.0f64;
    for config in shape_table() {
        let (weights, inputs) = common::case(&config, 11);
        let generated = LayerWeights::Generated(GeneratedWeights { d_model: config.d_model, seed: 11 });
        let mut pass = SteppedPass::new(&config, &inputs.x, &generated);
        let steps = pass.steps();
        let mut taken = 1;
        while pass.step() {
            taken += 1;
            assert!(pass.progress() < 1.0);
        }
        assert_eq!((taken, pass.progress()), (steps, 1.0), "{config:?}");
        let got = pass.finish();
        // Weight for weight the same numbers as the stored matrices, so the same oracle holds.
        worst = worst.max(check_forward("generated", &config, &inputs, &weights, &got, TOLERANCE));
    }
    say!("generated weights: worst relative error vs f64 oracle {worst:.2e}");
}

/// The page's pass in steps (a block of QKV columns, of one head's query rows, of one head's
/// output columns) gives the pass in one call's bits, cut however finely, on the shape table.
#[test]
fn a_pass_cut_into_steps_gives_the_one_call_pass_bit_for_bit() {
    use headlab::attention::LayerWeights;
    use headlab::cpu::stepped::SteppedPass;
    for config in shape_table() {
        let (weights, inputs) = common::case(&config, 7);
        let whole = cpu::forward(Kernel::Simd, &config, &inputs.x, &weights);
        let stored = LayerWeights::Stored(weights);
        for step_flops in [1, 4096, 1 << 20, usize::MAX / 2] {
            let pass = SteppedPass::in_steps_of(&config, &inputs.x, &stored, step_flops);
            let steps = pass.steps();
            let got = pass.finish();
            assert!(step_flops > 1 || steps >= 3 * config.d_model, "{config:?}: {steps} steps");
            assert_eq!(got, whole, "{config:?} in steps of {step_flops} flops");
        }
    }
}

#[test]
fn the_head_by_head_loop_equals_the_batched_pass_and_the_oracle_on_the_shape_table() {
    for kernel in Kernel::ALL {
        let mut worst = (0.0f64, 0.0f64);
        for config in shape_table() {
            let (w, inputs) = (Weights::generate(config.d_model, 5), Inputs::generate(&config, 5));
            let looped = cpu::head_loop::forward_head_by_head(kernel, &config, &inputs.x, &w);
            let o = oracle::multihead_attention(
                &config,
                &inputs.x,
                &w.w_qkv,
                &w.w_o,
                &HeadSet::all(config.num_heads),
            );
            worst.0 = worst.0.max(assert_close(&format!("loop {config:?}"), &looped, &o.output, TOLERANCE));
            let batched = cpu::forward(kernel, &config, &inputs.x, &w).output;
            let as_f64: Vec<f64> = batched.iter().map(|&v| v as f64).collect();
            worst.1 = worst.1.max(assert_close(
                &format!("loop vs batched {config:?}"),
                &looped,
                &as_f64,
                TOLERANCE,
            ));
        }
        say!("{kernel:?}: head-by-head loop vs oracle {:.2e}, vs batched pass {:.2e}", worst.0, worst.1);
    }
}

/// Naive f64 masked attention on a packed `qkv` (`n x 3d`): each head's weights (`H x n x n`) and
/// outputs (`n x d`), row `i` reading keys `0..=i` only when `causal`.
fn attend_oracle(qkv: &[f32], n: usize, heads: usize, d_k: usize, causal: bool) -> (Vec<f64>, Vec<f64>) {
    let d = heads * d_k;
    let at = |t: usize, col: usize| qkv[t * 3 * d + col] as f64;
    let (mut att, mut out) = (vec![0.0f64; heads * n * n], vec![0.0f64; n * d]);
    for h in 0..heads {
        for i in 0..n {
            let keys = if causal { i + 1 } else { n };
            let scores: Vec<f64> = (0..keys)
                .map(|j| {
                    (0..d_k).map(|c| at(i, h * d_k + c) * at(j, d + h * d_k + c)).sum::<f64>()
                        / (d_k as f64).sqrt()
                })
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = scores.iter().map(|s| (s - max).exp()).sum();
            for (j, s) in scores.iter().enumerate() {
                let p = (s - max).exp() / sum;
                att[h * n * n + i * n + j] = p;
                for c in 0..d_k {
                    out[i * d + h * d_k + c] += p * at(j, 2 * d + h * d_k + c);
                }
            }
        }
    }
    (att, out)
}

#[test]
fn causal_attention_matches_the_f64_oracle_and_writes_exact_zeros_above_the_diagonal() {
    // (n, heads, d_k): one token, odd widths, a head of 1, and lengths past the micro-kernel's tiles.
    for (n, heads, d_k) in [(1, 1, 1), (2, 3, 5), (7, 2, 9), (17, 4, 3), (33, 3, 16), (130, 2, 64)] {
        let d = heads * d_k;
        let qkv: Vec<f32> = filled(n * 3 * d, n as u32 + 11).iter().map(|v| v * 2.0).collect();
        for mask in [cpu::Mask::Causal, cpu::Mask::None] {
            let (want_att, want_out) = attend_oracle(&qkv, n, heads, d_k, mask == cpu::Mask::Causal);
            for kernel in Kernel::ALL {
                let (mut att, mut out) = (vec![f32::NAN; heads * n * n], vec![f32::NAN; n * d]);
                cpu::attend_masked(kernel, &qkv, n, heads, d_k, mask, &mut att, &mut out);
                let what = format!("{kernel:?} {mask:?} n={n} heads={heads} d_k={d_k}");
                assert_close(&format!("{what} weights"), &att, &want_att, TOLERANCE);
                assert_close(&format!("{what} outputs"), &out, &want_out, TOLERANCE);
                // Without the weights kept (one n x n buffer, NaN before, for every head): the
                // same outputs, bit for bit.
                let (mut probs, mut alone) = (vec![f32::NAN; n * n], vec![f32::NAN; n * d]);
                cpu::attend_outputs(kernel, &qkv, n, heads, d_k, mask, &mut probs, &mut alone);
                let differ = alone.iter().zip(&out).position(|(a, b)| a.to_bits() != b.to_bits());
                assert_eq!(differ, None, "{what}: the outputs alone differ from those beside the weights");
                if mask == cpu::Mask::Causal {
                    let above =
                        (0..heads * n * n).filter(|&x| (x % n) > (x / n) % n).find(|&x| att[x] != 0.0);
                    assert_eq!(above, None, "{what}: a later key has weight");
                }
            }
        }
    }
}
