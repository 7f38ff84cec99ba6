//! Every head of the trained model on one grid, layer by layer, shaded by importance: select one
//! to prune it; or prune the k least important with a slider.

use leptos::prelude::*;

use super::task_view::TaskView;
use super::view::TrainedView;
use crate::attention::HeadSet;
use crate::model::bert::{HEADS, LAYERS, TOTAL_HEADS};
use crate::model::roles::Role;
use crate::ui::keyboard::arrow_focus;

/// The grid: a row per layer, a button per head, each labelled with its role.
#[component]
pub fn HeadGrid() -> impl IntoView {
    let roles = Role::ALL.iter().filter(|r| r.specialised() || **r == Role::Broad);
    let legend: Vec<String> = roles.map(|r| format!("{} = {}", r.short(), r.name())).collect();
    view! {
        <p class="legend" data-testid="roles-legend">{format!("Labels: {}.", legend.join(", "))}</p>
        <div
            class="head-grid"
            data-testid="head-grid"
            role="group"
            aria-label="Heads by layer; arrow keys move between them"
            on:keydown=move |ev| arrow_focus(&ev)
        >
            {(0..LAYERS)
                .map(|l| {
                    view! {
                        <div class="head-grid-row">
                            <span class="muted">{format!("layer {}", l + 1)}</span>
                            {(0..HEADS).map(|h| view! { <GridHead layer=l head=h /> }).collect_view()}
                        </div>
                    }
                })
                .collect_view()}
        </div>
    }
}

/// Head `head` of layer `layer`.
#[component]
fn GridHead(layer: usize, head: usize) -> impl IntoView {
    let view = TrainedView::get();
    let i = layer * HEADS + head;
    let heads = view.choices.heads;
    let off = move || heads.read().is_pruned(i);
    let importance = move || view.importance_now().map(|imp| (imp.ranking.per_head[i], imp.ranking.share(i)));
    let task = TaskView::get();
    let role = move || task.roles.get().flatten().and_then(|r| r.get(i).copied()).unwrap_or(Role::None);
    view! {
        <button
            class="grid-head"
            aria-label=format!("layer {}, head {head}", layer + 1)
            data-nav="grid"
            data-testid=format!("grid-{layer}-{head}")
            aria-pressed=move || (!off()).to_string()
            data-role=move || role().short()
            title=move || {
                let what = importance().map(|(v, _)| format!("drift {v:.5} if removed alone")).unwrap_or_else(|| "measuring…".into());
                format!("layer {}, head {head}: {what}; role: {}", layer + 1, role().name())
            }
            style=move || format!("--weight: {:.3}", importance().map_or(0.0, |(_, share)| share))
            on:click=move |_| heads.update(|s| s.toggle(i))
        >
            {head}
            <span class="role">{move || role().short()}</span>
        </button>
    }
}

/// "Prune the k least important heads" by the current sentence's ranking, and "restore all".
#[component]
pub fn PruneLeast() -> impl IntoView {
    let view = TrainedView::get();
    let heads = view.choices.heads;
    let k = RwSignal::new(0usize);
    let prune_least = move |count: usize| {
        k.set(count);
        if let Some(imp) = view.importance_now() {
            heads.set(imp.ranking.least(count));
        }
    };
    view! {
        <label class="prune-k">
            {move || format!("Prune the {} least important heads ", k.get())}
            <input
                type="range"
                min="0"
                max=TOTAL_HEADS.to_string()
                data-testid="trained-prune-k"
                disabled=move || view.importance_now().is_none()
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
