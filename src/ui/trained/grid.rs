//! Every head of the trained model on one grid, layer by layer, shaded by importance: select one
//! to prune it; or prune the k least important with a slider.

use leptos::prelude::*;

use super::atlas::AtlasView;
use super::task_view::TaskView;
use super::view::EncoderView;
use crate::attention::HeadSet;
use crate::jobs::driver::Status;
use crate::model::digits::margin_text;
use crate::model::encoder::roles::Role;
use crate::settings::Measure;
use crate::ui::keyboard::arrow_focus;
use crate::viz::colormap::category_css;

/// The grid: a row per layer, a button per head, each labelled with its role.
#[component]
pub fn HeadGrid() -> impl IntoView {
    let view = EncoderView::get();
    let roles = Role::ALL.iter().filter(|r| r.specialised() || **r == Role::Broad);
    let legend: Vec<String> = roles.map(|r| format!("{} = {}", r.short(), r.name())).collect();
    view! {
        <p class="legend" data-testid="roles-legend">{format!("Labels: {}.", legend.join(", "))}</p>
        <div
            class="head-grid"
            style=move || format!("--heads: {}", view.spec().heads)
            data-testid="head-grid"
            role="group"
            aria-label="Heads by layer; arrow keys move between them"
            on:keydown=move |ev| arrow_focus(&ev)
        >
            {move || {
                let spec = view.spec();
                (0..spec.layers)
                    .map(|l| {
                        view! {
                            <div class="head-grid-row">
                                <span class="muted">{format!("layer {}", l + 1)}</span>
                                {(0..spec.heads)
                                    .map(|h| view! { <GridHead layer=l head=h index=spec.heads * l + h /> })
                                    .collect_view()}
                            </div>
                        }
                    })
                    .collect_view()
            }}
        </div>
    }
}

/// The reader's choice of what makes a head important, and what that measure found.
#[component]
pub fn MeasureChoice() -> impl IntoView {
    let view = EncoderView::get();
    let task = TaskView::get();
    let measure = view.choices.measure;
    let heading = move || match measure.get() {
        Measure::Drift => "darker = removing it alone moves this sentence's embedding more",
        Measure::Margin => "darker = removing it alone moves the meaning check's margin more",
        Measure::Task => "darker = the task's loss depends on it more (gradient on 16 pairs)",
    };
    view! {
        <h3>{move || format!("All {} heads: {}", view.spec().total_heads(), heading())}</h3>
        <label class="measure">
            "Important means: "
            <select
                data-testid="importance-measure"
                prop:value=move || measure.get().as_str()
                on:change=move |ev| {
                    if let Some(m) = Measure::parse(&event_target_value(&ev)) {
                        measure.set(m);
                    }
                }
            >
                {Measure::ALL.map(|m| view! { <option value=m.as_str()>{m.label()}</option> }).into_iter().collect_view()}
            </select>
        </label>
        <p class="muted" data-testid="importance-status" aria-live="polite">
            {move || match (measure.get(), task.importance_now().is_some()) {
                (_, true) => measure_note(view),
                (Measure::Drift, false) => format!(
                    "Measuring: one pass per head on this sentence{}…",
                    sweep_status(view.drift_status())
                ),
                (Measure::Margin, false) => format!(
                    "Measuring: the meaning check without each head (3 passes per head){}…",
                    sweep_status(view.margin_status.get())
                ),
                (Measure::Task, false) => "Measuring: the task's loss gradient on 16 pairs…".to_string(),
            }}
        </p>
    }
}

/// ", about 14 s at the 27 GFLOP/s measured here (23 of 72 heads done)": a sweep's estimate,
/// once its pace is known, and its count once it has measured some heads.
fn sweep_status(status: Option<Status>) -> String {
    let Some(s) = status else { return String::new() };
    let estimate = s.estimate.map(|e| format!(", {e}")).unwrap_or_default();
    let done = if s.done > 0 { format!(" ({} of {} heads done)", s.done, s.total) } else { String::new() };
    estimate + &done
}

/// What the chosen measure says beyond the ranking: for the margin, which heads flip the check.
fn measure_note(view: EncoderView) -> String {
    match view.choices.measure.get() {
        Measure::Drift => "Removing each head alone, on this sentence.".to_string(),
        Measure::Task => {
            "Head-gate gradients on the full model, as the iterative curve's first step measures them."
                .to_string()
        }
        Measure::Margin => view.margin.get().flatten().map(|m| m.summary(&view.spec())).unwrap_or_default(),
    }
}

/// Head `head` of layer `layer`, the model's head `index`.
#[component]
fn GridHead(layer: usize, head: usize, index: usize) -> impl IntoView {
    let view = EncoderView::get();
    let i = index;
    let heads = view.choices.heads;
    let off = move || heads.with(|h| i < h.len() && h.is_pruned(i));
    let task = TaskView::get();
    let importance = move || task.importance_now().map(|imp| (imp.ranking.per_head[i], imp.ranking.share(i)));
    let measure = view.choices.measure;
    let role = move || task.roles.get().flatten().and_then(|r| r.get(i).copied()).unwrap_or(Role::None);
    let atlas = AtlasView::get();
    let cluster = move || atlas.cluster_of().and_then(|c| c.get(i).copied());
    // Hidden by the filter only once what it needs is known.
    let hidden = move || atlas.shows(i) == Some(false);
    view! {
        <button
            class="grid-head"
            class:filtered-out=hidden
            data-shown=move || (!hidden()).to_string()
            data-cluster=move || cluster().map(|c| (c + 1).to_string())
            aria-label=format!("layer {}, head {head}", layer + 1)
            data-nav="grid"
            data-testid=format!("grid-{layer}-{head}")
            aria-pressed=move || (!off()).to_string()
            data-role=move || role().short()
            title=move || {
                let what = importance().map(|(v, _)| value_text(measure.get(), v)).unwrap_or_else(|| "measuring…".into());
                let cluster = cluster().map(|c| format!("; atlas cluster {}", c + 1)).unwrap_or_default();
                format!("layer {}, head {head}: {what}; role: {}{cluster}", layer + 1, role().name())
            }
            style=move || {
                let weight = format!("--weight: {:.3}", importance().map_or(0.0, |(_, share)| share));
                match cluster() {
                    Some(c) => format!("{weight}; --cluster: {}", category_css(c)),
                    None => weight,
                }
            }
            on:click=move |_| heads.update(|s| {
                if i < s.len() {
                    s.toggle(i)
                }
            })
        >
            {head}
            <span class="role">{move || role().short()}</span>
        </button>
    }
}

/// A head's importance by `measure`, for its tooltip.
fn value_text(measure: Measure, v: f64) -> String {
    match measure {
        Measure::Drift => format!("removing it alone moves the embedding by {v:.5} (1 - cosine)"),
        Measure::Margin => format!("removing it alone moves the check's margin by {}", margin_text(v)),
        Measure::Task => format!("|dL/d gate| {v:.5} on the task's pairs"),
    }
}

/// "Prune the k least important heads" by the current sentence's ranking, and "restore all".
#[component]
pub fn PruneLeast() -> impl IntoView {
    let view = EncoderView::get();
    let task = TaskView::get();
    let heads = view.choices.heads;
    let k = RwSignal::new(0usize);
    let prune_least = move |count: usize| {
        k.set(count);
        if let Some(imp) = task.importance_now() {
            heads.set(imp.ranking.least(count));
        }
    };
    view! {
        <label class="prune-k">
            {move || format!("Prune the {} least important heads ", k.get())}
            <input
                type="range"
                min="0"
                max=move || view.spec().total_heads().to_string()
                data-testid="trained-prune-k"
                disabled=move || task.importance_now().is_none()
                prop:value=move || k.get().to_string()
                on:input=move |ev| prune_least(event_target_value(&ev).parse().unwrap_or(0))
            />
        </label>
        <div class="buttons">
            <button
                class="reset"
                data-testid="trained-restore"
                on:click=move |_| {
                    k.set(0);
                    heads.update(HeadSet::restore_all);
                }
            >
                "Restore all heads"
            </button>
        </div>
    }
}
