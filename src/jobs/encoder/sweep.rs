//! Every head's importance by removing it alone: to the sentence's embedding ([`DriftSweep`]) and
//! to the meaning check's margin ([`MarginSweep`]). Both are the same pieces of work
//! ([`Piece::Ablate`]), dealt a few per worker (handed the page's unpruned passes) or one per
//! head where they run one at a time.

use std::collections::VecDeque;

use crate::attention::importance::Ranking;
use crate::attention::HeadSet;
use crate::jobs::driver::{Next, Plan, Progress};
use crate::jobs::engine::Engine;
use crate::jobs::pool::Priority;
use crate::jobs::work::{ablation_pieces, Done, Piece};
use crate::model::encoder::check::{CheckAnswer, MarginImportance, SENTENCES};
use crate::model::encoder::runner::embedding_drift;
use crate::model::encoder::Encoder;

/// Removing each head alone from the unpruned model on some sentences: the pieces, and as their
/// results come in, each head's embeddings.
struct Ablation {
    sentences: usize,
    pieces: Vec<Piece>,
    handed: bool,
    /// The heads of each piece not yet in, in order.
    waiting: VecDeque<Vec<usize>>,
    /// The unpruned embeddings, once the first piece is in.
    full: Option<Vec<Vec<f32>>>,
    /// Per head, its sentences' embeddings without it, once measured.
    without: Vec<Option<Vec<Vec<f32>>>>,
}

impl Ablation {
    fn new(engine: &Engine<Encoder>, sentences: &[Vec<u32>]) -> Ablation {
        let spec = engine.model().spec();
        let (count, traces) = engine.deal_ablation(sentences, &HeadSet::all(spec.total_heads()));
        let pieces = ablation_pieces(spec, sentences, count, &traces);
        let waiting = pieces
            .iter()
            .map(|w| match w {
                Piece::Ablate { ablate, .. } => ablate.clone(),
                _ => Vec::new(),
            })
            .collect();
        let total = spec.total_heads();
        Ablation {
            sentences: sentences.len(),
            pieces,
            handed: false,
            waiting,
            full: None,
            without: vec![None; total],
        }
    }

    fn next(&mut self) -> Option<Vec<Piece>> {
        (!std::mem::replace(&mut self.handed, true)).then(|| self.pieces.clone())
    }

    fn absorb(&mut self, done: Done) {
        let heads = self.waiting.pop_front().unwrap_or_default();
        let Done::Embeddings(e) = done else { return };
        let mut rows = e.chunks(self.sentences);
        let full = rows.next().map(<[_]>::to_vec).unwrap_or_default();
        self.full.get_or_insert(full);
        for (h, without) in heads.into_iter().zip(rows) {
            self.without[h] = Some(without.to_vec());
        }
    }

    fn done(&self) -> usize {
        self.without.iter().filter(|w| w.is_some()).count()
    }

    fn progress(&self, engine: &Engine<Encoder>) -> Progress {
        let left = self.pieces.iter().skip(self.pieces.len() - self.waiting.len());
        let flops: u64 = left.clone().map(|w| engine.flops(w)).sum();
        let place = self.pieces.first().map(|w| engine.place_of(w));
        Progress { done: self.done(), total: self.without.len(), left: place.map(|p| (flops, p)) }
    }
}

/// What a sweep makes of every head's embeddings once they are all in: the unpruned ones of its
/// sentences, and per head theirs without it.
pub trait Reading {
    /// What the sweep gives.
    type Output;
    /// The result from the unpruned embeddings and, per head, the embeddings without it.
    fn read(&self, full: &[Vec<f32>], without: &[&[Vec<f32>]]) -> Self::Output;
}

/// Every head of a model removed alone from it on some sentences, read as a [`Reading`] says.
pub struct Sweep<R: Reading> {
    ablation: Ablation,
    reading: R,
}

/// How far removing each head alone moves a sentence's embedding (`1 - cosine`), ranked.
pub type DriftSweep = Sweep<Drift>;

/// How far removing each head alone moves the meaning check's margin: its three sentences with
/// each head removed.
pub type MarginSweep = Sweep<Margin>;

/// [`DriftSweep`]'s reading.
pub struct Drift;

/// [`MarginSweep`]'s reading.
pub struct Margin;

impl Reading for Drift {
    type Output = Ranking;

    fn read(&self, full: &[Vec<f32>], without: &[&[Vec<f32>]]) -> Ranking {
        Ranking::new(without.iter().map(|w| embedding_drift(&full[0], &w[0])).collect())
    }
}

impl Reading for Margin {
    type Output = MarginImportance;

    fn read(&self, full: &[Vec<f32>], without: &[&[Vec<f32>]]) -> MarginImportance {
        let total = without.len();
        let answer =
            |e: &[Vec<f32>], heads: HeadSet| CheckAnswer::from_embeddings(&e[0], [&e[1], &e[2]], &heads);
        let full = answer(full, HeadSet::all(total));
        let margins = without
            .iter()
            .enumerate()
            .map(|(h, w)| answer(w, HeadSet::with_pruned(total, [h])).margin_toward(full.closer));
        MarginImportance { margins: margins.collect(), full }
    }
}

impl Sweep<Drift> {
    /// The sweep over the sentence `ids`, dealt for where `engine` runs it.
    pub fn new(engine: &Engine<Encoder>, ids: Vec<u32>) -> DriftSweep {
        Sweep { ablation: Ablation::new(engine, &[ids]), reading: Drift }
    }
}

impl Sweep<Margin> {
    /// The sweep over the meaning check's sentences, dealt for where `engine` runs it.
    pub fn new(engine: &Engine<Encoder>) -> MarginSweep {
        let tokenizer = &engine.model().tokenizer;
        let sentences: Vec<Vec<u32>> =
            SENTENCES.iter().map(|s| tokenizer.encode(s).iter().map(|t| t.id).collect()).collect();
        Sweep { ablation: Ablation::new(engine, &sentences), reading: Margin }
    }
}

impl<R: Reading> Sweep<R> {
    /// Heads measured so far.
    pub fn done(&self) -> usize {
        self.ablation.done()
    }
}

impl<R: Reading> Plan<Encoder> for Sweep<R> {
    type Output = R::Output;

    fn next(&mut self) -> Next<R::Output> {
        if let Some(pieces) = self.ablation.next() {
            return Next::Run(pieces);
        }
        let full = self.ablation.full.as_deref().expect("every piece is in");
        let without: Vec<&[Vec<f32>]> =
            self.ablation.without.iter().map(|w| w.as_deref().expect("every head measured")).collect();
        Next::Finished(self.reading.read(full, &without))
    }

    fn absorb(&mut self, done: Done) {
        self.ablation.absorb(done);
    }

    /// The reader waits for it: ahead of background work.
    fn priority(&self) -> Priority {
        Priority::Now
    }

    fn progress(&self, engine: &Engine<Encoder>) -> Progress {
        self.ablation.progress(engine)
    }
}
