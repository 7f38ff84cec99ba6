//! The engine for an encoder ([`Family`] for [`Encoder`]): its page passes run on an
//! [`EncoderRunner`] (the GPU while it works, else the CPU kernel), and the unpruned passes it
//! ran are kept for the work that removes one head at a time from them: on the page's thread
//! (or its GPU) that work starts from them, and on the workers each piece is handed them.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use crate::attention::precision::Precision;
use crate::attention::turns::Turns;
use crate::attention::HeadSet;
use crate::backend::{EncoderRunner, Session};
use crate::jobs::engine::{Engine, Family, Where, PIECES_PER_WORKER};
use crate::jobs::host::HostClock;
use crate::jobs::work::{ablation_flops, Done, Piece};
use crate::model::encoder::bert::BertOutput;
use crate::model::encoder::runner::Runner;
use crate::model::encoder::Encoder;
use crate::model::spec::ModelSpec;
use crate::model::Model;

/// One pass of the encoder, and where and how it ran.
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

/// An encoder's unpruned passes by their token ids and heads, most recent last.
#[derive(Default)]
pub struct Traces(RefCell<Vec<(Vec<u32>, Arc<BertOutput>)>>);

impl Family for Encoder {
    type Runner = EncoderRunner;
    type Kept = Traces;

    fn held(model: &Rc<Self>) -> Model {
        Model::Encoder(model.clone())
    }

    fn shape(&self) -> &ModelSpec {
        self.spec()
    }

    async fn runner(
        model: &Rc<Self>,
        session: &Session,
        clock: &HostClock<'_>,
        turns: Rc<dyn Turns>,
    ) -> EncoderRunner {
        EncoderRunner::new(model.clone(), session, clock, turns).await
    }

    /// Removing heads from a sentence runs on the GPU while the runner runs that length there;
    /// everything else on the CPU kernel, on the workers while they work.
    fn place_of(engine: &Engine<Self>, piece: &Piece) -> Where {
        match piece {
            Piece::Ablate { sentences, .. }
                if sentences.iter().map(Vec::len).max().is_some_and(|n| engine.runner().on_gpu(n)) =>
            {
                Where::Gpu
            }
            _ => engine.workers().place(),
        }
    }

    /// Removing heads from a sentence whose unpruned pass is kept here does not run that pass
    /// again.
    fn flops(engine: &Engine<Self>, piece: &Piece) -> u64 {
        let spec = engine.spec();
        match piece {
            Piece::Ablate { heads, sentences, .. }
                if !matches!(engine.place_of(piece), Where::Workers(_)) =>
            {
                let reused = sentences
                    .iter()
                    .filter(|ids| engine.kept_trace(ids, heads).is_some())
                    .map(|ids| ablation_flops(spec, ids.len(), &[]));
                piece.flops(spec) - reused.sum::<u64>()
            }
            _ => piece.flops(spec),
        }
    }

    /// Removing heads goes through the runner (the GPU where it runs this length), from the kept
    /// unpruned passes; every other piece runs on the page's thread.
    async fn run_here(engine: &Engine<Self>, piece: &Piece) -> (Done, u64) {
        let Piece::Ablate { heads, sentences, ablate, .. } = piece else {
            return (engine.run_on_page_thread(piece).await, 0);
        };
        let spec = engine.spec();
        let (mut out, mut traces, mut saved) = (Vec::new(), Vec::new(), 0);
        for ids in sentences {
            let (trace, reused) = engine.trace(ids, heads).await;
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
                out.push(engine.runner().embed(ids, &without, Some(trace)).await);
            }
        }
        (Done::Embeddings(out), saved)
    }
}

impl Engine<Encoder> {
    /// The model at `precision` on the page's thread: the model itself, or the copy the page's
    /// thread runs pieces at that precision on (made the first time), or why there can be none.
    pub fn model_at(&self, precision: Precision) -> Result<Rc<Encoder>, String> {
        self.page_thread().copies().encoder_at(precision).cloned()
    }

    /// One pass of the model on `ids` with `heads`, reusing `base`'s layers before the first one
    /// whose heads differ; an unpruned pass is kept for the work that removes heads from it.
    pub async fn pass(&self, ids: Vec<u32>, heads: &HeadSet, base: Option<&BertOutput>) -> Pass {
        self.pass_while(ids, heads, base, &|| true).await.expect("a pass wanted throughout ends")
    }

    /// [`Engine::pass`] for as long as `wanted` holds (the reader's heads or text still those
    /// it is for, its view still shown): `None` once it does not, at the pass's next turn.
    pub async fn pass_while(
        &self,
        ids: Vec<u32>,
        heads: &HeadSet,
        base: Option<&BertOutput>,
        wanted: &dyn Fn() -> bool,
    ) -> Option<Pass> {
        let t0 = self.host().now_ms();
        let out = Arc::new(self.runner().run_while(&ids, heads, base, wanted).await?);
        let elapsed_ms = self.host().now_ms() - t0;
        if !heads.any_pruned() {
            self.keep_trace(&ids, out.clone());
        }
        let ran_on = self.runner().ran_on(ids.len());
        Some(Pass { out, ids, ran_on, note: self.runner().note(), elapsed_ms })
    }

    fn keep_trace(&self, ids: &[u32], out: Arc<BertOutput>) {
        let mut traces = self.kept().0.borrow_mut();
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
        self.kept().0.borrow().iter().find(|(i, o)| i == ids && o.heads == *heads).map(|(_, o)| o.clone())
    }

    /// The pass of `ids` with `heads`: kept from earlier, or run now (and kept); and whether it
    /// was kept.
    async fn trace(&self, ids: &[u32], heads: &HeadSet) -> (Arc<BertOutput>, bool) {
        match self.kept_trace(ids, heads) {
            Some(t) => (t, true),
            None => {
                let out = Arc::new(self.runner().run(ids, heads, None).await);
                self.keep_trace(ids, out.clone());
                (out, false)
            }
        }
    }

    /// How many pieces to deal the removal of every head from a sentence of `tokens` tokens
    /// into: one per worker, or one per head where they run one at a time here.
    pub fn deal(&self, tokens: usize) -> usize {
        let probe = Piece::Ablate {
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
        let layers = self.spec().layers;
        match self.place_of(&Piece::Ablate {
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
            Where::Gpu | Where::PageThread => (self.spec().total_heads(), Vec::new()),
        }
    }
}
