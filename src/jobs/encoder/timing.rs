//! Timing the really pruned model against the full one on the reader's sentence
//! ([`PrunedTiming`] of the backend), and the model's f16 weights against its 8-bit copy
//! ([`PrecisionTiming`]), as jobs: one sample a step.

use crate::attention::HeadSet;
use crate::backend::precision_speed::{PrecisionCost, PrecisionTiming};
use crate::backend::pruned_speed::{PrunedSpeed, PrunedTiming};
use crate::jobs::driver::{Job, Progress};
use crate::jobs::engine::Engine;
use crate::jobs::host::HostClock;
use crate::model::encoder::Encoder;

/// Rounds of the pruned-forward timing (after one untimed round).
pub const ROUNDS: usize = 5;

/// The timing of `heads` on `ids` on one engine's runner (its models are prepared on the first
/// step, and a timing never moves to another engine).
pub struct TimePruned<'e> {
    engine: &'e Engine<Encoder>,
    ids: Vec<u32>,
    heads: HeadSet,
    timing: Option<PrunedTiming<'e>>,
}

impl<'e> TimePruned<'e> {
    /// The full model against the one with only `heads` kept, on `ids`, on `engine`.
    pub fn new(engine: &'e Engine<Encoder>, ids: Vec<u32>, heads: HeadSet) -> Self {
        TimePruned { engine, ids, heads, timing: None }
    }
}

impl Job<Encoder> for TimePruned<'_> {
    type Output = PrunedSpeed;

    async fn step(&mut self, _driven_by: &Engine<Encoder>) -> Option<PrunedSpeed> {
        let clock = HostClock(self.engine.host());
        let timing = match &mut self.timing {
            Some(t) => t,
            None => {
                let runner = self.engine.runner();
                self.timing
                    .insert(PrunedTiming::start(runner, self.ids.clone(), self.heads.clone(), ROUNDS).await)
            }
        };
        (!timing.sample(&clock).await).then(|| timing.result(&clock))
    }

    fn progress(&self, _engine: &Engine<Encoder>) -> Progress {
        let (done, total) = self.timing.as_ref().map_or((0, 2 * (ROUNDS + 1)), PrunedTiming::progress);
        Progress { done, total, left: None }
    }
}

/// The timing of the model at f16 against its 8-bit copy on one sentence, on the page's thread.
pub struct TimePrecision {
    timing: PrecisionTiming,
}

impl TimePrecision {
    /// The timing of `timing`'s two models, [`ROUNDS`] rounds of it.
    pub fn new(timing: PrecisionTiming) -> Self {
        TimePrecision { timing }
    }
}

impl Job<Encoder> for TimePrecision {
    type Output = PrecisionCost;

    async fn step(&mut self, engine: &Engine<Encoder>) -> Option<PrecisionCost> {
        let clock = HostClock(engine.host());
        (!self.timing.sample(&clock)).then(|| self.timing.result(&clock))
    }

    fn progress(&self, _engine: &Engine<Encoder>) -> Progress {
        let (done, total) = self.timing.progress();
        Progress { done, total, left: None }
    }
}
