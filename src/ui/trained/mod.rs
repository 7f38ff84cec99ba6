//! A trained model in the page on any sentence, its heads prunable: the built-in
//! all-MiniLM-L6-v2, a BERT-family or GPT-2 folder the handbook serves beside the page, or the
//! reader's own ([`source`]). A GPT-2 decoder gets its own view ([`decoder`]).
//!
//! The model loads only when the reader picks the trained model, with a progress bar ([`loader`]).
//! Drift is the cosine of the pruned sentence embedding to the unpruned one, and a small check
//! (which of two sentences is closer in meaning to a third) shows behaviour change. What is
//! computed lives in `crate::jobs` and `crate::model`, started by the resources of [`view`] and
//! [`task_view`]; the components here display it.

mod atlas;
mod compare;
mod decoder;
mod grid;
mod layer;
mod loader;
mod model_flow;
mod models;
mod patching;
mod source;
mod task;
mod task_view;
mod view;

use leptos::prelude::*;

use crate::attention::clock::show_ms;
use crate::attention::precision::Precision;
use crate::export::{attention_csv, layered_importance_csv};
use crate::model::digits::cosine_text;
use crate::model::tokenize::Token;
use crate::model::Model;
use crate::settings::{TrainedSource, MAX_TEXT_CHARS};
use crate::ui::browser::clock_step_ms;
use crate::ui::files;
use crate::ui::state::{AppState, EXAMPLES};
use atlas::{AtlasPanel, AtlasView, GridFilter};
use compare::ComparePanel;
use decoder::DecoderPanel;
use grid::{HeadGrid, MeasureChoice, PruneLeast};
use layer::LayerHeads;
use loader::Shown;
use model_flow::EncoderFlow;
use models::Models;
use patching::PatchPanel;
use source::ModelSource;
use task::TaskPanel;
use task_view::TaskView;
use view::EncoderView;

/// The trained-model panel: where the model comes from, then, for the model on show, the
/// sentence, its tokens, the numbers, a layer's heatmaps and the grid of every head.
#[component]
pub fn TrainedModel() -> impl IntoView {
    let models = Models::new();
    models.provide();
    let app = AppState::get();
    let precision = Memo::new(move |_| app.settings.with(|s| s.precision));
    let title = move || match models.shown.with(|s| s.as_ref().map(|s| *s.model.spec())) {
        Some(spec) => {
            format!("A trained model: {} ({} layers × {} heads)", models.name(), spec.layers, spec.heads)
        }
        None => format!("A trained model: {}", models.name()),
    };
    view! {
        <section class="panel trained" aria-labelledby="trained-title" data-testid="trained">
            <h2 id="trained-title">{title}</h2>
            <ModelSource />
            {move || {
                let notes = models.link_notes.get();
                (!notes.is_empty())
                    .then(|| {
                        view! {
                            <ul class="notes" data-testid="trained-link-notes">
                                {notes.into_iter().map(|n| view! { <li>{n}</li> }).collect_view()}
                            </ul>
                        }
                    })
            }}
            // Each model, and each precision of it, gets a view of its own: nothing computed for
            // one meets another.
            {move || {
                let precision = precision.get();
                models.shown.get().map(|shown| match shown.model.clone() {
                    Model::Encoder(encoder) => {
                        view! { <ModelPanel encoder=encoder shown=shown precision=precision /> }.into_any()
                    }
                    Model::Decoder(decoder) => {
                        view! { <DecoderPanel decoder=decoder shown=shown precision=precision /> }.into_any()
                    }
                })
            }}
        </section>
    }
}

/// Everything the panel shows of one model.
#[component]
fn ModelPanel(
    encoder: std::rc::Rc<crate::model::encoder::Encoder>,
    shown: Shown,
    precision: Precision,
) -> impl IntoView {
    let view = EncoderView::new(&encoder, &shown, precision);
    view.provide();
    TaskView::new(view).provide();
    AtlasView::new(TaskView::get()).provide();
    view! {
        <p class="muted" data-testid="trained-backend">
            {move || view.running_on().map(|(on, _)| format!("Running on {on}."))}
        </p>
        <PrecisionChoice />
        {view.precision_note.get_value().map(|n| view! { <p class="backend-note" data-testid="precision-note">{n}</p> })}
        {move || {
            view.running_on()
                .and_then(|(_, note)| note)
                .map(|n| view! { <p class="backend-note" data-testid="trained-note">{n}</p> })
        }}
        <Show when=move || view.ready()>
            <Sentence />
            <Numbers />
            <LayerHeads />
            <Exports />
            <MeasureChoice />
            <GridFilter />
            <HeadGrid />
            <PruneLeast />
            <p data-testid="trained-contrast">{contrast_text}</p>
            <EncoderFlow />
            <TaskPanel />
            <AtlasPanel />
            <PatchPanel />
            <ComparePanel />
            <p class="muted" data-testid="model-credit">{move || credit(view)}</p>
        </Show>
    }
}

/// Where the model on show comes from, and its licence when the page ships it.
fn credit(view: EncoderView) -> String {
    match view.choices.source.get() {
        TrainedSource::BuiltIn => "Model: sentence-transformers/all-MiniLM-L6-v2, Apache-2.0 (see the model card shipped with this page). Weights stored in f16; everything runs in this page.".into(),
        TrainedSource::Served { path, .. } => format!("Model: {}, served by this page's site from {path}. Weights converted to f16 while read; everything runs in this page.", view.name()),
        TrainedSource::Files { .. } => format!("Model: {}, from your files. Weights converted to f16 while read; nothing left your machine.", view.name()),
    }
}

/// The sentence, example sentences, and its tokens.
#[component]
fn Sentence() -> impl IntoView {
    let view = EncoderView::get();
    let text = view.choices.text;
    view! {
        <TextWithExamples label="Sentence " text=text />
        <p class="tokens" data-testid="tokens">
            {move || view.tokens.read().iter().map(|t| view! { <span class="token">{t.piece.clone()}</span> }).collect_view()}
        </p>
        <p class="muted token-count" data-testid="token-count">
            {move || format!("{} tokens, [CLS] and [SEP] included.", view.tokens.read().len())}
        </p>
        {move || {
            let note = view.cut_note();
            note.map(|n| view! { <p class="backend-note" data-testid="tokens-cut">{n}</p> })
        }}
    }
}

/// The text the trained model reads (`label` names it), and the example sentences to pick.
#[component]
fn TextWithExamples(label: &'static str, text: RwSignal<String>) -> impl IntoView {
    view! {
        <label class="text-input">
            {label}
            <textarea
                data-testid="text"
                rows="2"
                maxlength=MAX_TEXT_CHARS.to_string()
                prop:value=move || text.get()
                on:change=move |ev| text.set(event_target_value(&ev))
            ></textarea>
        </label>
        <div class="buttons examples">
            {EXAMPLES.iter().map(|&e| view! { <button on:click=move |_| text.set(e.to_string())>{e}</button> }).collect_view()}
        </div>
    }
}

/// A sentence of the panel's tools (patching, the side-by-side), its tokens and their count.
#[component]
fn SentenceInput(
    label: &'static str,
    text: RwSignal<String>,
    testid: &'static str,
    tokens: Signal<Vec<Token>>,
) -> impl IntoView {
    view! {
        <label class="text-input">
            {label}
            <textarea
                data-testid=testid
                rows="1"
                maxlength=MAX_TEXT_CHARS.to_string()
                prop:value=move || text.get()
                on:change=move |ev| text.set(event_target_value(&ev))
            ></textarea>
        </label>
        <p class="tokens" data-testid=format!("{testid}-tokens")>
            {move || tokens.read().iter().map(|t| view! { <span class="token">{t.piece.clone()}</span> }).collect_view()}
            <span class="muted">{move || format!("{} tokens", tokens.read().len())}</span>
        </p>
    }
}

/// The embedding's cosine, what the last pruned pass recomputed, and the meaning check.
#[component]
fn Numbers() -> impl IntoView {
    let view = EncoderView::get();
    let heads = view.choices.heads;
    let last_pass = move || {
        let pass = view.current_for_choices().filter(|_| heads.read().any_pruned())?;
        Some(format!(
            "Last change recomputed layers {}-{} only (those after the first pruned head), in {}.",
            pass.out.first_computed + 1,
            view.spec().layers,
            show_ms(pass.elapsed_ms, clock_step_ms())
        ))
    };
    view! {
        <div class="drift-numbers trained-numbers">
            <span>"Cosine of the pruned sentence embedding to the full one: "</span>
            <strong
                data-testid="trained-cosine"
                data-value=move || view.cosine().map(|c| c.to_string())
                title="Rounded to the digits the page's f16 weights support: the float32 checkpoint gives the same cosine to within 3e-4, and a small drift to within 0.2 % of itself."
            >{move || view.cosine().map(cosine_text).unwrap_or_else(|| "computing…".into())}</strong>
            <span>
                {move || format!(" ({} of {} heads pruned)", heads.read().pruned_count(), view.spec().total_heads())}
            </span>
        </div>
        <p class="muted" data-testid="trained-pass">{last_pass}</p>
        <p data-testid="trained-check">{move || check_text(view)}</p>
    }
}

fn check_text(view: EncoderView) -> String {
    let (Some(f), Some(n)) = (view.check_full.get().flatten(), view.check_now.get().flatten()) else {
        return String::new();
    };
    if view.choices.heads.with(|h| n.heads != *h) {
        return "Check: asking the pruned model…".into();
    }
    n.sentence(&f)
}

/// The contrast with the synthetic presets: a few heads matter, most can go.
fn contrast_text() -> Option<String> {
    Some(EncoderView::get().contrast.get().flatten()?.sentence())
}

/// This layer's attention and every head's importance, as CSV.
#[component]
fn Exports() -> impl IntoView {
    let view = EncoderView::get();
    let task = TaskView::get();
    let export_error = RwSignal::new(None::<String>);
    let settings = AppState::get().settings;
    let stem = move || files::stem(&settings.get_untracked());
    let export_layer = move |_| {
        let spec = untrack(|| view.spec());
        let l = view.choices.layer.get_untracked().min(spec.layers - 1);
        let result = match untrack(|| view.pass_now()) {
            Some(pass) => {
                let pieces: Vec<String> =
                    view.tokens.with_untracked(|t| t.iter().map(|t| t.piece.clone()).collect());
                attention_csv(&pieces, spec.heads, &pass.out.attention[l])
                    .map_err(|e| e.to_string())
                    .and_then(|csv| files::csv(&format!("{}-layer{}-attention.csv", stem(), l + 1), &csv))
            }
            None => Err("the model has not run yet".to_string()),
        };
        export_error.set(result.err());
    };
    let export_importance = move |_| {
        let result = match task.importance_now() {
            // Heads are numbered layer * heads + head, as in the link's pruned= list.
            Some(imp) => files::csv(
                &format!("{}-importance-{}.csv", stem(), view.choices.measure.get_untracked().as_str()),
                &layered_importance_csv(
                    &imp.ranking,
                    &view.choices.heads.get_untracked(),
                    view.choices.measure.get_untracked().csv_column(),
                    untrack(|| view.spec()).heads,
                ),
            ),
            None => Err("importance is still being measured".to_string()),
        };
        export_error.set(result.err());
    };
    view! {
        <div class="buttons">
            <span class="muted">"Download:"</span>
            <button data-testid="export-trained-attention-csv" on:click=export_layer>
                "This layer's attention (CSV)"
            </button>
            <button
                data-testid="export-trained-importance-csv"
                disabled=move || task.importance_now().is_none()
                on:click=export_importance
            >
                {move || format!("Importance of all {} heads (CSV)", view.spec().total_heads())}
            </button>
        </div>
        {move || export_error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
    }
}

/// The reader's precision for the trained model: the f16 weights or the 8-bit path. Changing it
/// builds the panel again at that precision (the sentence and heads stay, the numbers are
/// measured again); the link keeps it.
#[component]
fn PrecisionChoice(
    /// A precision the model on show has no form at (a decoder held at 8 bits only): offered
    /// greyed, the reader's choice of it kept.
    #[prop(default = None)]
    unavailable: Option<Precision>,
) -> impl IntoView {
    let app = AppState::get();
    let chosen = move || app.settings.with(|s| s.precision);
    view! {
        <p class="precision">
        <label class="measure">
            "Precision: "
            <select
                data-testid="precision"
                prop:value=move || chosen().key()
                on:change=move |ev| {
                    if let Some(p) = Precision::from_key(&event_target_value(&ev)) {
                        app.settings.update(|s| s.precision = p);
                    }
                }
            >
                {Precision::ALL.map(|p| view! { <option value=p.key() disabled=unavailable == Some(p)>{p.label()}</option> }).into_iter().collect_view()}
            </select>
        </label>
        <span class="muted">" Every number in this panel comes from the model at this precision."</span>
        </p>
    }
}
