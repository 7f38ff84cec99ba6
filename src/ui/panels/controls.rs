//! Preset picker, custom shape (sliders reach only valid shapes; typed values are explained),
//! sequence length, seed and theme.

use leptos::prelude::*;

use crate::attention::config::MAX_SEQ_LEN;
use crate::attention::PRESETS;
use crate::settings::{ModelChoice, Settings, Theme};
use crate::ui::state::AppState;

/// Widths the custom d_model slider visits: multiples of 64 up to 4096.
const D_MODEL_STEP: usize = 64;
const D_MODEL_SLIDER_MAX: usize = 4096;

/// Head counts that divide `d_model` (at most 256), so the heads slider reaches only valid shapes.
fn divisors(d_model: usize) -> Vec<usize> {
    (1..=d_model.min(256)).filter(|h| d_model.is_multiple_of(*h)).collect()
}

/// Longest sequence the slider reaches; longer ones can be typed (up to the validated limit).
const SLIDER_MAX: usize = 256;

/// Reads a whole number typed by the reader, or says why it is not one.
fn parse_count(what: &str, raw: &str) -> Result<usize, String> {
    raw.trim().parse::<usize>().map_err(|_| {
        format!("{what}: \"{}\" is not a whole number.", raw.chars().take(20).collect::<String>())
    })
}

/// A typed value that could not be read (the settings keep their last good value), shared by
/// the controls.
#[derive(Clone, Copy)]
struct InputNote {
    message: RwSignal<Option<String>>,
    settings: RwSignal<Settings>,
}

impl InputNote {
    /// Applies `apply` with a value that parsed, or says why it did not.
    fn set_or_note(self, result: Result<usize, String>, apply: impl FnOnce(&mut Settings, usize)) {
        match result {
            Ok(v) => {
                self.message.set(None);
                self.settings.update(|s| apply(s, v));
            }
            Err(msg) => self.message.set(Some(msg)),
        }
    }
}

/// The controls that change [`Settings`].
#[component]
pub fn Controls() -> impl IntoView {
    let settings = AppState::get().settings;
    let note = InputNote { message: RwSignal::new(None), settings };
    let is_custom = move || matches!(settings.read().model, ModelChoice::Custom { .. });
    view! {
        <div class="controls">
            <ModelPicker />
            <Show when=is_custom>
                <CustomShape note=note />
            </Show>
            <Show when=move || !settings.read().is_trained()>
                <Tokens note=note />
            </Show>
            <Seed note=note />
            <ThemePicker />
            <Show when=move || note.message.read().is_some()>
                <p class="error" role="alert" data-testid="input-note">
                    {move || note.message.get()}
                </p>
            </Show>
        </div>
    }
}

/// The seed's presets, a custom shape, or the trained model. Options are numbered by preset.
#[component]
fn ModelPicker() -> impl IntoView {
    let state = AppState::get();
    let settings = state.settings;
    let choice_value = move || match settings.read().model {
        ModelChoice::Preset(p) => PRESETS.iter().position(|q| q == p).unwrap_or(0).to_string(),
        ModelChoice::Trained => "trained".to_string(),
        ModelChoice::Custom { .. } => "custom".to_string(),
    };
    let on_choice = move |ev: leptos::ev::Event| {
        let value = event_target_value(&ev);
        let (d_model, num_heads) = untrack(|| state.shape());
        settings.update(|s| {
            s.model = match value.parse::<usize>().ok().and_then(|i| PRESETS.get(i)) {
                Some(p) => ModelChoice::Preset(p),
                None if value == "trained" => ModelChoice::Trained,
                // "custom": start from the shape on screen so the reader edits rather than retypes.
                None => ModelChoice::Custom { d_model, num_heads },
            }
        });
    };
    view! {
        <label>
            "Model "
            <select data-testid="preset" on:change=on_choice prop:value=choice_value>
                {PRESETS
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        view! {
                            <option value=i.to_string()>
                                {format!("{} — {}/{}, d_k {}", p.name, p.d_model, p.num_heads, p.d_k())}
                            </option>
                        }
                    })
                    .collect_view()}
                <option value="custom">"Custom…"</option>
                <option value="trained">
                    {move || {
                        // The model on show, whatever loaded it (the built-in one before).
                        let spec = state.trained.shape.get();
                        let name = state.trained.name.get();
                        format!(
                            "{} (trained) — {}/{}, d_k {}",
                            name.as_deref().unwrap_or(crate::model::encoder::BUILT_IN_NAME),
                            spec.d_model,
                            spec.heads,
                            spec.d_k()
                        )
                    }}
                </option>
            </select>
        </label>
    }
}

/// Sets the custom width to `v`, keeping the head count valid: the nearest divisor of the width.
fn set_width(s: &mut Settings, v: usize) {
    if let ModelChoice::Custom { d_model, num_heads } = &mut s.model {
        *d_model = v;
        let ok = divisors(v);
        if !ok.contains(num_heads) {
            *num_heads = ok.iter().copied().min_by_key(|h| h.abs_diff(*num_heads)).unwrap_or(1);
        }
    }
}

/// d_model and heads of a custom shape: sliders that reach only valid shapes, and typed values
/// that validation explains.
#[component]
fn CustomShape(note: InputNote) -> impl IntoView {
    let settings = AppState::get().settings;
    let config = move || settings.read().config();
    let typed = |what: &'static str, ev: &leptos::ev::Event| parse_count(what, &event_target_value(ev));
    view! {
        <label>
            "d_model "
            <input
                type="range"
                min=D_MODEL_STEP.to_string()
                max=D_MODEL_SLIDER_MAX.to_string()
                step=D_MODEL_STEP.to_string()
                data-testid="custom-d-model-slider"
                aria-label="d_model"
                prop:value=move || config().d_model.to_string()
                on:input=move |ev| note.set_or_note(typed("d_model", &ev), set_width)
            />
            <input
                type="number"
                min="1"
                data-testid="custom-d-model"
                aria-label="d_model, typed"
                prop:value=move || config().d_model.to_string()
                on:change=move |ev| {
                    note.set_or_note(
                        typed("d_model", &ev),
                        |s, v| {
                            if let ModelChoice::Custom { d_model, .. } = &mut s.model {
                                *d_model = v;
                            }
                        },
                    )
                }
            />
        </label>
        <label>
            "heads "
            <input
                type="range"
                min="0"
                max=move || divisors(config().d_model).len().saturating_sub(1).to_string()
                data-testid="custom-heads-slider"
                aria-label="heads (divisors of d_model only)"
                prop:value=move || {
                    let c = config();
                    divisors(c.d_model).iter().position(|&h| h == c.num_heads).unwrap_or(0).to_string()
                }
                on:input=move |ev| {
                    note.set_or_note(
                        typed("heads", &ev),
                        |s, i| {
                            if let ModelChoice::Custom { d_model, num_heads } = &mut s.model {
                                if let Some(&h) = divisors(*d_model).get(i) {
                                    *num_heads = h;
                                }
                            }
                        },
                    )
                }
            />
            <input
                type="number"
                min="1"
                data-testid="custom-heads"
                aria-label="heads, typed"
                prop:value=move || config().num_heads.to_string()
                on:change=move |ev| {
                    note.set_or_note(
                        typed("heads", &ev),
                        |s, v| {
                            if let ModelChoice::Custom { num_heads, .. } = &mut s.model {
                                *num_heads = v;
                            }
                        },
                    )
                }
            />
            <span class="muted" data-testid="custom-d-k">
                {move || {
                    let c = config();
                    if c.num_heads > 0 && c.d_model.is_multiple_of(c.num_heads) {
                        format!("d_k = {}", c.d_k())
                    } else {
                        String::new()
                    }
                }}
            </span>
        </label>
    }
}

/// Tokens in the sequence: a slider to [`SLIDER_MAX`], typed up to the validated limit.
#[component]
fn Tokens(note: InputNote) -> impl IntoView {
    let settings = AppState::get().settings;
    let set = move |ev: leptos::ev::Event| {
        note.set_or_note(parse_count("tokens", &event_target_value(&ev)), |s, v| s.seq_len = v)
    };
    view! {
        <label>
            "Tokens "
            <input
                type="range"
                min="1"
                max=SLIDER_MAX.to_string()
                data-testid="seq-slider"
                prop:value=move || settings.read().seq_len.min(SLIDER_MAX).to_string()
                on:input=set
            />
            <input
                type="number"
                min="1"
                max=MAX_SEQ_LEN.to_string()
                class="seq-number"
                data-testid="seq-number"
                prop:value=move || settings.read().seq_len.to_string()
                on:change=set
            />
        </label>
    }
}

/// The seed of the synthetic weights and inputs.
#[component]
fn Seed(note: InputNote) -> impl IntoView {
    let settings = AppState::get().settings;
    let on_change = move |ev: leptos::ev::Event| {
        let raw = event_target_value(&ev);
        match raw.trim().parse::<u32>() {
            Ok(v) => {
                note.message.set(None);
                settings.update(|s| s.seed = v);
            }
            Err(_) => note.message.set(Some(format!(
                "seed: \"{}\" is not a whole number from 0 to 4294967295.",
                raw.chars().take(20).collect::<String>()
            ))),
        }
    };
    view! {
        <label>
            "Seed "
            <input
                type="number"
                min="0"
                class="seed-number"
                data-testid="seed"
                prop:value=move || settings.read().seed.to_string()
                on:change=on_change
            />
        </label>
    }
}

/// Light, dark, or the system's.
#[component]
fn ThemePicker() -> impl IntoView {
    let settings = AppState::get().settings;
    view! {
        <label>
            "Theme "
            <select
                data-testid="theme"
                prop:value=move || settings.read().theme.as_str()
                on:change=move |ev| {
                    if let Some(t) = Theme::parse(&event_target_value(&ev)) {
                        settings.update(|s| s.theme = t);
                    }
                }
            >
                <option value="auto">"system"</option>
                <option value="light">"light"</option>
                <option value="dark">"dark"</option>
            </select>
        </label>
    }
}
