//! The task panel's state: the sentence pairs, and the jobs on them, each a resource that starts
//! a job on the panel's engine and publishes what it finds: the pruning curves (drawn as they
//! come, saved in the browser so a second visit shows them at once), the quality and speed of the
//! reader's own set of heads, every head's task importance and every head's role.

use std::rc::Rc;

use leptos::prelude::*;

use super::view::{EncoderView, SentenceImportance};
use crate::attention::importance::Ranking;
use crate::attention::HeadSet;
use crate::backend::precision_speed::PrecisionCost;
use crate::backend::pruned_speed::PrunedSpeed;
use crate::jobs::driver::{drive, drive_plan, Planned, Status};
use crate::jobs::encoder::curves::{CurveCache, CurveRun, WorkLeft};
use crate::jobs::encoder::levers::{precision_cost, precision_quality, PrecisionQuality};
use crate::jobs::encoder::task::{HeadRoles, SetQuality, SetScore, TaskData, TaskImportance};
use crate::jobs::encoder::timing::TimePruned;
use crate::jobs::engine::Engine;
use crate::jobs::ticket::Ticket;
use crate::model::encoder::curves::Curves;
use crate::model::encoder::roles::Role;
use crate::model::encoder::task::{Pairs, PAIRS_SHA256};
use crate::model::encoder::Encoder;
use crate::model::intervals::Estimate;
use crate::settings::Measure;
use crate::ui::browser::{fetch_bytes, BrowserStore};

/// Where the page finds the pairs (copied next to index.html by trunk).
pub const PAIRS_URL: &str = "sts-pairs.tsv";

/// How the curves' computation last stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CurveState {
    /// Waiting for the model and the pairs.
    Waiting,
    /// Not running: the reader has not started it, or paused it. What the browser saved is shown.
    Stopped,
    /// Every point is measured.
    Done,
}

/// Where the curves' computation stands while it runs.
#[derive(Clone, Debug, PartialEq)]
pub struct CurveStatus {
    /// Evaluations done and planned, and the time left at the workers' pace.
    pub status: Status,
    /// "About 50 s to the first complete curve and 3 min to every planned point, at the …"
    pub time_left: Option<String>,
}

/// The task panel's derived state.
#[derive(Clone, Copy)]
pub struct TaskView {
    /// The pairs, or why they could not be had.
    pub data: LocalResource<Option<Result<Rc<TaskData>, String>>>,
    /// What is known of the curves (drawn as it grows).
    pub curves: RwSignal<Curves, LocalStorage>,
    /// How far the curves have come, while they are computed.
    pub progress: RwSignal<Option<CurveStatus>>,
    /// The work the curves still need, while they are not being computed (for the estimate
    /// the page gives before the reader starts them).
    pub planned: RwSignal<Option<WorkLeft>>,
    /// Whether the reader asked for the curves to be computed (minutes of CPU time on a laptop,
    /// so not without asking), and has not paused them.
    pub running: RwSignal<bool>,
    /// The computation of the curves.
    pub run: LocalResource<CurveState>,
    /// The reader's set and its quality.
    pub quality: LocalResource<Option<SetScore>>,
    /// The reader's set's quality minus the full model's, paired over the pairs' resamples.
    pub change: Memo<Option<Estimate>>,
    /// The reader's set and the full and really pruned model's forward times.
    pub speed: LocalResource<Option<(HeadSet, PrunedSpeed)>>,
    /// Every head's role.
    pub roles: LocalResource<Option<Rc<Vec<Role>>>>,
    /// Whether the reader asked to set 8 bits beside pruning.
    pub lever_wanted: RwSignal<bool>,
    /// The model's quality at f16 and at 8 bits, every head kept (once asked).
    pub lever_quality: LocalResource<Option<Result<PrecisionQuality, String>>>,
    /// Its forward time at both precisions on the sentence (once asked).
    pub lever_cost: LocalResource<Option<Result<PrecisionCost, String>>>,
    /// Every head's task importance on the full model (head-gate gradients on the fixed subset
    /// of pairs): measured once the reader first asks for it.
    pub task_importance: LocalResource<Option<Rc<Ranking>>>,
    /// The trained-model panel's view this is part of.
    pub view: EncoderView,
}

impl TaskView {
    /// The task panel's state under the trained-model panel's `view`.
    pub fn new(view: EncoderView) -> TaskView {
        let engine = view.engine;
        let data = LocalResource::new(move || {
            let model = view.model();
            async move { Some(fetch_pairs(&model).await) }
        });
        let ready = move || Some((engine.get().flatten()?, data.get().flatten()?.ok()?));
        let task_wanted = Memo::new(move |was: Option<&bool>| {
            was.copied().unwrap_or(false) || view.choices.measure.get() == Measure::Task
        });
        let task_importance = LocalResource::new(move || {
            let (ready, wanted) = (ready(), task_wanted.get());
            async move {
                let (engine, data) = ready.filter(|_| wanted)?;
                let job = TaskImportance::new(&data, HeadSet::all(engine.model().spec().total_heads()));
                drive_plan(&engine, job, &while_shown(view, &engine), &mut |_| {}).await.map(Rc::new)
            }
        });
        let quality = LocalResource::new(move || {
            let (ready, heads) = (ready(), view.choices.heads.get());
            // Wanted while the reader's set is this one.
            let of = heads.clone();
            let ticket = Ticket::while_wanted(move || view.choices.heads.with_untracked(|h| *h == of));
            async move {
                let (engine, data) = ready?;
                (heads.len() == engine.model().spec().total_heads()).then_some(())?;
                let shown = while_shown(view, &engine);
                let ticket = Ticket::while_wanted(move || shown.is_current() && ticket.is_current());
                drive_plan(&engine, SetQuality::new(data, heads), &ticket, &mut |_| {}).await
            }
        });
        // Nothing known, of a model of no heads, until the model and the pairs are in.
        let curves = RwSignal::new_local(Curves::new(0));
        let (progress, running, planned) = (RwSignal::new(None), RwSignal::new(false), RwSignal::new(None));
        let panel = CurvePanel { curves, progress, running, planned };
        let run = curve_resource(view, ready, task_importance, quality, panel);
        let speed = pruned_speed(view, data, quality);
        let full_cosines = Memo::new(move |_| curves.with(|c| c.full_cosines.clone()));
        let change = Memo::new(move |_| {
            let (score, full) = (quality.get().flatten()?, full_cosines.get()?);
            let data = data.get().flatten()?.ok()?;
            data.bootstrap.change(&full, &score.cosines)
        });
        let lever_wanted = RwSignal::new(false);
        let lever_quality = LocalResource::new(move || {
            let (ready, wanted) = (ready(), lever_wanted.get());
            async move {
                let (engine, data) = ready.filter(|_| wanted)?;
                let known = untrack(|| quality.get().flatten());
                precision_quality(&engine, data, known, &while_shown(view, &engine)).await
            }
        });
        let lever_cost = LocalResource::new(move || {
            let (engine, ids, wanted) = (engine.get().flatten(), view.ids(), lever_wanted.get());
            async move {
                let engine = engine.filter(|_| wanted && !ids.is_empty())?;
                precision_cost(&engine, ids, &while_shown(view, &engine)).await
            }
        });
        let roles = LocalResource::new(move || {
            let ready = ready();
            async move {
                let (engine, data) = ready?;
                let job = HeadRoles::new(&engine, &data);
                drive_plan(&engine, job, &while_shown(view, &engine), &mut |_| {}).await.map(Rc::new)
            }
        });
        TaskView {
            data,
            curves,
            progress,
            planned,
            running,
            run,
            quality,
            change,
            speed,
            roles,
            lever_wanted,
            lever_quality,
            lever_cost,
            task_importance,
            view,
        }
    }

    /// Shares this view with the task panel's parts.
    pub fn provide(self) {
        provide_context(self);
    }

    /// The task panel's view, from any of its parts.
    pub fn get() -> TaskView {
        expect_context::<TaskView>()
    }

    /// Every head's importance by the reader's measure, when it is measured (for the current
    /// sentence, where the measure depends on it).
    pub fn importance_now(&self) -> Option<Rc<SentenceImportance>> {
        importance_now(self.view, self.task_importance)
    }
}

/// A ticket current while the panel shows `engine`'s model on it (a new model or backend stops
/// the job).
fn while_shown(view: EncoderView, engine: &Rc<Engine<Encoder>>) -> Ticket {
    let of = engine.clone();
    Ticket::while_wanted(move || super::view::engine_is(view.engine, &of))
}

/// The signals the curves' run publishes to.
#[derive(Clone, Copy)]
struct CurvePanel {
    curves: RwSignal<Curves, LocalStorage>,
    progress: RwSignal<Option<CurveStatus>>,
    running: RwSignal<bool>,
    planned: RwSignal<Option<WorkLeft>>,
}

/// The curves' computation: what the browser saved shows at once, computing waits for the
/// reader's go. The one-shot order joins when the sentence's ranking is there, and a run that
/// is going follows a new sentence's order ([`CurveRun::following`]) instead of restarting and
/// losing the job in flight; a run starts again from a new order only once none is going
/// (it then plans only what is missing).
fn curve_resource(
    view: EncoderView,
    ready: impl Fn() -> Option<(Rc<Engine<Encoder>>, Rc<TaskData>)> + Copy + 'static,
    task_importance: LocalResource<Option<Rc<Ranking>>>,
    quality: LocalResource<Option<SetScore>>,
    panel: CurvePanel,
) -> LocalResource<CurveState> {
    let CurvePanel { curves, progress, running, planned } = panel;
    let one_shot = move || importance_now(view, task_importance).map(|imp| imp.ranking.ranked.clone());
    // Which run is the current one, and whether it is computing.
    let (generation, in_flight) = (StoredValue::new(0u64), RwSignal::new(false));
    let start_order = Memo::new(move |was: Option<&Option<Vec<usize>>>| {
        let now = one_shot();
        match was {
            Some(was) if in_flight.get() => was.clone(),
            _ => now,
        }
    });
    LocalResource::new(move || {
        let (ready, order, go) = (ready(), start_order.get(), running.get());
        let this = generation.with_value(|g| g + 1);
        generation.set_value(this);
        // Wanted while the reader has not paused it and no later run replaced it (a view a new
        // model replaced is gone: its jobs stop).
        let ticket = Ticket::while_wanted(move || {
            running.try_get_untracked() == Some(true) && generation.try_get_value() == Some(this)
        });
        async move {
            let Some((engine, data)) = ready else { return CurveState::Waiting };
            // The full model's score, when the panel has measured the reader's set with every
            // head: the curves' point at no head pruned, not evaluated again.
            let full = untrack(|| quality.get().flatten());
            let run = curve_run(&engine, data, order, full).following(move || untrack(one_shot));
            curves.set(run.curves().clone());
            in_flight.set(go);
            if !go {
                progress.set(None);
                planned.set(Some(run.work_left()));
                return CurveState::Stopped;
            }
            let shown = std::cell::Cell::new(usize::MAX);
            let publish = |job: &Planned<CurveRun>, status: Status| {
                let time_left = job.plan().time_left(&engine.workers().pace(engine.workers().place()));
                progress.set(Some(CurveStatus { status, time_left }));
                // Redrawn when a point was added.
                if shown.replace(job.plan().evaluations().0) != job.plan().evaluations().0 {
                    curves.set(job.plan().curves().clone());
                }
            };
            let finished = drive(&engine, Planned::new(run), &ticket, publish).await;
            // A run a later one replaced leaves the panel to it.
            if generation.try_get_value() != Some(this) {
                return CurveState::Stopped;
            }
            progress.set(None);
            in_flight.set(false);
            match finished {
                Some(done) => {
                    curves.set(done);
                    CurveState::Done
                }
                None => CurveState::Stopped,
            }
        }
    })
}

/// The curves' run on `engine` over `data`, from what the browser saved (the one-shot order's
/// for `order`), saving every new point there.
fn curve_run(
    engine: &Engine<Encoder>,
    data: Rc<TaskData>,
    order: Option<Vec<usize>>,
    full: Option<SetScore>,
) -> CurveRun {
    let model = engine.model();
    let total = model.spec().total_heads();
    let cache = CurveCache::new(Rc::new(BrowserStore), &model.cache_id(), &PAIRS_SHA256[..16], total);
    let known = cache.saved(order.as_deref());
    let run = CurveRun::new(*model.spec(), data, order, known, Some(cache));
    match full {
        Some(full) => run.knowing_full(&full),
        None => run,
    }
}

/// The full model against the really pruned one on the sentence, for the reader's set: timed
/// once this sentence's importance and this set's quality are in (the passes computing them
/// share the cores: a timing beside them would be slow, and would slow them).
fn pruned_speed(
    view: EncoderView,
    data: LocalResource<Option<Result<Rc<TaskData>, String>>>,
    quality: LocalResource<Option<SetScore>>,
) -> LocalResource<Option<(HeadSet, PrunedSpeed)>> {
    LocalResource::new(move || {
        let (engine, heads, full) =
            (view.engine.get().flatten(), view.choices.heads.get(), view.full.get().flatten());
        let quality_in = match data.get().flatten() {
            Some(Ok(_)) => quality.get().flatten().is_some_and(|s| s.heads == heads),
            _ => true, // no set of pairs: no quality to wait for
        };
        let settled = view.drift_importance().is_some() && quality_in;
        // Wanted while the reader's set and the sentence's pass are these.
        let (of_heads, of_full) = (heads.clone(), full.clone());
        let ticket = Ticket::while_wanted(move || {
            let same_full = match (view.full.try_get_untracked().flatten().flatten(), &of_full) {
                (Some(now), Some(was)) => Rc::ptr_eq(&now, was),
                _ => false,
            };
            same_full && view.choices.heads.with_untracked(|h| *h == of_heads)
        });
        async move {
            let (engine, full) = (engine?, full?);
            (heads.any_pruned() && settled && heads.len() == full.out.heads.len()).then_some(())?;
            let job = TimePruned::new(&engine, full.ids.clone(), heads.clone());
            let speed = drive(&engine, job, &ticket, |_, _| {}).await?;
            Some((heads, speed))
        }
    })
}

/// The ranking by the reader's measure: the sentence's drift, the meaning check's margin, or
/// the task's gradients (the last two are the same for every sentence).
fn importance_now(
    view: EncoderView,
    task: LocalResource<Option<Rc<Ranking>>>,
) -> Option<Rc<SentenceImportance>> {
    let of_sentence = |ranking: Ranking| Some(Rc::new(SentenceImportance { ids: view.ids(), ranking }));
    let ranking = match view.choices.measure.get() {
        Measure::Drift => view.drift_importance(),
        Measure::Margin => of_sentence(view.margin.get().flatten()?.ranking()),
        Measure::Task => of_sentence((*task.get().flatten()?).clone()),
    }?;
    // A ranking of the previous model's heads, while the next model's is measured, is not shown.
    (ranking.ranking.len() == view.spec().total_heads()).then_some(ranking)
}

/// Fetches the pairs, checks them against the hash built into the page, and tokenizes them.
async fn fetch_pairs(model: &Encoder) -> Result<Rc<TaskData>, String> {
    let bytes = fetch_bytes(PAIRS_URL, |_, _| {})
        .await
        .map_err(|e| format!("Could not load the sentence pairs: {e}."))?;
    let pairs = Pairs::from_file(&bytes).map_err(|e| format!("Could not load the sentence pairs: {e}."))?;
    Ok(Rc::new(TaskData::new(pairs, &model.tokenizer)))
}
