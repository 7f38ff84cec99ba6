//! Timing two kinds of pass against each other honestly: interleaved rounds after an untimed
//! one, medians, and on a coarse clock samples that repeat their pass until it spans enough ticks.

use crate::attention::clock::{more_repeats, Clock};

/// What [`Interleaved`] measured: median milliseconds per pass of each side, and the finest step
/// they can tell.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timed {
    /// Median milliseconds of a pass of the first side.
    pub first_ms: f64,
    /// Median milliseconds of a pass of the second side.
    pub second_ms: f64,
    /// The finest step these medians can tell.
    pub step_ms: f64,
}

/// Two sides timed alternately for `rounds` rounds after one untimed round, one sample at a
/// time, so that whoever drives it can let the browser draw between samples. On a coarse clock
/// the untimed round finds how many passes a sample needs to span `SAMPLE_TICKS` ticks, for each
/// side; an exact clock times single passes.
#[derive(Clone, Debug)]
pub struct Interleaved {
    rounds: usize,
    round: usize,
    side: bool,
    reps: [usize; 2],
    times: [Vec<f64>; 2],
}

impl Interleaved {
    /// A timing of `rounds` timed rounds.
    pub fn new(rounds: usize) -> Interleaved {
        Interleaved { rounds, round: 0, side: false, reps: [1; 2], times: [Vec::new(), Vec::new()] }
    }

    /// The next sample: which side (`false` the first), and how many passes it repeats; `None`
    /// once every round is timed.
    pub fn next(&self) -> Option<(bool, usize)> {
        (self.round <= self.rounds).then_some((self.side, self.reps[usize::from(self.side)]))
    }

    /// Samples taken so far and in all, for progress.
    pub fn progress(&self) -> (usize, usize) {
        (self.round * 2 + usize::from(self.side), (self.rounds + 1) * 2)
    }

    /// Records the sample [`Interleaved::next`] asked for: its passes took `elapsed_ms` on a
    /// clock of step `resolution_ms`.
    pub fn record(&mut self, elapsed_ms: f64, resolution_ms: f64) {
        let i = usize::from(self.side);
        if self.round > 0 {
            self.times[i].push(elapsed_ms / self.reps[i] as f64);
        } else if let Some(more) = more_repeats(resolution_ms, self.reps[i], elapsed_ms) {
            // The untimed round: try again with more passes.
            self.reps[i] = more;
            return;
        }
        self.side = !self.side;
        if !self.side {
            self.round += 1;
        }
    }

    /// The medians, once every round is timed (NaN for a side never timed).
    pub fn result(&self, resolution_ms: f64) -> Timed {
        let median = |t: &[f64]| crate::attention::stats::median(t).unwrap_or(f64::NAN);
        let step_ms = resolution_ms / self.reps[0].min(self.reps[1]) as f64;
        Timed { first_ms: median(&self.times[0]), second_ms: median(&self.times[1]), step_ms }
    }
}

/// Median milliseconds per pass of `pass(false)` and `pass(true)` ([`Interleaved`]), awaiting
/// `between` after each sample.
pub async fn interleaved<E>(
    rounds: usize,
    clock: &impl Clock,
    between: &mut impl AsyncFnMut(),
    mut pass: impl AsyncFnMut(bool) -> Result<(), E>,
) -> Result<Timed, E> {
    let mut timing = Interleaved::new(rounds);
    while let Some((side, reps)) = timing.next() {
        let t0 = clock.now_ms();
        for _ in 0..reps {
            pass(side).await?;
        }
        let elapsed = clock.now_ms() - t0;
        between().await;
        timing.record(elapsed, clock.resolution_ms());
    }
    Ok(timing.result(clock.resolution_ms()))
}

// Natively only: pollster drives the futures.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    /// A clock that shows whole milliseconds of a time the test advances, as Firefox's does.
    struct WholeMs(std::cell::Cell<f64>);

    impl Clock for WholeMs {
        fn now_ms(&self) -> f64 {
            self.0.get().floor()
        }

        fn resolution_ms(&self) -> f64 {
            1.0
        }
    }

    #[test]
    fn on_a_coarse_clock_samples_repeat_until_they_can_tell_sub_tick_passes_apart() {
        // Passes of 0.25 and 0.1 ms on a 1 ms clock: read singly, both would be 0 or 1 ms.
        let clock = WholeMs(std::cell::Cell::new(0.3));
        let (mut samples, mut passes) = (0, [0usize; 2]);
        let timed = pollster::block_on(interleaved(3, &clock, &mut async || samples += 1, async |side| {
            passes[usize::from(side)] += 1;
            clock.0.set(clock.0.get() + if side { 0.1 } else { 0.25 });
            Ok::<(), ()>(())
        }))
        .unwrap();
        assert!((timed.first_ms / 0.25 - 1.0).abs() < 0.03, "{}", timed.first_ms);
        assert!((timed.second_ms / 0.1 - 1.0).abs() < 0.03, "{}", timed.second_ms);
        // Each timed sample spans at least 50 ticks, and the step shown is one tick over the
        // passes of the side that repeated least.
        assert!(passes[0] >= 4 * 200 && passes[1] >= 4 * 500, "{passes:?}");
        assert!(timed.step_ms > 0.0 && timed.step_ms <= 1.0 / 200.0, "{}", timed.step_ms);
        assert!(samples >= 8, "the browser gets a turn after every sample");
    }
}
