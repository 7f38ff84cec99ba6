//! The really pruned model timed against the full one on the same sentence, on the GPU while
//! the runner uses it, else on the CPU kernel: one sample at a time ([`PrunedTiming::sample`]),
//! so whoever drives it lets the page draw between samples.

use super::encoder::EncoderRunner;
use super::timing::{Interleaved, Timed};
use crate::attention::clock::Clock;
use crate::attention::HeadSet;
use crate::cpu::Kernel;
use crate::gpu::GpuBert;
use crate::model::encoder::pruned::PrunedBert;
use std::rc::Rc;

/// Forward times of the full model and of the really pruned one, on the same sentence.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrunedSpeed {
    /// Median milliseconds of the full model.
    pub full_ms: f64,
    /// Median milliseconds of the pruned one.
    pub pruned_ms: f64,
    /// Whether both ran on the GPU (else on the CPU kernel).
    pub on_gpu: bool,
    /// The finest step these medians can tell (see `attention::clock`).
    pub step_ms: f64,
}

impl PrunedSpeed {
    /// The pruned model's time as a share of the full one's.
    pub fn ratio(&self) -> f64 {
        self.pruned_ms / self.full_ms
    }
}

/// The two models timed: on the GPU (the runner's full model and a really pruned copy uploaded
/// for the timing), or on the CPU kernel.
enum Sides<'r> {
    Gpu { full: Rc<GpuBert>, pruned: GpuBert },
    Cpu { whole: PrunedBert<'r>, cut: PrunedBert<'r> },
}

/// The full model timed against the one with only `heads` kept (its weights really removed) on
/// `ids`: interleaved rounds after one untimed round, medians ([`Interleaved`]). A sample repeats
/// its pass as often as the clock needs. A GPU that fails mid-way is left for the CPU kernel,
/// whose timing starts over.
pub struct PrunedTiming<'r> {
    runner: &'r EncoderRunner,
    ids: Vec<u32>,
    heads: HeadSet,
    rounds: usize,
    sides: Sides<'r>,
    timing: Interleaved,
}

impl<'r> PrunedTiming<'r> {
    /// Prepares the timing of `heads` on `ids` over `rounds` rounds: the pruned model is uploaded
    /// to the GPU while the runner runs this length there (the CPU kernel's if that fails).
    pub async fn start(
        runner: &'r EncoderRunner,
        ids: Vec<u32>,
        heads: HeadSet,
        rounds: usize,
    ) -> PrunedTiming<'r> {
        let bert = &runner.model().bert;
        let sides = match runner.gpu_for(ids.len()) {
            Some(full) => match GpuBert::pruned(full.context(), &PrunedBert::new(bert, &heads)).await {
                Ok(pruned) => Sides::Gpu { full, pruned },
                Err(_) => Self::cpu_sides(runner, &heads),
            },
            None => Self::cpu_sides(runner, &heads),
        };
        PrunedTiming { runner, ids, heads, rounds, sides, timing: Interleaved::new(rounds) }
    }

    fn cpu_sides(runner: &'r EncoderRunner, heads: &HeadSet) -> Sides<'r> {
        let bert = &runner.model().bert;
        Sides::Cpu {
            whole: PrunedBert::new(bert, &HeadSet::all(heads.len())),
            cut: PrunedBert::new(bert, heads),
        }
    }

    /// Samples taken and in all.
    pub fn progress(&self) -> (usize, usize) {
        self.timing.progress()
    }

    /// Takes the next sample on `clock`; `false` once every round is timed.
    pub async fn sample(&mut self, clock: &impl Clock) -> bool {
        let Some((pruned_side, reps)) = self.timing.next() else { return false };
        let bert = &self.runner.model().bert;
        let t0 = clock.now_ms();
        for _ in 0..reps {
            match &self.sides {
                Sides::Gpu { full, pruned } => {
                    let (model, set) = if pruned_side {
                        (pruned, &self.heads)
                    } else {
                        (&**full, &HeadSet::all(self.heads.len()))
                    };
                    if model.forward(bert, &self.ids, set).await.is_err() {
                        self.sides = Self::cpu_sides(self.runner, &self.heads);
                        self.timing = Interleaved::new(self.rounds);
                        return true;
                    }
                }
                Sides::Cpu { whole, cut } => {
                    std::hint::black_box(
                        if pruned_side { cut } else { whole }.embed(Kernel::Simd, &self.ids),
                    );
                }
            }
        }
        self.timing.record(clock.now_ms() - t0, clock.resolution_ms());
        self.timing.next().is_some()
    }

    /// What was measured (NaN for a side not timed yet).
    pub fn result(&self, clock: &impl Clock) -> PrunedSpeed {
        let Timed { first_ms, second_ms, step_ms } = self.timing.result(clock.resolution_ms());
        let on_gpu = matches!(self.sides, Sides::Gpu { .. });
        PrunedSpeed { full_ms: first_ms, pruned_ms: second_ms, on_gpu, step_ms }
    }
}
