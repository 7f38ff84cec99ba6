//! Timing on the reader's clock, honestly. Browsers coarsen `performance.now()` against timing
//! attacks, by different amounts: Chromium to 0.1 ms, Firefox and WebKit to 1 ms when the page
//! is not cross-origin isolated. A 5 ms pass read once on a 1 ms clock is off by up to 20 %, and
//! a 0.3 ms one reads as 0. So a timed sample repeats its pass until it spans many ticks, and a
//! single reading is shown no finer than the clock can tell.

/// A millisecond clock and the smallest step it shows.
pub trait Clock {
    /// Milliseconds from any fixed origin.
    fn now_ms(&self) -> f64;
    /// The clock's step in milliseconds (0 for a clock treated as exact).
    fn resolution_ms(&self) -> f64;
}

/// Any `Fn() -> f64` is a clock treated as exact: native code's `Instant`, or a test's clock.
impl<F: Fn() -> f64> Clock for F {
    fn now_ms(&self) -> f64 {
        self()
    }

    fn resolution_ms(&self) -> f64 {
        0.0
    }
}

/// Ticks a timed sample should span: its reading is then within 2 % of the true time.
pub const SAMPLE_TICKS: f64 = 50.0;
/// The most passes one sample repeats.
pub const MAX_REPEATS: usize = 1000;

/// How many passes one timed sample should repeat, given that `reps` passes read `elapsed_ms`
/// on a clock of step `resolution_ms`; `None` when `reps` is already enough. A reading below one
/// step counts as one step, so each try at least doubles the count.
pub fn more_repeats(resolution_ms: f64, reps: usize, elapsed_ms: f64) -> Option<usize> {
    let target = SAMPLE_TICKS * resolution_ms;
    if elapsed_ms >= target || reps >= MAX_REPEATS {
        return None;
    }
    let scaled = (reps as f64 * target / elapsed_ms.max(resolution_ms)).ceil() as usize;
    Some(scaled.max(2 * reps).min(MAX_REPEATS))
}

/// Milliseconds per run of `run` on `clock`: one sample, repeated until it spans at least
/// `ticks` of the clock's steps and `min_ms` ([`more_repeats`], on a step scaled to match).
pub fn ms_per_run(clock: &impl Clock, min_ms: f64, ticks: f64, mut run: impl FnMut()) -> f64 {
    let step = (clock.resolution_ms() * ticks).max(min_ms) / SAMPLE_TICKS;
    let mut reps = 1;
    loop {
        let t0 = clock.now_ms();
        (0..reps).for_each(|_| run());
        let elapsed = clock.now_ms() - t0;
        match more_repeats(step, reps, elapsed) {
            Some(more) => reps = more,
            None => return elapsed / reps as f64,
        }
    }
}

/// A duration for the page, no finer than a clock of step `resolution_ms` can tell: below one
/// step it is "under 1 ms" (or "under 0.1 ms"), and it keeps only the decimals the step has.
/// An exact clock (step 0) gets one decimal.
pub fn show_ms(ms: f64, resolution_ms: f64) -> String {
    if !ms.is_finite() {
        return "unmeasured".into();
    }
    let decimals = decimals(resolution_ms);
    if resolution_ms > 0.0 && ms < resolution_ms {
        return format!("under {resolution_ms:.decimals$} ms");
    }
    format!("{ms:.decimals$} ms")
}

/// The decimals a clock of this step shows: 0 for 1 ms, 1 for 0.1 ms, 2 for 0.01 ms; 1 for an
/// exact clock.
pub fn decimals(resolution_ms: f64) -> usize {
    if resolution_ms <= 0.0 {
        return 1;
    }
    (-resolution_ms.log10() - 1e-9).ceil().clamp(0.0, 3.0) as usize
}

/// A clock's step from the smallest change seen between successive readings, rounded up to a
/// power of ten (Chromium jitters its 0.1 ms steps by a few nanoseconds either way; a 20 us
/// step is taken as 0.1 ms, so what the page shows is never finer than the clock).
pub fn step_from_tick(smallest_ms: f64) -> f64 {
    if !(smallest_ms > 0.0 && smallest_ms.is_finite()) {
        return 1.0;
    }
    10f64.powf((smallest_ms.log10() - 0.05).ceil())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_repeats_until_it_spans_fifty_ticks() {
        // An exact clock never asks for more.
        assert_eq!(more_repeats(0.0, 1, 0.0), None);
        // Chromium's 0.1 ms clock: a 5 ms pass is enough alone; a 1 ms one needs 5.
        assert_eq!(more_repeats(0.1, 1, 5.0), None);
        assert_eq!(more_repeats(0.1, 1, 1.0), Some(5));
        // Firefox's 1 ms clock: a 5 ms pass needs 10; a pass that reads 0 at least doubles.
        assert_eq!(more_repeats(1.0, 1, 5.0), Some(10));
        assert_eq!(more_repeats(1.0, 1, 0.0), Some(50));
        assert_eq!(more_repeats(1.0, 4, 0.0), Some(200));
        assert_eq!(more_repeats(1.0, 10, 49.0), Some(20));
        assert_eq!(more_repeats(1.0, 10, 50.0), None);
        // Never past the cap.
        assert_eq!(more_repeats(1.0, 600, 1.0), Some(MAX_REPEATS));
        assert_eq!(more_repeats(1.0, MAX_REPEATS, 1.0), None);
    }

    #[test]
    fn a_run_is_timed_over_as_many_repeats_as_the_clock_needs() {
        // A 1 ms clock and runs of 0.3 ms each: 1, then 50, then 167 runs (50.1 ms).
        struct Coarse(std::cell::Cell<f64>);
        impl Clock for Coarse {
            fn now_ms(&self) -> f64 {
                self.0.get().floor()
            }
            fn resolution_ms(&self) -> f64 {
                1.0
            }
        }
        let (clock, runs) = (Coarse(std::cell::Cell::new(0.0)), std::cell::Cell::new(0));
        let time = |min_ms, ticks| {
            runs.set(0);
            let ms = ms_per_run(&clock, min_ms, ticks, || {
                clock.0.set(clock.0.get() + 0.3);
                runs.set(runs.get() + 1);
            });
            assert!((ms - 0.3).abs() < 0.01, "{ms} ms per run");
            runs.get()
        };
        assert_eq!(time(0.0, SAMPLE_TICKS), 1 + 50 + 167);
        // At least 100 ms: as a clock of 2 ms steps would need.
        assert!((334..=400).contains(&time(100.0, SAMPLE_TICKS)));
        // Ten ticks: 1, then 10, then 34 runs (about 10 ms).
        assert!((40..=50).contains(&time(0.0, 10.0)));
    }

    #[test]
    fn a_step_is_the_smallest_tick_rounded_up_to_a_power_of_ten() {
        let close = |a: f64, b: f64| (a / b - 1.0).abs() < 1e-12;
        assert!(close(step_from_tick(0.099_999_997_764_825_82), 0.1));
        assert!(close(step_from_tick(0.100_000_001_490_116_12), 0.1));
        assert!(close(step_from_tick(1.0), 1.0));
        assert!(close(step_from_tick(0.02), 0.1));
        assert!(close(step_from_tick(0.005), 0.01));
        assert!(close(step_from_tick(16.7), 100.0));
        assert_eq!((step_from_tick(0.0), step_from_tick(f64::NAN)), (1.0, 1.0));
    }

    #[test]
    fn durations_show_only_what_the_clock_can_tell() {
        assert_eq!(show_ms(5.0, 1.0), "5 ms");
        assert_eq!(show_ms(0.0, 1.0), "under 1 ms");
        assert_eq!(show_ms(0.4, 0.1), "0.4 ms");
        assert_eq!(show_ms(0.04, 0.1), "under 0.1 ms");
        assert_eq!(show_ms(12.345, 0.1), "12.3 ms");
        assert_eq!(show_ms(12.346, 0.01), "12.35 ms");
        assert_eq!(show_ms(12.345, 0.0), "12.3 ms");
        assert_eq!(show_ms(f64::NAN, 1.0), "unmeasured");
        assert_eq!(
            (decimals(1.0), decimals(0.1), decimals(0.01), decimals(0.02), decimals(5e-6)),
            (0, 1, 2, 2, 3)
        );
    }
}
