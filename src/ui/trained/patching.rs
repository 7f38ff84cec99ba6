//! Which heads carry the meaning check's answer: activation patching on the workers, beside
//! ablation in the same unit ([`crate::model::encoder::patching`]). The reader edits the clean and
//! corrupted sentences, starts the job, and reads a grid of each head's share restored and lost.

use std::rc::Rc;

use leptos::prelude::*;

use super::view::{engine_is, EncoderView};
use super::SentenceInput;
use crate::export::patching_csv;
use crate::jobs::driver::{drive_plan, Status};
use crate::jobs::encoder::patching::PatchSweep;
use crate::jobs::ticket::Ticket;
use crate::model::encoder::patching::{
    check_pair, percent, percent_points, PatchEffects, PatchMetric, Patching, CLEAN, CORRUPTED,
};
use crate::ui::files;
use crate::ui::state::AppState;
use crate::viz::colormap::{diverging, wants_light_text};

/// The two sentences as token ids: clean, corrupted.
type Pair = (Vec<u32>, Vec<u32>);

/// A finished patching run, for the pair it was asked for.
struct Patched {
    pair: Pair,
    patching: Patching,
}

/// The section's state: the reader's sentences and metric, what was asked, the job's progress
/// and its result.
#[derive(Clone, Copy)]
struct PatchState {
    clean: RwSignal<String>,
    corrupted: RwSignal<String>,
    metric: RwSignal<PatchMetric>,
    asked: RwSignal<Option<Pair>>,
    status: RwSignal<Option<Status>>,
    result: LocalResource<Option<Rc<Patched>>>,
}

impl PatchState {
    fn new(view: EncoderView) -> PatchState {
        let asked = RwSignal::new(None::<Pair>);
        let status = RwSignal::new(None::<Status>);
        let result = LocalResource::new(move || {
            let (engine, pair) = (view.engine.get().flatten(), asked.get());
            async move {
                let (engine, pair) = (engine?, pair?);
                // Wanted while the engine is this one and the reader has not asked for another pair.
                let (of, wanted) = (engine.clone(), pair.clone());
                let ticket = Ticket::while_wanted(move || {
                    engine_is(view.engine, &of)
                        && asked.try_with_untracked(|a| a.as_ref() == Some(&wanted)) == Some(true)
                });
                let job = PatchSweep::new(&engine, pair.0.clone(), pair.1.clone());
                let patching = drive_plan(&engine, job, &ticket, &mut |s| status.set(Some(s))).await;
                status.set(None);
                Some(Rc::new(Patched { pair, patching: patching? }))
            }
        });
        PatchState {
            clean: RwSignal::new(CLEAN.to_string()),
            corrupted: RwSignal::new(CORRUPTED.to_string()),
            metric: RwSignal::new(PatchMetric::Margin),
            asked,
            status,
            result,
        }
    }

    /// The last finished run, scored by the reader's metric.
    fn effects(&self) -> Option<(Rc<Patched>, PatchEffects)> {
        let done = self.result.get().flatten()?;
        let effects = done.patching.effects(self.metric.get());
        Some((done, effects))
    }
}

/// The patching section of the trained-model panel.
#[component]
pub fn PatchPanel() -> impl IntoView {
    let view = EncoderView::get();
    let state = PatchState::new(view);
    let tokens = move |text: RwSignal<String>| view.model().tokenizer.encode(&text.get());
    let ids = move |text: RwSignal<String>| tokens(text).iter().map(|t| t.id).collect::<Vec<u32>>();
    let pair = move || (ids(state.clean), ids(state.corrupted));
    let refused = move || {
        let (clean, corrupted) = pair();
        check_pair(&clean, &corrupted).err().map(|e| e.to_string())
    };
    let running = move || state.status.get().is_some();
    view! {
        <section class="patching" aria-labelledby="patching-title" data-testid="patching">
            <h3 id="patching-title">"Which heads carry the answer: activation patching"</h3>
            <p class="muted">
                "The model reads the clean sentence's \"bank\" as money and the corrupted one's as a river's. \
                 For each head, the corrupted sentence is run again with that head's output taken from the \
                 clean run, token for token: the share of the difference it restores is what that head \
                 carries of the answer. Beside it, the share lost when the head is removed from the clean \
                 run (ablation), in the same unit: a head can hurt when removed without carrying the answer, \
                 or carry it while others could stand in."
            </p>
            <SentenceInput label="Clean sentence " text=state.clean testid="patch-clean" tokens=Signal::derive(move || tokens(state.clean)) />
            <SentenceInput label="Corrupted sentence " text=state.corrupted testid="patch-corrupted" tokens=Signal::derive(move || tokens(state.corrupted)) />
            <div class="buttons">
                <label class="measure">
                    "Scored by "
                    <select
                        data-testid="patch-metric"
                        prop:value=move || state.metric.get().as_str()
                        on:change=move |ev| {
                            if let Some(m) = PatchMetric::parse(&event_target_value(&ev)) {
                                state.metric.set(m);
                            }
                        }
                    >
                        {PatchMetric::ALL.map(|m| view! { <option value=m.as_str()>{m.label()}</option> }).into_iter().collect_view()}
                    </select>
                </label>
                <button
                    data-testid="patch-run"
                    disabled=move || refused().is_some() || running()
                    on:click=move |_| state.asked.set(Some(pair()))
                >
                    {move || format!("Patch every head ({} heads, two runs each)", view.spec().total_heads())}
                </button>
            </div>
            {move || refused().map(|e| view! { <p class="error" role="alert" data-testid="patch-refused">{e}</p> })}
            <p class="muted" data-testid="patch-status" aria-live="polite">{move || status_text(state)}</p>
            {move || state.effects().map(|(done, effects)| view! { <PatchResult state=state done=done effects=effects /> })}
        </section>
    }
}

/// What the job is doing, or what the shown result is for.
fn status_text(state: PatchState) -> String {
    if let Some(s) = state.status.get() {
        let estimate = s.estimate.map(|e| format!(", {e}")).unwrap_or_default();
        return format!("Patching: {} of {} heads done{estimate}…", s.done, s.total);
    }
    match (state.result.get().flatten(), state.asked.get()) {
        (Some(done), Some(asked)) if done.pair != asked => "Patching…".into(),
        (None, Some(_)) => "Patching…".into(),
        _ => String::new(),
    }
}

/// The finished run: what it says, the two grids and the download.
#[component]
fn PatchResult(state: PatchState, done: Rc<Patched>, effects: PatchEffects) -> impl IntoView {
    let view = EncoderView::get();
    let spec = view.spec();
    let pair = done.pair.clone();
    let stale = move || {
        (ids_now(view, state) != pair).then_some(
            "These shares are for the sentences as they were when patched; patch again for the new ones.",
        )
    };
    let export_error = RwSignal::new(None::<String>);
    let settings = AppState::get().settings;
    let csv_effects = StoredValue::new(effects.clone());
    let download = move |_| {
        let (csv, metric) = csv_effects.with_value(|e| {
            let runs = (e.clean, e.corrupted);
            (patching_csv(e.metric.as_str(), runs, &e.restored, &e.lost, spec.heads), e.metric.as_str())
        });
        let name = format!("{}-patching-{metric}.csv", files::stem(&settings.get_untracked()));
        export_error.set(files::csv(&name, &csv).err());
    };
    let measurable = effects.measurable();
    // One scale for both grids, so a colour means the same share in each.
    let scale = effects.restored.iter().chain(&effects.lost).fold(0.0f64, |m, v| m.max(v.abs())).max(1e-12);
    view! {
        <p class="muted">{stale}</p>
        <p data-testid="patch-summary" data-correlation=effects.correlation().map(|r| r.to_string())>
            {effects.summary(&spec)}
        </p>
        <Show when=move || measurable>
            <div class="patch-grids">
                <ShareGrid title="Restored: the head's clean output patched into the corrupted run" values=effects.restored.clone() scale=scale kind="restored" />
                <ShareGrid title="Lost: the head removed from the clean run" values=effects.lost.clone() scale=scale kind="lost" />
            </div>
            <div class="buttons">
                <button data-testid="export-patching-csv" on:click=download>"Every head's shares (CSV)"</button>
            </div>
        </Show>
        {move || export_error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
    }
}

fn ids_now(view: EncoderView, state: PatchState) -> Pair {
    let model = view.model();
    let ids = |text: RwSignal<String>| model.ids(&text.get());
    (ids(state.clean), ids(state.corrupted))
}

/// One share per head, a row per layer, coloured blue for a positive share and red for a
/// negative one, as strong as the share against `scale`.
#[component]
fn ShareGrid(title: &'static str, values: Vec<f64>, scale: f64, kind: &'static str) -> impl IntoView {
    let spec = EncoderView::get().spec();
    let cell = move |h: usize| {
        let v = values[h];
        let rgb = diverging((v / scale) as f32);
        let text = if wants_light_text(rgb) { "#fff" } else { "#000" };
        let style = format!("background: rgb({},{},{}); color: {text}", rgb[0], rgb[1], rgb[2]);
        let (l, i) = (spec.layer_of(h), spec.head_in_layer(h));
        view! {
            <span
                class="share-cell"
                data-testid=format!("patch-{kind}-{l}-{i}")
                data-value=v.to_string()
                title=format!("{}: {} {kind}", spec.head_name(h), percent(v))
                style=style
            >
                {percent_points(v)}
            </span>
        }
    };
    view! {
        <figure class="share-grid" data-testid=format!("patch-grid-{kind}")>
            <figcaption>{title}" (% of the difference)"</figcaption>
            <div class="head-grid" style=format!("--heads: {}", spec.heads)>
                <div class="head-grid-row muted" aria-hidden="true">
                    <span>"head"</span>
                    {(0..spec.heads).map(|i| view! { <span class="share-head">{i}</span> }).collect_view()}
                </div>
                {(0..spec.layers)
                    .map(|l| {
                        view! {
                            <div class="head-grid-row">
                                <span class="muted">{format!("layer {}", l + 1)}</span>
                                {(0..spec.heads).map(|i| cell(l * spec.heads + i)).collect_view()}
                            </div>
                        }
                    })
                    .collect_view()}
            </div>
        </figure>
    }
}
