//! Row-wise softmax with max subtraction: `p_j = exp(s_j - max_k s_k) / sum_l exp(s_l - max_k s_k)`.
//!
//! Subtracting the row maximum makes every exponent `<= 0`, so nothing overflows however large
//! the scores, and the largest term is exactly 1, so the sum is at least 1.
//!
//! The vector path evaluates `exp` with a Cody-Waite range reduction and the Cephes degree-6
//! polynomial (relative error about 2e-7 over the range used here), four lanes at a time:
//! wasm simd128 where compiled in, otherwise a portable four-lane type with the same arithmetic,
//! so the algorithm is tested natively and in the browser alike. The scalar twin uses `f32::exp`.
//!
//! A row holding NaN or an infinity becomes a row of NaN on both paths (the polynomial's input
//! clamp would otherwise turn NaN into a finite weight).

use super::Kernel;

/// Replaces each row of `scores` (rows of length `row_len`) with its softmax.
pub fn softmax_rows(kernel: Kernel, scores: &mut [f32], row_len: usize) {
    if row_len == 0 {
        return;
    }
    assert_eq!(scores.len() % row_len, 0, "scores must be whole rows");
    for row in scores.chunks_exact_mut(row_len) {
        match kernel {
            Kernel::Simd => softmax_row_vector(row),
            Kernel::Scalar => softmax_row_scalar(row),
        }
    }
}

/// Values of a [`log_sum_exp`] block: each lane adds a quarter of them in f32, then the block's
/// sum goes into an f64.
const LSE_BLOCK: usize = 256;

/// `log sum_j exp(v_j)`, in f64, max-subtracted: the normaliser of a decoder's next-token
/// distribution (its loss is this minus the target's logit). The scalar twin takes every `exp`
/// in f64 (the reference). The vector path takes them four lanes at a time with [`exp`] (relative
/// error about 2e-7; `v - max` rounds by at most half an ulp of `|v - max| <= 87`, so a term's
/// error is below 6e-6 of itself, and the terms that large are below `e^-1` of the largest),
/// adds each lane's [`LSE_BLOCK`]` / 4` terms in f32 (at most 64 roundings of 6e-8 each) and the
/// blocks in f64: the result is within 1e-5 of the f64 value, absolutely, and within 2e-6 in the
/// tests' table of rows. A decoder's pass over 128 tokens of GPT-2's 50 257-piece vocabulary
/// took about a quarter of its 8-bit time in f64 `exp`s (BENCHMARKS.md section 21). A value that
/// is NaN or infinite gives NaN; no values give negative infinity.
pub fn log_sum_exp(kernel: Kernel, values: &[f32]) -> f64 {
    if values.iter().any(|v| !v.is_finite()) {
        return f64::NAN;
    }
    let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if values.is_empty() {
        return f64::NEG_INFINITY;
    }
    let sum = match kernel {
        Kernel::Scalar => values.iter().map(|&v| (v as f64 - max as f64).exp()).sum::<f64>(),
        Kernel::Simd => {
            let m4 = F4::splat(max);
            let mut sum = 0.0f64;
            for block in values.chunks(LSE_BLOCK) {
                let (body, tail) = block.split_at(block.len() / 4 * 4);
                let mut lanes = F4::splat(0.0);
                for c in body.chunks_exact(4) {
                    lanes = lanes.add(exp(F4::load(c).sub(m4)));
                }
                sum += lanes.reduce_sum() as f64 + tail.iter().map(|&v| exp(v - max) as f64).sum::<f64>();
            }
            sum
        }
    };
    max as f64 + sum.ln()
}

fn softmax_row_scalar(row: &mut [f32]) {
    if row.iter().any(|v| !v.is_finite()) {
        row.fill(f32::NAN);
        return;
    }
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for v in row.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    let inv = 1.0 / sum;
    row.iter_mut().for_each(|v| *v *= inv);
}

fn softmax_row_vector(row: &mut [f32]) {
    let (body, tail) = row.split_at_mut(row.len() / 4 * 4);

    // `v - v` is 0, or NaN where `v` is NaN or infinite: summed alongside the maximum.
    let (mut vmax, mut vbad) = (F4::splat(f32::NEG_INFINITY), F4::splat(0.0));
    for c in body.chunks_exact(4) {
        let v = F4::load(c);
        vmax = vmax.max(v);
        vbad = vbad.add(v.sub(v));
    }
    if vbad.reduce_sum().is_nan() || tail.iter().any(|v| !v.is_finite()) {
        row.fill(f32::NAN);
        return;
    }
    let max = tail.iter().copied().fold(vmax.reduce_max(), f32::max);

    let (m4, mut vsum) = (F4::splat(max), F4::splat(0.0));
    for c in body.chunks_exact_mut(4) {
        let e = exp(F4::load(c).sub(m4));
        e.store(c);
        vsum = vsum.add(e);
    }
    let mut sum = vsum.reduce_sum();
    for v in tail.iter_mut() {
        *v = exp(*v - max);
        sum += *v;
    }

    let inv = 1.0 / sum;
    let i4 = F4::splat(inv);
    for c in body.chunks_exact_mut(4) {
        F4::load(c).mul(i4).store(c);
    }
    tail.iter_mut().for_each(|v| *v *= inv);
}

/// The operations `exp` (and [`super::gelu`]) need, on one lane (`f32`) or four (`F4`).
pub(super) trait Lanes: Copy {
    fn splat(x: f32) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn max(self, o: Self) -> Self;
    fn min(self, o: Self) -> Self;
    /// Round to the nearest integer, ties to even.
    fn round(self) -> Self;
    /// `2^n` for integral `n` in `[-126, 127]`, built in the exponent field.
    fn pow2(self) -> Self;
    fn div(self, o: Self) -> Self;
    fn abs(self) -> Self;
    /// Per lane, `negative` where `self < 0`, else `otherwise`.
    fn select_negative(self, negative: Self, otherwise: Self) -> Self;
}

/// `e^x` for `x` in `[-87, 88]` (clamped outside it): `x = n ln2 + r` with `|r| <= ln2 / 2`,
/// `e^x = 2^n e^r`, `e^r` from Cephes' `expf` polynomial. `ln2` is split in two so `n ln2` is
/// subtracted without rounding error.
#[inline(always)]
pub(super) fn exp<V: Lanes>(x: V) -> V {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Cephes lists the last coefficient as 5.0000001201e-1, which is 0.5 in f32.
    const P: [f32; 6] = [1.987_569_1e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 0.5];
    let x = x.max(V::splat(-87.0)).min(V::splat(88.0));
    let n = x.mul(V::splat(LOG2E)).round();
    let r = x.sub(n.mul(V::splat(LN2_HI))).sub(n.mul(V::splat(LN2_LO)));
    let mut p = V::splat(P[0]);
    for c in &P[1..] {
        p = p.mul(r).add(V::splat(*c));
    }
    let er = p.mul(r.mul(r)).add(r).add(V::splat(1.0));
    er.mul(n.pow2())
}

impl Lanes for f32 {
    fn splat(x: f32) -> Self {
        x
    }
    fn add(self, o: Self) -> Self {
        self + o
    }
    fn sub(self, o: Self) -> Self {
        self - o
    }
    fn mul(self, o: Self) -> Self {
        self * o
    }
    fn max(self, o: Self) -> Self {
        f32::max(self, o)
    }
    fn min(self, o: Self) -> Self {
        f32::min(self, o)
    }
    fn round(self) -> Self {
        self.round_ties_even()
    }
    fn pow2(self) -> Self {
        f32::from_bits(((self as i32 + 127) as u32) << 23)
    }
    fn div(self, o: Self) -> Self {
        self / o
    }
    fn abs(self) -> Self {
        f32::abs(self)
    }
    fn select_negative(self, negative: Self, otherwise: Self) -> Self {
        if self < 0.0 {
            negative
        } else {
            otherwise
        }
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod f4 {
    use core::arch::wasm32::*;

    /// Four f32 lanes in one simd128 register.
    #[derive(Clone, Copy)]
    pub(in crate::cpu) struct F4(v128);

    impl F4 {
        #[inline(always)]
        pub(in crate::cpu) fn load(c: &[f32]) -> Self {
            assert!(c.len() >= 4);
            // safety: the slice holds at least 4 floats (asserted); wasm loads need no alignment.
            F4(unsafe { v128_load(c.as_ptr() as *const v128) })
        }
        #[inline(always)]
        pub(in crate::cpu) fn store(self, c: &mut [f32]) {
            assert!(c.len() >= 4);
            // safety: as in `load`, 16 writable bytes at an address wasm lets us store to unaligned.
            unsafe { v128_store(c.as_mut_ptr() as *mut v128, self.0) }
        }
        #[inline(always)]
        pub(super) fn reduce_max(self) -> f32 {
            let v = self.0;
            f32x4_extract_lane::<0>(v)
                .max(f32x4_extract_lane::<1>(v))
                .max(f32x4_extract_lane::<2>(v).max(f32x4_extract_lane::<3>(v)))
        }
        #[inline(always)]
        pub(super) fn reduce_sum(self) -> f32 {
            let v = self.0;
            (f32x4_extract_lane::<0>(v) + f32x4_extract_lane::<1>(v))
                + (f32x4_extract_lane::<2>(v) + f32x4_extract_lane::<3>(v))
        }
    }

    impl super::Lanes for F4 {
        #[inline(always)]
        fn splat(x: f32) -> Self {
            F4(f32x4_splat(x))
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            F4(f32x4_add(self.0, o.0))
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            F4(f32x4_sub(self.0, o.0))
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            F4(f32x4_mul(self.0, o.0))
        }
        // pmax/pmin are the plain compare-and-select: one instruction on x86 and ARM, where
        // f32x4_max's NaN and signed-zero rules cost several.
        #[inline(always)]
        fn max(self, o: Self) -> Self {
            F4(f32x4_pmax(self.0, o.0))
        }
        #[inline(always)]
        fn min(self, o: Self) -> Self {
            F4(f32x4_pmin(self.0, o.0))
        }
        #[inline(always)]
        fn round(self) -> Self {
            F4(f32x4_nearest(self.0))
        }
        #[inline(always)]
        fn pow2(self) -> Self {
            let n = i32x4_trunc_sat_f32x4(self.0);
            F4(i32x4_shl(i32x4_add(n, i32x4_splat(127)), 23))
        }
        #[inline(always)]
        fn div(self, o: Self) -> Self {
            F4(f32x4_div(self.0, o.0))
        }
        #[inline(always)]
        fn abs(self) -> Self {
            F4(f32x4_abs(self.0))
        }
        #[inline(always)]
        fn select_negative(self, negative: Self, otherwise: Self) -> Self {
            F4(v128_bitselect(negative.0, otherwise.0, f32x4_lt(self.0, f32x4_splat(0.0))))
        }
    }
}

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
mod f4 {
    /// Four f32 lanes as an array: the same arithmetic as the simd128 type, so the vector
    /// algorithm is exercised natively; LLVM maps most of it to the host's vector unit.
    #[derive(Clone, Copy)]
    pub(in crate::cpu) struct F4([f32; 4]);

    impl F4 {
        #[inline(always)]
        pub(in crate::cpu) fn load(c: &[f32]) -> Self {
            F4([c[0], c[1], c[2], c[3]])
        }
        #[inline(always)]
        pub(in crate::cpu) fn store(self, c: &mut [f32]) {
            c[..4].copy_from_slice(&self.0);
        }
        #[inline(always)]
        pub(super) fn reduce_max(self) -> f32 {
            let v = self.0;
            v[0].max(v[1]).max(v[2].max(v[3]))
        }
        #[inline(always)]
        pub(super) fn reduce_sum(self) -> f32 {
            let v = self.0;
            (v[0] + v[1]) + (v[2] + v[3])
        }
        #[inline(always)]
        fn map(self, f: impl Fn(f32) -> f32) -> Self {
            F4(self.0.map(f))
        }
        #[inline(always)]
        fn zip(self, o: Self, f: impl Fn(f32, f32) -> f32) -> Self {
            F4([f(self.0[0], o.0[0]), f(self.0[1], o.0[1]), f(self.0[2], o.0[2]), f(self.0[3], o.0[3])])
        }
    }

    impl super::Lanes for F4 {
        fn splat(x: f32) -> Self {
            F4([x; 4])
        }
        fn add(self, o: Self) -> Self {
            self.zip(o, |a, b| a + b)
        }
        fn sub(self, o: Self) -> Self {
            self.zip(o, |a, b| a - b)
        }
        fn mul(self, o: Self) -> Self {
            self.zip(o, |a, b| a * b)
        }
        fn max(self, o: Self) -> Self {
            self.zip(o, f32::max)
        }
        fn min(self, o: Self) -> Self {
            self.zip(o, f32::min)
        }
        fn round(self) -> Self {
            self.map(f32::round_ties_even)
        }
        fn pow2(self) -> Self {
            self.map(super::Lanes::pow2)
        }
        fn div(self, o: Self) -> Self {
            self.zip(o, |a, b| a / b)
        }
        fn abs(self) -> Self {
            self.map(f32::abs)
        }
        fn select_negative(self, negative: Self, otherwise: Self) -> Self {
            F4([0, 1, 2, 3].map(|i| if self.0[i] < 0.0 { negative.0[i] } else { otherwise.0[i] }))
        }
    }
}

pub(super) use f4::F4;

#[cfg(test)]
mod tests {
    use super::*;
    // In `wasm-pack test` this runs in the browser, on the simd128 lanes.
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;
    #[cfg(target_arch = "wasm32")]
    wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

    #[test]
    fn log_sum_exp_is_within_its_bound_of_the_f64_value_on_a_table_of_rows() {
        let hash = crate::attention::synthetic::hash32;
        let mut worst = 0.0f64;
        for (i, &len) in [1usize, 3, 4, 5, 255, 256, 257, 1000, 4099, 50_257].iter().enumerate() {
            for spread in [0.1f32, 10.0, 60.0] {
                let row: Vec<f32> = (0..len)
                    .map(|j| spread * ((hash((i * 7_919 + j) as u32) >> 8) as f32 / 8_388_608.0 - 1.0) + 3.0)
                    .collect();
                let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
                let want = max + row.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln();
                assert_eq!(log_sum_exp(Kernel::Scalar, &row), want, "the scalar twin is the f64 value");
                let err = (log_sum_exp(Kernel::Simd, &row) - want).abs();
                assert!(err < 2e-6, "{len} values of spread {spread}: off by {err:.1e}");
                worst = worst.max(err);
            }
        }
        for kernel in Kernel::ALL {
            assert!(log_sum_exp(kernel, &[1.0, f32::NAN, 2.0]).is_nan());
            assert!(log_sum_exp(kernel, &[1.0, f32::INFINITY]).is_nan());
            assert_eq!(log_sum_exp(kernel, &[]), f64::NEG_INFINITY);
            assert!((log_sum_exp(kernel, &[0.0, 0.0]) - 2f64.ln()).abs() < 1e-7);
        }
        println!("vector log-sum-exp: worst error {worst:.1e}");
    }

    #[test]
    fn a_row_with_nan_or_an_infinity_becomes_nan_on_both_paths_and_other_rows_do_not() {
        for kernel in Kernel::ALL {
            for len in [1, 3, 4, 7, 16, 33] {
                for poison in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
                    for at in [0, len / 2, len - 1] {
                        let mut rows: Vec<f32> = (0..2 * len).map(|i| (i % 5) as f32 - 2.0).collect();
                        rows[len + at] = poison;
                        softmax_rows(kernel, &mut rows, len);
                        let case = format!("{kernel:?} len {len}, {poison} at {at}");
                        assert!(rows[..len].iter().all(|v| v.is_finite()), "{case}: the clean row");
                        assert!((rows[..len].iter().sum::<f32>() - 1.0).abs() < 1e-5, "{case}");
                        assert!(rows[len..].iter().all(|v| v.is_nan()), "{case}: {:?}", &rows[len..]);
                    }
                }
            }
        }
    }

    #[test]
    fn polynomial_exp_matches_std_over_the_softmax_range() {
        let mut worst = 0.0f64;
        for i in 0..87_000 {
            let x = -(i as f32) * 1e-3;
            let (got, want) = (exp(x) as f64, (x as f64).exp());
            worst = worst.max(((got - want) / want).abs());
            let four = exp(F4::splat(x));
            let mut out = [f32::NAN; 4];
            four.store(&mut out);
            assert_eq!(out, [exp(x); 4], "lanes disagree with the one-lane path at x = {x}");
        }
        assert!(worst < 4e-7, "worst relative error {worst:e}");
        // Below the clamp the result stays a normal float instead of degrading into denormals.
        assert_eq!(exp(-1e4f32), exp(-87.0f32));
        assert!(exp(-87.0f32).is_normal());
    }
}
