//! A decoder on the text set's passages, as jobs: its perplexity with some heads
//! ([`TextSetLoss`]) and every head's importance by the gradient of its loss ([`TextSetGradient`],
//! Michel et al.'s mean `|∂L/∂ξ_h|`). A pass over the set is a batch of one piece per passage
//! ([`Piece::Losses`], [`Piece::GateGradients`]): the workers take them from one queue, and the
//! page's thread runs one between two turns of the browser. Each passage's numbers come back on
//! their own and are added in the passages' order, so the result has the same bits however the
//! pieces were dealt.

use super::SetPerplexity;
use crate::attention::importance::Ranking;
use crate::attention::HeadSet;
use crate::jobs::driver::{Next, Plan, Progress};
use crate::jobs::engine::Engine;
use crate::jobs::work::{Done, Piece};
use crate::model::decoder::Decoder;

/// One pass over the set's passages: a piece per passage, and their results as they come in.
#[derive(Clone, Debug)]
pub(super) struct SetPass {
    pieces: Vec<Piece>,
    results: Vec<Done>,
}

impl SetPass {
    /// The losses of `passages` with `heads` active.
    pub(super) fn losses(passages: &[Vec<u32>], heads: &HeadSet) -> SetPass {
        let piece = |p: &Vec<u32>| Piece::Losses { heads: heads.clone(), passages: vec![p.clone()] };
        SetPass { pieces: passages.iter().map(piece).collect(), results: Vec::new() }
    }

    /// The gate gradients of `passages`' losses with `heads` kept.
    pub(super) fn gradients(passages: &[Vec<u32>], heads: &HeadSet) -> SetPass {
        let piece = |p: &Vec<u32>| Piece::GateGradients { heads: heads.clone(), passages: vec![p.clone()] };
        SetPass { pieces: passages.iter().map(piece).collect(), results: Vec::new() }
    }

    /// The pieces, to run.
    pub(super) fn pieces(&self) -> Vec<Piece> {
        self.pieces.clone()
    }

    pub(super) fn absorb(&mut self, done: Done) {
        self.results.push(done);
    }

    /// Passages whose piece is in.
    pub(super) fn done(&self) -> usize {
        self.results.len()
    }

    /// FLOPs of the pieces not yet in, where they run now.
    pub(super) fn left(&self, engine: &Engine<Decoder>) -> u64 {
        self.pieces[self.results.len().min(self.pieces.len())..].iter().map(|p| engine.flops(p)).sum()
    }

    /// The heads the pass runs with.
    pub(super) fn heads(&self) -> Option<&HeadSet> {
        match self.pieces.first()? {
            Piece::Losses { heads, .. } | Piece::GateGradients { heads, .. } => Some(heads),
            _ => None,
        }
    }

    /// The perplexity of a pass (of losses, or of gradients, whose forward pass gives each
    /// passage's loss too), once every passage is in: the passages' sums added in their order,
    /// over the tokens predicted.
    pub(super) fn perplexity(&self) -> SetPerplexity {
        let heads = self.heads().cloned().unwrap_or_default();
        let count: usize = self
            .pieces
            .iter()
            .map(|p| match p {
                Piece::Losses { passages, .. } | Piece::GateGradients { passages, .. } => {
                    passages.iter().map(|ids| ids.len() - 1).sum()
                }
                _ => 0,
            })
            .sum();
        // A gradients piece's sums: per passage its loss, then one per head.
        let stride = match self.pieces.first() {
            Some(Piece::GateGradients { .. }) => 1 + heads.len(),
            _ => 1,
        };
        let losses = self.results.iter().flat_map(|d| d.sums().iter().step_by(stride));
        let sum = losses.fold(0.0, |sum, s| sum + s);
        let mean_loss = if count > 0 { sum / count as f64 } else { f64::NAN };
        SetPerplexity {
            heads,
            mean_loss,
            perplexity: mean_loss.exp(),
            tokens: count,
            passages: self.pieces.len(),
        }
    }

    /// The ranking of a gradients pass, once every passage is in: each head's `|∂L/∂ξ_h|` added
    /// passage by passage in their order, over the passages (0 for a pruned head).
    pub(super) fn ranking(&self) -> Ranking {
        let heads = self.heads().cloned().unwrap_or_default();
        let mut sums = vec![0.0; heads.len()];
        for done in &self.results {
            // Per passage: its loss, then one gradient per head.
            for per_passage in done.sums().chunks_exact(1 + heads.len()) {
                sums.iter_mut().zip(&per_passage[1..]).for_each(|(s, g)| *s += g);
            }
        }
        let count = self.pieces.len().max(1) as f64;
        Ranking::new(
            sums.iter().enumerate().map(|(h, s)| if heads.is_pruned(h) { 0.0 } else { s / count }).collect(),
        )
    }
}

/// The text set's perplexity with each of some sets of heads, one pass over the passages each.
pub struct TextSetLoss {
    passes: Vec<SetPass>,
    /// The pass whose pieces are out (or next), and whether they are handed.
    at: usize,
    handed: bool,
}

impl TextSetLoss {
    /// The perplexity on `passages` (token ids, 2 or more each) with each of `sets`.
    pub fn new(passages: &[Vec<u32>], sets: &[HeadSet]) -> TextSetLoss {
        TextSetLoss {
            passes: sets.iter().map(|h| SetPass::losses(passages, h)).collect(),
            at: 0,
            handed: false,
        }
    }

    /// Which set is being measured (0-based), of how many, and its passages read.
    pub fn reading(&self) -> (usize, usize, usize) {
        let at = self.at.min(self.passes.len().saturating_sub(1));
        (at, self.passes.len(), self.passes.get(at).map_or(0, SetPass::done))
    }
}

impl Plan<Decoder> for TextSetLoss {
    type Output = Vec<SetPerplexity>;

    fn next(&mut self) -> Next<Vec<SetPerplexity>> {
        if self.handed {
            (self.at, self.handed) = (self.at + 1, false);
        }
        match self.passes.get(self.at) {
            Some(pass) => {
                self.handed = true;
                Next::Run(pass.pieces())
            }
            None => Next::Finished(self.passes.iter().map(SetPass::perplexity).collect()),
        }
    }

    fn absorb(&mut self, done: Done) {
        if let Some(pass) = self.passes.get_mut(self.at) {
            pass.absorb(done);
        }
    }

    fn progress(&self, engine: &Engine<Decoder>) -> Progress {
        let total = self.passes.iter().map(|p| p.pieces.len()).sum();
        let done = self.passes.iter().map(SetPass::done).sum();
        let left = self.passes.iter().map(|p| p.left(engine)).sum();
        let place = self.passes.first().and_then(|p| p.pieces.first()).map(|p| engine.place_of(p));
        Progress { done, total, left: place.map(|place| (left, place)) }
    }
}

/// Every head's importance by the text set's loss with only `heads` kept: one pass of gradients
/// over the passages.
pub struct TextSetGradient {
    pass: SetPass,
    handed: bool,
}

impl TextSetGradient {
    /// The importance on `passages` (token ids, 2 or more each) with only `heads` kept.
    pub fn new(passages: &[Vec<u32>], heads: &HeadSet) -> TextSetGradient {
        TextSetGradient { pass: SetPass::gradients(passages, heads), handed: false }
    }

    /// Passages done, of all.
    pub fn reading(&self) -> (usize, usize) {
        (self.pass.done(), self.pass.pieces.len())
    }
}

impl Plan<Decoder> for TextSetGradient {
    type Output = Ranking;

    fn next(&mut self) -> Next<Ranking> {
        match std::mem::replace(&mut self.handed, true) {
            false => Next::Run(self.pass.pieces()),
            true => Next::Finished(self.pass.ranking()),
        }
    }

    fn absorb(&mut self, done: Done) {
        self.pass.absorb(done);
    }

    fn progress(&self, engine: &Engine<Decoder>) -> Progress {
        let place = self.pass.pieces.first().map(|p| engine.place_of(p));
        let (done, total) = self.reading();
        Progress { done, total, left: place.map(|place| (self.pass.left(engine), place)) }
    }
}
