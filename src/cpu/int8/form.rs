//! Which form of the relaxed build's 8-bit micro-kernel this CPU runs faster, and the trial that
//! times it (the module docs of `super`: the forms give the same integers; the time depends on
//! whether the engine lowers the relaxed dot product to one instruction).

use std::sync::atomic::{AtomicU8, Ordering};

use super::gemm::qgemm_with;
use super::layout::DotForm;
use super::weights::QuantizedWeights;
use crate::attention::clock::{ms_per_run, Clock};
use crate::cpu::Kernel;

/// This wasm instance's [`DotForm`] (one CPU, so one choice: [`set_dot_form`]).
static DOT_FORM: AtomicU8 = AtomicU8::new(0);

/// The [`DotForm`] 8-bit products run with: [`DotForm::Fused`] until [`set_dot_form`].
pub fn dot_form() -> DotForm {
    DotForm::ALL[DOT_FORM.load(Ordering::Relaxed) as usize]
}

/// Runs every later 8-bit product with `form` (results unchanged: only the time).
pub fn set_dot_form(form: DotForm) {
    DOT_FORM.store(form as u8, Ordering::Relaxed);
}

/// Whether this build's vector kernel has both forms (the relaxed SIMD build).
pub const DOT_FORMS_DIFFER: bool =
    cfg!(all(target_arch = "wasm32", target_feature = "simd128", feature = "relaxed-simd"));

/// The faster [`DotForm`] on this CPU, timed on `clock` ([`DotFormTrial`] round after round).
/// A build with one kernel ([`DOT_FORMS_DIFFER`] false) times nothing and answers
/// [`DotForm::Fused`].
pub fn faster_dot_form(clock: &impl Clock) -> DotForm {
    if !DOT_FORMS_DIFFER {
        return DotForm::Fused;
    }
    let mut trial = DotFormTrial::new();
    loop {
        if let Some(form) = trial.round(clock) {
            return form;
        }
    }
}

/// Timing the two [`DotForm`]s against each other, a round at a time (a page gives the browser
/// a turn between rounds): each round one sample of each form on an 8-bit product of 32 rows at
/// MiniLM's `384 x 384` (0.05-0.1 ms), repeated to at least 2 ms and 10 clock steps (10 %: the
/// forms differ by 25-70 %); settled when two rounds in a row improve neither form's fastest
/// sample by 10 %, after at least 5 rounds (at most 16). A fresh instance's first calls run the
/// engine's baseline code, several times slower and not in the same ratio, until its optimized
/// code is swapped in, which in a page still starting took 4-20 rounds in headless Chromium and
/// once more than a trial waited for (1 start in 17 picked the slower form): so a page times
/// again later, when a trial is clean. 4-10 ms a round on a 0.1 ms clock, 20-40 ms on a 1 ms
/// one (Firefox's, where a page is not cross-origin isolated).
pub struct DotFormTrial {
    operands: (Vec<f32>, QuantizedWeights, Vec<f32>, Vec<f32>),
    best: [f64; 2],
    steady: usize,
    rounds: usize,
}

impl Default for DotFormTrial {
    fn default() -> Self {
        DotFormTrial::new()
    }
}

impl DotFormTrial {
    /// Rows of the timed product.
    const ROWS: usize = 32;
    /// Its inputs and outputs (MiniLM's `d_model`).
    const WIDTH: usize = 384;

    /// A trial with its operands made (a fixed wave: the time does not depend on the values).
    pub fn new() -> Self {
        let (n, k) = (Self::ROWS, Self::WIDTH);
        let wave =
            |len: usize, seed: f32| -> Vec<f32> { (0..len).map(|i| (i as f32 * seed).sin()).collect() };
        let weights = QuantizedWeights::new(&wave(k * k, 0.11), k, k);
        DotFormTrial {
            operands: (wave(n * k, 0.37), weights, vec![0.0; k], vec![0.0; n * k]),
            best: [f64::INFINITY; 2],
            steady: 0,
            rounds: 0,
        }
    }

    /// One round on `clock`: the faster form once the trial has settled.
    pub fn round(&mut self, clock: &impl Clock) -> Option<DotForm> {
        let (x, weights, bias, y) = &mut self.operands;
        let (n, k) = (Self::ROWS, Self::WIDTH);
        let times = DotForm::ALL.map(|form| {
            ms_per_run(clock, 2.0, 10.0, || qgemm_with(Kernel::Simd, form, x, n, weights, bias, y, k))
        });
        self.record(times)
    }

    /// A round's times (milliseconds per product, fused then split).
    pub(super) fn record(&mut self, times: [f64; 2]) -> Option<DotForm> {
        let before = self.best;
        for (best, t) in self.best.iter_mut().zip(times) {
            *best = best.min(t);
        }
        let improved = self.best.iter().zip(before).any(|(now, was)| *now < 0.9 * was);
        self.steady = if improved { 0 } else { self.steady + 1 };
        self.rounds += 1;
        let settled = (self.rounds >= 5 && self.steady >= 2) || self.rounds >= 16;
        settled.then(|| by_time(self.best[0], self.best[1]))
    }
}

/// The form that took less time; the fused one on a tie (or an unreadable clock).
pub(super) fn by_time(fused_ms: f64, split_ms: f64) -> DotForm {
    if split_ms < fused_ms {
        DotForm::Split
    } else {
        DotForm::Fused
    }
}
