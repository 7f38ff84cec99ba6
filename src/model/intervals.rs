//! How sure the page's quality numbers are: bootstrap intervals over the sentence pairs.
//!
//! A quality is Spearman's correlation of the pairs' cosine similarities with people's scores
//! ([`crate::model::encoder::task`]); with 230 pairs it is itself an estimate. [`Bootstrap`] resamples the pairs
//! with replacement ([`RESAMPLES`] times, the same resamples for every quality of a pair set, so
//! two qualities are compared pair by pair) and recomputes the correlation from the cosines
//! already measured: no forward pass. The 95 % interval is the 2.5th to 97.5th percentile of
//! the resampled values (the percentile bootstrap); a change between two sets of heads is the
//! difference of their qualities on each resample, and is said to be detectable only when its
//! interval leaves out zero.

use crate::attention::stats::{pearson, ranks, spearman};
use crate::attention::synthetic::hash32;

use crate::model::digits::quality_text;

/// Resamples per interval.
pub const RESAMPLES: usize = 1000;

/// The resamples' seed: every page draws the same ones, so its intervals are reproducible.
pub const SEED: u32 = 0x0b00_75ed;

/// A quality (or a change of quality) and its 95 % interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// On every pair.
    pub value: f64,
    /// The interval's lower end (2.5th percentile of the resamples).
    pub lo: f64,
    /// The interval's upper end (97.5th percentile).
    pub hi: f64,
}

impl Estimate {
    /// "0.813 (0.776 to 0.845)".
    pub fn text(&self) -> String {
        format!("{} ({} to {})", quality_text(self.value), quality_text(self.lo), quality_text(self.hi))
    }

    /// What a change of quality (after minus before) allows one to say: "no change detectable at
    /// this sample size (-0.004, 95 % interval -0.012 to 0.003)", "a loss of 0.021 (95 %
    /// interval 0.010 to 0.033)" or "a gain of ...".
    pub fn change_text(&self) -> String {
        let (v, lo, hi) = (self.value, self.lo, self.hi);
        if lo <= 0.0 && hi >= 0.0 {
            let [v, lo, hi] = [v, lo, hi].map(quality_text);
            format!("no change detectable at this sample size ({v}, 95 % interval {lo} to {hi})")
        } else if hi < 0.0 {
            let [v, lo, hi] = [-v, -hi, -lo].map(quality_text);
            format!("a loss of {v} (95 % interval {lo} to {hi})")
        } else {
            let [v, lo, hi] = [v, lo, hi].map(quality_text);
            format!("a gain of {v} (95 % interval {lo} to {hi})")
        }
    }

    /// Whether the interval leaves out zero (a change said to be detectable).
    pub fn excludes_zero(&self) -> bool {
        self.lo > 0.0 || self.hi < 0.0
    }
}

/// How sure one point of the pruning curves is: its quality's interval, and the change from the
/// full model's quality, paired over the same resamples (`None` for the full model itself, or
/// before its cosines are known).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// The quality and its interval.
    pub quality: Estimate,
    /// Quality here minus the full model's, and its interval.
    pub change: Option<Estimate>,
}

/// The resamples of one pair set with its people's scores, ranked once per resample.
pub struct Bootstrap {
    /// Each resample's pairs (indices into the set), with replacement.
    resamples: Vec<Vec<u32>>,
    /// The scores' ranks in each resample.
    score_ranks: Vec<Vec<f64>>,
    /// The scores, in the set's order.
    scores: Vec<f64>,
}

/// `count` resamples with replacement of `n` items (their indices), drawn from `seed`.
fn resamples(n: usize, count: usize, seed: u32) -> Vec<Vec<u32>> {
    (0..count as u32)
        .map(|r| {
            let stream = hash32(seed ^ hash32(r.wrapping_mul(0x9e37_79b9)));
            (0..n as u32).map(|i| (hash32(stream ^ hash32(i)) as usize % n.max(1)) as u32).collect()
        })
        .collect()
}

/// A statistic of `n` items (a text set's passages) with its 95 % percentile-bootstrap interval:
/// `statistic` of every item's index, then of the page's resamples ([`RESAMPLES`] from [`SEED`]).
/// `None` when it is undefined on every item. (`statistic` is a trait object: one copy of this
/// in the page's wasm for every statistic.)
pub fn resampled(
    n: usize,
    statistic: &dyn Fn(&mut dyn Iterator<Item = usize>) -> Option<f64>,
) -> Option<Estimate> {
    let value = statistic(&mut (0..n))?;
    let each = resamples(n, RESAMPLES, SEED);
    Some(interval(value, each.iter().map(|r| statistic(&mut r.iter().map(|&i| i as usize)))))
}

impl Bootstrap {
    /// `count` resamples of the pairs whose scores are `scores`, drawn from `seed`.
    pub fn new(scores: &[f64], count: usize, seed: u32) -> Bootstrap {
        let resamples = resamples(scores.len(), count, seed);
        let score_ranks = resamples.iter().map(|r| ranks(&gather(scores, r))).collect();
        Bootstrap { resamples, score_ranks, scores: scores.to_vec() }
    }

    /// The page's resamples ([`RESAMPLES`] from [`SEED`]) of pairs scored `scores`.
    pub fn of_pairs(scores: &[f64]) -> Bootstrap {
        Bootstrap::new(scores, RESAMPLES, SEED)
    }

    /// How many pairs the set has.
    pub fn pairs(&self) -> usize {
        self.scores.len()
    }

    /// The quality of the pair cosines `cosines` and its interval; `None` when they are not one
    /// per pair or the quality is undefined (every cosine equal).
    pub fn quality(&self, cosines: &[f64]) -> Option<Estimate> {
        Some(self.spread(cosines, None)?.quality)
    }

    /// The change of quality from `before`'s cosines to `after`'s (after minus before), the two
    /// resampled pair by pair, and its interval.
    pub fn change(&self, before: &[f64], after: &[f64]) -> Option<Estimate> {
        self.spread(after, Some(before))?.change
    }

    /// The [`Spread`] of a point whose pair cosines are `cosines`, against the full model's
    /// (`full`, if known).
    pub fn spread(&self, cosines: &[f64], full: Option<&[f64]>) -> Option<Spread> {
        let value = self.value(cosines)?;
        // Each resample's quality once, for the interval and the change alike.
        let mine: Vec<Option<f64>> = self.each(cosines).collect();
        let change = full.and_then(|f| {
            let diffs = mine.iter().zip(self.each(f)).map(|(a, b)| Some((*a)? - b?));
            Some(interval(value - self.value(f)?, diffs))
        });
        Some(Spread { quality: interval(value, mine.into_iter()), change })
    }

    fn value(&self, cosines: &[f64]) -> Option<f64> {
        (cosines.len() == self.scores.len()).then_some(())?;
        spearman(cosines, &self.scores)
    }

    /// The quality on each resample (`None` where a resample's cosines are all equal).
    fn each<'a>(&'a self, cosines: &'a [f64]) -> impl Iterator<Item = Option<f64>> + 'a {
        self.resamples.iter().zip(&self.score_ranks).map(move |(r, s)| {
            let c: Vec<f64> = r.iter().map(|&i| cosines[i as usize]).collect();
            pearson(&ranks(&c), s)
        })
    }
}

fn gather(values: &[f64], at: &[u32]) -> Vec<f64> {
    at.iter().map(|&i| values[i as usize]).collect()
}

/// `value` with the 2.5th and 97.5th percentiles (linear between order statistics, as numpy's
/// default) of the resampled values that are defined.
fn interval(value: f64, resampled: impl Iterator<Item = Option<f64>>) -> Estimate {
    let mut v: Vec<f64> = resampled.flatten().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let at = |p: f64| {
        if v.is_empty() {
            return value;
        }
        let x = p * (v.len() - 1) as f64;
        let (i, f) = (x.floor() as usize, x - x.floor());
        v[i] + f * (v[(i + 1).min(v.len() - 1)] - v[i])
    };
    Estimate { value, lo: at(0.025), hi: at(0.975) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A standard normal from two counter-based uniforms (Box-Muller).
    fn normal(seed: u32, i: u32) -> f64 {
        let u = |k: u32| (hash32(hash32(seed ^ k) ^ i) as f64 + 0.5) / 4294967296.0;
        (-2.0 * u(1).ln()).sqrt() * (std::f64::consts::TAU * u(2)).cos()
    }

    /// `n` pairs from a bivariate normal of correlation `rho`: (cosine-like, score-like).
    fn sample(n: usize, rho: f64, seed: u32) -> (Vec<f64>, Vec<f64>) {
        (0..n as u32)
            .map(|i| {
                let (x, e) = (normal(seed, 2 * i), normal(seed ^ 0xabcd, 2 * i + 1));
                (x, rho * x + (1.0 - rho * rho).sqrt() * e)
            })
            .unzip()
    }

    #[test]
    fn the_interval_covers_the_true_rank_correlation_at_about_the_stated_rate() {
        // A bivariate normal's Spearman correlation is (6 / pi) asin(rho / 2).
        let (rho, n, runs) = (0.6, 230, 120u32);
        let truth = 6.0 / std::f64::consts::PI * (rho / 2.0f64).asin();
        let mut covered = 0;
        for run in 0..runs {
            let (cos, scores) = sample(n, rho, 1000 + run);
            let e = Bootstrap::new(&scores, RESAMPLES, run).quality(&cos).unwrap();
            assert!(e.lo <= e.value && e.value <= e.hi, "{e:?}");
            covered += usize::from(e.lo <= truth && truth <= e.hi);
        }
        // 95 % of 120: 114, with a binomial standard deviation of 2.4; the percentile bootstrap
        // of a correlation runs a little short of its rate.
        let rate = covered as f64 / runs as f64;
        assert!((0.88..=0.99).contains(&rate), "covered {covered} of {runs}");
    }

    #[test]
    fn the_width_shrinks_with_more_pairs() {
        let width = |n: usize| {
            let (cos, scores) = sample(n, 0.6, 7);
            let e = Bootstrap::new(&scores, RESAMPLES, 1).quality(&cos).unwrap();
            e.hi - e.lo
        };
        let (small, large) = (width(60), width(960));
        // About 1 / sqrt(n): a quarter of the width at 16 times the pairs.
        assert!(large < 0.4 * small && large > 0.15 * small, "{small} {large}");
    }

    #[test]
    fn a_change_is_paired_and_zero_for_the_same_cosines() {
        let (cos, scores) = sample(230, 0.6, 3);
        let b = Bootstrap::of_pairs(&scores);
        let same = b.change(&cos, &cos).unwrap();
        assert_eq!((same.value, same.lo, same.hi), (0.0, 0.0, 0.0));
        assert!(!same.excludes_zero());
        assert!(same.change_text().starts_with("no change detectable at this sample size (0.000"));
        // Noise that makes the cosines worse at ranking: a loss, detected.
        let worse: Vec<f64> = cos.iter().enumerate().map(|(i, &c)| c + 1.5 * normal(99, i as u32)).collect();
        let loss = b.change(&cos, &worse).unwrap();
        assert!(loss.value < 0.0 && loss.hi < 0.0, "{loss:?}");
        assert!(loss.change_text().starts_with("a loss of "), "{}", loss.change_text());
        // Paired: the change's interval is narrower than the two qualities' intervals side by side.
        let (q1, q2) = (b.quality(&cos).unwrap(), b.quality(&worse).unwrap());
        assert!(loss.hi - loss.lo < (q1.hi - q1.lo) + (q2.hi - q2.lo));
        // A tiny change is not called one.
        let nudged: Vec<f64> = cos.iter().enumerate().map(|(i, &c)| c + 0.01 * normal(5, i as u32)).collect();
        assert!(!b.change(&cos, &nudged).unwrap().excludes_zero());
    }

    #[test]
    fn a_points_spread_is_its_quality_and_its_change() {
        let (cos, scores) = sample(230, 0.6, 21);
        let b = Bootstrap::of_pairs(&scores);
        let other: Vec<f64> = cos.iter().enumerate().map(|(i, &c)| c + 0.3 * normal(8, i as u32)).collect();
        let s = b.spread(&other, Some(&cos)).unwrap();
        assert_eq!((s.quality, s.change), (b.quality(&other).unwrap(), b.change(&cos, &other)));
        assert_eq!(b.spread(&cos, None).unwrap().change, None);
    }

    #[test]
    fn texts_say_what_the_interval_allows() {
        let e = |value, lo, hi| Estimate { value, lo, hi };
        assert_eq!(e(0.8134, 0.776, 0.8451).text(), "0.813 (0.776 to 0.845)");
        assert_eq!(e(-0.021, -0.033, -0.01).change_text(), "a loss of 0.021 (95 % interval 0.010 to 0.033)");
        assert_eq!(e(0.007, 0.001, 0.013).change_text(), "a gain of 0.007 (95 % interval 0.001 to 0.013)");
        assert_eq!(
            e(0.007, -0.004, 0.018).change_text(),
            "no change detectable at this sample size (0.007, 95 % interval -0.004 to 0.018)"
        );
    }

    #[test]
    fn cosines_of_another_set_or_all_equal_give_no_estimate() {
        let (cos, scores) = sample(50, 0.5, 11);
        let b = Bootstrap::new(&scores, 100, 2);
        assert_eq!(b.pairs(), 50);
        assert!(b.quality(&cos[..49]).is_none());
        assert!(b.quality(&[0.5; 50]).is_none());
        assert!(b.change(&cos, &[0.5; 50]).is_none());
    }
}
