//! Where the trained model comes from, as the reader sees and chooses it: a drop zone and file
//! pickers for their own model folder (nothing leaves their machine), the built-in model, the
//! load's progress, and a message naming the file and the problem when a load fails.

use leptos::ev;
use leptos::prelude::*;
use leptos::task::spawn_local;
use wasm_bindgen::JsCast;
use web_sys::HtmlInputElement;

use super::models::Models;
use crate::jobs::web::files::ReaderFiles;
use crate::jobs::web::load::Source;
use crate::model::Model;
use crate::ui::browser::Alive;
use crate::viz::chart::band_note;

/// The model's source: what is on show, the ways to load another, progress and failures.
#[component]
pub fn ModelSource() -> impl IntoView {
    let view = Models::get();
    let dragging = RwSignal::new(false);
    let open_files = move |ev: ev::Event| {
        let Some(input) = ev.target().and_then(|t| t.dyn_into::<HtmlInputElement>().ok()) else { return };
        if let Some(list) = input.files().filter(|l| l.length() > 0) {
            view.open(Source::Reader(ReaderFiles::from_input(&list)));
        }
        // The same files picked again are a new load.
        input.set_value("");
    };
    let alive = Alive::here();
    let on_drop = move |ev: ev::DragEvent| {
        ev.prevent_default();
        dragging.set(false);
        let Some(data) = ev.data_transfer() else { return };
        let files = ReaderFiles::from_drop(&data);
        let alive = alive.clone();
        spawn_local(async move {
            let files = files.await;
            // The reader may have left the panel while the folder was read.
            if !alive.get() {
                return;
            }
            match files {
                Ok(files) => view.open(Source::Reader(files)),
                Err(e) => {
                    view.load.update(|s| s.error = Some(format!("Could not read the dropped files: {e}.")))
                }
            }
        });
    };
    let over = move |ev: ev::DragEvent| {
        ev.prevent_default();
        dragging.set(true);
    };
    view! {
        <div
            class="drop-zone"
            class:dragging=move || dragging.get()
            data-testid="model-drop"
            on:dragover=over
            on:dragenter=over
            on:dragleave=move |_| dragging.set(false)
            on:drop=on_drop
        >
            <Wanted />
            <p>
                "Your own BERT-family or GPT-2 model: drop its folder here (config.json, model.safetensors or its shards, tokenizer.json, vocab.txt or vocab.json and merges.txt), or pick "
                <label class="file-pick">
                    "its files"
                    <input type="file" multiple data-testid="model-files" on:change=open_files />
                </label>
                " or "
                <label class="file-pick">
                    "its folder"
                    <input type="file" multiple prop:webkitdirectory=true data-testid="model-folder" on:change=open_files />
                </label>
                ". It is read here: nothing leaves your machine. "
                <button data-testid="model-built-in" on:click=move |_| view.open(Source::BuiltIn)>
                    "Built-in model"
                </button>
            </p>
            <Progress />
            <Loaded />
        </div>
    }
}

/// What a link asks for that the page cannot fetch: the reader's own model.
#[component]
fn Wanted() -> impl IntoView {
    let view = Models::get();
    move || {
        view.waiting_for_files().map(|(name, id)| {
            view! {
                <p class="backend-note" role="status" data-testid="model-wanted">
                    {format!(
                        "This link shows {name} (weights {id}), a model from its author's own files, which a link cannot carry: drop that model's folder here to see it with the link's sentence and pruned heads, or load the built-in model."
                    )}
                </p>
            }
        })
    }
}

/// The load under way and the last failure.
#[component]
fn Progress() -> impl IntoView {
    let view = Models::get();
    let mb = |b: f64| b / 1e6;
    view! {
        {move || {
            view.load.get().loading.map(|l| {
                view! {
                    <label class="loading" data-testid="model-progress">
                        {match l.total {
                            Some(t) => format!("Reading {}: {:.1} of {:.1} MB", l.what, mb(l.done), mb(t)),
                            None => format!("Reading {}: {:.1} MB", l.what, mb(l.done)),
                        }}
                        <progress max=l.total.unwrap_or(0.0).max(1.0) value=l.done></progress>
                    </label>
                }
            })
        }}
        {move || {
            let state = view.load.get();
            state.error.map(|e| {
                view! {
                    <p class="error" role="alert" data-testid="model-error">
                        {e}
                        {state.retry.map(|_| view! { " " <button on:click=move |_| view.reload()>"Try again"</button> })}
                        {view.shown.with(Option::is_some).then_some(" The model on show stays.")}
                    </p>
                }
            })
        }}
    }
}

/// How the model on show was read, and what the loader noted about its folder.
#[component]
fn Loaded() -> impl IntoView {
    let view = Models::get();
    move || {
        view.shown.get().map(|shown| {
            let m = &shown.model;
            let spec = m.spec();
            let (architecture, pieces) = match m {
                Model::Encoder(e) => (e.architecture, e.tokenizer.vocab_size()),
                Model::Decoder(d) => (crate::model::load::config::Architecture::Gpt2, d.bpe.vocab_size()),
            };
            view! {
                <p class="muted" data-testid="model-load">
                    {format!(
                        "{} ({}, weights {}): {} layers × {} heads of {}, d_model {}, FFN {}, {} positions, {} pieces. {}",
                        m.name(),
                        architecture.model_type(),
                        m.id(),
                        spec.layers,
                        spec.heads,
                        spec.d_k(),
                        spec.d_model,
                        spec.ffn,
                        spec.positions,
                        pieces,
                        shown.summary
                    )}
                </p>
                <p class="muted" data-testid="model-band">
                    {band_note(m.name(), true, spec.d_model, spec.heads)}
                </p>
                {(!shown.notes.is_empty()).then(|| view! {
                    <ul class="model-notes" data-testid="model-notes">
                        {shown.notes.iter().map(|n| view! { <li>{n.clone()}</li> }).collect_view()}
                    </ul>
                })}
            }
        })
    }
}
