//! Timing the CPU kernel and the GPU on a few short passes of one model, once per session, for
//! the choice in [`super::placement`]: the synthetic layer of one shape, or the trained model.

use super::placement::{gpu_needs_large_probe, CostLine, Crossover, Place};
use crate::attention::clock::{more_repeats, Clock};

/// Largest forward pass (FLOPs) drawn on the CPU kernel while the GPU is still starting: about
/// 10 ms in wasm, so the first heatmaps do not wait for the GPU.
pub const QUICK_CPU_FLOPS: u64 = 300_000_000;

/// The sequence lengths a calibration times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probes {
    /// The small pass: the fixed costs.
    pub small: usize,
    /// The large pass: the cost per GFLOP.
    pub large: usize,
    /// The longest the model accepts (not timed: the range the choice covers).
    pub largest: usize,
}

impl Probes {
    /// Lengths for a model whose pass of `n` tokens costs `flops(n)`: 4 tokens, and the longest
    /// power of two from 16 whose pass stays within `budget_flops` (at most `largest`).
    pub fn within(flops: impl Fn(usize) -> u64, budget_flops: u64, largest: usize) -> Probes {
        let mut large = 16.min(largest);
        while large * 2 <= largest && flops(large * 2) <= budget_flops {
            large *= 2;
        }
        Probes { small: 4.min(large), large, largest }
    }
}

/// A pass that took at least this long is timed once: noise is then a small part of it, and on
/// a software GPU (a second or more a pass) a second sample would double the wait.
const ONE_SAMPLE_MS: f64 = 50.0;

/// Times `pass(place, n)` at the probes' lengths on both places and fits each a line: one untimed
/// pass on each first (the GPU builds its pipelines on it), then the fastest of up to two samples
/// per length. The GPU's large pass is skipped when its small one shows it cannot win
/// ([`gpu_needs_large_probe`]). A sample repeats its pass as often as `clock` needs to tell it.
pub async fn crossover<E>(
    probes: Probes,
    flops: impl Fn(usize) -> u64,
    clock: &impl Clock,
    mut pass: impl AsyncFnMut(Place, usize) -> Result<(), E>,
) -> Result<Crossover, E> {
    for place in [Place::Cpu, Place::Gpu] {
        pass(place, probes.small).await?;
    }
    let mut cpu = Vec::new();
    for n in [probes.small, probes.large] {
        cpu.push((flops(n), fastest(clock, &mut pass, Place::Cpu, n).await?));
    }
    let cpu = CostLine::fit(&cpu).unwrap_or(CostLine::at_least(0.0));
    let largest_flops = flops(probes.largest);
    let small = fastest(clock, &mut pass, Place::Gpu, probes.small).await?;
    let gpu = if gpu_needs_large_probe(&cpu, small, largest_flops) {
        let large = fastest(clock, &mut pass, Place::Gpu, probes.large).await?;
        CostLine::fit(&[(flops(probes.small), small), (flops(probes.large), large)])
            .unwrap_or(CostLine::at_least(small))
    } else {
        CostLine::at_least(small)
    };
    Ok(Crossover { cpu, gpu, largest_flops })
}

/// The fastest of up to two samples of `pass(place, n)`, milliseconds per pass.
async fn fastest<E>(
    clock: &impl Clock,
    pass: &mut impl AsyncFnMut(Place, usize) -> Result<(), E>,
    place: Place,
    n: usize,
) -> Result<f64, E> {
    let first = sample(clock, pass, place, n).await?;
    if first >= ONE_SAMPLE_MS {
        return Ok(first);
    }
    Ok(first.min(sample(clock, pass, place, n).await?))
}

/// Milliseconds per pass of one sample: the pass repeated until the clock can tell it.
async fn sample<E>(
    clock: &impl Clock,
    pass: &mut impl AsyncFnMut(Place, usize) -> Result<(), E>,
    place: Place,
    n: usize,
) -> Result<f64, E> {
    let mut reps = 1;
    loop {
        let t0 = clock.now_ms();
        for _ in 0..reps {
            pass(place, n).await?;
        }
        let elapsed = clock.now_ms() - t0;
        match more_repeats(clock.resolution_ms(), reps, elapsed) {
            Some(more) => reps = more,
            None => return Ok(elapsed / reps as f64),
        }
    }
}

// Natively only: pollster drives the futures.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// A clock the fake passes advance: each pass adds its modelled time.
    struct Fake {
        now: Cell<f64>,
        resolution: f64,
    }

    impl Clock for Fake {
        fn now_ms(&self) -> f64 {
            match self.resolution {
                r if r > 0.0 => (self.now.get() / r).floor() * r,
                _ => self.now.get(),
            }
        }
        fn resolution_ms(&self) -> f64 {
            self.resolution
        }
    }

    fn flops(n: usize) -> u64 {
        n as u64 * 10_000_000
    }

    /// Calibrates against modelled backends; returns the crossover and the passes run.
    fn calibrate(cpu: CostLine, gpu: CostLine, resolution: f64) -> (Crossover, Vec<(Place, usize)>) {
        let clock = Fake { now: Cell::new(0.0), resolution };
        let ran = std::cell::RefCell::new(Vec::new());
        let probes = Probes { small: 4, large: 64, largest: 1024 };
        let c = pollster::block_on(crossover(probes, flops, &clock, async |place, n| {
            let line = if place == Place::Cpu { cpu } else { gpu };
            clock.now.set(clock.now.get() + line.predict(flops(n)));
            ran.borrow_mut().push((place, n));
            Ok::<(), ()>(())
        }))
        .unwrap();
        (c, ran.into_inner())
    }

    #[test]
    fn the_lines_of_modelled_backends_are_measured_back() {
        let cpu = CostLine { fixed_ms: 0.25, ms_per_gflop: 40.0 };
        let gpu = CostLine { fixed_ms: 3.0, ms_per_gflop: 2.0 };
        for resolution in [0.0, 0.1, 1.0] {
            let (c, _) = calibrate(cpu, gpu, resolution);
            // A coarse clock reads each sample to within a step over its repeats.
            let close = |a: f64, b: f64| (a - b).abs() <= 0.05 * b.max(1.0);
            assert!(close(c.cpu.ms_per_gflop, 40.0) && close(c.gpu.ms_per_gflop, 2.0), "{resolution}: {c:?}");
            assert!(close(c.gpu.fixed_ms, 3.0), "{resolution}: {c:?}");
            assert_eq!(c.largest_flops, flops(1024));
            let from = c.gpu_from().unwrap() as f64 / 1e9;
            assert!((from - 2.75 / 38.0).abs() < 0.01, "{resolution}: {from}");
        }
    }

    #[test]
    fn a_gpu_slower_than_the_largest_cpu_pass_is_not_timed_large() {
        let cpu = CostLine { fixed_ms: 0.25, ms_per_gflop: 40.0 };
        // 600 ms for 4 tokens: the CPU kernel needs 410 ms for 1024.
        let gpu = CostLine { fixed_ms: 600.0, ms_per_gflop: 50.0 };
        let (c, ran) = calibrate(cpu, gpu, 0.0);
        assert!(!ran.contains(&(Place::Gpu, 64)), "{ran:?}");
        // One warm-up and one sample: a 600 ms pass is timed once.
        assert_eq!(ran.iter().filter(|r| r.0 == Place::Gpu).count(), 2, "{ran:?}");
        assert_eq!(c.gpu.ms_per_gflop, 0.0);
        assert!((c.gpu.fixed_ms - 602.0).abs() < 1e-9, "{c:?}");
        assert_eq!(c.gpu_from(), None);
    }

    #[test]
    fn probe_lengths_follow_the_budget() {
        assert_eq!(Probes::within(flops, 700_000_000, 1024), Probes { small: 4, large: 64, largest: 1024 });
        assert_eq!(Probes::within(flops, 1, 1024), Probes { small: 4, large: 16, largest: 1024 });
        assert_eq!(Probes::within(flops, u64::MAX, 100), Probes { small: 4, large: 64, largest: 100 });
        assert_eq!(Probes::within(flops, u64::MAX, 3), Probes { small: 3, large: 3, largest: 3 });
    }
}
