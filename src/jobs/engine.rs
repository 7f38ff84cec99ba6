//! The one object that decides where a trained model's work runs, and runs it, for both
//! families: the model on the page's backend (its [`Family::Runner`]: the GPU while it works,
//! else the CPU kernel), the pool of threads for batch work ([`Workers`]), what it keeps of
//! earlier passes for the pieces it runs itself, and the pace each place has run at.
//!
//! An [`Engine`] is the same type for an encoder and a decoder (`Engine<Encoder>`,
//! `Engine<Decoder>`): the pool, the pace, the dealing of pieces and their running are shared;
//! what differs (how the page's passes run, what of them is kept, a piece that runs through the
//! GPU) is the family's [`Family`] implementation, in `super::encoder::engine` and
//! `super::decoder::engine`.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::attention::turns::Turns;
use crate::backend::Session;
use crate::jobs::host::{Host, HostClock, HostTurns};
use crate::jobs::pace::Pace;
use crate::jobs::pool::{PageThread, Pool, Priority};
use crate::jobs::work::{Done, Piece};
use crate::model::spec::ModelSpec;
use crate::model::Model;

/// Pieces a batch of work is dealt into per worker when its pieces can be cut finer than one
/// per worker: a worker that finishes first takes the next.
pub const PIECES_PER_WORKER: usize = 2;

/// Where a piece of work runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Where {
    /// The GPU, pass by pass, from the page's thread.
    Gpu,
    /// The pool's threads, all at once.
    Workers(usize),
    /// The page's own thread (the CPU kernel), a piece at a time.
    PageThread,
}

impl Where {
    /// For a status line: "2 worker threads", "this page's thread", "the GPU".
    pub fn describe(self) -> String {
        match self {
            Where::Gpu => "the GPU".into(),
            Where::Workers(n) => format!("{n} worker threads"),
            Where::PageThread => "this page's thread".into(),
        }
    }
}

/// A model family as the engine runs it.
// The page is single-threaded: its futures never move between threads, so no `Send` bound.
#[allow(async_fn_in_trait)]
pub trait Family: Sized + 'static {
    /// Where the page's own passes of the model run (the GPU or the CPU kernel).
    type Runner;
    /// What the engine keeps of earlier passes, for the pieces it runs on the page's thread.
    type Kept: Default;

    /// The model as a thread holds it for pieces of work.
    fn held(model: &Rc<Self>) -> Model;

    /// The model's shape.
    fn shape(&self) -> &ModelSpec;

    /// The model on `session`'s backend (timed there against the CPU kernel on `clock`, unless
    /// the reader forced the backend), its CPU passes giving the thread `turns`.
    async fn runner(
        model: &Rc<Self>,
        session: &Session,
        clock: &HostClock<'_>,
        turns: Rc<dyn Turns>,
    ) -> Self::Runner;

    /// Where `piece` runs on `engine` now: the workers while they work, unless the family runs
    /// it elsewhere.
    fn place_of(engine: &Engine<Self>, _piece: &Piece) -> Where {
        engine.workers.place()
    }

    /// FLOPs `piece` takes where it runs now (less what the engine kept from earlier passes).
    fn flops(engine: &Engine<Self>, piece: &Piece) -> u64 {
        piece.flops(engine.spec())
    }

    /// Runs `piece` on the page's thread (or its GPU): its result and the FLOPs it did not need.
    async fn run_here(engine: &Engine<Self>, piece: &Piece) -> (Done, u64) {
        (engine.run_on_page_thread(piece).await, 0)
    }
}

/// The pool for a model's batch work and what is known of it, kept while the model is: a new
/// backend session makes a new [`Engine`], but the workers (each holding the model) and the
/// pace they ran at stay.
pub struct Workers {
    pool: Rc<dyn Pool>,
    /// Why the pool is no longer used, once it failed.
    failed: RefCell<Option<String>>,
    /// Threads the last batch ran on (0 before any ran).
    used: Cell<usize>,
    paces: RefCell<Vec<(Where, Pace)>>,
    /// Told whenever the pace, the threads used or the failure changes.
    watchers: RefCell<Vec<Box<dyn Fn()>>>,
}

impl Workers {
    /// Batch work on `pool`.
    pub fn new(pool: Rc<dyn Pool>) -> Workers {
        Workers {
            pool,
            failed: RefCell::new(None),
            used: Cell::new(0),
            paces: RefCell::new(Vec::new()),
            watchers: RefCell::new(Vec::new()),
        }
    }

    /// Calls `f` whenever what these workers report changes (for a page that shows it).
    pub fn watch(&self, f: impl Fn() + 'static) {
        self.watchers.borrow_mut().push(Box::new(f));
    }

    fn changed(&self) {
        self.watchers.borrow().iter().for_each(|f| f());
    }

    /// Where batch work on the CPU kernel runs now: the pool, unless it has one thread or failed.
    pub fn place(&self) -> Where {
        match self.pool.threads() {
            n if n > 1 && self.failed.borrow().is_none() => Where::Workers(n),
            _ => Where::PageThread,
        }
    }

    /// Why the work runs on the page's thread although more were asked for, once known.
    pub fn note(&self) -> Option<String> {
        let why = self.failed.borrow().clone()?;
        Some(format!(
            "Computing on this page's thread only: the {} workers could not be used ({why}).",
            self.pool.threads()
        ))
    }

    /// What the page and these workers hold in memory, as a sentence ([`memory_note`]), `page`
    /// being the page's own wasm memory's bytes and `file` its model file's.
    pub fn memory_note(&self, page: u64, file: u64) -> String {
        memory_note(page, file, &self.pool.memory())
    }

    /// Threads the last batch ran on (0 before any ran).
    pub fn used(&self) -> usize {
        self.used.get()
    }

    /// The pace work has run at in `place`.
    pub fn pace(&self, place: Where) -> Pace {
        self.paces.borrow().iter().find(|(w, _)| *w == place).map_or(Pace::default(), |(_, p)| *p)
    }

    fn record(&self, place: Where, flops: u64, ms: f64) {
        {
            let mut paces = self.paces.borrow_mut();
            match paces.iter_mut().find(|(w, _)| *w == place) {
                Some((_, p)) => p.record(flops, ms),
                None => {
                    let mut p = Pace::default();
                    p.record(flops, ms);
                    paces.push((place, p));
                }
            }
        }
        if place != Where::Gpu {
            self.used.set(match place {
                Where::Workers(n) => n,
                _ => 1,
            });
        }
        self.changed();
    }

    fn fail(&self, why: String) {
        self.failed.borrow_mut().get_or_insert(why);
        self.changed();
    }
}

/// A model of family `F` on the page's backend, its workers, and everything that runs on them.
pub struct Engine<F: Family> {
    model: Rc<F>,
    runner: F::Runner,
    workers: Rc<Workers>,
    here: PageThread,
    host: Rc<dyn Host>,
    /// The turns of the page's thread, for the passes made there.
    turns: Rc<HostTurns>,
    kept: F::Kept,
}

impl<F: Family> Engine<F> {
    /// The model on `session`'s backend (uploaded to its GPU and, unless the reader forced the
    /// GPU, timed there and on the CPU kernel), its batch work on `workers`.
    pub async fn new(model: Rc<F>, session: &Session, workers: Rc<Workers>, host: Rc<dyn Host>) -> Engine<F> {
        let turns = Rc::new(HostTurns::new(host.clone()));
        let runner = F::runner(&model, session, &HostClock(&*host), turns.clone()).await;
        let here = PageThread::new(F::held(&model));
        Engine { model, runner, workers, here, host, turns, kept: F::Kept::default() }
    }

    /// The model.
    pub fn model(&self) -> &Rc<F> {
        &self.model
    }

    /// The model's shape.
    pub fn spec(&self) -> &ModelSpec {
        self.model.shape()
    }

    /// Where the page's passes run (the GPU or the CPU kernel).
    pub fn runner(&self) -> &F::Runner {
        &self.runner
    }

    /// The batch work's pool and what is known of it.
    pub fn workers(&self) -> &Rc<Workers> {
        &self.workers
    }

    /// The clock and the browser's turn.
    pub fn host(&self) -> &dyn Host {
        &*self.host
    }

    /// The turns the passes made on the page's thread give it.
    pub fn turns(&self) -> &dyn Turns {
        &*self.turns
    }

    /// What the engine keeps of earlier passes (the family's).
    pub fn kept(&self) -> &F::Kept {
        &self.kept
    }

    /// The page's own thread, which runs pieces one at a time.
    pub fn page_thread(&self) -> &PageThread {
        &self.here
    }

    /// Where `piece` runs now.
    pub fn place_of(&self, piece: &Piece) -> Where {
        F::place_of(self, piece)
    }

    /// FLOPs `piece` takes where it runs now.
    pub fn flops(&self, piece: &Piece) -> u64 {
        F::flops(self, piece)
    }

    /// How many pieces to deal work of `probe`'s kind (one head at a time) into: one per worker,
    /// or one per head where it runs one piece at a time here.
    pub fn deal_like(&self, probe: &Piece) -> usize {
        match self.place_of(probe) {
            Where::Workers(n) => n,
            Where::Gpu | Where::PageThread => self.spec().total_heads(),
        }
    }

    /// How long `flops` of work should take in `place` at the pace measured there ("about 14 s
    /// at the 27 GFLOP/s measured here"); `None` before anything ran there, or for a few seconds.
    pub fn estimate(&self, flops: u64, place: Where) -> Option<String> {
        self.workers.pace(place).duration(flops, 3.0)
    }

    /// How many of `pieces` (all of one batch, in the same place) to run at once: all of them
    /// on the workers, one at a time elsewhere, so the browser gets its turn between them.
    pub fn at_once(&self, pieces: &[Piece]) -> usize {
        match pieces.first().map(|w| self.place_of(w)) {
            Some(Where::Workers(_)) => pieces.len(),
            _ => pieces.len().min(1),
        }
    }

    /// Runs `pieces` where they run now (on busy workers, `priority` among the pieces waiting),
    /// results in order. `None` when the workers failed on them (they are not used again; the
    /// caller runs the pieces again, here).
    pub async fn run(&self, pieces: Vec<Piece>, priority: Priority) -> Option<Vec<Done>> {
        let Some(place) = pieces.first().map(|w| self.place_of(w)) else { return Some(Vec::new()) };
        let spec = *self.spec();
        let flops: u64 = pieces.iter().map(|w| w.flops(&spec)).sum();
        if place != Where::Gpu && place != Where::PageThread {
            if let Err(why) = self.workers.pool.ready().await {
                return self.workers_failed(why);
            }
        }
        // Timed from here: the pool's start (workers spawned, the model loaded) is not the work's.
        let t0 = self.host.now_ms();
        let (done, flops) = match place {
            Where::Workers(_) => match self.workers.pool.run(pieces.clone(), priority).await {
                Ok(done)
                    if pieces.iter().zip(&done).all(|(w, d)| w.accepts(&spec, d))
                        && done.len() == pieces.len() =>
                {
                    (done, flops)
                }
                Ok(_) => {
                    return self.workers_failed("a worker answered with a result of the wrong shape".into())
                }
                Err(why) => return self.workers_failed(why),
            },
            Where::Gpu | Where::PageThread => {
                let mut out = Vec::with_capacity(pieces.len());
                let mut saved = 0;
                for w in &pieces {
                    let (done, reused) = F::run_here(self, w).await;
                    out.push(done);
                    saved += reused;
                }
                (out, flops - saved)
            }
        };
        self.workers.record(place, flops, self.host.now_ms() - t0);
        Some(done)
    }

    fn workers_failed(&self, why: String) -> Option<Vec<Done>> {
        self.workers.fail(why);
        None
    }

    /// Runs `piece` on the page's thread, on the CPU kernel, its passes in steps between the
    /// browser's turns.
    ///
    /// # Panics
    /// If the piece does not fit the model: a job's pieces are made for its engine's model.
    pub async fn run_on_page_thread(&self, piece: &Piece) -> Done {
        let done = self.here.run_one_in_turns(piece, &*self.turns).await;
        done.unwrap_or_else(|e| panic!("a piece of this engine's own job: {e}"))
    }
}

/// The memory the page's wasm holds (`page` bytes), its model file outside it (`file` bytes, in
/// JavaScript buffers, copied to each worker as it starts) and each worker's wasm (`workers`, as
/// they last said; none before they started), as the page says it: each browser tab and each
/// worker has a wasm memory of its own, of at most 4 GiB, which only grows.
pub fn memory_note(page: u64, file: u64, workers: &[u64]) -> String {
    use crate::model::digits::bytes_text;
    let page = format!(
        "Memory: this page's wasm holds {}, and its model file {} outside it",
        bytes_text(page),
        bytes_text(file)
    );
    match workers {
        [] => format!("{page}; the workers start with the first measurement."),
        [one] => format!("{page}; its worker {}.", bytes_text(*one)),
        [rest @ .., last] => format!(
            "{page}; its {} workers {} and {} (each its own copy of the model).",
            workers.len(),
            rest.iter().map(|b| bytes_text(*b)).collect::<Vec<_>>().join(", "),
            bytes_text(*last)
        ),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_memory_note_names_the_page_and_each_worker() {
        use super::memory_note;
        let gb = |x: f64| (x * (1u64 << 30) as f64) as u64;
        assert_eq!(
            memory_note(gb(2.9), gb(1.44), &[]),
            "Memory: this page's wasm holds 2.9 GB, and its model file 1.4 GB outside it; the workers start with the first measurement."
        );
        assert_eq!(
            memory_note(90 << 20, 2 << 20, &[80 << 20]),
            "Memory: this page's wasm holds 90 MB, and its model file 2 MB outside it; its worker 80 MB."
        );
        assert_eq!(
            memory_note(gb(2.9), gb(1.44), &[gb(2.8), gb(2.75), 512 << 20]),
            "Memory: this page's wasm holds 2.9 GB, and its model file 1.4 GB outside it; its 3 workers 2.8 GB, 2.8 GB and 512 MB (each its own copy of the model)."
        );
    }
}
