//! Task quality against heads pruned, in three orders, as Michel et al. (2019) draw it:
//!
//! - **iterative**: prune the 6 least important heads, measure importance again on the pruned
//!   model, repeat (as `run_bertology.py` does, 10 % a step); importance is the head-gate
//!   gradient ([`super::gradient`]) on a fixed subset of 16 pairs (32 sentences);
//! - **one-shot**: the page's single-head-ablation order for the reader's sentence, computed
//!   once ([`super::analysis::ImportanceSweep`]);
//! - **random**: [`RANDOM_SEEDS`] random orders, drawn as their mean and a min/max band.
//!
//! Quality at each point is measured on every pair ([`super::task::Pairs::quality`]) with the
//! model really pruned ([`super::pruned::PrunedBert`]). [`CurveRun::next_job`] hands out one job at
//! a time, coarsest first (both ends, every quarter and the 20 % and 40 % marks, every 12 heads,
//! every 6, then every head around the knee), in pieces ([`Work`]) the page runs on its workers
//! or between its own turns; the caller draws between jobs and can drop the run at any time.
//! What is known already (from a cache) is never computed again.

use std::collections::{BTreeMap, VecDeque};

use serde_json::{json, Value};

use super::bert::{Bert, HEADS, LAYERS, TOTAL_HEADS};
use super::pruned::cost;
use super::task::Pairs;
use super::work::{Done, Pair, Work, GRADIENT_COST};
use crate::attention::importance::{least_important_first, random_order};
use crate::attention::HeadSet;
use crate::cpu::Kernel;

/// Random orders averaged (and drawn as a band).
pub const RANDOM_SEEDS: u32 = 5;

/// Heads pruned between importance measurements in the iterative order (10 % of 72, rounded).
pub const ITERATIVE_STEP: usize = 6;

/// Pairs of the fixed subset the iterative order's importance is measured on.
pub const SUBSET_PAIRS: usize = 16;

/// Sentences embedded per step of an evaluation.
pub const SENTENCES_PER_STEP: usize = 48;

/// Pairs whose gradients are taken per step of an importance measurement.
pub const PAIRS_PER_STEP: usize = 4;

/// Michel et al.'s marks: 20 % of heads (their WMT result) and 40 % (BERT on MNLI).
pub fn michel_marks() -> [usize; 2] {
    [(TOTAL_HEADS as f64 * 0.2).round() as usize, (TOTAL_HEADS as f64 * 0.4).round() as usize]
}

/// The fixed subset of [`SUBSET_PAIRS`] pairs, spread evenly over the set, that head-gate
/// gradients are measured on, with each sentence's token ids (`ids`, one per sentence).
pub fn subset(pairs: &Pairs, ids: &[Vec<u32>]) -> Vec<Pair> {
    (0..SUBSET_PAIRS)
        .map(|i| pairs.pairs[i * pairs.pairs.len() / SUBSET_PAIRS])
        .map(|p| (ids[p.a].clone(), ids[p.b].clone(), p.score))
        .collect()
}

/// The pieces that measure every head's task importance on `subset` with only `heads` kept,
/// [`PAIRS_PER_STEP`] pairs each.
pub fn gradient_pieces(subset: &[Pair], heads: &HeadSet) -> Vec<Work> {
    subset
        .chunks(PAIRS_PER_STEP)
        .map(|c| Work::Gradients { heads: heads.clone(), pairs: c.to_vec() })
        .collect()
}

/// The importance from [`gradient_pieces`]' results (`HeadSums`) over `pairs` pairs: the mean
/// of `|dL/d gate|` (0 for pruned heads), as [`super::gradient::head_importance`] gives it.
pub fn importance_from_sums(done: &[Done], pairs: usize, heads: &HeadSet) -> Vec<f64> {
    let mut importance = vec![0.0; TOTAL_HEADS];
    for d in done {
        if let Done::HeadSums(sums) = d {
            importance.iter_mut().zip(sums).for_each(|(i, s)| *i += s / pairs as f64);
        }
    }
    importance.iter_mut().enumerate().filter(|(h, _)| heads.is_pruned(*h)).for_each(|(_, i)| *i = 0.0);
    importance
}

/// Which order a point belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Order {
    /// Least important first, importance measured again every [`ITERATIVE_STEP`] heads.
    Iterative,
    /// The reader's sentence's single-head-ablation order.
    OneShot,
    /// A random order, by seed index.
    Random(u32),
}

/// Every quality measured so far: `k` heads pruned -> Spearman correlation, per order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Curves {
    /// Per order, quality by heads pruned. 0 and [`TOTAL_HEADS`] pruned are shared by all.
    pub points: BTreeMap<Order, BTreeMap<usize, f64>>,
    /// Quality with each layer's most important head kept (by the full model's importance):
    /// `TOTAL_HEADS - LAYERS` pruned.
    pub one_per_layer: Option<f64>,
    /// The iterative order as far as it is known (least important first).
    pub iterative_order: Vec<usize>,
}

impl Curves {
    /// The quality of `order` at `k` pruned, if measured (the ends count for every order).
    pub fn at(&self, order: Order, k: usize) -> Option<f64> {
        let shared = |k| self.points.values().find_map(|p| p.get(&k).copied());
        match k {
            0 | TOTAL_HEADS => shared(k),
            _ => self.points.get(&order)?.get(&k).copied(),
        }
    }

    fn record(&mut self, order: Order, k: usize, quality: f64) {
        self.points.entry(order).or_default().insert(k, quality);
    }

    /// The curve of one order: `(k, quality)` for every measured `k`, ends included.
    pub fn curve(&self, order: Order) -> Vec<(usize, f64)> {
        let mut ks: Vec<usize> =
            self.points.get(&order).map(|p| p.keys().copied().collect()).unwrap_or_default();
        ks.extend([0, TOTAL_HEADS]);
        ks.sort_unstable();
        ks.dedup();
        ks.into_iter().filter_map(|k| Some((k, self.at(order, k)?))).collect()
    }

    /// The random orders at every `k` all of them have: `(k, mean, min, max)`.
    pub fn random_band(&self) -> Vec<(usize, f64, f64, f64)> {
        let ks = self.curve(Order::Random(0)).into_iter().map(|(k, _)| k);
        ks.filter_map(|k| {
            let q: Vec<f64> =
                (0..RANDOM_SEEDS).map(|s| self.at(Order::Random(s), k)).collect::<Option<_>>()?;
            let mean = q.iter().sum::<f64>() / q.len() as f64;
            Some((
                k,
                mean,
                q.iter().copied().fold(f64::INFINITY, f64::min),
                q.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ))
        })
        .collect()
    }

    /// These curves without `order`'s points (what stays valid when that order changes).
    pub fn without(&self, order: Order) -> Curves {
        let mut c = self.clone();
        c.points.remove(&order);
        c
    }

    /// Only `order`'s points.
    pub fn only(&self, order: Order) -> Curves {
        let points = self.points.get(&order).map(|p| [(order, p.clone())].into()).unwrap_or_default();
        Curves { points, ..Curves::default() }
    }

    /// These curves with `other`'s points and findings added (`other` wins where both have one).
    pub fn merged(mut self, other: &Curves) -> Curves {
        for (order, points) in &other.points {
            self.points.entry(*order).or_default().extend(points);
        }
        self.one_per_layer = other.one_per_layer.or(self.one_per_layer);
        if other.iterative_order.len() > self.iterative_order.len() {
            self.iterative_order = other.iterative_order.clone();
        }
        self
    }

    /// As JSON, for the page's cache.
    pub fn to_json(&self) -> String {
        let name = |o: &Order| match o {
            Order::Iterative => "iterative".to_string(),
            Order::OneShot => "one-shot".to_string(),
            Order::Random(s) => format!("random-{s}"),
        };
        let points: serde_json::Map<String, Value> = self
            .points
            .iter()
            .map(|(o, p)| (name(o), Value::Array(p.iter().map(|(k, q)| json!([k, q])).collect())))
            .collect();
        json!({ "version": 1, "points": points, "one_per_layer": self.one_per_layer, "iterative_order": self.iterative_order })
            .to_string()
    }

    /// From [`Curves::to_json`]'s text; `None` for anything else (a stale or foreign cache).
    pub fn from_json(text: &str) -> Option<Curves> {
        let v: Value = serde_json::from_str(text).ok()?;
        (v.get("version")?.as_u64()? == 1).then_some(())?;
        let order: Vec<usize> = v
            .get("iterative_order")?
            .as_array()?
            .iter()
            .map(|h| h.as_u64().map(|h| h as usize))
            .collect::<Option<_>>()?;
        (order.iter().all(|&h| h < TOTAL_HEADS) && order.len() <= TOTAL_HEADS).then_some(())?;
        let mut curves = Curves {
            one_per_layer: v.get("one_per_layer")?.as_f64(),
            iterative_order: order,
            ..Curves::default()
        };
        for (name, pts) in v.get("points")?.as_object()? {
            let order = match name.as_str() {
                "iterative" => Order::Iterative,
                "one-shot" => Order::OneShot,
                r => Order::Random(r.strip_prefix("random-")?.parse().ok().filter(|s| *s < RANDOM_SEEDS)?),
            };
            for p in pts.as_array()? {
                let (k, q) = (p.get(0)?.as_u64()? as usize, p.get(1)?.as_f64()?);
                (k <= TOTAL_HEADS && q.is_finite()).then_some(())?;
                curves.record(order, k, q);
            }
        }
        Some(curves)
    }
}

/// One piece of the work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Job {
    /// Measure the pruned model's importance and extend the iterative order by a step.
    Importance,
    /// Measure the full model's importance (for the one-head-per-layer point), when the
    /// iterative order came from a cache and its first measurement is not at hand.
    FullImportance,
    /// Measure quality with the first `k` heads of `order` pruned.
    Evaluate(Order, usize),
    /// Measure quality with one head per layer kept.
    OnePerLayer,
}

impl Job {
    /// Whether the first complete curve needs this job's point.
    fn in_first_curve(self) -> bool {
        match self {
            Job::Evaluate(_, k) => first_curve_ks().contains(&k),
            Job::OnePerLayer => true,
            Job::Importance | Job::FullImportance => false,
        }
    }
}

/// Heads pruned at the first complete curve's points: 0, 25, 50, 75 and 100 % and Michel et
/// al.'s marks.
fn first_curve_ks() -> Vec<usize> {
    (0..=TOTAL_HEADS).step_by(TOTAL_HEADS / 4).chain(michel_marks()).collect()
}

/// Floating-point operations a run has left ([`CurveRun::work_left`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkLeft {
    /// What the first complete curve still needs.
    pub first_curve: u64,
    /// Everything planned so far (the knee's points are planned once the iterative curve is
    /// known every 6 heads).
    pub all: u64,
}

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
        (seconds >= at_least)
            .then(|| format!("about {} at the {gflops:.0}\u{a0}GFLOP/s measured here", about(seconds)))
    }
}

/// Where a run of the curves stands ([`CurveRun::standing`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    /// Evaluations done.
    pub done: usize,
    /// Evaluations planned, done included.
    pub total: usize,
    /// The work left.
    pub left: WorkLeft,
    /// Whether the first complete curve is there.
    pub first_curve_done: bool,
}

impl Progress {
    /// How long the rest should take at `pace` (the workers' own, [`Work::flops`] over time),
    /// e.g. "About 50 s to the first complete curve and 3 min to every planned point, at the
    /// 61 GFLOP/s measured here." `None` before anything was timed.
    pub fn time_left(&self, pace: &Pace) -> Option<String> {
        let first = (!self.first_curve_done).then_some(self.left.first_curve);
        Some(format!("About {}.", time_for(first, self.left.all, pace)?))
    }
}

impl WorkLeft {
    /// How long this work would take at `pace`, e.g. "about 1.4 TFLOP: 25 s to the first
    /// complete curve and 4 min to every planned point, at the 58 GFLOP/s measured here";
    /// `None` before anything was timed, and when nothing is left.
    pub fn estimate(&self, pace: &Pace) -> Option<String> {
        (self.all > 0).then_some(())?;
        let first = (self.first_curve > 0).then_some(self.first_curve);
        Some(format!("about {:.1}\u{a0}TFLOP: {}", self.all as f64 / 1e12, time_for(first, self.all, pace)?))
    }
}

/// "50 s to the first complete curve and 3 min to every planned point, at the 61 GFLOP/s
/// measured here" (without the first part when `first` is `None` or 0).
fn time_for(first: Option<u64>, all: u64, pace: &Pace) -> Option<String> {
    let gflops = pace.gflops()?;
    let all = about(pace.seconds(all)?);
    let pace_words = format!("at the {gflops:.0}\u{a0}GFLOP/s measured here");
    Some(match first.filter(|&f| f > 0) {
        None => format!("{all} to every planned point, {pace_words}"),
        Some(f) => format!(
            "{} to the first complete curve and {all} to every planned point, {pace_words}",
            about(pace.seconds(f)?)
        ),
    })
}

/// A duration as a reader wants it: "8 s", "45 s", "2 min" (a no-break space before the unit,
/// so a line never ends between the two).
fn about(seconds: f64) -> String {
    match seconds {
        s if s < 20.0 => format!("{}\u{a0}s", s.round().max(1.0)),
        s if s < 90.0 => format!("{}\u{a0}s", (s / 5.0).round() * 5.0),
        s => format!("{}\u{a0}min", (s / 60.0).round()),
    }
}

/// The curves being computed; see the module's documentation.
pub struct CurveRun<'m> {
    bert: &'m Bert,
    pairs: &'m Pairs,
    ids: Vec<Vec<u32>>,
    subset: Vec<(Vec<u32>, Vec<u32>, f64)>,
    one_shot: Option<Vec<usize>>,
    random: Vec<Vec<usize>>,
    iterative: Vec<usize>,
    /// The full model's importance on the subset (the iterative order's first measurement).
    first_importance: Option<Vec<f64>>,
    curves: Curves,
    jobs: VecDeque<Job>,
    /// The job whose pieces are out, and the heads it runs with.
    pending: Option<(Job, HeadSet)>,
    done: usize,
    total: usize,
    /// Tokens of each sentence, and of each sentence of the subset (for FLOP counts).
    lengths: Vec<usize>,
    subset_lengths: Vec<usize>,
}

impl<'m> CurveRun<'m> {
    /// The curves of `pairs` (every sentence's token ids in `ids`) for `bert`, with `one_shot`
    /// the one-shot order (least important first, all [`TOTAL_HEADS`]) when it is known (the
    /// other orders are computed meanwhile), starting from `known`.
    pub fn new(
        bert: &'m Bert,
        pairs: &'m Pairs,
        ids: Vec<Vec<u32>>,
        one_shot: Option<Vec<usize>>,
        known: Curves,
    ) -> Self {
        assert!(one_shot.as_ref().is_none_or(|o| o.len() == TOTAL_HEADS), "an order of every head");
        let subset = subset(pairs, &ids);
        let lengths = ids.iter().map(Vec::len).collect();
        let subset_lengths = subset.iter().flat_map(|(a, b, _)| [a.len(), b.len()]).collect();
        let random = (0..RANDOM_SEEDS).map(|s| random_order(TOTAL_HEADS, 0x5eed + s)).collect();
        // The iterative order is the same whatever else changed: continue it, do not remeasure.
        let iterative = known.iterative_order.clone();
        let mut run = CurveRun {
            bert,
            pairs,
            ids,
            subset,
            one_shot,
            random,
            iterative,
            first_importance: None,
            curves: known,
            jobs: VecDeque::new(),
            pending: None,
            done: 0,
            total: 0,
            lengths,
            subset_lengths,
        };
        run.plan();
        run
    }

    /// Every job, coarsest first, without those whose result is known.
    fn plan(&mut self) {
        let [m20, m40] = michel_marks();
        // Quarters and Michel et al.'s marks first (the first complete curve), then every 12,
        // then every 6; the knee is planned once the iterative curve is known at every 6.
        let levels: [Vec<usize>; 3] = [vec![m20, m40, 36, 18, 54], vec![12, 24, 48, 60], vec![6, 30, 42, 66]];
        let mut jobs = vec![Job::Evaluate(Order::Iterative, 0), Job::Evaluate(Order::Iterative, TOTAL_HEADS)];
        for (level, ks) in levels.iter().enumerate() {
            for &k in ks {
                jobs.push(Job::Evaluate(Order::Iterative, k));
                if self.one_shot.is_some() {
                    jobs.push(Job::Evaluate(Order::OneShot, k));
                }
                jobs.extend((0..RANDOM_SEEDS).map(|s| Job::Evaluate(Order::Random(s), k)));
            }
            if level == 0 {
                jobs.push(Job::OnePerLayer);
            }
        }
        jobs.retain(|j| !self.known(*j));
        self.total = jobs.len();
        self.jobs = jobs.into();
    }

    fn known(&self, job: Job) -> bool {
        match job {
            Job::Evaluate(order, k) => self.curves.at(order, k).is_some(),
            Job::OnePerLayer => self.curves.one_per_layer.is_some(),
            Job::Importance | Job::FullImportance => false,
        }
    }

    /// What is known so far.
    pub fn curves(&self) -> &Curves {
        &self.curves
    }

    /// Evaluations done and planned, for a progress bar.
    pub fn progress(&self) -> (usize, usize) {
        (self.done, self.total.max(self.done))
    }

    /// Where the run stands: evaluations done and planned, and the work left.
    pub fn standing(&self) -> Progress {
        let (done, total) = self.progress();
        Progress { done, total, left: self.work_left(), first_curve_done: self.coarse_complete() }
    }

    /// FLOPs of one evaluation (every sentence) with `pruned` heads removed. Every head costs
    /// the same in every layer (same width, same tokens), so which heads does not matter.
    fn evaluation_flops(&self, pruned: usize) -> u64 {
        cost(&HeadSet::with_pruned(TOTAL_HEADS, 0..pruned), &self.lengths).total_flops
    }

    /// FLOPs of one importance measurement (gradients on the subset) with `pruned` heads removed.
    fn importance_flops(&self, pruned: usize) -> u64 {
        GRADIENT_COST * cost(&HeadSet::with_pruned(TOTAL_HEADS, 0..pruned), &self.subset_lengths).total_flops
    }

    /// FLOPs still to do: for the first complete curve, and for every job planned (the one out
    /// included), with the importance measurements the iterative order needs to get that far.
    pub fn work_left(&self) -> WorkLeft {
        let jobs: Vec<Job> = self.pending.iter().map(|(j, _)| *j).chain(self.jobs.iter().copied()).collect();
        let first: Vec<Job> = jobs.iter().copied().filter(|j| j.in_first_curve()).collect();
        WorkLeft { first_curve: self.flops_of(&first), all: self.flops_of(&jobs) }
    }

    fn flops_of(&self, jobs: &[Job]) -> u64 {
        let evaluations: u64 = jobs
            .iter()
            .map(|j| match j {
                Job::Evaluate(_, k) => self.evaluation_flops(*k),
                Job::OnePerLayer => self.evaluation_flops(TOTAL_HEADS - LAYERS),
                Job::Importance | Job::FullImportance => 0,
            })
            .sum();
        // The iterative order is known as far as `iterative`; each measurement extends it by a step.
        let reach = jobs
            .iter()
            .filter_map(|j| match j {
                Job::Evaluate(Order::Iterative, k) if *k < TOTAL_HEADS => Some(*k),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let steps = (self.iterative.len()..reach).step_by(ITERATIVE_STEP);
        let iterative: u64 = steps.map(|pruned| self.importance_flops(pruned)).sum();
        // One head per layer needs the full model's importance: the iterative order's first
        // measurement gives it, unless that came from a cache.
        let full = jobs.contains(&Job::OnePerLayer)
            && self.first_importance.is_none()
            && !(self.iterative.is_empty() && reach > 0);
        evaluations + iterative + if full { self.importance_flops(0) } else { 0 }
    }

    /// Whether the first complete curve is there: every order at 0, 25, 50, 75 and 100 % of
    /// the heads pruned and at Michel et al.'s marks, and the one-head-per-layer point.
    pub fn coarse_complete(&self) -> bool {
        let ks = first_curve_ks();
        let orders =
            [Order::Iterative, Order::OneShot].into_iter().chain((0..RANDOM_SEEDS).map(Order::Random));
        let mut orders = orders.filter(|o| *o != Order::OneShot || self.one_shot.is_some());
        self.curves.one_per_layer.is_some()
            && orders.all(|o| ks.iter().all(|&k| self.curves.at(o, k).is_some()))
    }

    /// The heads of `order` with its first `k` pruned, once that order is known that far.
    fn heads(&self, order: Order, k: usize) -> Option<HeadSet> {
        let list = match order {
            Order::Iterative => &self.iterative,
            Order::OneShot => self.one_shot.as_ref()?,
            Order::Random(s) => &self.random[s as usize],
        };
        (k == 0 || k == TOTAL_HEADS || list.len() >= k).then(|| {
            HeadSet::with_pruned(
                TOTAL_HEADS,
                if k == TOTAL_HEADS { (0..TOTAL_HEADS).collect() } else { list[..k].to_vec() },
            )
        })
    }

    /// Each layer's most important head kept, by the full model's importance.
    fn one_per_layer(&self) -> Option<HeadSet> {
        let imp = self.first_importance.as_ref()?;
        let keep = (0..LAYERS).map(|l| {
            (0..HEADS).map(|h| l * HEADS + h).max_by(|&a, &b| imp[a].total_cmp(&imp[b])).unwrap_or(l * HEADS)
        });
        let mut heads = HeadSet::with_pruned(TOTAL_HEADS, 0..TOTAL_HEADS);
        keep.for_each(|h| heads.set(h, true));
        Some(heads)
    }

    /// Does the next job here, on `kernel`; `false` once there is none left.
    pub fn step(&mut self, kernel: Kernel) -> bool {
        let Some(pieces) = self.next_job() else { return false };
        let done = pieces.iter().map(|w| w.run(self.bert, kernel)).collect();
        self.complete(done);
        true
    }

    /// The next job, in pieces that can run anywhere and in any order ([`Work`]): an
    /// evaluation as [`SENTENCES_PER_STEP`] sentences a piece, an importance measurement as
    /// [`PAIRS_PER_STEP`] pairs a piece. Hand their results, in the pieces' order, to
    /// [`CurveRun::complete`] before asking for more. `None` once every job is done.
    pub fn next_job(&mut self) -> Option<Vec<Work>> {
        assert!(self.pending.is_none(), "the last job's results are not in yet");
        loop {
            let job = self.jobs.pop_front()?;
            let heads = match job {
                Job::Importance => Some(HeadSet::with_pruned(TOTAL_HEADS, self.iterative.iter().copied())),
                Job::FullImportance => Some(HeadSet::all(TOTAL_HEADS)),
                Job::Evaluate(order, k) => self.heads(order, k),
                Job::OnePerLayer => self.one_per_layer(),
            };
            let Some(heads) = heads else {
                // The order is not known that far yet (or, for one head per layer, the full
                // model's importance): measure it first.
                self.jobs.push_front(job);
                self.jobs.push_front(if job == Job::OnePerLayer {
                    Job::FullImportance
                } else {
                    Job::Importance
                });
                continue;
            };
            let pieces = match job {
                Job::Importance | Job::FullImportance => gradient_pieces(&self.subset, &heads),
                _ => self
                    .ids
                    .chunks(SENTENCES_PER_STEP)
                    .map(|ids| Work::Embed { heads: heads.clone(), ids: ids.to_vec() })
                    .collect(),
            };
            self.pending = Some((job, heads));
            return Some(pieces);
        }
    }

    /// Takes the results of the pieces [`CurveRun::next_job`] gave, in their order.
    pub fn complete(&mut self, done: Vec<Done>) {
        let Some((job, heads)) = self.pending.take() else { return };
        match job {
            Job::Importance | Job::FullImportance => {
                let mut sum = vec![0.0; TOTAL_HEADS];
                for d in &done {
                    if let Done::HeadSums(s) = d {
                        sum.iter_mut().zip(s).for_each(|(a, b)| *a += b);
                    }
                }
                self.measured(job, &heads, sum);
            }
            _ => {
                let embeddings = Done::embeddings(done);
                assert_eq!(embeddings.len(), self.ids.len(), "one embedding per sentence");
                self.finish(job, &embeddings);
            }
        }
    }

    /// The importance of the heads left after `pruned` (the mean |gradient| over the subset,
    /// from `sum`): the full model's is kept; for the iterative order, its 6 least important
    /// remaining heads join it.
    fn measured(&mut self, job: Job, pruned: &HeadSet, sum: Vec<f64>) {
        let importance: Vec<f64> = sum.iter().map(|s| s / self.subset.len() as f64).collect();
        if !pruned.any_pruned() {
            self.first_importance = Some(importance.clone());
        }
        if job == Job::FullImportance {
            return;
        }
        let next: Vec<usize> = least_important_first(&importance)
            .into_iter()
            .filter(|&h| pruned.is_active(h))
            .take(ITERATIVE_STEP)
            .collect();
        self.iterative.extend(next);
        self.curves.iterative_order = self.iterative.clone();
    }

    fn finish(&mut self, job: Job, embeddings: &[Vec<f32>]) {
        let quality = self.pairs.quality(embeddings);
        match job {
            Job::Evaluate(order, k) => self.curves.record(order, k, quality),
            Job::OnePerLayer => self.curves.one_per_layer = Some(quality),
            Job::Importance | Job::FullImportance => {}
        }
        self.done += 1;
        if self.jobs.is_empty() && !self.knee_planned() {
            self.plan_knee();
        }
    }

    fn knee_planned(&self) -> bool {
        self.curves
            .points
            .get(&Order::Iterative)
            .is_some_and(|p| p.keys().any(|k| k % 6 != 0 && !michel_marks().contains(k)))
    }

    /// Every head inside the knee of the iterative curve (the 6 heads over which its quality
    /// falls fastest), for the iterative and one-shot orders.
    fn plan_knee(&mut self) {
        let curve = self.curves.curve(Order::Iterative);
        let steps: Vec<(usize, f64)> = curve.iter().filter(|(k, _)| k % 6 == 0).copied().collect();
        let Some(knee) =
            steps.windows(2).max_by(|a, b| (a[0].1 - a[1].1).total_cmp(&(b[0].1 - b[1].1))).map(|w| w[0].0)
        else {
            return;
        };
        let ks = knee + 1..knee + 6;
        let orders = if self.one_shot.is_some() {
            vec![Order::Iterative, Order::OneShot]
        } else {
            vec![Order::Iterative]
        };
        let jobs: Vec<Job> = ks
            .flat_map(|k| orders.iter().map(move |&o| Job::Evaluate(o, k)))
            .filter(|j| !self.known(*j))
            .collect();
        self.total += jobs.len();
        self.jobs.extend(jobs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let plain = |t: Option<String>| t.map(|t| t.replace('\u{a0}', " "));
        assert_eq!(
            plain(pace.duration(560_000_000_000, 3.0)).unwrap(),
            "about 14 s at the 40 GFLOP/s measured here"
        );
        assert_eq!(pace.duration(80_000_000_000, 3.0), None, "2 s: not worth saying");
        assert_eq!(Pace::default().duration(560_000_000_000, 3.0), None, "nothing timed yet");
    }

    #[test]
    fn the_time_left_reads_as_a_reader_wants_it() {
        let pace = {
            let mut p = Pace::default();
            p.record(60_000_000_000, 1000.0);
            p
        };
        // Numbers and units are joined by no-break spaces; read here as plain ones.
        let plain = |t: Option<String>| t.map(|t| t.replace('\u{a0}', " "));
        let at = |first: f64, all: f64, first_curve_done| Progress {
            done: 3,
            total: 98,
            left: WorkLeft { first_curve: (first * 60e9) as u64, all: (all * 60e9) as u64 },
            first_curve_done,
        };
        assert_eq!(
            plain(at(52.4, 250.0, false).time_left(&pace)).unwrap(),
            "About 50 s to the first complete curve and 4 min to every planned point, at the 60 GFLOP/s measured here."
        );
        assert_eq!(
            plain(at(7.6, 12.2, false).time_left(&pace)).unwrap(),
            "About 8 s to the first complete curve and 12 s to every planned point, at the 60 GFLOP/s measured here."
        );
        assert_eq!(
            plain(at(0.0, 0.2, true).time_left(&pace)).unwrap(),
            "About 1 s to every planned point, at the 60 GFLOP/s measured here."
        );
        assert_eq!(at(1.0, 2.0, false).time_left(&Pace::default()), None);
        let planned = WorkLeft { first_curve: 1_500_000_000_000, all: 12_900_000_000_000 };
        assert_eq!(
            plain(planned.estimate(&pace)).unwrap(),
            "about 12.9 TFLOP: 25 s to the first complete curve and 4 min to every planned point, at the 60 GFLOP/s measured here"
        );
        assert_eq!(planned.estimate(&Pace::default()), None);
        assert_eq!(WorkLeft::default().estimate(&pace), None, "nothing left, nothing to say");
    }
}
