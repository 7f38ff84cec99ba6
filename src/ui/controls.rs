//! Preset picker, custom shape (sliders reach only valid shapes; typed values are explained),
//! sequence length, seed and theme.

use leptos::prelude::*;

use crate::attention::config::MAX_SEQ_LEN;
use crate::attention::PRESETS;
use crate::settings::{ModelChoice, Settings, Theme};

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

/// The controls that change [`Settings`].
#[component]
pub fn Controls(settings: RwSignal<Settings>) -> impl IntoView {
    // A typed value that could not be read; the settings keep their last good value.
    let input_note = RwSignal::new(None::<String>);
    let set_or_note = move |result: Result<usize, String>, apply: &dyn Fn(&mut Settings, usize)| match result
    {
        Ok(v) => {
            input_note.set(None);
            settings.update(|s| apply(s, v));
        }
        Err(msg) => input_note.set(Some(msg)),
    };

    let choice_value = move || match settings.read().model {
        ModelChoice::Preset(i) => i.to_string(),
        ModelChoice::Trained => "trained".to_string(),
        ModelChoice::Custom { .. } => "custom".to_string(),
    };
    let on_choice = move |ev: leptos::ev::Event| {
        let value = event_target_value(&ev);
        settings.update(|s| {
            s.model = match value.parse::<usize>() {
                Ok(i) if i < PRESETS.len() => ModelChoice::Preset(i),
                _ if value == "trained" => ModelChoice::Trained,
                // "custom": start from the shape on screen so the reader edits rather than retypes.
                _ => {
                    let c = s.config();
                    ModelChoice::Custom { d_model: c.d_model, num_heads: c.num_heads }
                }
            }
        });
    };
    let is_custom = move || matches!(settings.read().model, ModelChoice::Custom { .. });
    let is_trained = move || matches!(settings.read().model, ModelChoice::Trained);
    let config = move || settings.read().config();

    view! {
        <div class="controls">
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
                    <option value="trained">"all-MiniLM-L6-v2 (trained) — 384/12, d_k 32"</option>
                </select>
            </label>
            <Show when=is_custom>
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
                        on:input=move |ev| {
                            set_or_note(
                                parse_count("d_model", &event_target_value(&ev)),
                                &|s, v| {
                                    if let ModelChoice::Custom { d_model, num_heads } = &mut s.model {
                                        *d_model = v;
                                        // Keep the head count valid: the nearest divisor of the new width.
                                        let ok = divisors(v);
                                        if !ok.contains(num_heads) {
                                            *num_heads = ok
                                                .iter()
                                                .copied()
                                                .min_by_key(|h| h.abs_diff(*num_heads))
                                                .unwrap_or(1);
                                        }
                                    }
                                },
                            )
                        }
                    />
                    <input
                        type="number"
                        min="1"
                        data-testid="custom-d-model"
                        aria-label="d_model, typed"
                        prop:value=move || config().d_model.to_string()
                        on:change=move |ev| {
                            set_or_note(
                                parse_count("d_model", &event_target_value(&ev)),
                                &|s, v| {
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
                            set_or_note(
                                parse_count("heads", &event_target_value(&ev)),
                                &|s, i| {
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
                            set_or_note(
                                parse_count("heads", &event_target_value(&ev)),
                                &|s, v| {
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
            </Show>
            <Show when=move || !is_trained()>
            <label>
                "Tokens "
                <input
                    type="range"
                    min="1"
                    max=SLIDER_MAX.to_string()
                    data-testid="seq-slider"
                    prop:value=move || settings.read().seq_len.min(SLIDER_MAX).to_string()
                    on:input=move |ev| set_or_note(parse_count("tokens", &event_target_value(&ev)), &|s, v| s.seq_len = v)
                />
                <input
                    type="number"
                    min="1"
                    max=MAX_SEQ_LEN.to_string()
                    class="seq-number"
                    data-testid="seq-number"
                    prop:value=move || settings.read().seq_len.to_string()
                    on:change=move |ev| set_or_note(parse_count("tokens", &event_target_value(&ev)), &|s, v| s.seq_len = v)
                />
            </label>
            </Show>
            <label>
                "Seed "
                <input
                    type="number"
                    min="0"
                    class="seed-number"
                    data-testid="seed"
                    prop:value=move || settings.read().seed.to_string()
                    on:change=move |ev| {
                        let raw = event_target_value(&ev);
                        match raw.trim().parse::<u32>() {
                            Ok(v) => {
                                input_note.set(None);
                                settings.update(|s| s.seed = v);
                            }
                            Err(_) => input_note.set(Some(format!("seed: \"{}\" is not a whole number from 0 to 4294967295.", raw.chars().take(20).collect::<String>()))),
                        }
                    }
                />
            </label>
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
            <Show when=move || input_note.read().is_some()>
                <p class="error" role="alert" data-testid="input-note">
                    {move || input_note.get()}
                </p>
            </Show>
        </div>
    }
}
