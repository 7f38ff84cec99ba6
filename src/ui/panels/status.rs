//! The lines above the panels: the controls with the backend badge, why the GPU is not used (with
//! a way to try it again), the link's notes, a configuration that cannot run, and what the last
//! pass took or what is being computed.

use leptos::prelude::*;

use super::controls::Controls;
use crate::attention::analysis::heads_count;
use crate::attention::clock::show_ms;
use crate::ui::browser::clock_step_ms;
use crate::ui::state::AppState;

/// The controls, the backend badge and, when framed, the link to the full explorer.
#[component]
pub fn Toolbar() -> impl IntoView {
    let state = AppState::get();
    let badge =
        move || state.backend_status().map_or_else(|| "preparing the GPU…".to_string(), |(label, ..)| label);
    let note = move || state.backend_status().and_then(|(_, note, _)| note);
    let full_view = move || format!("?{}", state.link().full_view_query());
    view! {
        <div class="toolbar">
            <Controls />
            <span
                class="badge"
                class:busy=move || state.session.with(Option::is_none)
                data-testid="backend-badge"
                role="status"
                title=move || note().or_else(|| state.choice_why()).unwrap_or_default()
            >
                {badge}
            </span>
            {state
                .frame
                .with_value(Option::is_some)
                .then(|| {
                    view! {
                        <a class="full-view" data-testid="full-view" href=full_view target="_blank" rel="noopener">
                            "Open the full explorer ↗"
                        </a>
                    }
                })}
        </div>
    }
}

/// Why the GPU is not used, when it is not; "Try the GPU again" when that could help.
#[component]
pub fn BackendNote() -> impl IntoView {
    let state = AppState::get();
    let status = move || state.backend_status().and_then(|(_, note, retryable)| note.map(|n| (n, retryable)));
    move || {
        status().map(|(note, retryable)| {
            view! {
                <p class="backend-note" data-testid="backend-note">
                    {note}
                    " "
                    {retryable
                        .then(|| {
                            view! {
                                <button
                                    class="reset"
                                    data-testid="retry-gpu"
                                    disabled=move || state.retrying.get()
                                    on:click=move |_| state.retry_gpu()
                                >
                                    {move || if state.retrying.get() { "Trying the GPU…" } else { "Try the GPU again" }}
                                </button>
                            }
                        })}
                </p>
            }
        })
    }
}

/// One note per part of the link that could not be used.
#[component]
pub fn LinkNotes(notes: Vec<String>) -> impl IntoView {
    (!notes.is_empty()).then(|| {
        view! {
            <ul class="notes" data-testid="url-notes">
                {notes.into_iter().map(|n| view! { <li>{n}</li> }).collect_view()}
            </ul>
        }
    })
}

/// Why the configuration cannot run, when it cannot.
#[component]
pub fn ConfigError() -> impl IntoView {
    let state = AppState::get();
    let error = move || state.refused().map(|e| e.to_string());
    view! {
        <Show when=move || error().is_some()>
            <p class="error" role="alert" data-testid="config-error">
                {error}
            </p>
        </Show>
    }
}

/// What is being computed, or what the last pass took and where; a progress bar for long passes.
#[component]
pub fn Timing() -> impl IntoView {
    let state = AppState::get();
    let trained = move || state.settings.read().is_trained();
    let busy = move || !trained() && (state.computing() || state.run().is_none());
    view! {
        <p class="timing" class:busy=busy data-testid="timing" role="status">
            {move || timing_text(state)}
        </p>
        {move || {
            state
                .progress
                .get()
                .map(|p| {
                    view! {
                        <progress class="pass-progress" data-testid="pass-progress" max="1" value=p aria-label="Forward pass progress"></progress>
                    }
                })
        }}
    }
}

fn timing_text(state: AppState) -> String {
    if state.settings.read().is_trained() {
        // The model on show, whatever loaded it (the built-in one before).
        let name = state.trained.name.get();
        return format!(
            "{}: its passes are timed in its panel below.",
            name.as_deref().unwrap_or(crate::model::encoder::BUILT_IN_NAME)
        );
    }
    if state.computing() {
        let c = state.settings.read().config();
        if c.validate().is_err() {
            return "Checking the configuration…".to_string();
        }
        let generating = if c.generates_weights() {
            format!(
                ", generating its {:.2} GiB of weights on the fly",
                c.weight_bytes() as f64 / (1u64 << 30) as f64
            )
        } else {
            String::new()
        };
        let done = state.progress.get().map(|p| format!(": {:.0} %", 100.0 * p)).unwrap_or_default();
        let timing = state.session.with(|s| s.as_ref().is_some_and(|s| s.will_calibrate(&c)));
        let generating = match timing {
            true => format!(
                "{generating}; first timing the CPU kernel and the GPU on a few short passes of this shape"
            ),
            false => generating,
        };
        return format!(
            "Computing d_model {}, {}, {} tokens ({:.2} GFLOP{generating}){done}…",
            c.d_model,
            heads_count(c.num_heads),
            c.seq_len,
            c.forward_flops() as f64 / 1e9
        );
    }
    if state.refused().is_some() {
        return String::new();
    }
    let Some(r) = state.run() else { return "Computing…".to_string() };
    let step = clock_step_ms();
    // A rate from a reading of fewer than 20 ticks would be off by over 5 %: leave it out.
    let rate = if r.forward_ms >= 20.0 * step {
        format!(" ({:.1} GFLOP/s)", r.config.forward_flops() as f64 / 1e6 / r.forward_ms)
    } else {
        String::new()
    };
    let interim = if state.session.with(Option::is_none) { " (while the GPU starts)" } else { "" };
    let why = r.choice.map(|c| format!(" Chosen by measurement, {}.", c.why())).unwrap_or_default();
    format!(
        "Forward pass on {}{interim}: {}{rate} for d_model {}, {} of d_k = {}, {} tokens.{why}",
        r.ran_on(),
        show_ms(r.forward_ms, step),
        r.config.d_model,
        heads_count(r.config.num_heads),
        r.config.d_k(),
        r.config.seq_len
    )
}
