//! Activation patching as a job ([`PatchSweep`]): the meaning check's candidates embedded once,
//! and every head patched and removed alone, dealt one piece per worker (or one per head where
//! the pieces run one at a time), read as [`Patching`].

use std::collections::VecDeque;

use crate::attention::HeadSet;
use crate::jobs::driver::{Next, Plan, Progress};
use crate::jobs::engine::Engine;
use crate::jobs::pool::Priority;
use crate::jobs::work::{ablation_deal, Done, Piece};
use crate::model::encoder::check::CANDIDATES;
use crate::model::encoder::patching::Patching;
use crate::model::encoder::Encoder;

/// Every head of the unpruned model patched from `clean` into `corrupted`, and removed from
/// `clean`, alone ([`Piece::Patch`]).
pub struct PatchSweep {
    pieces: Vec<Piece>,
    handed: bool,
    /// The heads of each piece not yet in, in order (none for the candidates' piece).
    waiting: VecDeque<Vec<usize>>,
    candidates: Vec<Vec<f32>>,
    runs: Option<(Vec<f32>, Vec<f32>)>,
    patched: Vec<Option<(Vec<f32>, Vec<f32>)>>,
}

impl PatchSweep {
    /// The sweep over the token ids `clean` and `corrupted` (as many of each:
    /// [`crate::model::encoder::patching::check_pair`]), dealt for where `engine` runs it.
    pub fn new(engine: &Engine<Encoder>, clean: Vec<u32>, corrupted: Vec<u32>) -> PatchSweep {
        let model = engine.model();
        let total = model.spec().total_heads();
        let piece = |patch| Piece::Patch { clean: clean.clone(), corrupted: corrupted.clone(), patch };
        let dealt = ablation_deal(total, engine.deal_like(&piece(Vec::new())));
        let embed = Piece::Embed {
            heads: HeadSet::all(total),
            ids: CANDIDATES.map(|c| model.ids(c)).to_vec(),
            precision: None,
        };
        let mut waiting = VecDeque::from([Vec::new()]);
        waiting.extend(dealt.iter().cloned());
        let pieces = std::iter::once(embed).chain(dealt.into_iter().map(piece)).collect();
        PatchSweep {
            pieces,
            handed: false,
            waiting,
            candidates: Vec::new(),
            runs: None,
            patched: vec![None; total],
        }
    }

    /// Heads measured so far.
    pub fn done(&self) -> usize {
        self.patched.iter().filter(|p| p.is_some()).count()
    }
}

impl Plan<Encoder> for PatchSweep {
    type Output = Patching;

    fn next(&mut self) -> Next<Patching> {
        if !std::mem::replace(&mut self.handed, true) {
            return Next::Run(self.pieces.clone());
        }
        let (clean, corrupted) = self.runs.clone().expect("every piece is in");
        let (patched, ablated) = self.patched.iter().map(|p| p.clone().expect("every head measured")).unzip();
        let [a, b] = <[Vec<f32>; 2]>::try_from(std::mem::take(&mut self.candidates)).expect("two candidates");
        Next::Finished(Patching { clean, corrupted, candidates: [a, b], patched, ablated })
    }

    fn absorb(&mut self, done: Done) {
        let heads = self.waiting.pop_front().unwrap_or_default();
        let Done::Embeddings(e) = done else { return };
        if heads.is_empty() {
            self.candidates = e;
            return;
        }
        let mut e = e.into_iter();
        let (clean, corrupted) = (e.next().unwrap_or_default(), e.next().unwrap_or_default());
        self.runs.get_or_insert((clean, corrupted));
        for h in heads {
            let (patched, ablated) = (e.next().unwrap_or_default(), e.next().unwrap_or_default());
            self.patched[h] = Some((patched, ablated));
        }
    }

    /// The reader asked for it and waits: ahead of background work.
    fn priority(&self) -> Priority {
        Priority::Now
    }

    fn progress(&self, engine: &Engine<Encoder>) -> Progress {
        let left = self.pieces.iter().skip(self.pieces.len() - self.waiting.len());
        let flops: u64 = left.map(|w| engine.flops(w)).sum();
        let place = self.pieces.last().map(|w| engine.place_of(w));
        Progress { done: self.done(), total: self.patched.len(), left: place.map(|p| (flops, p)) }
    }
}
