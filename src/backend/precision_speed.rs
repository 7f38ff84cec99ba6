//! What 8 bits buy on the reader's sentence: the model with its f16 weights timed against its
//! 8-bit copy on the CPU kernel (the 8-bit products have no GPU kernel), one sample at a time
//! ([`PrecisionTiming::sample`]) so whoever drives it lets the page draw between samples, and
//! the bytes of the weights each pass reads.

use std::rc::Rc;

use super::timing::{Interleaved, Timed};
use crate::attention::clock::Clock;
use crate::attention::precision::Precision;
use crate::attention::HeadSet;
use crate::cpu::Kernel;
use crate::model::encoder::pruned::PrunedBert;
use crate::model::encoder::Encoder;

/// Forward times and weight bytes of the model at f16 and at 8 bits, on the same sentence.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrecisionCost {
    /// Median milliseconds of a pass with the f16 weights.
    pub f16_ms: f64,
    /// Median milliseconds of a pass at 8 bits.
    pub int8_ms: f64,
    /// The finest step these medians can tell (see `attention::clock`).
    pub step_ms: f64,
    /// Bytes of the weights the f16 pass reads ([`crate::model::encoder::bert::Bert::stored_bytes`]).
    pub f16_bytes: u64,
    /// Bytes of the weights the 8-bit pass reads.
    pub int8_bytes: u64,
}

impl PrecisionCost {
    /// The 8-bit pass's time as a share of the f16 one's.
    pub fn ratio(&self) -> f64 {
        self.int8_ms / self.f16_ms
    }
}

/// The two models timed against each other on `ids`, every head kept: interleaved rounds after
/// one untimed round, medians ([`Interleaved`]).
pub struct PrecisionTiming {
    models: [Rc<Encoder>; 2],
    ids: Vec<u32>,
    timing: Interleaved,
}

impl PrecisionTiming {
    /// The timing of `f16` against `int8` (the same model at both precisions) on `ids` over
    /// `rounds` rounds.
    pub fn new(f16: Rc<Encoder>, int8: Rc<Encoder>, ids: Vec<u32>, rounds: usize) -> PrecisionTiming {
        assert_eq!((f16.precision(), int8.precision()), (Precision::F16, Precision::Int8));
        PrecisionTiming { models: [f16, int8], ids, timing: Interleaved::new(rounds) }
    }

    /// Samples taken and in all.
    pub fn progress(&self) -> (usize, usize) {
        self.timing.progress()
    }

    /// Takes the next sample on `clock`; `false` once every round is timed.
    pub fn sample(&mut self, clock: &impl Clock) -> bool {
        let Some((int8_side, reps)) = self.timing.next() else { return false };
        let bert = &self.models[usize::from(int8_side)].bert;
        // The pass the pruned model's timing takes for the full model ([`super::pruned_speed`]),
        // so that the task panel's two lines time the same f16 pass; its weights are gathered
        // before the clock starts.
        let whole = PrunedBert::new(bert, &HeadSet::all(bert.spec().total_heads()));
        let t0 = clock.now_ms();
        for _ in 0..reps {
            std::hint::black_box(whole.embed(Kernel::Simd, &self.ids));
        }
        self.timing.record(clock.now_ms() - t0, clock.resolution_ms());
        self.timing.next().is_some()
    }

    /// What was measured (NaN for a side not timed yet).
    pub fn result(&self, clock: &impl Clock) -> PrecisionCost {
        let Timed { first_ms, second_ms, step_ms } = self.timing.result(clock.resolution_ms());
        let [f16, int8] = &self.models;
        PrecisionCost {
            f16_ms: first_ms,
            int8_ms: second_ms,
            step_ms,
            f16_bytes: f16.bert.stored_bytes(),
            int8_bytes: int8.bert.stored_bytes(),
        }
    }
}
