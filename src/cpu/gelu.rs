//! The exact GELU BERT uses, `GELU(x) = x Φ(x) = x (1 + erf(x / sqrt 2)) / 2`, over a buffer;
//! and its tanh approximation ([`gelu_tanh_in_place`]) that GPT-2 and some BERTs use.
//!
//! The vector path evaluates `erf(z)` as `z P(z^2) / Q(z^2)`, `P` of degree 6 and `Q` of degree
//! 5: a minimax rational on `[0, 3.9]` (beyond, `erf` is 1 in f32 to within `3.5e-8`) fitted in
//! float64 by `scripts/fit-erf.py` (largest error 2e-9), four lanes at a time in eleven
//! multiply-adds and one division, `z` clamped to `[-4, 4]`; then the normal tail
//! `h = (1 - min(|erf|, 1)) / 2` and GELU as `x h` below zero, `x - x h` above. Rounded in f32
//! one operation at a time, GELU's worst error is 1.93e-7 of `max(1, |x|)` (1.8e-7 for
//! Abramowitz and Stegun 7.1.26 with the softmax's `exp`, which `shaders/bert.wgsl` keeps on the
//! GPU), far below the rounding of the product that feeds it; far from zero it is exactly `x`
//! or 0 (so GELU of an infinity is NaN), and it takes about half the time of the `exp` form
//! (BENCHMARKS.md section 13). A call to `erff` per value, several times slower still, once
//! took half of a batched pass of the trained model; the scalar twin calls `libm::erff`.

use super::softmax::{exp, Lanes, F4};
use super::Kernel;

/// Replaces every value of `values` with its GELU.
pub fn gelu_in_place(kernel: Kernel, values: &mut [f32]) {
    map_in_place(kernel, values, gelu::<F4>, gelu::<f32>, exact);
}

/// `values` through an activation: four lanes at a time by `lanes` and the rest one by one
/// (`one`, the same formula) on the vector kernel, by `libm` (`scalar`) on the scalar twin.
fn map_in_place(
    kernel: Kernel,
    values: &mut [f32],
    lanes: impl Fn(F4) -> F4,
    one: impl Fn(f32) -> f32,
    scalar: impl Fn(f32) -> f32,
) {
    match kernel {
        Kernel::Simd => {
            let (body, tail) = values.split_at_mut(values.len() / 4 * 4);
            for c in body.chunks_exact_mut(4) {
                lanes(F4::load(c)).store(c);
            }
            tail.iter_mut().for_each(|v| *v = one(*v));
        }
        Kernel::Scalar => values.iter_mut().for_each(|v| *v = scalar(*v)),
    }
}

/// GELU with `libm`'s `erff`.
pub fn exact(x: f32) -> f32 {
    0.5 * x * (1.0 + libm::erff(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// Replaces every value of `values` with GELU's tanh approximation,
/// `x (1 + tanh(u)) / 2` with `u = sqrt(2 / π) (x + 0.044715 x^3)`. The vector path takes
/// `tanh(u) = 1 - 2 / (e^{2u} + 1)` with the softmax's `exp` (absolute error below 3e-7); the
/// scalar twin calls `libm::tanhf`.
pub fn gelu_tanh_in_place(kernel: Kernel, values: &mut [f32]) {
    map_in_place(kernel, values, gelu_tanh::<F4>, gelu_tanh::<f32>, tanh_exact);
}

/// `sqrt(2 / π)` and the cubic term's coefficient of GELU's tanh approximation.
const TANH_SCALE: f32 = 0.797_884_6;
const TANH_CUBIC: f32 = 0.044_715;

/// GELU's tanh approximation with `libm`'s `tanhf`.
pub fn tanh_exact(x: f32) -> f32 {
    0.5 * x * (1.0 + libm::tanhf(TANH_SCALE * (x + TANH_CUBIC * x * x * x)))
}

#[inline(always)]
fn gelu_tanh<V: Lanes>(x: V) -> V {
    // u is clamped: tanh is 1 in f32 beyond |u| = 9, and e^{2u} must not overflow.
    let u = V::splat(TANH_SCALE).mul(x.add(V::splat(TANH_CUBIC).mul(x).mul(x).mul(x)));
    let u = u.max(V::splat(-9.0)).min(V::splat(9.0));
    let e = exp(u.add(u));
    let tanh = V::splat(1.0).sub(V::splat(2.0).div(e.add(V::splat(1.0))));
    V::splat(0.5).mul(x).mul(V::splat(1.0).add(tanh))
}

#[inline(always)]
fn gelu<V: Lanes>(x: V) -> V {
    // The fit's leading coefficient is 2 / sqrt(pi) in f32, erf's slope at 0.
    use std::f32::consts::FRAC_2_SQRT_PI;
    const P: [f32; 7] = [
        FRAC_2_SQRT_PI,
        0.184_689_3,
        0.054_328_99,
        3.838_774_7e-3,
        3.826_465_7e-4,
        4.778_336_5e-6,
        -1.364_675_1e-8,
    ];
    const Q: [f32; 6] = [1.0, 0.497_010_17, 0.113_816_924, 0.015_451_543, 1.309_407e-3, 6.399_476e-5];
    let z = x.mul(V::splat(std::f32::consts::FRAC_1_SQRT_2)).max(V::splat(-4.0)).min(V::splat(4.0));
    let w = z.mul(z);
    let mut p = V::splat(P[6]);
    for c in P[..6].iter().rev() {
        p = p.mul(w).add(V::splat(*c));
    }
    let mut q = V::splat(Q[5]);
    for c in Q[..5].iter().rev() {
        q = q.mul(w).add(V::splat(*c));
    }
    // h = Φ(-|x|), the normal tail beyond |x|: `1 - |erf|` is exact in f32 once |erf| >= 1/2, and
    // the quotient passes 1 between z = 3.9 and 4, so h is exactly 0 far from zero. GELU is
    // `x h` below zero and `x - x h` above: neither side rounds a value near 1.
    let h = V::splat(1.0).sub(z.mul(p).div(q).abs().min(V::splat(1.0))).mul(V::splat(0.5));
    let t = x.mul(h);
    x.select_negative(t, x.sub(t))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn the_vector_gelu_matches_the_exact_one() {
        // Every 1e-4 from -12 to 12 (the worst error, 1.93e-7 near x = 4.9 on a grid of 1e-5,
        // falls between points 1e-3 apart).
        let xs: Vec<f32> = (-120_000..=120_000)
            .map(|i| i as f32 * 1e-4)
            .chain([f32::MIN_POSITIVE, -0.0, 3.9 * std::f32::consts::SQRT_2, 40.0, -40.0, 1e30, -1e30])
            .collect();
        let mut fast = xs.clone();
        gelu_in_place(Kernel::Simd, &mut fast);
        let mut worst = 0.0f64;
        for (&x, &got) in xs.iter().zip(&fast) {
            let want = 0.5 * x as f64 * (1.0 + libm::erf(x as f64 / std::f64::consts::SQRT_2));
            let err = (got as f64 - want).abs() / (x.abs() as f64).max(1.0);
            assert!(err < 2e-7, "GELU({x}) = {got}, want {want}");
            worst = worst.max(err);
        }
        assert_eq!(gelu(xs[135_000]).to_bits(), fast[135_000].to_bits(), "one lane and four agree");
        let mut scalar = xs.clone();
        gelu_in_place(Kernel::Scalar, &mut scalar);
        assert_eq!(scalar[120_000], 0.0);
        // Far from zero GELU is x or 0 exactly, on every lane.
        let mut far = [-1e30, -40.0, 40.0, 1e30, -6.0, 6.0, -5.7, 5.7];
        gelu_in_place(Kernel::Simd, &mut far);
        assert_eq!(far, [0.0, 0.0, 40.0, 1e30, 0.0, 6.0, 0.0, 5.7]);
        println!("vector GELU: worst error {worst:.1e} (relative to max(1, |x|))");
    }

    #[test]
    fn the_vector_tanh_gelu_matches_the_formula_in_f64() {
        let xs: Vec<f32> = (-12_000..=12_000)
            .map(|i| i as f32 * 1e-3)
            .chain([f32::MIN_POSITIVE, -0.0, 40.0, -40.0, 1e4, -1e4])
            .collect();
        let mut fast = xs.clone();
        gelu_tanh_in_place(Kernel::Simd, &mut fast);
        let mut scalar = xs.clone();
        gelu_tanh_in_place(Kernel::Scalar, &mut scalar);
        let mut worst = 0.0f64;
        for ((&x, &got), &twin) in xs.iter().zip(&fast).zip(&scalar) {
            let x64 = x as f64;
            let u = (2.0 / std::f64::consts::PI).sqrt() * (x64 + 0.044715 * x64 * x64 * x64);
            let want = 0.5 * x64 * (1.0 + u.tanh());
            let err = (got as f64 - want).abs() / x.abs().max(1.0) as f64;
            assert!(err < 5e-7, "tanh GELU({x}) = {got}, want {want}");
            assert!(
                (twin as f64 - want).abs() / x.abs().max(1.0) as f64 <= 5e-7,
                "scalar tanh GELU({x}) = {twin}"
            );
            worst = worst.max(err);
        }
        assert_eq!(gelu_tanh(xs[13_500]).to_bits(), fast[13_500].to_bits(), "one lane and four agree");
        println!("vector tanh GELU: worst error {worst:.1e} (relative to max(1, |x|))");
    }
}
