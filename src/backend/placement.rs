//! Which backend runs a pass, decided from measurements instead of assumed.
//!
//! A GPU is not always faster: a software adapter (SwiftShader, lavapipe) is slower than the CPU
//! kernel at every size, and even a hardware GPU loses short passes to its fixed cost (upload,
//! dispatch, readback). So when the reader leaves `?backend=` alone, the page times a few short
//! passes of each model on both backends once per session, fits each a straight line in the
//! pass's FLOPs ([`CostLine`]: a fixed cost plus a cost per GFLOP), and runs every later pass
//! where its line is lower ([`Crossover::choose`]).
//!
//! The GPU is timed at the small size first. When that one pass already takes longer than the
//! CPU kernel's line predicts for the largest pass the model accepts, the GPU cannot win at any
//! size (a larger pass never takes less time), so its large probe is skipped
//! ([`gpu_needs_large_probe`]) and its line is that bound ([`CostLine::at_least`]): on a
//! software adapter this saves the slowest pass of the calibration.

/// Where a pass runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// The CPU kernel (wasm simd128 in the page).
    Cpu,
    /// The GPU (WebGPU in the page).
    Gpu,
}

/// Milliseconds of a pass as a straight line in its work: `fixed_ms + ms_per_gflop * GFLOP`,
/// both terms non-negative.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostLine {
    /// What a pass costs before any arithmetic: dispatch, upload, readback.
    pub fixed_ms: f64,
    /// What each GFLOP adds.
    pub ms_per_gflop: f64,
}

impl CostLine {
    /// The least-squares line through `(flops, ms)` samples with both terms kept non-negative
    /// (a negative slope from noise becomes a flat line at the mean; a negative fixed cost, a line
    /// through the origin). `None` without a sample or with a time that is not a finite,
    /// non-negative number.
    pub fn fit(samples: &[(u64, f64)]) -> Option<CostLine> {
        if samples.is_empty() || samples.iter().any(|&(_, ms)| !(ms.is_finite() && ms >= 0.0)) {
            return None;
        }
        let n = samples.len() as f64;
        let x = |f: u64| f as f64 / 1e9;
        let mean_x = samples.iter().map(|&(f, _)| x(f)).sum::<f64>() / n;
        let mean_y = samples.iter().map(|&(_, ms)| ms).sum::<f64>() / n;
        let var: f64 = samples.iter().map(|&(f, _)| (x(f) - mean_x).powi(2)).sum();
        let cov: f64 = samples.iter().map(|&(f, ms)| (x(f) - mean_x) * (ms - mean_y)).sum();
        let slope = if var > 0.0 { cov / var } else { 0.0 };
        if slope <= 0.0 {
            return Some(CostLine::at_least(mean_y));
        }
        let fixed = mean_y - slope * mean_x;
        if fixed >= 0.0 {
            return Some(CostLine { fixed_ms: fixed, ms_per_gflop: slope });
        }
        let sxy: f64 = samples.iter().map(|&(f, ms)| x(f) * ms).sum();
        let sxx: f64 = samples.iter().map(|&(f, _)| x(f) * x(f)).sum();
        Some(CostLine { fixed_ms: 0.0, ms_per_gflop: sxy / sxx })
    }

    /// A flat line: what is known of a backend that took `ms` on its smallest pass (no larger
    /// pass can take less).
    pub fn at_least(ms: f64) -> CostLine {
        CostLine { fixed_ms: ms, ms_per_gflop: 0.0 }
    }

    /// Predicted milliseconds of a pass of `flops`.
    pub fn predict(&self, flops: u64) -> f64 {
        self.fixed_ms + self.ms_per_gflop * flops as f64 / 1e9
    }
}

/// Whether the GPU's large probe is needed: not when its small pass (`gpu_small_ms`) already took
/// longer than the CPU kernel is predicted to take on the largest pass the model accepts.
pub fn gpu_needs_large_probe(cpu: &CostLine, gpu_small_ms: f64, largest_flops: u64) -> bool {
    gpu_small_ms < cpu.predict(largest_flops)
}

/// What the calibration of one model measured: a line for each backend.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Crossover {
    /// The CPU kernel's line.
    pub cpu: CostLine,
    /// The GPU's line ([`CostLine::at_least`] when its large probe was skipped).
    pub gpu: CostLine,
    /// The largest pass the model accepts, FLOPs: the range a choice is made over.
    pub largest_flops: u64,
}

impl Crossover {
    /// Where a pass of `flops` runs: on the backend predicted faster (the CPU kernel on a tie, as
    /// it needs no device).
    pub fn choose(&self, flops: u64) -> Choice {
        let (cpu_ms, gpu_ms) = (self.cpu.predict(flops), self.gpu.predict(flops));
        let place = if gpu_ms < cpu_ms { Place::Gpu } else { Place::Cpu };
        Choice { place, cpu_ms, gpu_ms, gpu_from: self.gpu_from() }
    }

    /// The smallest pass, in FLOPs, from which the GPU is predicted faster up to the largest the
    /// model accepts: `Some(0)` when it is faster from the start, `None` when the CPU kernel is
    /// predicted faster on every pass up to the largest.
    pub fn gpu_from(&self) -> Option<u64> {
        let wins = |f: u64| self.gpu.predict(f) < self.cpu.predict(f);
        if wins(0) {
            return Some(0);
        }
        if !wins(self.largest_flops) {
            return None;
        }
        // The lines cross once between 0 and the largest: where the difference is zero.
        let extra = self.cpu.ms_per_gflop - self.gpu.ms_per_gflop;
        let gflop = (self.gpu.fixed_ms - self.cpu.fixed_ms) / extra;
        Some(((gflop * 1e9).ceil() as u64).min(self.largest_flops))
    }
}

/// The backend a pass runs on, and the predictions that chose it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Choice {
    /// Where it runs.
    pub place: Place,
    /// Predicted milliseconds on the CPU kernel.
    pub cpu_ms: f64,
    /// Predicted milliseconds on the GPU.
    pub gpu_ms: f64,
    /// From how many FLOPs on the GPU would be chosen ([`Crossover::gpu_from`]).
    pub gpu_from: Option<u64>,
}

impl Choice {
    /// Why, in a clause for the page: "faster here than on the GPU: about 3.1 ms against 480 ms
    /// (timed on this machine); the GPU is predicted slower for every input this model takes".
    pub fn why(&self) -> String {
        let (other, mine, theirs) = match self.place {
            Place::Cpu => ("the GPU", self.cpu_ms, self.gpu_ms),
            Place::Gpu => ("the CPU kernel", self.gpu_ms, self.cpu_ms),
        };
        let range = match self.gpu_from {
            None => "the GPU is predicted slower for every input this model takes".to_string(),
            Some(0) => "the GPU is predicted faster for every input this model takes".to_string(),
            Some(f) => format!("the GPU is predicted faster from {} on", show_gflop(f)),
        };
        format!(
            "faster here than on {other}: about {} against {} (timed on this machine); {range}",
            show_predicted(mine),
            show_predicted(theirs)
        )
    }
}

/// A predicted time, with the digits a prediction from a few timed passes supports.
fn show_predicted(ms: f64) -> String {
    match ms {
        ms if ms >= 1000.0 => format!("{:.1} s", ms / 1000.0),
        ms if ms >= 10.0 => format!("{ms:.0} ms"),
        ms => format!("{ms:.1} ms"),
    }
}

/// FLOPs for the page: "0.42 GFLOP a pass".
fn show_gflop(flops: u64) -> String {
    format!("{:.2} GFLOP a pass", flops as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 1_000_000_000;

    #[test]
    fn a_line_through_exact_samples_is_found_again() {
        let line = CostLine { fixed_ms: 2.5, ms_per_gflop: 40.0 };
        let samples: Vec<(u64, f64)> = [G / 10, G / 2, 3 * G].iter().map(|&f| (f, line.predict(f))).collect();
        let fit = CostLine::fit(&samples).unwrap();
        assert!((fit.fixed_ms - 2.5).abs() < 1e-9 && (fit.ms_per_gflop - 40.0).abs() < 1e-9, "{fit:?}");
    }

    #[test]
    fn noise_never_gives_a_negative_term() {
        // Larger passes timed faster (noise): a flat line at the mean.
        let flat = CostLine::fit(&[(G / 10, 9.0), (G, 7.0)]).unwrap();
        assert_eq!(flat, CostLine::at_least(8.0));
        // A line that would cross zero above the origin: through the origin instead.
        let origin = CostLine::fit(&[(G, 1.0), (2 * G, 10.0)]).unwrap();
        assert_eq!(origin.fixed_ms, 0.0);
        assert!((origin.ms_per_gflop - 21.0 / 5.0).abs() < 1e-12, "{origin:?}");
        // One size only: flat. Nothing, NaN or a negative time: no line.
        assert_eq!(CostLine::fit(&[(G, 4.0), (G, 6.0)]), Some(CostLine::at_least(5.0)));
        assert_eq!(CostLine::fit(&[]), None);
        assert_eq!(CostLine::fit(&[(G, f64::NAN), (2 * G, 1.0)]), None);
        assert_eq!(CostLine::fit(&[(G, -1.0)]), None);
    }

    /// A hardware GPU: dear to start, cheap per GFLOP. The CPU kernel: the other way round.
    fn hardware() -> Crossover {
        Crossover {
            cpu: CostLine { fixed_ms: 0.2, ms_per_gflop: 40.0 },
            gpu: CostLine { fixed_ms: 2.0, ms_per_gflop: 1.0 },
            largest_flops: 10 * G,
        }
    }

    #[test]
    fn small_passes_go_to_the_cpu_and_large_ones_to_the_gpu() {
        let c = hardware();
        // The lines cross where 0.2 + 40 x = 2 + x: x = 1.8 / 39 GFLOP.
        let from = c.gpu_from().unwrap();
        assert!((from as f64 / 1e9 - 1.8 / 39.0).abs() < 1e-9, "{from}");
        assert_eq!(c.choose(from - 1000).place, Place::Cpu);
        assert_eq!(c.choose(from + 1000).place, Place::Gpu);
        let big = c.choose(G);
        assert_eq!((big.place, big.cpu_ms, big.gpu_ms), (Place::Gpu, 40.2, 3.0));
        assert_eq!(
            big.why(),
            "faster here than on the CPU kernel: about 3.0 ms against 40 ms (timed on this \
             machine); the GPU is predicted faster from 0.05 GFLOP a pass on"
        );
    }

    #[test]
    fn a_software_gpu_never_wins_and_says_so() {
        let cpu = CostLine { fixed_ms: 0.5, ms_per_gflop: 40.0 };
        let largest = 8 * G;
        // The small GPU pass (500 ms) is slower than the CPU kernel's largest (320.5 ms): no
        // large probe, and the bound alone decides.
        assert!(!gpu_needs_large_probe(&cpu, 500.0, largest));
        assert!(gpu_needs_large_probe(&cpu, 300.0, largest));
        let c = Crossover { cpu, gpu: CostLine::at_least(500.0), largest_flops: largest };
        assert_eq!(c.gpu_from(), None);
        for f in [0, G / 100, G, largest] {
            assert_eq!(c.choose(f).place, Place::Cpu, "{f}");
        }
        assert_eq!(
            c.choose(G / 10).why(),
            "faster here than on the GPU: about 4.5 ms against 500 ms (timed on this machine); \
             the GPU is predicted slower for every input this model takes"
        );
    }

    #[test]
    fn a_gpu_faster_everywhere_and_ties_are_told_apart() {
        let fast = Crossover {
            cpu: CostLine { fixed_ms: 1.0, ms_per_gflop: 40.0 },
            gpu: CostLine { fixed_ms: 0.5, ms_per_gflop: 2.0 },
            largest_flops: G,
        };
        assert_eq!(fast.gpu_from(), Some(0));
        assert!(fast
            .choose(0)
            .why()
            .ends_with("the GPU is predicted faster for every input this model takes"));
        // Equal predictions: the CPU kernel, which needs no device.
        let line = CostLine { fixed_ms: 1.0, ms_per_gflop: 1.0 };
        let tie = Crossover { cpu: line, gpu: line, largest_flops: G };
        assert_eq!((tie.choose(G / 2).place, tie.gpu_from()), (Place::Cpu, None));
        // Long predictions are shown in seconds.
        let slow = Crossover { cpu: CostLine::at_least(2500.0), ..tie };
        assert!(slow.choose(0).why().contains("than on the CPU kernel: about 1.0 ms against 2.5 s"));
    }
}
