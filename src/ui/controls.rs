//! Preset picker, custom shape and sequence length.

use leptos::prelude::*;

use crate::attention::config::MAX_SEQ_LEN;
use crate::attention::PRESETS;
use crate::settings::{ModelChoice, Settings};

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
        ModelChoice::Custom { .. } => "custom".to_string(),
    };
    let on_choice = move |ev: leptos::ev::Event| {
        let value = event_target_value(&ev);
        settings.update(|s| {
            s.model = match value.parse::<usize>() {
                Ok(i) if i < PRESETS.len() => ModelChoice::Preset(i),
                // "custom": start from the shape on screen so the reader edits rather than retypes.
                _ => {
                    let c = s.config();
                    ModelChoice::Custom { d_model: c.d_model, num_heads: c.num_heads }
                }
            }
        });
    };
    let is_custom = move || matches!(settings.read().model, ModelChoice::Custom { .. });
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
                </select>
            </label>
            <Show when=is_custom>
                <label>
                    "d_model "
                    <input
                        type="number"
                        min="1"
                        data-testid="custom-d-model"
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
                        type="number"
                        min="1"
                        data-testid="custom-heads"
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
                </label>
            </Show>
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
            <Show when=move || input_note.read().is_some()>
                <p class="error" role="alert" data-testid="input-note">
                    {move || input_note.get()}
                </p>
            </Show>
        </div>
    }
}
