//! Every head's importance to the token after the reader's text, and the drift curve, as a job
//! ([`NextTokenImportance`]): first each head removed alone (its KL of the next token, unless the
//! heads come ranked by another measure), then the curve, heads pruned least important first and
//! in random orders at each of its points. Each batch is a set of head sets, dealt into pieces of
//! [`Piece::NextKl`]: one per worker (each runs the full pass once, then every set it was dealt
//! from the first layer the set prunes), or one set per piece where they run one at a time (the
//! page's thread keeps the full pass between them).

use super::{DecoderMeasure, TextImportance};
use crate::attention::importance::{random_order, Ranking};
use crate::attention::HeadSet;
use crate::jobs::driver::{Next, Plan, Progress};
use crate::jobs::engine::{Engine, Where};
use crate::jobs::pool::Priority;
use crate::jobs::work::{ablation_deal, Done, Piece};
use crate::model::decoder::cost::next_logits_flops;
use crate::model::decoder::next_importance::{curve_ks, NextCurve, NextImportance, SweepPlan};
use crate::model::decoder::Decoder;

/// Head sets measured on one text, dealt into pieces; their KLs as they come in.
struct SetBatch {
    pieces: Vec<Piece>,
    /// Per piece, the indices of its sets.
    dealt: Vec<Vec<usize>>,
    /// Pieces whose results are in.
    absorbed: usize,
    kls: Vec<Option<f64>>,
}

/// Pieces to deal a batch of head sets into where `engine` runs them on the text `ids`: one
/// per worker, or `None`: one per set.
fn pieces_for(engine: &Engine<Decoder>, ids: &[u32]) -> Option<usize> {
    match engine.place_of(&Piece::NextKl { ids: ids.to_vec(), sets: Vec::new() }) {
        Where::Workers(n) => Some(n),
        Where::Gpu | Where::PageThread => None,
    }
}

impl SetBatch {
    /// `sets` on the text `ids`, dealt into `pieces` pieces (sets interleaved, so that every
    /// piece has early and late layers' sets), or one per set.
    fn new(ids: &[u32], sets: Vec<HeadSet>, pieces: Option<usize>) -> SetBatch {
        let dealt = ablation_deal(sets.len(), pieces.unwrap_or(sets.len()));
        let pieces = dealt
            .iter()
            .map(|which| Piece::NextKl {
                ids: ids.to_vec(),
                sets: which.iter().map(|&i| sets[i].clone()).collect(),
            })
            .collect();
        SetBatch { pieces, dealt, absorbed: 0, kls: vec![None; sets.len()] }
    }

    fn absorb(&mut self, done: Done) {
        if let Some(which) = self.dealt.get(self.absorbed) {
            for (&i, &kl) in which.iter().zip(done.sums()) {
                self.kls[i] = Some(kl);
            }
        }
        self.absorbed += 1;
    }

    /// Sets measured.
    fn measured(&self) -> usize {
        self.kls.iter().filter(|k| k.is_some()).count()
    }

    /// Every set's KL, once all are in.
    fn kls(&self) -> Option<Vec<f64>> {
        self.kls.iter().copied().collect()
    }

    /// FLOPs of the pieces not yet in, where they run now.
    fn left(&self, engine: &Engine<Decoder>) -> u64 {
        self.pieces[self.absorbed.min(self.pieces.len())..].iter().map(|p| engine.flops(p)).sum()
    }
}

/// Every head's KL of the next token when removed alone, then the drift curve; see the module's
/// documentation.
pub struct NextTokenImportance {
    text: String,
    ids: Vec<u32>,
    measure: DecoderMeasure,
    plan: SweepPlan,
    total: usize,
    ks: Vec<usize>,
    /// Pieces each batch is dealt into (`None`: one per set).
    pieces: Option<usize>,
    /// Each head's importance, once measured (or as it was given).
    per_head: Option<Vec<f64>>,
    /// The ranked order, then the random ones, once every head is ranked.
    orders: Vec<Vec<usize>>,
    batch: Option<SetBatch>,
    handed: bool,
    /// Per order, the KL at each of the curve's points, once measured.
    values: Option<Vec<Vec<f64>>>,
}

impl NextTokenImportance {
    /// The measurement of every head on the text `text` (its token ids `ids`, at least one),
    /// laid out as `plan` says and dealt for where `engine` runs it.
    pub fn new(engine: &Engine<Decoder>, text: &str, ids: Vec<u32>, plan: SweepPlan) -> NextTokenImportance {
        let total = engine.spec().total_heads();
        NextTokenImportance {
            text: text.to_string(),
            measure: DecoderMeasure::NextToken,
            plan,
            total,
            ks: curve_ks(total, plan.points),
            pieces: pieces_for(engine, &ids),
            ids,
            per_head: None,
            orders: Vec::new(),
            batch: None,
            handed: false,
            values: None,
        }
    }

    /// The drift curve alone, in the order of `ranking` (by `measure`) and at random.
    pub fn ranked(mut self, ranking: &Ranking, measure: DecoderMeasure) -> NextTokenImportance {
        assert_eq!(ranking.len(), self.total, "a ranking of the model's heads");
        self.per_head = Some(ranking.per_head.clone());
        self.measure = measure;
        self
    }

    /// What ranks the heads.
    pub fn measure(&self) -> DecoderMeasure {
        self.measure
    }

    /// Passes in all: one per head (unless ranked already), one per point of each order (a
    /// point with no head pruned costs none but counts as one).
    pub fn passes(&self) -> usize {
        let heads = if self.measure == DecoderMeasure::NextToken { self.total } else { 0 };
        heads + (1 + self.plan.random_orders as usize) * self.ks.len()
    }

    /// Passes made.
    pub fn done(&self) -> usize {
        let heads = match (self.measure, &self.per_head) {
            (DecoderMeasure::NextToken, Some(_)) => self.total,
            _ => 0,
        };
        heads + self.batch.as_ref().map_or(0, SetBatch::measured)
    }

    /// The sets of the curve: each order's first `k` heads pruned, at each point.
    fn curve_sets(&mut self) -> Vec<HeadSet> {
        let per_head = self.per_head.clone().expect("every head ranked");
        self.orders = std::iter::once(Ranking::new(per_head).ranked)
            .chain((0..self.plan.random_orders).map(|i| random_order(self.total, self.plan.seed + i)))
            .collect();
        let total = self.total;
        self.orders
            .iter()
            .flat_map(|order| {
                self.ks.iter().map(move |&k| HeadSet::with_pruned(total, order[..k].iter().copied()))
            })
            .collect()
    }

    /// What the measurement found, from the curve's KLs (order by order, point by point).
    fn found(&self, kls: &[f64]) -> TextImportance {
        let points = self.ks.len();
        let values: Vec<&[f64]> = kls.chunks(points).collect();
        let orders = self.plan.random_orders.max(1) as f64;
        let random = (0..points).map(|i| values[1..].iter().map(|v| v[i]).sum::<f64>() / orders).collect();
        let curve = NextCurve {
            ks: self.ks.clone(),
            ranked: values[0].to_vec(),
            random,
            random_orders: self.plan.random_orders,
        };
        let ranking = Ranking::new(self.per_head.clone().expect("every head ranked"));
        TextImportance {
            text: self.text.clone(),
            measure: self.measure,
            found: NextImportance { ranking, curve },
        }
    }
}

impl Plan<Decoder> for NextTokenImportance {
    type Output = TextImportance;

    fn next(&mut self) -> Next<TextImportance> {
        if let Some(values) = &self.values {
            let kls: Vec<f64> = values.concat();
            return Next::Finished(self.found(&kls));
        }
        if let Some(kls) =
            self.batch.as_ref().filter(|_| self.handed).map(|b| b.kls().expect("every set measured"))
        {
            // A batch is in: the heads' KLs, or the curve's.
            match self.per_head.is_none() {
                true => self.per_head = Some(kls),
                false => {
                    self.values = Some(kls.chunks(self.ks.len()).map(<[f64]>::to_vec).collect());
                    return self.next();
                }
            }
        }
        let sets = match &self.per_head {
            None => (0..self.total).map(|h| HeadSet::with_pruned(self.total, [h])).collect(),
            Some(_) => self.curve_sets(),
        };
        let batch = SetBatch::new(&self.ids, sets, self.pieces);
        let pieces = batch.pieces.clone();
        (self.batch, self.handed) = (Some(batch), true);
        Next::Run(pieces)
    }

    fn absorb(&mut self, done: Done) {
        if let Some(batch) = &mut self.batch {
            batch.absorb(done);
        }
    }

    /// The reader waits for it: ahead of background work.
    fn priority(&self) -> Priority {
        Priority::Now
    }

    fn progress(&self, engine: &Engine<Decoder>) -> Progress {
        let spec = engine.spec();
        let left_in_batch = self.batch.as_ref().map_or(0, |b| b.left(engine));
        // The curve's sets not yet dealt, counted as whole passes.
        let curve_left = match (&self.values, self.per_head.is_some() && self.handed) {
            (None, false) => (1 + self.plan.random_orders as u64) * self.ks.len() as u64,
            _ => 0,
        } * next_logits_flops(spec, self.ids.len(), 0);
        let place = engine.place_of(&Piece::NextKl { ids: self.ids.clone(), sets: Vec::new() });
        Progress { done: self.done(), total: self.passes(), left: Some((left_in_batch + curve_left, place)) }
    }
}
