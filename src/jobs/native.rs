//! The jobs natively, for tests and benchmarks: a host whose browser turns are counted, and a
//! fake pool that runs its pieces here, last first, and can be told to fail.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

use super::host::{Host, LocalFuture};
use super::pool::{Pool, Priority};
use crate::attention::clock::Clock;
use crate::cpu::Kernel;
use crate::jobs::copies::Copies;
use crate::jobs::work::{Done, Piece};
use crate::model::Model;

/// A host on the process's clock; counts the turns it gave.
pub struct NativeHost {
    start: Instant,
    turns: Rc<Cell<usize>>,
}

impl Default for NativeHost {
    fn default() -> Self {
        NativeHost { start: Instant::now(), turns: Rc::default() }
    }
}

impl NativeHost {
    /// Turns given so far.
    pub fn turns(&self) -> usize {
        self.turns.get()
    }
}

impl Clock for NativeHost {
    fn now_ms(&self) -> f64 {
        self.start.elapsed().as_secs_f64() * 1e3
    }

    fn resolution_ms(&self) -> f64 {
        0.0
    }
}

impl Host for NativeHost {
    fn turn(&self) -> LocalFuture<'static, ()> {
        self.turns.set(self.turns.get() + 1);
        Box::pin(std::future::ready(()))
    }
}

/// A pool of `threads` pretend workers: each batch runs here, its pieces in reverse order (so a
/// job that depended on the order would show it), checked as a worker checks them. After
/// `fail_after` pieces it fails, as a worker that stopped would.
pub struct FakePool {
    models: Copies,
    threads: usize,
    /// Pieces it runs before it fails (`None`: never).
    pub fail_after: Cell<Option<usize>>,
    /// Pieces run so far, and batches.
    pub ran: Cell<(usize, usize)>,
    /// Milliseconds its first [`Pool::ready`] takes, as workers loading the model would.
    pub start_ms: Cell<u64>,
    started: Cell<bool>,
}

impl FakePool {
    /// A pool of `threads` for `model` (an encoder or a decoder).
    pub fn new(model: impl Into<Model>, threads: usize) -> FakePool {
        FakePool {
            models: Copies::new(model.into()),
            threads,
            fail_after: Cell::new(None),
            ran: Cell::new((0, 0)),
            start_ms: Cell::new(0),
            started: Cell::new(false),
        }
    }
}

impl Pool for FakePool {
    fn threads(&self) -> usize {
        self.threads
    }

    fn ready(&self) -> LocalFuture<'_, Result<(), String>> {
        if !self.started.replace(true) {
            std::thread::sleep(std::time::Duration::from_millis(self.start_ms.get()));
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn run(&self, pieces: Vec<Piece>, _: Priority) -> LocalFuture<'_, Result<Vec<Done>, String>> {
        let result = (|| {
            let mut done: Vec<(usize, Done)> = Vec::with_capacity(pieces.len());
            for (i, work) in pieces.iter().enumerate().rev() {
                let (count, batches) = self.ran.get();
                if self.fail_after.get().is_some_and(|n| count >= n) {
                    return Err("a worker stopped (the fake pool was told to fail)".to_string());
                }
                self.ran.set((count + 1, batches));
                let decoded = Piece::decode(&work.encode()).map_err(|e| e.to_string())?;
                let result = self.models.run(&decoded, Kernel::Simd)?;
                done.push((i, Done::decode(&result.encode()).map_err(|e| e.to_string())?));
            }
            let (count, batches) = self.ran.get();
            self.ran.set((count, batches + 1));
            done.sort_by_key(|(i, _)| *i);
            Ok(done.into_iter().map(|(_, d)| d).collect())
        })();
        Box::pin(std::future::ready(result))
    }
}
