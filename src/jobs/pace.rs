//! How fast work has run where it ran (FLOPs done over the time they took), and how long more
//! work should take at that pace, in words a reader wants.

/// How fast work has run: FLOPs done over the time they took.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pace {
    flops: u64,
    ms: f64,
}

impl Pace {
    /// Adds `flops` done in `ms` (a time that is not a positive number is left out).
    pub fn record(&mut self, flops: u64, ms: f64) {
        if ms.is_finite() && ms > 0.0 {
            self.flops += flops;
            self.ms += ms;
        }
    }

    /// GFLOP/s so far, once anything was timed.
    pub fn gflops(&self) -> Option<f64> {
        (self.ms > 0.0 && self.flops > 0).then(|| self.flops as f64 / self.ms / 1e6)
    }

    /// Seconds `flops` would take at this pace.
    pub fn seconds(&self, flops: u64) -> Option<f64> {
        self.gflops().map(|g| flops as f64 / (g * 1e9))
    }

    /// How long `flops` should take at this pace, for a status line: "about 14 s at the
    /// 27 GFLOP/s measured here"; `None` before anything was timed, or under `at_least` seconds
    /// (not worth saying).
    pub fn duration(&self, flops: u64, at_least: f64) -> Option<String> {
        let (gflops, seconds) = (self.gflops()?, self.seconds(flops)?);
        (seconds >= at_least).then(|| format!("about {} {}", about(seconds), self.words(gflops)))
    }

    /// "at the 27 GFLOP/s measured here" (or "0.4 GFLOP/s" below one).
    fn words(&self, gflops: f64) -> String {
        let digits = if gflops < 1.0 { 1 } else { 0 };
        format!("at the {gflops:.digits$}\u{a0}GFLOP/s measured here")
    }

    /// "50 s to the first complete curve and 3 min to every planned point, at the 61 GFLOP/s
    /// measured here" (without the first part when `first` is `None` or 0); `None` before
    /// anything was timed.
    pub fn time_for(&self, first: Option<u64>, all: u64) -> Option<String> {
        let gflops = self.gflops()?;
        let all = about(self.seconds(all)?);
        let pace_words = self.words(gflops);
        Some(match first.filter(|&f| f > 0) {
            None => format!("{all} to every planned point, {pace_words}"),
            Some(f) => format!(
                "{} to the first complete curve and {all} to every planned point, {pace_words}",
                about(self.seconds(f)?)
            ),
        })
    }
}

/// A duration as a reader wants it: "8 s", "45 s", "2 min" (a no-break space before the unit,
/// so a line never ends between the two).
pub fn about(seconds: f64) -> String {
    match seconds {
        s if s < 20.0 => format!("{}\u{a0}s", s.round().max(1.0)),
        s if s < 90.0 => format!("{}\u{a0}s", (s / 5.0).round() * 5.0),
        s => format!("{}\u{a0}min", (s / 60.0).round()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Numbers and units are joined by no-break spaces; read here as plain ones.
    fn plain(t: Option<String>) -> Option<String> {
        t.map(|t| t.replace('\u{a0}', " "))
    }

    #[test]
    fn the_pace_is_the_flops_over_the_time_that_was_measured() {
        let mut pace = Pace::default();
        assert_eq!((pace.gflops(), pace.seconds(1)), (None, None));
        pace.record(30_000_000_000, 1000.0);
        pace.record(10_000_000_000, 0.0); // a clock that did not move says nothing
        pace.record(10_000_000_000, f64::NAN);
        pace.record(30_000_000_000, 500.0);
        assert_eq!(pace.gflops(), Some(40.0));
        assert_eq!(pace.seconds(400_000_000_000), Some(10.0));
        // A status line's estimate, said only when it is long enough to matter.
        assert_eq!(
            plain(pace.duration(560_000_000_000, 3.0)).unwrap(),
            "about 14 s at the 40 GFLOP/s measured here"
        );
        assert_eq!(pace.duration(80_000_000_000, 3.0), None, "2 s: not worth saying");
        assert_eq!(Pace::default().duration(560_000_000_000, 3.0), None, "nothing timed yet");
        // A software GPU's pace has a decimal.
        let mut slow = Pace::default();
        slow.record(400_000_000, 1000.0);
        assert_eq!(
            plain(slow.duration(8_000_000_000, 3.0)).unwrap(),
            "about 20 s at the 0.4 GFLOP/s measured here"
        );
    }

    #[test]
    fn the_time_left_reads_as_a_reader_wants_it() {
        let mut pace = Pace::default();
        pace.record(60_000_000_000, 1000.0);
        let s = |secs: f64| (secs * 60e9) as u64;
        assert_eq!(
            plain(pace.time_for(Some(s(52.4)), s(250.0))).unwrap(),
            "50 s to the first complete curve and 4 min to every planned point, at the 60 GFLOP/s measured here"
        );
        assert_eq!(
            plain(pace.time_for(Some(s(7.6)), s(12.2))).unwrap(),
            "8 s to the first complete curve and 12 s to every planned point, at the 60 GFLOP/s measured here"
        );
        assert_eq!(
            plain(pace.time_for(Some(0), s(0.2))).unwrap(),
            "1 s to every planned point, at the 60 GFLOP/s measured here"
        );
        assert_eq!(Pace::default().time_for(None, 5), None);
        assert_eq!(plain(Some(about(95.0))).unwrap(), "2 min");
    }
}
