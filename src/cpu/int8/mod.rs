//! The 8-bit matrix product of the trained model's projections: `y = x W^T + b` for activations
//! `x` (`n x K`, f32) and weights `W` (`N x K`, PyTorch's `[out, in]`), with the products in
//! integers accumulated exactly.
//!
//! ```text
//! weights, once at load, per output channel o (symmetric; L = 127, or 2047 at 12 bits):
//!   s_o = max_k |W[o,k]| / L            q[o,k] = round(W[o,k] / s_o)            in [-L, L]
//! activations, per row i at run time (asymmetric, zero exactly representable; A = 127 for
//! 7 bits, 4095 for 12):
//!   lo = min(0, min_k x[i,k])  hi = max(0, max_k x[i,k])  t_i = (hi - lo) / A
//!   z_i = round(-lo / t_i)      u[i,k] = clamp(round(x[i,k] / t_i) + z_i, 0, A)
//! y[i,o] = t_i s_o (sum_k u[i,k] q[o,k] - z_i sum_k q[o,k]) + b[o]
//! ```
//!
//! Two refinements, both per weight matrix ([`QuantizedWeights::smoothed`]): smoothing factors
//! `m_k` (SmoothQuant), so that the product quantizes `x / m` against `W m` (the same product,
//! the rounding moved off the activations' outlier features); and [`IntBits::Twelve`], 12-bit
//! weights against 12-bit activations for the one product whose 8-bit weights and 7-bit
//! activations cost too much (the model's `W_2`). Rounding is to nearest: the activations' ties
//! to even (one `f32x4.nearest`), the weights' (once, at load) away from zero, as `f32::round`.
//!
//! Why 7-bit activations: relaxed SIMD's `i32x4.relaxed_dot_i8x16_i7x16_add_s` multiplies 16
//! signed bytes by 16 bytes whose top bit must be clear (an engine may read them as signed or
//! unsigned), summing each four into an i32 lane: 16 multiply-adds per instruction where
//! `f32x4.relaxed_madd` does 4. The activations are that operand, as unsigned 7-bit values with
//! a zero point; the weights keep all 8 bits. (8-bit activations, each code split into two 7-bit
//! halves for two dot products a step, were measured and dropped: 0.66-0.72x of f32 where 7 bits
//! take 0.33-0.39x, and no product of the model needed them once `W_2` had finer weights.)
//! How an engine runs that instruction depends on the CPU: V8 emits one `vpdpbusd` where the
//! CPU has VEX VNNI (a Zen 5, recent Intel), and five instructions elsewhere (a Zen 4, Xeons
//! without AVX-VNNI: the constant ones made again, `vpmaddubsw`, `vpmaddwd` by them, an add).
//! So the relaxed micro-kernel has two forms of the same sums ([`DotForm`]), timed by each wasm
//! instance ([`DotFormTrial`]): [`DotForm::Fused`], that one instruction, and
//! [`DotForm::Split`], `i16x8.relaxed_dot_i8x16_i7x16_s` (one `vpmaddubsw`; a pair of products
//! is at most `2 * 127 * 127 = 32258`, exact in 16 bits) then `i32x4.dot_i16x8_s` by ones kept
//! in a register and an add: three instructions on any x64. Without VNNI the split form's 8-bit
//! products take about 0.8 of the fused one's time, with VNNI about twice it; both compute the
//! same integers.
//! 12-bit products go through simd128's `i32x4.dot_i16x8_s` (8 multiply-adds an instruction) on
//! 16-bit words: on a CPU whose engine lowers the relaxed dot product to a multiply-add pair (no
//! VNNI) that is the same multiplier work per weight as 8 bits, and anywhere it is half the work
//! of the residual product it replaced (8-bit weights and their rounding error in a second 8-bit
//! product on the same 7-bit codes: bench/int8.mjs, BENCHMARKS.md section 13).
//!
//! # Contract
//! - The integer sum is exact: at 8 bits each i32 lane holds at most `127 * 127 * K` (exact for
//!   any `K <= 133_000`); at 12 bits each run of [`WORD_CHUNK`] positions (`4095 * 2047 * 256 <
//!   2^31`) is added into an i64, so any `K` is exact. `y` therefore equals the float64 product
//!   of the *dequantized* operands `x^_k = m_k t_i (u_k - z_i)` and `W^ = s_o q / m_k` up to the
//!   f32 roundings of the final scales and bias (a test holds it to `1e-6` relative).
//! - Against the exact `x W^T + b`: `|x_k - x^_k| <= m_k t_i / 2` and `|W - W^| <= s_o / (2 m_k)`
//!   elementwise, so `|y - y_exact| <= sum_k (m_k t_i / 2 |W^[o,k]| + s_o / (2 m_k) |x[i,k]|)`
//!   (a test checks this bound on a table of shapes, every variant).
//! - A row of `x` holding NaN or infinity gives a row of NaN; every element of `y`'s `n x N`
//!   block is written and nothing else (NaN-poisoned outputs prove it).
//!
//! Each width's micro-kernel has variants with one contract, chosen by [`Kernel`] and the build:
//! at 8 bits relaxed SIMD (the page's relaxed build) or, in the simd128 build (engines without
//! relaxed SIMD), the 12-bit micro-kernel on the same integers: the codes quantized into words
//! and each strip's bytes widened into words once per product (`widen_strip`), which takes
//! 0.57-0.60x of f32's time where a kernel widening the bytes at every step took 0.85-0.90x (it
//! kept sixteen accumulators and four widened weight vectors, more than x64's sixteen vector
//! registers); at 12 bits `i32x4.dot_i16x8_s` in both builds; and a portable twin of each that
//! always compiles and runs the native tests. They all compute the same integers, so they give
//! the same bits. The work around the micro-kernel has a simd128 variant on the vector kernel
//! too, with the same operations in the same order: the activations' quantization
//! (`vector_rows`: range and codes four values at a time; one value at a time it took about a
//! sixth of an 8-bit layer at 128 tokens) and the final scaling of a full strip
//! (`write_block_simd128`). `both_kernels_give_the_same_bits` holds all of it to the bit in the
//! browser.

mod activations;
mod form;
mod gemm;
mod kernels;
mod layout;
mod weights;

pub use form::{dot_form, faster_dot_form, set_dot_form, DotFormTrial, DOT_FORMS_DIFFER};
pub use layout::{DotForm, IntBits, WORD_CHUNK};
pub use weights::QuantizedWeights;

use crate::cpu::Kernel;

/// `y <- x W^T + bias` for `x` (`n x K`); row `i` of the result goes to `y[i * rs..][..N]`,
/// nothing else of `y` is read or written.
pub fn qgemm(
    kernel: Kernel,
    x: &[f32],
    n: usize,
    w: &QuantizedWeights,
    bias: &[f32],
    y: &mut [f32],
    rs: usize,
) {
    gemm::qgemm_with(kernel, form::dot_form(), x, n, w, bias, y, rs)
}

#[cfg(test)]
mod tests {
    use super::form::by_time;
    use super::gemm::qgemm_with;
    use super::kernels::{unpack_twelve, widen_strip};
    use super::layout::{NR, STEP_BYTES, STEP_WORDS};
    use super::weights::{packed_index, Packed};
    use super::*;

    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// A deterministic value in about [-1, 1] with some large ones (outlier channels).
    fn value(seed: usize, i: usize) -> f32 {
        let h = crate::attention::synthetic::hash32((seed as u32).wrapping_mul(0x9e37_79b9) ^ i as u32);
        let v = (h as f32 / u32::MAX as f32) * 2.0 - 1.0;
        if h.is_multiple_of(97) {
            v * 8.0
        } else {
            v
        }
    }

    fn filled(len: usize, seed: usize) -> Vec<f32> {
        (0..len).map(|i| value(seed, i)).collect()
    }

    /// `(n, K, N)`: empty, one, odd, every remainder of MR, NR and four, and the trained
    /// models' projection shapes.
    const SHAPES: &[(usize, usize, usize)] = &[
        (0, 5, 3),
        (3, 0, 5),
        (1, 1, 1),
        (2, 3, 7),
        (5, 9, 9),
        (7, 13, 17),
        (4, 4, 8),
        (9, 33, 15),
        (13, 384, 384),
        (6, 384, 1536),
        (11, 1536, 384),
        (17, 768, 31),
    ];

    /// The weights of the table's cases: plain and smoothed by activation maxima of a wide
    /// range, at both widths.
    fn variants(w: &[f32], m: usize, k: usize) -> Vec<QuantizedWeights> {
        let maxima: Vec<f32> = (0..k).map(|j| 0.1 + 10.0 * value(99, j).abs()).collect();
        [IntBits::Eight, IntBits::Twelve]
            .into_iter()
            .flat_map(|bits| {
                [
                    QuantizedWeights::with_bits(w, m, k, bits),
                    QuantizedWeights::smoothed(w, m, k, &maxima, bits),
                ]
            })
            .collect()
    }

    #[test]
    fn the_integer_product_equals_f64_on_the_dequantized_operands_and_meets_the_stated_bound() {
        for kernel in Kernel::ALL {
            for &(n, k, m) in SHAPES {
                let (x, w, bias) = (filled(n * k, 1), filled(m * k, 2), filled(m, 3));
                for q in variants(&w, m, k) {
                    check_product(kernel, &x, n, &w, &q, &bias);
                }
            }
        }
    }

    /// [`qgemm`] against the f64 product of the dequantized operands (to f32 rounding) and of
    /// the exact ones (within the contract's bound), into NaN-poisoned rows wider than the block.
    fn check_product(kernel: Kernel, x: &[f32], n: usize, w: &[f32], q: &QuantizedWeights, bias: &[f32]) {
        let (k, m) = (q.inp(), q.out());
        let case = format!("{kernel:?} {n}x{k}x{m} smoothed {} {:?}", !q.smoothing().is_empty(), q.bits());
        let wq = q.dequantized();
        let rs = m + 3;
        let mut y = vec![f32::NAN; n * rs];
        qgemm(kernel, x, n, q, bias, &mut y, rs);
        for i in 0..n {
            let row = &x[i * k..(i + 1) * k];
            let (xq, t) = q.dequantized_row(row);
            for o in 0..m {
                let got = y[i * rs + o] as f64;
                let terms = |a: &[f32], b: &[f32]| -> (f64, f64) {
                    let p = (0..k).map(|j| a[j] as f64 * b[o * k + j] as f64);
                    (p.clone().sum::<f64>() + bias[o] as f64, p.map(f64::abs).sum::<f64>() + 1.0)
                };
                let ((deq, scale), (exact, _)) = (terms(&xq, &wq), terms(row, w));
                assert!(
                    (got - deq).abs() <= 1e-6 * scale,
                    "{case} at ({i}, {o}): {got} against {deq} dequantized"
                );
                let bound: f64 = (0..k)
                    .map(|j| {
                        let mk = q.smoothing_factor(j) as f64;
                        mk * t as f64 / 2.0 * (wq[o * k + j] as f64).abs()
                            + q.scale(o) as f64 / (2.0 * mk) * (row[j] as f64).abs()
                    })
                    .sum();
                let error = (got - exact).abs();
                assert!(
                    error <= bound * (1.0 + 1e-5) + 1e-6 * scale,
                    "{case} at ({i}, {o}): error {error} over {bound}"
                );
            }
            for o in m..rs {
                assert!(y[i * rs + o].is_nan(), "{case}: wrote ({i}, {o}) outside the block");
            }
        }
    }

    /// The simd128 build's 8-bit products read each strip widened into the 12-bit kernel's
    /// layout: every weight where the words layout puts it, zeros past the channels and the
    /// positions (natively the portable loop, in the browser the shuffles).
    #[test]
    fn a_widened_strip_holds_the_same_weights_in_the_words_layout() {
        for (m, k) in [(13, 9), (8, 4), (3, 1), (17, 33)] {
            let q = QuantizedWeights::new(&filled(m * k, 7), m, k);
            let Packed::Bytes(bytes) = &q.packed else { panic!("8-bit weights are bytes") };
            let lanes = k.div_ceil(4);
            let strip = lanes * STEP_BYTES;
            for s in 0..m.div_ceil(NR) {
                let mut words = vec![i16::MIN; 3];
                widen_strip(&bytes[s * strip..(s + 1) * strip], lanes, &mut words);
                assert_eq!(words.len(), lanes * 2 * STEP_WORDS, "{m}x{k}");
                for c in 0..NR {
                    for j in 0..lanes * 4 {
                        let o = s * NR + c;
                        let want = if o < m && j < k { q.at(o, j) } else { 0 };
                        let got = words[packed_index(IntBits::Twelve, lanes, c, j)] as i32;
                        assert_eq!(got, want, "{m}x{k}: channel {o}, position {j}");
                    }
                }
            }
        }
    }

    /// Every 12-bit weight, held in a byte and a half, reads back as itself one at a time and
    /// in the unpacked strips the micro-kernel reads (natively the portable loop, in the browser
    /// the shuffles): channels whose largest weight is 2047 have scale 1, so `q` is `w`.
    #[test]
    fn every_twelve_bit_weight_unpacks_to_itself() {
        let (m, k) = (17, 509);
        let w: Vec<f32> =
            (0..m * k).map(|i| if i % k == 0 { 2047.0 } else { (i * 11 % 4095) as f32 - 2047.0 }).collect();
        let q = QuantizedWeights::with_bits(&w, m, k, IntBits::Twelve);
        let Packed::Twelve(p) = &q.packed else { panic!("12-bit weights are twelve bits") };
        assert_eq!(p.low.len() + p.high.len(), 3 * p.low.len() / 2, "a byte and a half each");
        let seen: std::collections::HashSet<i32> = (0..m * k).map(|i| w[i] as i32).collect();
        assert_eq!(seen.len(), 4095, "the table holds every 12-bit weight");
        let lanes = k.div_ceil(4);
        let strip = lanes * 2 * STEP_WORDS;
        for s in 0..m.div_ceil(NR) {
            let mut words = vec![i16::MIN; 5];
            unpack_twelve(
                &p.low[s * strip..(s + 1) * strip],
                &p.high[s * strip / 2..(s + 1) * strip / 2],
                &mut words,
            );
            assert_eq!(words.len(), strip);
            for c in 0..NR {
                for j in 0..lanes * 4 {
                    let o = s * NR + c;
                    let want = if o < m && j < k { w[o * k + j] as i32 } else { 0 };
                    if o < m && j < k {
                        assert_eq!(q.at(o, j), want, "channel {o}, position {j} one at a time");
                    }
                    let got = words[packed_index(IntBits::Twelve, lanes, c, j)] as i32;
                    assert_eq!(got, want, "channel {o}, position {j} unpacked");
                }
            }
        }
    }

    #[test]
    fn both_kernels_give_the_same_bits() {
        for &(n, k, m) in SHAPES {
            let (x, w, bias) = (filled(n * k, 4), filled(m * k, 5), filled(m, 6));
            for q in variants(&w, m, k) {
                let run = |kernel, form| {
                    let mut y = vec![f32::NAN; n * m];
                    qgemm_with(kernel, form, &x, n, &q, &bias, &mut y, m);
                    y
                };
                let b = run(Kernel::Scalar, DotForm::Fused);
                for form in DotForm::ALL {
                    let a = run(Kernel::Simd, form);
                    let same = a.iter().zip(&b).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{n}x{k}x{m} {:?} {form:?}: the kernels differ", q.bits());
                }
            }
        }
    }

    #[test]
    fn the_faster_dot_form_is_chosen_and_named() {
        assert_eq!((by_time(2.0, 1.0), by_time(1.0, 2.0)), (DotForm::Split, DotForm::Fused));
        assert_eq!((by_time(1.0, 1.0), by_time(f64::NAN, 1.0)), (DotForm::Fused, DotForm::Fused));
        for form in DotForm::ALL {
            assert_eq!(DotForm::from_key(form.key()), Some(form));
        }
        assert_eq!(DotForm::from_key("vnni"), None);
        // A build with one kernel times nothing; the relaxed build answers either form (on a
        // clock that moves 10 ms a reading: one run a sample).
        let now = std::cell::Cell::new(0.0);
        let chosen = faster_dot_form(&|| {
            now.set(now.get() + 10.0);
            now.get()
        });
        assert!(DOT_FORMS_DIFFER || chosen == DotForm::Fused);
    }

    #[test]
    fn a_trial_waits_for_the_optimized_code_before_it_answers() {
        let answer = |rounds: &[[f64; 2]]| {
            let mut trial = DotFormTrial::new();
            rounds
                .iter()
                .enumerate()
                .map(|(i, &t)| (i + 1, trial.record(t)))
                .find_map(|(i, f)| f.map(|f| (i, f)))
        };
        // Baseline code for the fused form until round 5, then optimized: the answer waits for
        // two steady rounds after the last improvement.
        let late = [
            [0.5, 0.09],
            [0.4, 0.085],
            [0.45, 0.086],
            [0.42, 0.085],
            [0.05, 0.085],
            [0.06, 0.09],
            [0.055, 0.088],
        ];
        assert_eq!(answer(&late), Some((7, DotForm::Fused)));
        // Steady from the start: five rounds.
        assert_eq!(answer(&[[0.1, 0.08]; 9]), Some((5, DotForm::Split)));
        // Never steady (each round 20 % faster): sixteen rounds, then the faster so far.
        let falling: Vec<[f64; 2]> = (0..20).map(|i| [0.8f64.powi(i), 0.9 * 0.8f64.powi(i)]).collect();
        assert_eq!(answer(&falling), Some((16, DotForm::Split)));
    }

    #[test]
    fn the_largest_sums_are_exact_at_either_width() {
        // Every code at its top level against every weight at its largest: 4095 * 2047 * K
        // overflows an i32 from K = 257; the 12-bit kernel's runs of WORD_CHUNK positions must not.
        for &(n, k) in &[(5, 256), (3, 257), (4, 1536), (7, 4099)] {
            let (x, w) = (vec![1.0f32; n * k], vec![0.5f32; 9 * k]);
            for bits in [IntBits::Eight, IntBits::Twelve] {
                let q = QuantizedWeights::with_bits(&w, 9, k, bits);
                assert!(
                    (0..9).all(|o| q.at(o, k - 1) as f32 == bits.weight_levels()),
                    "{bits:?}: the top level"
                );
                for (kernel, form) in Kernel::ALL.into_iter().flat_map(|k| DotForm::ALL.map(|f| (k, f))) {
                    let mut y = vec![f32::NAN; n * 9];
                    qgemm_with(kernel, form, &x, n, &q, &[1.0; 9], &mut y, 9);
                    let want = 0.5 * k as f32 + 1.0;
                    for v in &y {
                        assert!(
                            (v - want).abs() <= 1e-6 * want,
                            "{kernel:?} {form:?} {bits:?} K = {k}: {v} for {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_error_is_rounding_noise_not_a_bias() {
        // Rounding to the nearest level leaves an error uniform in +-step/2 (variance step^2/12)
        // on each operand; the products' squared error stays near the sum of those variances.
        // Truncation, or a zero point off by one, would be 4 times as much or more.
        let (n, k, m) = (16, 384, 384);
        let (x, w) = (filled(n * k, 7), filled(m * k, 8));
        let q = QuantizedWeights::new(&w, m, k);
        let mut y = vec![0.0; n * m];
        qgemm(Kernel::Simd, &x, n, &q, &vec![0.0; m], &mut y, m);
        let (mut err, mut predicted) = (0.0f64, 0.0f64);
        for i in 0..n {
            let (_, t) = q.dequantized_row(&x[i * k..(i + 1) * k]);
            for o in 0..m {
                let exact: f64 = (0..k).map(|j| x[i * k + j] as f64 * w[o * k + j] as f64).sum();
                err += (y[i * m + o] as f64 - exact).powi(2);
                let s = q.scale(o) as f64;
                predicted += (0..k)
                    .map(|j| {
                        ((w[o * k + j] as f64).powi(2) * (t as f64).powi(2)
                            + (x[i * k + j] as f64).powi(2) * s * s)
                            / 12.0
                    })
                    .sum::<f64>();
            }
        }
        let ratio = err / predicted;
        assert!((0.5..1.5).contains(&ratio), "squared error {ratio} times the rounding noise's");
    }

    #[test]
    fn non_finite_rows_and_channels_give_nan_and_zero_rows_give_the_bias() {
        let (n, k, m) = (3, 6, 5);
        let mut x = filled(n * k, 9);
        x[k + 2] = f32::NAN;
        x[2 * k..].fill(0.0);
        let mut w = filled(m * k, 10);
        w[3 * k + 1] = f32::INFINITY;
        let bias = filled(m, 11);
        let q = QuantizedWeights::new(&w, m, k);
        for kernel in Kernel::ALL {
            let mut y = vec![0.0; n * m];
            qgemm(kernel, &x, n, &q, &bias, &mut y, m);
            assert!(y[m..2 * m].iter().all(|v| v.is_nan()), "{kernel:?}: a NaN input row gives NaN");
            assert!(
                y[3].is_nan() && y[2 * m + 3].is_nan(),
                "{kernel:?}: an infinite weight's channel is NaN"
            );
            for o in [0, 1, 2, 4] {
                assert_eq!(y[2 * m + o], bias[o], "{kernel:?}: a zero row gives the bias");
                assert!(y[o].is_finite(), "{kernel:?}: finite rows stay finite");
            }
        }
    }

    #[test]
    fn selected_channels_and_inputs_compute_those_parts_of_the_whole_product() {
        let (n, k, m) = (5, 24, 19);
        let (x, w, bias) = (filled(n * k, 12), filled(m * k, 13), filled(m, 14));
        for bits in [IntBits::Eight, IntBits::Twelve] {
            check_selections(&x, n, &QuantizedWeights::with_bits(&w, m, k, bits), &bias);
        }
    }

    fn check_selections(x: &[f32], n: usize, q: &QuantizedWeights, bias: &[f32]) {
        let m = q.out();
        let channels = [17, 2, 3, 11];
        let sel = q.select_channels(&channels);
        let mut whole = vec![0.0; n * m];
        qgemm(Kernel::Scalar, x, n, q, bias, &mut whole, m);
        let mut part = vec![0.0; n * channels.len()];
        let sel_bias: Vec<f32> = channels.iter().map(|&o| bias[o]).collect();
        qgemm(Kernel::Scalar, x, n, &sel, &sel_bias, &mut part, channels.len());
        for i in 0..n {
            for (c, &o) in channels.iter().enumerate() {
                assert_eq!(part[i * channels.len() + c].to_bits(), whole[i * m + o].to_bits(), "({i}, {o})");
            }
        }
        // Inputs: the kept columns keep their bytes and their channel's scale.
        let ranges = [3..7, 12..20];
        let kept = q.select_inputs(&ranges);
        assert_eq!((kept.out(), kept.inp()), (m, 12));
        for o in 0..m {
            assert_eq!(kept.scale(o), q.scale(o));
            for (j, k) in ranges.iter().flat_map(|r| r.clone()).enumerate() {
                assert_eq!(kept.at(o, j), q.at(o, k), "({o}, {k})");
            }
        }
    }
}
