//! The trained-model panel's state for one model: the model on the page's backend (a
//! [`crate::jobs::engine::Engine`]), and everything derived from it and the reader's sentence and
//! heads. Each computation is a resource of its inputs that runs a pass or starts a job; the jobs
//! publish their progress into signals the parts show.

use std::rc::Rc;

use leptos::prelude::*;

use super::loader::Shown;
use crate::attention::importance::Ranking;
use crate::attention::precision::Precision;
use crate::attention::{cosine, HeadSet};
use crate::jobs::driver::{drive_plan, Status};
use crate::jobs::encoder::engine::Pass;
use crate::jobs::encoder::sweep::{DriftSweep, MarginSweep};
use crate::jobs::engine::{Engine, Workers};
use crate::jobs::ticket::Ticket;
use crate::jobs::web::{auto_threads, PageHost, WebWorkers};
use crate::model::encoder::check::{meaning_check, CheckAnswer, MarginImportance};
use crate::model::encoder::contrast::Contrast;
use crate::model::encoder::Encoder;
use crate::model::spec::ModelSpec;
use crate::model::tokenize::Token;
use crate::settings::Measure;
use crate::ui::state::{AppState, TrainedChoices};

/// Every head's importance on one sentence.
pub struct SentenceImportance {
    /// The token ids of the sentence.
    pub ids: Vec<u32>,
    /// The heads ranked by the measure.
    pub ranking: Ranking,
}

/// A job's status, for the sentence (token ids) it works on.
pub type SentenceStatus = Option<(Vec<u32>, Status)>;

/// The panel's derived state, shared by its parts through context.
#[derive(Clone, Copy)]
pub struct EncoderView {
    /// The reader's sentence, layer and heads.
    pub choices: TrainedChoices,
    /// The model this view shows, at the reader's precision (a new model or precision gets a
    /// new view).
    model: StoredValue<Rc<Encoder>, LocalStorage>,
    /// Why the model runs at another precision than the reader asked for, when it does.
    pub precision_note: StoredValue<Option<String>>,
    /// The model on the page's backend and its workers, once loaded and the backend chosen.
    pub engine: LocalResource<Option<Rc<Engine<Encoder>>>>,
    /// Where the model's batch work runs, kept while the model is (the workers hold it).
    pub workers: StoredValue<Rc<Workers>, LocalStorage>,
    /// Changes whenever the workers' pace, threads or failure does.
    pub workers_changed: Trigger,
    /// The sentence's tokens.
    pub tokens: Memo<Vec<Token>>,
    /// The unpruned pass over the sentence.
    pub full: LocalResource<Option<Rc<Pass>>>,
    /// The pass with the reader's heads pruned (the unpruned one when none is).
    pub current: LocalResource<Option<Rc<Pass>>>,
    /// Every head's drift importance on the sentence (a job).
    pub importance: LocalResource<Option<Rc<SentenceImportance>>>,
    /// How far the drift importance has come, for the sentence it measures.
    pub importance_status: RwSignal<SentenceStatus>,
    /// Half the heads pruned, least important first.
    pub contrast: LocalResource<Option<Contrast>>,
    /// The meaning check with every head, and with the reader's heads.
    pub check_full: LocalResource<Option<CheckAnswer>>,
    /// See `check_full`.
    pub check_now: LocalResource<Option<CheckAnswer>>,
    /// The meaning check's margin with each head alone pruned (a job): measured once the reader
    /// first asks for it, then kept for the session's engine.
    pub margin: LocalResource<Option<Rc<MarginImportance>>>,
    /// How far the margin sweep has come.
    pub margin_status: RwSignal<Option<Status>>,
}

impl EncoderView {
    /// The panel's state for the encoder `encoder` (of the model `shown`): its workers, its
    /// engine on the page's backend, and everything computed from it.
    pub fn new(encoder: &Rc<Encoder>, shown: &Shown, precision: Precision) -> EncoderView {
        let app = AppState::get();
        let choices = app.trained;
        let (model, precision_note) = Encoder::for_precision(encoder, precision);
        let threads = app.settings.with_untracked(|s| s.threads.count(auto_threads()));
        let file = shown.file.clone();
        let workers = Rc::new(Workers::new(Rc::new(WebWorkers::new(threads, file, model.precision()))));
        let workers_changed = Trigger::new();
        workers.watch(move || workers_changed.notify());
        let workers = StoredValue::new_local(workers);
        let model = StoredValue::new_local(model);
        let engine = LocalResource::new(move || {
            let (model, session, workers) = (model.get_value(), app.session.get(), workers.get_value());
            async move { Some(Rc::new(Engine::new(model, &*session?, workers, Rc::new(PageHost)).await)) }
        });
        let tokens = Memo::new(move |_| model.with_value(|m| m.tokenizer.encode(&choices.text.read())));
        // The last pass with the reader's heads, kept for as long as this view is: a pass whose
        // heads are changed again, or whose view is gone, ends at its next turn.
        let last = StoredValue::new_local(None::<Rc<Pass>>);
        let shown = move || last.try_with_value(|_| ()).is_some();
        let full = LocalResource::new(move || {
            let (engine, ids) = (engine.get().flatten(), ids_of(tokens));
            async move {
                let engine = engine?;
                let all = HeadSet::all(engine.model().spec().total_heads());
                Some(Rc::new(engine.pass_while(ids, &all, None, &shown).await?))
            }
        });
        let current = LocalResource::new(move || {
            let (full, heads, engine) = (full.get().flatten(), choices.heads.get(), engine.get().flatten());
            async move {
                let (full, engine) = (full?, engine?);
                if !heads.any_pruned() || heads.len() != full.out.heads.len() {
                    last.try_set_value(Some(full.clone()));
                    return Some(full);
                }
                // Only the layers from the first pruned one on are computed again, while these
                // are still the reader's heads; if not, the last pass stays until the next lands.
                let wanted = || shown() && choices.heads.try_with_untracked(|h| *h == heads).unwrap_or(false);
                let pass = match engine.pass_while(full.ids.clone(), &heads, Some(&full.out), &wanted).await {
                    Some(pass) => Rc::new(pass),
                    None => return last.try_get_value().flatten(),
                };
                last.try_set_value(Some(pass.clone()));
                Some(pass)
            }
        });
        let (importance, importance_status) = drift_importance(engine, full);
        let contrast = LocalResource::new(move || {
            let (engine, base, imp) =
                (engine.get().flatten(), full.get().flatten(), importance.get().flatten());
            async move {
                let (engine, base, imp) = (engine?, base?, imp?);
                (imp.ids == base.ids).then_some(())?;
                Some(Contrast::measure(engine.runner(), &base.ids, &base.out, &imp.ranking).await)
            }
        });
        let check = move |heads: Option<HeadSet>| {
            let engine = engine.get().flatten();
            async move {
                let engine = engine?;
                let heads = heads.unwrap_or_else(|| HeadSet::all(engine.model().spec().total_heads()));
                (heads.len() == engine.model().spec().total_heads()).then_some(())?;
                Some(meaning_check(engine.runner(), &engine.model().tokenizer, &heads).await)
            }
        };
        let check_full = LocalResource::new(move || check(None));
        let check_now = LocalResource::new(move || check(Some(choices.heads.get())));
        let (margin, margin_status) = margin_importance(engine, choices.measure);
        EncoderView {
            choices,
            model,
            precision_note: StoredValue::new(precision_note),
            engine,
            workers,
            workers_changed,
            tokens,
            full,
            current,
            importance,
            importance_status,
            contrast,
            check_full,
            check_now,
            margin,
            margin_status,
        }
    }

    /// Shares this view with the panel's parts.
    pub fn provide(self) {
        provide_context(self);
    }

    /// The panel's view, from any of its parts.
    pub fn get() -> EncoderView {
        expect_context::<EncoderView>()
    }

    /// The model.
    pub fn model(&self) -> Rc<Encoder> {
        self.model.get_value()
    }

    /// The model's shape.
    pub fn spec(&self) -> ModelSpec {
        self.model.with_value(|m| *m.spec())
    }

    /// The model's name.
    pub fn name(&self) -> String {
        self.model.with_value(|m| m.name.clone())
    }

    /// Whether the model is ready to run: loaded, and on the page's backend (its weights on the
    /// GPU, when the page has one).
    pub fn ready(&self) -> bool {
        self.engine.with(|r| matches!(r, Some(Some(_))))
    }

    /// The token ids of the sentence.
    pub fn ids(&self) -> Vec<u32> {
        ids_of(self.tokens)
    }

    /// The pass with the reader's heads (or the last one, while a new one runs). Each model on
    /// show has a view of its own, so every pass here is this model's.
    pub fn pass_now(&self) -> Option<Rc<Pass>> {
        self.current.get().flatten()
    }

    /// The unpruned pass over the sentence.
    pub fn full_now(&self) -> Option<Rc<Pass>> {
        self.full.get().flatten()
    }

    /// The pass with the reader's heads, once it is for the sentence the page shows and the heads
    /// it says are pruned: while a new pass runs, the resource still holds the last one.
    pub fn current_for_choices(&self) -> Option<Rc<Pass>> {
        let pass = self.pass_now()?;
        let heads = self.choices.heads.with(|h| pass.out.heads == *h);
        let sentence = self.tokens.with(|t| t.iter().map(|t| t.id).eq(pass.ids.iter().copied()));
        (heads && sentence).then_some(pass)
    }

    /// What was cut from the reader's sentence to fit the model, if anything was.
    pub fn cut_note(&self) -> Option<String> {
        let text = self.choices.text.read();
        self.model.with_value(|m| m.cut_note(&text))
    }

    /// Cosine of the pruned sentence embedding to the full one, for the sentence shown and the
    /// heads pruned now (never the last sentence's beside the new one's tokens).
    pub fn cosine(&self) -> Option<f64> {
        let (full, now) = (self.full_now()?, self.current_for_choices()?);
        (full.ids == now.ids).then(|| cosine(&full.out.embedding, &now.out.embedding))
    }

    /// The drift sweep's status, when it is the current sentence's.
    pub fn drift_status(&self) -> Option<Status> {
        let ids = self.ids();
        self.importance_status.with(|s| s.as_ref().filter(|(of, _)| *of == ids).map(|(_, s)| s.clone()))
    }

    /// The embedding-drift ranking, when it is the current sentence's.
    pub fn drift_importance(&self) -> Option<Rc<SentenceImportance>> {
        let imp = self.importance.get().flatten()?;
        (imp.ids == self.ids() && imp.ranking.len() == self.spec().total_heads()).then_some(imp)
    }

    /// Where the model runs, and why not on the GPU when it is not: as of the last pass.
    pub fn running_on(&self) -> Option<(String, Option<String>)> {
        match self.pass_now() {
            Some(pass) => Some((pass.ran_on.clone(), pass.note.clone())),
            None => {
                self.engine.get().flatten().map(|e| (e.runner().ran_on(self.ids().len()), e.runner().note()))
            }
        }
    }
}

fn ids_of(tokens: Memo<Vec<Token>>) -> Vec<u32> {
    tokens.with(|t| t.iter().map(|t| t.id).collect())
}

/// The drift importance of the sentence of `full` (a job on `engine`), and its status.
fn drift_importance(
    engine: LocalResource<Option<Rc<Engine<Encoder>>>>,
    full: LocalResource<Option<Rc<Pass>>>,
) -> (LocalResource<Option<Rc<SentenceImportance>>>, RwSignal<SentenceStatus>) {
    let status = RwSignal::new(None::<(Vec<u32>, Status)>);
    let importance = LocalResource::new(move || {
        // Waits for the sentence's unpruned pass: the sweep starts from it.
        let (engine, base) = (engine.get().flatten(), full.get().flatten());
        async move {
            let (engine, base) = (engine?, base?);
            // Wanted while the page's unpruned pass is this one (the sentence or the backend
            // did not change).
            let of = base.clone();
            let ticket = Ticket::while_wanted(move || {
                full.try_get_untracked().flatten().flatten().is_some_and(|f| Rc::ptr_eq(&f, &of))
            });
            let ids = base.ids.clone();
            let job = DriftSweep::new(&engine, ids.clone());
            let ranking =
                drive_plan(&engine, job, &ticket, &mut |s| status.set(Some((ids.clone(), s)))).await?;
            Some(Rc::new(SentenceImportance { ids, ranking }))
        }
    });
    (importance, status)
}

/// Whether `engine` still holds `of`.
pub(super) fn engine_is(
    engine: LocalResource<Option<Rc<Engine<Encoder>>>>,
    of: &Rc<Engine<Encoder>>,
) -> bool {
    engine.try_get_untracked().flatten().flatten().is_some_and(|e| Rc::ptr_eq(&e, of))
}

/// The margin importance (a job on `engine`), once the reader first chooses that measure, and
/// its status.
fn margin_importance(
    engine: LocalResource<Option<Rc<Engine<Encoder>>>>,
    measure: RwSignal<Measure>,
) -> (LocalResource<Option<Rc<MarginImportance>>>, RwSignal<Option<Status>>) {
    let engine_resource = engine;
    let wanted = Memo::new(move |was: Option<&bool>| {
        was.copied().unwrap_or(false) || measure.get() == Measure::Margin
    });
    let status = RwSignal::new(None::<Status>);
    let margin = LocalResource::new(move || {
        let (engine, wanted) = (engine.get().flatten(), wanted.get());
        async move {
            let engine = engine.filter(|_| wanted)?;
            // Wanted while the page's engine is this one (the backend did not change).
            let of = engine.clone();
            let ticket = Ticket::while_wanted(move || engine_is(engine_resource, &of));
            status.set(None);
            let job = MarginSweep::new(&engine);
            drive_plan(&engine, job, &ticket, &mut |s| status.set(Some(s))).await.map(Rc::new)
        }
    });
    (margin, status)
}
