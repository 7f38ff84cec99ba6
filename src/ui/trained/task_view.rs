//! The task panel's state: the sentence pairs, the pruning curves (computed in steps on the CPU
//! kernel, drawn as they come, saved in the browser so a second visit shows them at once), the
//! quality and speed of the reader's own set of heads, and every head's role.

use std::rc::Rc;

use leptos::prelude::*;

use super::view::{SentenceImportance, TrainedView};
use crate::attention::importance::Ranking;
use crate::attention::HeadSet;
use crate::backend::PrunedSpeed;
use crate::cpu::Kernel;
use crate::model::asset::ASSET_SHA256;
use crate::model::bert::TOTAL_HEADS;
use crate::model::curves::{
    gradient_pieces, importance_from_sums, subset, CurveRun, Curves, Order, Progress, WorkLeft,
};
use crate::model::roles::{is_punctuation, Role, RoleCounter};
use crate::model::task::{Pairs, PAIRS_SHA256};
use crate::model::work::{Done, Work};
use crate::model::MiniLm;
use crate::settings::Measure;
use crate::ui::browser::{fetch_bytes, load, save, yield_to_browser, PageClock};
use crate::ui::pool::Workers;

/// Where the page finds the pairs (copied next to index.html by trunk).
pub const PAIRS_URL: &str = "sts-pairs.tsv";

/// Sentences whose attention decides the heads' roles.
const ROLE_SENTENCES: usize = 64;

/// Sentences embedded between the browser's turns when the reader's set is measured.
const CHUNK: usize = 48;

/// The pairs with every sentence's token ids.
pub struct TaskData {
    /// The sentence pairs and scores.
    pub pairs: Pairs,
    /// Every sentence's token ids.
    pub ids: Vec<Vec<u32>>,
}

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

/// The task panel's derived state.
#[derive(Clone, Copy)]
pub struct TaskView {
    /// The pairs, or why they could not be had.
    pub data: LocalResource<Option<Result<Rc<TaskData>, String>>>,
    /// What is known of the curves (drawn as it grows).
    pub curves: RwSignal<Curves, LocalStorage>,
    /// Evaluations done and planned, the work left and its pace, while the curves are computed.
    pub progress: RwSignal<Option<Progress>>,
    /// The work the curves still need, while they are not being computed (for the estimate
    /// the page gives before the reader starts them).
    pub planned: RwSignal<Option<WorkLeft>>,
    /// Whether the reader asked for the curves to be computed (minutes of CPU time on a laptop,
    /// so not without asking), and has not paused them.
    pub running: RwSignal<bool>,
    /// The computation of the curves.
    pub run: LocalResource<CurveState>,
    /// The reader's set and its quality.
    pub quality: LocalResource<Option<(HeadSet, f64)>>,
    /// The reader's set and the full and really pruned model's forward times.
    pub speed: LocalResource<Option<(HeadSet, PrunedSpeed)>>,
    /// Every head's role.
    pub roles: LocalResource<Option<Rc<Vec<Role>>>>,
    /// Where the curves and the reader's set's quality are computed (the panel's workers).
    pub workers: StoredValue<Rc<Workers>, LocalStorage>,
    /// Every head's task importance on the full model (head-gate gradients on the fixed subset
    /// of pairs): measured once the reader first asks for it.
    pub task_importance: LocalResource<Option<Rc<Ranking>>>,
    /// The trained-model panel's view this is part of.
    pub view: TrainedView,
}

impl TaskView {
    /// The task panel's state under the trained-model panel's `view`.
    pub fn new(view: TrainedView) -> TaskView {
        let model = move || view.load.with(|s| s.model());
        let data = LocalResource::new(move || {
            let model = model();
            async move { Some(fetch_pairs(&*model?).await) }
        });
        let workers = view.workers;
        let curves = RwSignal::new_local(Curves::default());
        let (progress, running, planned) = (RwSignal::new(None), RwSignal::new(false), RwSignal::new(None));
        let task_wanted = Memo::new(move |was: Option<&bool>| {
            was.copied().unwrap_or(false) || view.choices.measure.get() == Measure::Task
        });
        let task_importance = LocalResource::new(move || {
            let (data, model, wanted) = (data.get().flatten(), model(), task_wanted.get());
            let workers = workers.get_value();
            async move {
                let (data, model) = (data?.ok()?, model.filter(|_| wanted)?);
                let (all, subset) = (HeadSet::all(TOTAL_HEADS), subset(&data.pairs, &data.ids));
                let done = workers.run(&model.bert, gradient_pieces(&subset, &all), || true).await?;
                Some(Rc::new(Ranking::new(importance_from_sums(&done, subset.len(), &all))))
            }
        });
        let one_shot = move || importance_now(view, task_importance).map(|imp| imp.ranking.ranked.clone());
        let run = LocalResource::new(move || {
            let (data, model, order, go) = (data.get().flatten(), model(), one_shot(), running.get());
            async move {
                // Whatever the browser saved shows at once; computing waits for the reader's go.
                // The one-shot order joins when this sentence's ranking is there (a new sentence
                // restarts the run, which keeps every other point).
                let known = saved(order.as_deref());
                curves.set(known.clone());
                match (data, model) {
                    (Some(Ok(data)), Some(model)) if !go => {
                        let run = CurveRun::new(&model.bert, &data.pairs, data.ids.clone(), order, known);
                        planned.set(Some(run.work_left()));
                        CurveState::Stopped
                    }
                    _ if !go => CurveState::Stopped,
                    (Some(Ok(data)), Some(model)) => {
                        let wanted =
                            move |o: &Option<Vec<usize>>| running.get_untracked() && untrack(one_shot) == *o;
                        let workers = workers.get_value();
                        run_curves(&model, &data, order, known, (curves, progress), &workers, wanted).await
                    }
                    _ => CurveState::Waiting,
                }
            }
        });
        let quality = LocalResource::new(move || {
            let (data, model, heads) = (data.get().flatten(), model(), view.choices.heads.get());
            let workers = workers.get_value();
            async move { set_quality(&*model?, &*data?.ok()?, heads, view, &workers).await }
        });
        let speed = LocalResource::new(move || {
            let (runner, heads, full) =
                (view.runner.get().flatten(), view.choices.heads.get(), view.full.get().flatten());
            // Timed once this sentence's importance and this set's quality are in: the passes
            // computing them share the cores (a timing beside them would be slow, and would slow
            // them: ten passes of a 512-token sentence take a core for 5 s).
            let quality_in = match data.get().flatten() {
                Some(Ok(_)) => quality.get().flatten().is_some_and(|(set, _)| set == heads),
                _ => true, // no set of pairs: no quality to wait for
            };
            let settled = view.drift_importance().is_some() && quality_in;
            async move {
                let (runner, full) = (runner?, full?);
                (heads.any_pruned() && settled).then_some(())?;
                let speed = runner.time_pruned(&full.ids, &heads, 5, &PageClock, yield_to_browser).await;
                Some((heads, speed))
            }
        });
        let roles = LocalResource::new(move || {
            let (data, model) = (data.get().flatten(), model());
            async move { Some(Rc::new(head_roles(&*model?, &*data?.ok()?).await)) }
        });
        TaskView {
            data,
            curves,
            progress,
            planned,
            running,
            run,
            quality,
            speed,
            roles,
            workers,
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

/// The ranking by the reader's measure: the sentence's drift, the meaning check's margin, or
/// the task's gradients (the last two are the same for every sentence).
fn importance_now(
    view: TrainedView,
    task: LocalResource<Option<Rc<Ranking>>>,
) -> Option<Rc<SentenceImportance>> {
    let of_sentence = |ranking: Ranking| Some(Rc::new(SentenceImportance { ids: view.ids(), ranking }));
    match view.choices.measure.get() {
        Measure::Drift => view.drift_importance(),
        Measure::Margin => of_sentence(view.margin.get().flatten()?.ranking()),
        Measure::Task => of_sentence((*task.get().flatten()?).clone()),
    }
}

/// Fetches the pairs, checks them against the hash built into the page, and tokenizes them.
async fn fetch_pairs(model: &MiniLm) -> Result<Rc<TaskData>, String> {
    let bytes = fetch_bytes(PAIRS_URL, |_, _| {})
        .await
        .map_err(|e| format!("Could not load the sentence pairs: {e}."))?;
    let pairs = Pairs::from_file(&bytes).map_err(|e| format!("Could not load the sentence pairs: {e}."))?;
    let ids = pairs.ids(&model.tokenizer);
    Ok(Rc::new(TaskData { pairs, ids }))
}

/// Where the curves are saved: the orders that do not depend on the sentence, and the one-shot
/// order of one sentence (when it is known).
fn cache_keys(one_shot: Option<&[usize]>) -> (String, Option<String>) {
    let base = format!("headlab-curves-v1-{}-{}", &PAIRS_SHA256[..16], &ASSET_SHA256[..16]);
    let order = one_shot.map(|o| o.iter().map(|h| h.to_string()).collect::<Vec<_>>().join("."));
    let shot =
        order.map(|o| format!("{base}-one-shot-{}", &crate::model::asset::sha256_hex(o.as_bytes())[..16]));
    (base, shot)
}

/// What the browser saved of the curves (the one-shot order's for `order`).
fn saved(order: Option<&[usize]>) -> Curves {
    let (base_key, shot_key) = cache_keys(order);
    let read = |key: &str| load(key).and_then(|text| Curves::from_json(&text)).unwrap_or_default();
    let base = read(&base_key).without(Order::OneShot);
    match shot_key {
        Some(key) => base.merged(&read(&key).only(Order::OneShot)),
        None => base,
    }
}

/// Where the curves' computation shows what it found, and how far it is.
type Shown = (RwSignal<Curves, LocalStorage>, RwSignal<Option<Progress>>);

/// Runs the curves' computation on from `known`, publishing and saving every new point, until
/// it is done or no longer `wanted` for `order` (paused, or another sentence's order).
async fn run_curves(
    model: &MiniLm,
    data: &TaskData,
    order: Option<Vec<usize>>,
    known: Curves,
    (curves, progress): Shown,
    workers: &Workers,
    wanted: impl Fn(&Option<Vec<usize>>) -> bool,
) -> CurveState {
    let (base_key, shot_key) = cache_keys(order.as_deref());
    let mut run = CurveRun::new(&model.bert, &data.pairs, data.ids.clone(), order.clone(), known);
    loop {
        yield_to_browser().await;
        let pieces = match run.next_job() {
            Some(pieces) if wanted(&order) => pieces,
            Some(_) => {
                progress.set(None);
                return CurveState::Stopped;
            }
            None => break,
        };
        progress.set(Some(run.standing()));
        let Some(done) = workers.run(&model.bert, pieces, || wanted(&order)).await else {
            progress.set(None);
            return CurveState::Stopped;
        };
        let before = run.progress().0;
        run.complete(done);
        progress.set(Some(run.standing()));
        if run.progress().0 > before {
            let c = run.curves();
            curves.set(c.clone());
            save(&base_key, &c.without(Order::OneShot).to_json());
            if let Some(key) = &shot_key {
                save(key, &c.only(Order::OneShot).to_json());
            }
        }
    }
    progress.set(None);
    CurveState::Done
}

/// The quality of the model with only `heads` kept, on every pair (the full model's is the
/// curves' first point once known); `None` when the reader's set changed meanwhile.
async fn set_quality(
    model: &MiniLm,
    data: &TaskData,
    heads: HeadSet,
    view: TrainedView,
    workers: &Workers,
) -> Option<(HeadSet, f64)> {
    let pieces =
        data.ids.chunks(CHUNK).map(|ids| Work::Embed { heads: heads.clone(), ids: ids.to_vec() }).collect();
    let done =
        workers.run(&model.bert, pieces, || view.choices.heads.with_untracked(|h| *h == heads)).await?;
    Some((heads, data.pairs.quality(&Done::embeddings(done))))
}

/// Every head's role over the first sentences of the pairs, on the full model.
async fn head_roles(model: &MiniLm, data: &TaskData) -> Vec<Role> {
    let mut counter = RoleCounter::default();
    for (i, ids) in data.ids.iter().take(ROLE_SENTENCES).enumerate() {
        if i % 8 == 0 {
            yield_to_browser().await;
        }
        let out = model.bert.forward(Kernel::Simd, ids, &HeadSet::all(TOTAL_HEADS));
        let punctuation: Vec<bool> = model
            .tokenizer
            .encode(&data.pairs.sentences[i])
            .iter()
            .map(|t| is_punctuation(&t.piece))
            .collect();
        counter.add(&out.attention, &punctuation);
    }
    counter.roles()
}
