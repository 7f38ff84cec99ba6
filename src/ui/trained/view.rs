//! The trained-model panel's state: everything derived from the loaded model, the page's backend
//! session and the reader's sentence and heads. Each computation is a resource of its inputs that
//! runs a function of [`crate::model::analysis`] on a [`TrainedRunner`]; none writes a signal.

use std::rc::Rc;
use std::sync::Arc;

use leptos::prelude::*;

use super::loader::{LoadState, ASSET_URL};
use crate::attention::importance::Ranking;
use crate::attention::{cosine, HeadSet};
use crate::backend::TrainedRunner;
use crate::model::analysis::{
    self, CheckAnswer, Contrast, ImportanceSweep, MarginImportance, MarginSweep, Runner,
};
use crate::model::bert::{BertOutput, TOTAL_HEADS};
use crate::model::tokenizer::Token;
use crate::model::work::{ablation_pieces, dealt_sweep_flops, given_sweep_flops, Done, Work};
use crate::settings::Measure;
use crate::ui::browser::{now_ms, yield_to_browser, PageClock};
use crate::ui::pool::{auto_threads, Workers};
use crate::ui::state::{AppState, TrainedChoices};

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

impl Pass {
    async fn run(runner: &TrainedRunner, ids: Vec<u32>, heads: &HeadSet, base: Option<&BertOutput>) -> Pass {
        let t0 = now_ms();
        let out = Arc::new(runner.run(&ids, heads, base).await);
        let ran_on = runner.ran_on(ids.len());
        Pass { out, ids, ran_on, note: runner.note(), elapsed_ms: now_ms() - t0 }
    }
}

/// Every head's importance on one sentence.
pub struct SentenceImportance {
    /// The token ids of the sentence.
    pub ids: Vec<u32>,
    /// The heads ranked by how far removing each alone moves the embedding.
    pub ranking: Ranking,
}

/// The panel's derived state, shared by its parts through context.
#[derive(Clone, Copy)]
pub struct TrainedView {
    /// The reader's sentence, layer and heads.
    pub choices: TrainedChoices,
    /// Loading the model.
    pub load: RwSignal<LoadState, LocalStorage>,
    /// The model on the page's backend, once loaded and the backend chosen.
    pub runner: LocalResource<Option<Rc<TrainedRunner>>>,
    /// The sentence's tokens.
    pub tokens: Memo<Vec<Token>>,
    /// The unpruned pass over the sentence.
    pub full: LocalResource<Option<Rc<Pass>>>,
    /// The pass with the reader's heads pruned (the unpruned one when none is).
    pub current: LocalResource<Option<Rc<Pass>>>,
    /// Every head's importance on the sentence (72 passes, with the browser's turn between).
    pub importance: LocalResource<Option<Rc<SentenceImportance>>>,
    /// Half the heads pruned, least important first.
    pub contrast: LocalResource<Option<Contrast>>,
    /// The meaning check with every head, and with the reader's heads.
    pub check_full: LocalResource<Option<CheckAnswer>>,
    /// See `check_full`.
    pub check_now: LocalResource<Option<CheckAnswer>>,
    /// The meaning check's margin with each head alone pruned: measured once the reader first
    /// asks for it (3 x 72 passes), then kept for the session's runner.
    pub margin: LocalResource<Option<Rc<MarginImportance>>>,
    /// Where batch work on the CPU kernel runs: the page's web workers, or its own thread.
    pub workers: StoredValue<Rc<Workers>, LocalStorage>,
    /// Heads measured so far by the sweeps that run pass by pass on the page's thread (the drift
    /// on the GPU or with `?threads=1`, the margin always), for the status line.
    pub swept: RwSignal<Swept>,
}

/// How far the page's own-thread sweeps have come: heads measured, per measure.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// The sentence (token ids) the drift sweep measures, and its heads measured.
    pub drift: Option<(Vec<u32>, usize)>,
    /// Heads of the margin sweep measured.
    pub margin: usize,
}

impl TrainedView {
    /// The state of a panel opened with `load` under way.
    pub fn new(load: RwSignal<LoadState, LocalStorage>) -> TrainedView {
        let app = AppState::get();
        let choices = app.trained;
        let threads = app.settings.with_untracked(|s| s.threads.count(auto_threads()));
        let workers = StoredValue::new_local(Rc::new(Workers::new(threads, ASSET_URL)));
        let runner = LocalResource::new(move || {
            let (model, session) = (load.with(LoadState::model), app.session.get());
            async move { Some(Rc::new(TrainedRunner::new(model?, &*session?, &PageClock).await)) }
        });
        let tokens = Memo::new(move |_| {
            load.with(|s| s.model().map(|m| m.tokenizer.encode(&choices.text.read())).unwrap_or_default())
        });
        let full = LocalResource::new(move || {
            let (runner, ids) = (runner.get().flatten(), ids_of(tokens));
            async move { Some(Rc::new(Pass::run(&*runner?, ids, &HeadSet::all(TOTAL_HEADS), None).await)) }
        });
        let current = LocalResource::new(move || {
            let (full, heads, runner) = (full.get().flatten(), choices.heads.get(), runner.get().flatten());
            async move {
                let (full, runner) = (full?, runner?);
                if !heads.any_pruned() {
                    return Some(full);
                }
                // Only the layers from the first pruned one on are computed again.
                Some(Rc::new(Pass::run(&runner, full.ids.clone(), &heads, Some(&full.out)).await))
            }
        });
        let swept = RwSignal::new(Swept::default());
        let importance = LocalResource::new(move || {
            let (runner, base) = (runner.get().flatten(), full.get().flatten());
            let workers = workers.get_value();
            async move { measure_importance(runner?, base?, full, workers, swept).await }
        });
        let contrast = LocalResource::new(move || {
            let (runner, base, imp) =
                (runner.get().flatten(), full.get().flatten(), importance.get().flatten());
            async move {
                let (runner, base, imp) = (runner?, base?, imp?);
                (imp.ids == base.ids).then_some(())?;
                Some(analysis::contrast(&*runner, &base.ids, &base.out, &imp.ranking).await)
            }
        });
        let check = move |heads: HeadSet| {
            let runner = runner.get().flatten();
            async move {
                let runner = runner?;
                Some(analysis::meaning_check(&*runner, &runner.model().tokenizer, &heads).await)
            }
        };
        let check_full = LocalResource::new(move || check(HeadSet::all(TOTAL_HEADS)));
        let check_now = LocalResource::new(move || check(choices.heads.get()));
        let margin_wanted = Memo::new(move |was: Option<&bool>| {
            was.copied().unwrap_or(false) || choices.measure.get() == Measure::Margin
        });
        let margin = LocalResource::new(move || {
            let (runner, wanted) = (runner.get().flatten(), margin_wanted.get());
            async move {
                let runner = runner.filter(|_| wanted)?;
                swept.update(|s| s.margin = 0);
                let mut sweep = MarginSweep::start(&*runner, &runner.model().tokenizer).await;
                while sweep.step(&*runner).await {
                    swept.update(|s| s.margin = sweep.done());
                    yield_to_browser().await;
                }
                sweep.result().map(Rc::new)
            }
        });
        TrainedView {
            choices,
            load,
            runner,
            tokens,
            full,
            current,
            importance,
            contrast,
            check_full,
            check_now,
            margin,
            workers,
            swept,
        }
    }

    /// Shares this view with the panel's parts.
    pub fn provide(self) {
        provide_context(self);
    }

    /// The panel's view, from any of its parts.
    pub fn get() -> TrainedView {
        expect_context::<TrainedView>()
    }

    /// Whether the model is ready to run: loaded, and on the page's backend (its weights on the
    /// GPU, when the page has one).
    pub fn ready(&self) -> bool {
        self.runner.with(|r| matches!(r, Some(Some(_))))
    }

    /// The token ids of the sentence.
    pub fn ids(&self) -> Vec<u32> {
        ids_of(self.tokens)
    }

    /// The pass with the reader's heads, once it is for the heads the page says are pruned: while
    /// a new pass runs, the resource still holds the last one.
    pub fn current_for_heads(&self) -> Option<Rc<Pass>> {
        let pass = self.current.get().flatten()?;
        self.choices.heads.with(|h| pass.out.heads == *h).then_some(pass)
    }

    /// Cosine of the pruned sentence embedding to the full one, for the heads pruned now.
    pub fn cosine(&self) -> Option<f64> {
        let (full, now) = (self.full.get().flatten()?, self.current_for_heads()?);
        (full.ids == now.ids).then(|| cosine(&full.out.embedding, &now.out.embedding))
    }

    /// Heads of the current sentence's drift sweep measured so far on the page's thread (0 when
    /// the sweep runs on the workers, or has not measured one yet).
    pub fn drift_swept(&self) -> usize {
        let ids = self.ids();
        self.swept.with(|s| s.drift.as_ref().filter(|(of, _)| *of == ids).map_or(0, |(_, done)| *done))
    }

    /// The embedding-drift ranking, when it is the current sentence's.
    pub fn drift_importance(&self) -> Option<Rc<SentenceImportance>> {
        let imp = self.importance.get().flatten()?;
        (imp.ids == self.ids()).then_some(imp)
    }

    /// How long this sentence's importance sweep should take on the CPU kernel, at the pace the
    /// page's batch work has run so far ("about 14 s at the 27 GFLOP/s measured here"); `None`
    /// on the GPU, before anything was timed, and for a sweep of a few seconds.
    pub fn sweep_estimate(&self) -> Option<String> {
        let (runner, n) = (self.runner.get().flatten()?, self.tokens.with(Vec::len));
        if runner.on_gpu(n) {
            return None;
        }
        let workers = self.workers.get_value();
        let flops = match workers.parallel() {
            true => dealt_sweep_flops(n, workers.running_on()),
            false => given_sweep_flops(n),
        };
        workers.pace.get().duration(flops, 3.0)
    }

    /// Where the model runs, and why not on the GPU when it is not: as of the last pass.
    pub fn running_on(&self) -> Option<(String, Option<String>)> {
        match self.current.get().flatten() {
            Some(pass) => Some((pass.ran_on.clone(), pass.note.clone())),
            None => self.runner.get().flatten().map(|r| (r.ran_on(self.ids().len()), r.note())),
        }
    }
}

fn ids_of(tokens: Memo<Vec<Token>>) -> Vec<u32> {
    tokens.with(|t| t.iter().map(|t| t.id).collect())
}

/// The importance sweep over `base`'s sentence, one pass per head; abandoned (`None`) as soon
/// as `full` holds another pass (the sentence or the backend changed, and a newer sweep is due).
/// On the CPU kernel with workers, the heads are shared among them ([`ablation_pieces`]); else
/// the passes run here, with the browser's turn between.
async fn measure_importance(
    runner: Rc<TrainedRunner>,
    base: Rc<Pass>,
    full: LocalResource<Option<Rc<Pass>>>,
    workers: Rc<Workers>,
    swept: RwSignal<Swept>,
) -> Option<Rc<SentenceImportance>> {
    let wanted = || full.get_untracked().flatten().is_some_and(|f| Rc::ptr_eq(&f, &base));
    if !runner.on_gpu(base.ids.len()) && workers.parallel() {
        let work = ablation_pieces(&base.ids, workers.running_on());
        let done = workers.run(&runner.model().bert, work.clone(), wanted).await?;
        let mut values = vec![0.0; TOTAL_HEADS];
        for (w, d) in work.iter().zip(done) {
            if let (Work::Ablate { ablate, .. }, Done::Drifts(drifts)) = (w, d) {
                ablate.iter().zip(drifts).for_each(|(&h, v)| values[h] = v);
            }
        }
        return Some(Rc::new(SentenceImportance { ids: base.ids.clone(), ranking: Ranking::new(values) }));
    }
    let (mut sweep, mut busy_ms) = (ImportanceSweep::new(base.ids.clone(), base.out.clone()), 0.0);
    loop {
        yield_to_browser().await;
        if !wanted() {
            return None;
        }
        let started = now_ms();
        let more = sweep.step(&*runner).await;
        busy_ms += now_ms() - started;
        // A sweep abandoned meanwhile leaves the count to the one that replaced it.
        if wanted() {
            swept.update(|s| s.drift = Some((base.ids.clone(), sweep.done())));
        }
        if !more {
            break;
        }
    }
    // On the CPU kernel the sweep's pace is the page's too (the next long sentence's estimate),
    // counted without the browser's turns between the passes.
    if !runner.on_gpu(base.ids.len()) {
        workers.record(given_sweep_flops(base.ids.len()), busy_ms);
    }
    Some(Rc::new(SentenceImportance { ids: base.ids.clone(), ranking: sweep.ranking()? }))
}
