//! The one object that decides where the trained model's work runs, and runs it: the model on
//! the page's backend ([`EncoderRunner`]: the GPU while it works, else the CPU kernel), the pool
//! of threads for batch work ([`Workers`]), the unpruned passes kept for reuse, and the pace
//! each place has run at.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use super::host::{Host, HostClock};
use super::pace::Pace;
use super::pool::{PageThread, Pool, Priority};
use crate::attention::HeadSet;
use crate::backend::{EncoderRunner, Session};
use crate::jobs::work::{ablation_flops, Done, Work};
use crate::model::encoder::bert::BertOutput;
use crate::model::encoder::runner::Runner;
use crate::model::encoder::Encoder;

/// Pieces an ablation is dealt into per worker when the page hands them its unpruned passes.
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

/// One pass of the trained model, and where and how it ran.
pub struct Pass {
    /// What it computed.
    pub out: Arc<BertOutput>,
    /// The token ids it ran on.
    pub ids: Vec<u32>,
    /// Where it ran ("the GPU (WebGPU)"), and why when a measurement chose.
    pub ran_on: String,
    /// Why the model is not on the GPU, when it is not (as of this pass).
    pub note: Option<String>,
    /// Milliseconds it took.
    pub elapsed_ms: f64,
}

/// Unpruned passes kept for the work that removes one head at a time from them: the page's
/// sentence and the meaning check's three, within [`TRACE_BYTES`] (the newest always kept: a
/// 512-token pass of MiniLM is about 85 MB, and wasm memory never shrinks).
const TRACES_KEPT: usize = 4;

/// Bytes of unpruned passes kept beyond the newest.
const TRACE_BYTES: usize = 32 << 20;

/// Bytes a pass holds: attention maps, heads' outputs, layer inputs.
fn trace_bytes(out: &BertOutput) -> usize {
    let floats = out.attention.iter().map(|a| a.len()).sum::<usize>()
        + out.head_outputs.iter().map(|h| h.len()).sum::<usize>()
        + out.layer_inputs.iter().map(Vec::len).sum::<usize>();
    4 * floats
}

/// The model on the page's backend, its workers, and everything that runs on them.
pub struct Engine {
    model: Rc<Encoder>,
    runner: EncoderRunner,
    workers: Rc<Workers>,
    here: PageThread,
    host: Rc<dyn Host>,
    /// Unpruned passes by their token ids and heads, most recent last.
    traces: RefCell<Vec<(Vec<u32>, Arc<BertOutput>)>>,
}

impl Engine {
    /// The model on `session`'s backend (uploaded to its GPU and, unless the reader forced the
    /// GPU, timed there and on the CPU kernel), its batch work on `workers`.
    pub async fn new(
        model: Rc<Encoder>,
        session: &Session,
        workers: Rc<Workers>,
        host: Rc<dyn Host>,
    ) -> Engine {
        let runner = EncoderRunner::new(model.clone(), session, &HostClock(&*host)).await;
        let here = PageThread::new(model.clone());
        Engine { model, runner, workers, here, host, traces: RefCell::new(Vec::new()) }
    }

    /// The model.
    pub fn model(&self) -> &Rc<Encoder> {
        &self.model
    }

    /// The model at `precision` on the page's thread: the model itself, or the copy the page's
    /// thread runs pieces at that precision on (made the first time), or why there can be none.
    pub fn model_at(&self, precision: crate::attention::precision::Precision) -> Result<Rc<Encoder>, String> {
        self.here.model_at(precision)
    }

    /// Where its passes run (the GPU or the CPU kernel).
    pub fn runner(&self) -> &EncoderRunner {
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

    /// One pass of the model on `ids` with `heads`, reusing `base`'s layers before the first one
    /// whose heads differ; an unpruned pass is kept for the work that removes heads from it.
    pub async fn pass(&self, ids: Vec<u32>, heads: &HeadSet, base: Option<&BertOutput>) -> Pass {
        let t0 = self.host.now_ms();
        let out = Arc::new(self.runner.run(&ids, heads, base).await);
        let elapsed_ms = self.host.now_ms() - t0;
        if !heads.any_pruned() {
            self.keep_trace(&ids, out.clone());
        }
        let ran_on = self.runner.ran_on(ids.len());
        Pass { out, ids, ran_on, note: self.runner.note(), elapsed_ms }
    }

    fn keep_trace(&self, ids: &[u32], out: Arc<BertOutput>) {
        let mut traces = self.traces.borrow_mut();
        traces.retain(|(i, o)| !(i == ids && o.heads == out.heads));
        traces.push((ids.to_vec(), out));
        // The oldest go first, until what is left beside the newest fits the budget.
        while traces.len() > TRACES_KEPT
            || (traces.len() > 1
                && traces[..traces.len() - 1].iter().map(|(_, o)| trace_bytes(o)).sum::<usize>()
                    > TRACE_BYTES)
        {
            traces.remove(0);
        }
    }

    /// The unpruned pass of `ids` with `heads`, if one is kept.
    fn kept_trace(&self, ids: &[u32], heads: &HeadSet) -> Option<Arc<BertOutput>> {
        self.traces.borrow().iter().find(|(i, o)| i == ids && o.heads == *heads).map(|(_, o)| o.clone())
    }

    /// The pass of `ids` with `heads`: kept from earlier, or run now (and kept); and whether it
    /// was kept.
    async fn trace(&self, ids: &[u32], heads: &HeadSet) -> (Arc<BertOutput>, bool) {
        match self.kept_trace(ids, heads) {
            Some(t) => (t, true),
            None => {
                let out = Arc::new(self.runner.run(ids, heads, None).await);
                self.keep_trace(ids, out.clone());
                (out, false)
            }
        }
    }

    /// Where `work` runs now: removing heads from a sentence runs on the GPU while the runner
    /// runs that length there; everything else on the CPU kernel, on the workers while they work.
    pub fn place_of(&self, work: &Work) -> Where {
        match work {
            Work::Ablate { sentences, .. }
                if sentences.iter().map(Vec::len).max().is_some_and(|n| self.runner.on_gpu(n)) =>
            {
                Where::Gpu
            }
            _ => self.workers.place(),
        }
    }

    /// FLOPs `work` takes where it runs now: removing heads from a sentence whose unpruned pass
    /// is kept here does not run that pass again.
    pub fn flops(&self, work: &Work) -> u64 {
        let spec = self.model.spec();
        match work {
            Work::Ablate { heads, sentences, .. } if !matches!(self.place_of(work), Where::Workers(_)) => {
                let reused = sentences
                    .iter()
                    .filter(|ids| self.kept_trace(ids, heads).is_some())
                    .map(|ids| ablation_flops(spec, ids.len(), &[]));
                work.flops(spec) - reused.sum::<u64>()
            }
            _ => work.flops(spec),
        }
    }

    /// How many pieces to deal the removal of every head from a sentence of `tokens` tokens
    /// into: one per worker, or one per head where they run one at a time here.
    pub fn deal(&self, tokens: usize) -> usize {
        let probe = Work::Ablate {
            heads: HeadSet::default(),
            sentences: vec![vec![0; tokens]],
            ablate: vec![],
            traces: vec![],
        };
        self.deal_like(&probe)
    }

    /// How to deal the removal of every head from `heads` on `sentences`: into how many pieces,
    /// and the unpruned passes to hand each piece. On workers, when the page kept every
    /// sentence's unpruned CPU pass (its layers' inputs and heads' outputs), each piece gets them
    /// instead of running them again, and the heads are dealt into [`PIECES_PER_WORKER`] pieces
    /// per worker, so that a worker that finishes first takes the next piece; else one piece per
    /// worker (each runs the unpruned passes once). Elsewhere one piece per head.
    pub fn deal_ablation(&self, sentences: &[Vec<u32>], heads: &HeadSet) -> (usize, Vec<Arc<BertOutput>>) {
        let longest = sentences.iter().map(Vec::len).max().unwrap_or(0);
        let layers = self.model.spec().layers;
        match self.place_of(&Work::Ablate {
            heads: HeadSet::default(),
            sentences: vec![vec![0; longest]],
            ablate: vec![],
            traces: vec![],
        }) {
            Where::Workers(n) => {
                let traces: Option<Vec<_>> = sentences
                    .iter()
                    .map(|ids| self.kept_trace(ids, heads).filter(|t| t.head_outputs.len() == layers))
                    .collect();
                match traces {
                    Some(traces) if !sentences.is_empty() => (n * PIECES_PER_WORKER, traces),
                    _ => (n, Vec::new()),
                }
            }
            Where::Gpu | Where::PageThread => (self.model.spec().total_heads(), Vec::new()),
        }
    }

    /// How many pieces to deal work of `probe`'s kind (one head at a time) into: one per worker,
    /// or one per head where it runs one piece at a time here.
    pub fn deal_like(&self, probe: &Work) -> usize {
        match self.place_of(probe) {
            Where::Workers(n) => n,
            Where::Gpu | Where::PageThread => self.model.spec().total_heads(),
        }
    }

    /// How long `flops` of work should take in `place` at the pace measured there ("about 14 s
    /// at the 27 GFLOP/s measured here"); `None` before anything ran there, or for a few seconds.
    pub fn estimate(&self, flops: u64, place: Where) -> Option<String> {
        self.workers.pace(place).duration(flops, 3.0)
    }

    /// How many of `pieces` (all of one batch, in the same place) to run at once: all of them
    /// on the workers, one at a time elsewhere, so the browser gets its turn between them.
    pub fn at_once(&self, pieces: &[Work]) -> usize {
        match pieces.first().map(|w| self.place_of(w)) {
            Some(Where::Workers(_)) => pieces.len(),
            _ => pieces.len().min(1),
        }
    }

    /// Runs `pieces` where they run now (on busy workers, `priority` among the pieces waiting),
    /// results in order. `None` when the workers failed on them (they are not used again; the
    /// caller runs the pieces again, here).
    pub async fn run(&self, pieces: Vec<Work>, priority: Priority) -> Option<Vec<Done>> {
        let Some(place) = pieces.first().map(|w| self.place_of(w)) else { return Some(Vec::new()) };
        let spec = *self.model.spec();
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
                    let (done, reused) = self.run_here(w).await;
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

    /// Runs one piece on the page's thread; with the FLOPs it did not need (unpruned passes
    /// kept from earlier). Removing heads goes through the runner (the GPU where it runs this
    /// length), from the kept unpruned passes.
    async fn run_here(&self, work: &Work) -> (Done, u64) {
        let Work::Ablate { heads, sentences, ablate, .. } = work else {
            let done = self
                .here
                .run(vec![work.clone()], Priority::Now)
                .await
                .expect("the page's thread does not fail");
            return (done.into_iter().next().expect("one result a piece"), 0);
        };
        let spec = self.model.spec();
        let (mut out, mut traces, mut saved) = (Vec::new(), Vec::new(), 0);
        for ids in sentences {
            let (trace, reused) = self.trace(ids, heads).await;
            if reused {
                saved += ablation_flops(spec, ids.len(), &[]);
            }
            out.push(trace.embedding.clone());
            traces.push(trace);
        }
        for &h in ablate {
            let mut without = heads.clone();
            without.set(h, false);
            for (ids, trace) in sentences.iter().zip(&traces) {
                out.push(self.runner.embed(ids, &without, Some(trace)).await);
            }
        }
        (Done::Embeddings(out), saved)
    }
}
