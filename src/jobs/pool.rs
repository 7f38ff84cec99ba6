//! Threads for batch work, behind one trait: the page's web workers (`jobs::web::WebWorkers`),
//! the page's own thread ([`PageThread`]), and a native fake for tests
//! (`jobs::native::FakePool`). A pool runs pieces of [`Work`] and gives their results in order;
//! the same piece gives the same bits on any of them.

use std::rc::Rc;

use super::host::LocalFuture;
use crate::cpu::Kernel;
use crate::jobs::copies::Copies;
use crate::jobs::work::{Done, Work};
use crate::model::encoder::Encoder;

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
    fn run(&self, pieces: Vec<Work>, priority: Priority) -> LocalFuture<'_, Result<Vec<Done>, String>>;
}

/// The page's own thread: each piece runs to its end before the browser gets its turn, so the
/// engine hands it one piece at a time.
pub struct PageThread {
    models: Copies,
}

impl PageThread {
    /// The page's thread, running `model` (and its copy at the other precision, for pieces
    /// that ask for it).
    pub fn new(model: Rc<Encoder>) -> PageThread {
        PageThread { models: Copies::new(model) }
    }
}

impl PageThread {
    /// The model at `precision`: the loaded one, or the copy the page's thread runs pieces at
    /// that precision on (made now if no piece asked for it yet).
    pub fn model_at(&self, precision: crate::attention::precision::Precision) -> Result<Rc<Encoder>, String> {
        self.models.at(precision).cloned()
    }
}

impl Pool for PageThread {
    fn threads(&self) -> usize {
        1
    }

    fn run(&self, pieces: Vec<Work>, _: Priority) -> LocalFuture<'_, Result<Vec<Done>, String>> {
        let done = pieces.iter().map(|w| self.models.run(w, Kernel::Simd)).collect();
        Box::pin(std::future::ready(done))
    }
}
