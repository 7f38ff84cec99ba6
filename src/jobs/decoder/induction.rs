//! The induction test as a job ([`InductionTest`]): one piece ([`Piece::Induction`]) that runs the
//! decoder with every head over a random sequence repeated once and scores each head (the
//! copying score reads each head's output through the unembedding: on GPT-2 small about a
//! second, on a worker rather than the page's thread when there are workers).

use super::InductionRun;
use crate::jobs::driver::{Next, Plan, Progress};
use crate::jobs::engine::Engine;
use crate::jobs::pool::Priority;
use crate::jobs::work::{Done, Piece};
use crate::model::decoder::induction::Repeated;
use crate::model::decoder::Decoder;

/// The induction test on one sequence.
pub struct InductionTest {
    sequence: Repeated,
    handed: bool,
    sums: Option<Vec<f64>>,
}

impl InductionTest {
    /// The test on `decoder` with the sequence `seed` draws ([`InductionRun::sequence`]), or why
    /// the model is too small for it.
    pub fn new(decoder: &Decoder, seed: u32) -> Result<InductionTest, String> {
        Ok(InductionTest { sequence: InductionRun::sequence(decoder, seed)?, handed: false, sums: None })
    }

    fn piece(&self) -> Piece {
        let s = &self.sequence;
        Piece::Induction { ids: s.ids.clone(), half: s.half, start: s.start }
    }
}

impl Plan<Decoder> for InductionTest {
    type Output = InductionRun;

    fn next(&mut self) -> Next<InductionRun> {
        if !std::mem::replace(&mut self.handed, true) {
            return Next::Run(vec![self.piece()]);
        }
        let sums = self.sums.take().expect("the test's piece is in");
        Next::Finished(InductionRun::from_sums(self.sequence.clone(), &sums))
    }

    fn absorb(&mut self, done: Done) {
        self.sums = Some(done.sums().to_vec());
    }

    /// The reader waits for it: ahead of background work.
    fn priority(&self) -> Priority {
        Priority::Now
    }

    fn progress(&self, engine: &Engine<Decoder>) -> Progress {
        let piece = self.piece();
        let done = usize::from(self.sums.is_some());
        let left = if done == 1 { 0 } else { engine.flops(&piece) };
        Progress { done, total: 1, left: Some((left, engine.place_of(&piece))) }
    }
}
