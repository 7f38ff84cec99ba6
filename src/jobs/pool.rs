//! Threads for batch work, behind one trait: the page's web workers (`jobs::web::WebWorkers`),
//! the page's own thread ([`PageThread`]), and a native fake for tests
//! (`jobs::native::FakePool`). A pool runs pieces of [`Piece`] and gives their results in order;
//! the same piece gives the same bits on any of them.

use super::host::LocalFuture;
use crate::attention::turns::Turns;
use crate::cpu::Kernel;
use crate::jobs::copies::Copies;
use crate::jobs::work::{Done, Piece};
use crate::model::Model;

/// Which pieces a busy pool runs first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Priority {
    /// What the reader is waiting to see (a sentence's importance): ahead of everything queued
    /// before it but other such pieces.
    Now,
    /// Work that takes its time (quality, curves, roles): in the order it came.
    #[default]
    Background,
}

/// Where pieces of work run.
pub trait Pool {
    /// Threads the pieces run on at once (1: one after another).
    fn threads(&self) -> usize;
    /// Resolves once the pool can take work (its threads started, the model loaded in each), or
    /// says why it cannot; the time it takes is not the work's, so the engine waits for it
    /// before timing a batch.
    fn ready(&self) -> LocalFuture<'_, Result<(), String>> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// Runs `pieces` (checked against the model by the caller) with `priority` among the pieces
    /// waiting, results in their order; an error says why the pool stopped working (its pieces
    /// are then run elsewhere).
    fn run(&self, pieces: Vec<Piece>, priority: Priority) -> LocalFuture<'_, Result<Vec<Done>, String>>;
    /// Bytes of memory each of its threads holds, as they last said (empty for a pool whose
    /// threads share the page's memory, or before they started).
    fn memory(&self) -> Vec<u64> {
        Vec::new()
    }
}

/// The page's own thread: each piece runs to its end before the browser gets its turn, so the
/// engine hands it one piece at a time.
pub struct PageThread {
    models: Copies,
}

impl PageThread {
    /// The page's thread, running `model` (and, for an encoder, its copy at the other precision,
    /// for pieces that ask for it).
    pub fn new(model: Model) -> PageThread {
        PageThread { models: Copies::new(model) }
    }

    /// The model and its copies the page's thread runs pieces on.
    pub fn copies(&self) -> &Copies {
        &self.models
    }

    /// Runs one piece here, or says why the model cannot run it.
    pub fn run_one(&self, piece: &Piece) -> Result<Done, String> {
        self.models.run(piece, Kernel::Simd)
    }

    /// [`PageThread::run_one`] with the piece's passes in `turns`' steps.
    pub async fn run_one_in_turns(&self, piece: &Piece, turns: &dyn Turns) -> Result<Done, String> {
        self.models.run_in_turns(piece, Kernel::Simd, turns).await
    }
}

impl Pool for PageThread {
    fn threads(&self) -> usize {
        1
    }

    fn run(&self, pieces: Vec<Piece>, _: Priority) -> LocalFuture<'_, Result<Vec<Done>, String>> {
        let done = pieces.iter().map(|w| self.run_one(w)).collect();
        Box::pin(std::future::ready(done))
    }
}
