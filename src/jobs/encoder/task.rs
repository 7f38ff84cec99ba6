//! The jobs on the task's sentence pairs that are not the curves: the quality of the reader's
//! set of heads ([`SetQuality`]), every head's task importance by head-gate gradients
//! ([`TaskImportance`]), and every head's role over the pairs' first sentences ([`HeadRoles`]).

use std::rc::Rc;

use crate::attention::atlas::{Atlas, PatternSums};
use crate::attention::importance::Ranking;
use crate::attention::precision::Precision;
use crate::attention::HeadSet;
use crate::jobs::driver::{Next, Plan, Progress};
use crate::jobs::engine::Engine;
use crate::jobs::pool::Priority;
use crate::jobs::work::{Done, Pair, Piece};
use crate::model::encoder::roles::{is_punctuation, Role, RoleCounter};
use crate::model::encoder::task::Pairs;
use crate::model::encoder::Encoder;
use crate::model::intervals::Bootstrap;
use crate::model::tokenize::wordpiece::WordPiece;

/// Sentences embedded in one piece of an evaluation.
pub const SENTENCES_PER_PIECE: usize = 48;

/// Pairs of the fixed subset head-gate gradients are measured on.
pub const SUBSET_PAIRS: usize = 16;

/// Pairs whose gradients are taken in one piece.
pub const PAIRS_PER_PIECE: usize = 4;

/// Sentences whose attention decides the heads' roles, and how many a piece counts.
pub const ROLE_SENTENCES: usize = 64;
const ROLE_SENTENCES_PER_PIECE: usize = 8;

/// The task's pairs with every sentence's token ids.
pub struct TaskData {
    /// The sentence pairs and scores.
    pub pairs: Pairs,
    /// Every sentence's token ids.
    pub ids: Vec<Vec<u32>>,
    /// Per sentence, per token: whether it is punctuation.
    pub punctuation: Vec<Vec<bool>>,
    /// The pairs' resamples, for how sure each quality is.
    pub bootstrap: Bootstrap,
}

impl TaskData {
    /// The pairs, tokenized by `tokenizer`.
    pub fn new(pairs: Pairs, tokenizer: &WordPiece) -> TaskData {
        let tokens: Vec<_> = pairs.sentences.iter().map(|s| tokenizer.encode(s)).collect();
        let ids = tokens.iter().map(|t| t.iter().map(|t| t.id).collect()).collect();
        let punctuation =
            tokens.iter().map(|t| t.iter().map(|t| is_punctuation(&t.piece)).collect()).collect();
        let bootstrap = Bootstrap::of_pairs(&pairs.scores());
        TaskData { pairs, ids, punctuation, bootstrap }
    }

    /// The fixed subset of [`SUBSET_PAIRS`] pairs, spread evenly over the set, that head-gate
    /// gradients are measured on.
    pub fn subset(&self) -> Vec<Pair> {
        let pairs = &self.pairs.pairs;
        (0..SUBSET_PAIRS.min(pairs.len()))
            .map(|i| pairs[i * pairs.len() / SUBSET_PAIRS.min(pairs.len())])
            .map(|p| (self.ids[p.a].clone(), self.ids[p.b].clone(), p.score))
            .collect()
    }

    /// Every sentence embedded by the model with only `heads` kept, as pieces (at `precision`,
    /// `None` for the loaded model's).
    pub fn evaluation(&self, heads: &HeadSet, precision: Option<Precision>) -> Vec<Piece> {
        let piece = |ids: &[Vec<u32>]| Piece::Embed { heads: heads.clone(), ids: ids.to_vec(), precision };
        self.ids.chunks(SENTENCES_PER_PIECE).map(piece).collect()
    }
}

/// The pieces that measure every head's task importance on `subset` with only `heads` kept.
pub fn gradient_pieces(subset: &[Pair], heads: &HeadSet) -> Vec<Piece> {
    subset
        .chunks(PAIRS_PER_PIECE)
        .map(|c| Piece::Gradients { heads: heads.clone(), pairs: c.to_vec() })
        .collect()
}

/// Collects the results of one batch of pieces, in order.
#[derive(Default)]
struct Batch {
    pieces: Vec<Piece>,
    done: Vec<Done>,
}

impl Batch {
    fn new(pieces: Vec<Piece>) -> Batch {
        Batch { pieces, done: Vec::new() }
    }

    fn left(&self, engine: &Engine<Encoder>) -> Option<(u64, crate::jobs::engine::Where)> {
        let rest = &self.pieces[self.done.len().min(self.pieces.len())..];
        let place = engine.place_of(self.pieces.first()?);
        Some((rest.iter().map(|w| engine.flops(w)).sum(), place))
    }
}

/// A set of heads' quality on the pairs, with each pair's cosine (what its intervals resample).
#[derive(Clone, Debug, PartialEq)]
pub struct SetScore {
    /// The heads kept and pruned.
    pub heads: HeadSet,
    /// Spearman's correlation with people's scores.
    pub quality: f64,
    /// Each pair's cosine similarity.
    pub cosines: std::sync::Arc<[f64]>,
}

/// The quality of the model with only `heads` kept, on every pair, the model really pruned
/// (at the loaded model's precision, or at the one [`SetQuality::at`] names).
pub struct SetQuality {
    data: Rc<TaskData>,
    heads: HeadSet,
    batch: Batch,
    handed: bool,
}

impl SetQuality {
    /// The quality of `heads` on `data`'s pairs.
    pub fn new(data: Rc<TaskData>, heads: HeadSet) -> SetQuality {
        let batch = Batch::new(data.evaluation(&heads, None));
        SetQuality { data, heads, batch, handed: false }
    }

    /// The same quality measured at `precision` (the workers make a copy of the model at it
    /// when theirs is at the other: [`crate::jobs::copies::Copies`]).
    pub fn at(self, precision: Precision) -> SetQuality {
        let batch = Batch::new(self.data.evaluation(&self.heads, Some(precision)));
        SetQuality { batch, ..self }
    }
}

impl Plan<Encoder> for SetQuality {
    type Output = SetScore;

    fn next(&mut self) -> Next<Self::Output> {
        if !std::mem::replace(&mut self.handed, true) {
            return Next::Run(self.batch.pieces.clone());
        }
        let embeddings = Done::embeddings(std::mem::take(&mut self.batch.done));
        let cosines = self.data.pairs.cosines(&embeddings);
        let quality = self.data.pairs.quality_of(&cosines);
        Next::Finished(SetScore { heads: self.heads.clone(), quality, cosines: cosines.into() })
    }

    fn absorb(&mut self, done: Done) {
        self.batch.done.push(done);
    }

    fn progress(&self, engine: &Engine<Encoder>) -> Progress {
        let total = self.data.ids.len();
        let done = (self.batch.done.len() * SENTENCES_PER_PIECE).min(total);
        Progress { done, total, left: self.batch.left(engine) }
    }
}

/// Every head's task importance with only `heads` kept: the mean over the subset's pairs of
/// `|dL/d gate|` (0 for pruned heads), as Michel et al. measure it.
pub struct TaskImportance {
    heads: HeadSet,
    pairs: usize,
    batch: Batch,
    handed: bool,
}

impl TaskImportance {
    /// The importance of the heads of `heads` on `data`'s subset.
    pub fn new(data: &TaskData, heads: HeadSet) -> TaskImportance {
        let subset = data.subset();
        TaskImportance {
            pairs: subset.len(),
            batch: Batch::new(gradient_pieces(&subset, &heads)),
            heads,
            handed: false,
        }
    }

    /// The importance from the pieces' results (`Sums`) over `pairs` pairs.
    pub fn from_sums(done: &[Done], pairs: usize, heads: &HeadSet) -> Vec<f64> {
        let mut importance = vec![0.0; heads.len()];
        for d in done {
            if let Done::Sums(sums) = d {
                importance.iter_mut().zip(sums).for_each(|(i, s)| *i += s / pairs as f64);
            }
        }
        heads.pruned().for_each(|h| importance[h] = 0.0);
        importance
    }
}

impl Plan<Encoder> for TaskImportance {
    type Output = Ranking;

    fn next(&mut self) -> Next<Ranking> {
        if !std::mem::replace(&mut self.handed, true) {
            return Next::Run(self.batch.pieces.clone());
        }
        Next::Finished(Ranking::new(Self::from_sums(&self.batch.done, self.pairs, &self.heads)))
    }

    fn absorb(&mut self, done: Done) {
        self.batch.done.push(done);
    }

    fn progress(&self, engine: &Engine<Encoder>) -> Progress {
        let done = (self.batch.done.len() * PAIRS_PER_PIECE).min(self.pairs);
        Progress { done, total: self.pairs, left: self.batch.left(engine) }
    }
}

/// Every head's role over the first [`ROLE_SENTENCES`] sentences of the pairs, on the full model.
pub struct HeadRoles {
    counter: RoleCounter,
    batch: Batch,
    sentences: usize,
    handed: bool,
}

impl HeadRoles {
    /// The roles of `engine`'s model's heads on `data`'s first sentences.
    pub fn new(engine: &Engine<Encoder>, data: &TaskData) -> HeadRoles {
        let take = ROLE_SENTENCES.min(data.ids.len());
        let (ids, punctuation) = (&data.ids[..take], &data.punctuation[..take]);
        let pieces = ids
            .chunks(ROLE_SENTENCES_PER_PIECE)
            .zip(punctuation.chunks(ROLE_SENTENCES_PER_PIECE))
            .map(|(s, p)| Piece::Roles { sentences: s.to_vec(), punctuation: p.to_vec() })
            .collect();
        let counter = RoleCounter::new(engine.model().spec());
        HeadRoles { counter, batch: Batch::new(pieces), sentences: take, handed: false }
    }
}

impl Plan<Encoder> for HeadRoles {
    type Output = Vec<Role>;

    fn next(&mut self) -> Next<Vec<Role>> {
        if !std::mem::replace(&mut self.handed, true) {
            return Next::Run(self.batch.pieces.clone());
        }
        Next::Finished(self.counter.roles())
    }

    fn absorb(&mut self, done: Done) {
        // Counted in the pieces' order wherever they ran: the same sums to the bit.
        if let Done::Sums(sums) = &done {
            self.counter.absorb(sums);
        }
        self.batch.done.push(done);
    }

    fn progress(&self, engine: &Engine<Encoder>) -> Progress {
        let done = (self.batch.done.len() * ROLE_SENTENCES_PER_PIECE).min(self.sentences);
        Progress { done, total: self.sentences, left: self.batch.left(engine) }
    }
}

/// The head atlas over the first [`ROLE_SENTENCES`] sentences of the pairs (the sentences the
/// roles are counted on), on the full model.
pub struct HeadAtlas {
    sums: PatternSums,
    batch: Batch,
    sentences: usize,
    handed: bool,
}

impl HeadAtlas {
    /// The atlas of `engine`'s model's heads on `data`'s first sentences.
    pub fn new(engine: &Engine<Encoder>, data: &TaskData) -> HeadAtlas {
        let take = ROLE_SENTENCES.min(data.ids.len());
        let pieces = data.ids[..take]
            .chunks(ROLE_SENTENCES_PER_PIECE)
            .map(|s| Piece::Atlas { sentences: s.to_vec() })
            .collect();
        let sums = PatternSums::new(engine.model().spec().total_heads());
        HeadAtlas { sums, batch: Batch::new(pieces), sentences: take, handed: false }
    }
}

impl Plan<Encoder> for HeadAtlas {
    type Output = Atlas;

    fn next(&mut self) -> Next<Atlas> {
        if !std::mem::replace(&mut self.handed, true) {
            return Next::Run(self.batch.pieces.clone());
        }
        Next::Finished(Atlas::from_sums(&self.sums))
    }

    fn absorb(&mut self, done: Done) {
        // Summed in the pieces' order wherever they ran: the same sums to the bit.
        if let Done::Sums(sums) = &done {
            self.sums.absorb(sums);
        }
        self.batch.done.push(done);
    }

    /// The reader asked for it and waits: ahead of background work.
    fn priority(&self) -> Priority {
        Priority::Now
    }

    fn progress(&self, engine: &Engine<Encoder>) -> Progress {
        let done = (self.batch.done.len() * ROLE_SENTENCES_PER_PIECE).min(self.sentences);
        Progress { done, total: self.sentences, left: self.batch.left(engine) }
    }
}
