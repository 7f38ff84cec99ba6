//! The handbook's `efficient_multihead_attention`, line by line, on the current preset's tensors
//! ([`crate::attention::walk`]), and the same output computed head by head, timed beside it.

use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::attention::analysis::heads_count;
use crate::attention::clock::show_ms;
use crate::attention::synthetic::{GeneratedWeights, LayerWeights};
use crate::attention::walk::{walk, walk_cost, weights_row, Focus, Line, Walk, WALK_MAX_COST};
use crate::backend::batched::{time_loop, untimeable, LoopVsBatched, BATCHED_ROUNDS};
use crate::ui::browser::{yield_to_browser, PageHost};
use crate::ui::state::AppState;

/// The code walk: the function's lines, the current one's tensor, and loop against batched.
#[component]
pub fn CodeWalk() -> impl IntoView {
    let state = AppState::get();
    let line = RwSignal::new(0usize);
    let focus = RwSignal::new(Focus { head: 0, token: 0 });
    // Recomputed when the pass or the focus changes: only the focused head's row, its weights
    // made from the seed where they are read (the pass's inputs are kept with it).
    let walked = Memo::new(move |_| {
        let run = state.run().filter(|r| walk_cost(&r.config) <= WALK_MAX_COST)?;
        let f = focus.get();
        let weights =
            LayerWeights::Generated(GeneratedWeights { d_model: run.config.d_model, seed: run.seed });
        let w = walk(&run.config, &run.inputs.x, &weights, f, &run.forward.heads);
        let row_sum = weights_row(&run.config, &run.inputs.x, &weights, w.focus).iter().sum::<f64>();
        Some((w, row_sum, run.words.clone()))
    });
    let too_wide = move || {
        let run = state.run()?;
        (walk_cost(&run.config) > WALK_MAX_COST).then(|| {
            format!(
                "Heads of {} dimensions are too wide to walk here: following one token through one head \
                 takes {:.0} million multiply-adds in f64 on this page's thread, over its limit of {:.0} \
                 million. Give the layer more heads or fewer dimensions to walk it.",
                run.config.d_k(),
                walk_cost(&run.config) as f64 / 1e6,
                WALK_MAX_COST as f64 / 1e6,
            )
        })
    };
    let last = Line::ALL.len() - 1;
    let go = move |to: usize| line.set(to.min(last));
    let on_key = move |ev: web_sys::KeyboardEvent| {
        let at = line.get_untracked();
        let to = match ev.key().as_str() {
            "ArrowDown" | "ArrowRight" => at + 1,
            "ArrowUp" | "ArrowLeft" => at.saturating_sub(1),
            "Home" => 0,
            "End" => last,
            _ => return,
        };
        ev.prevent_default();
        go(to);
    };
    view! {
        <section class="panel code-walk" aria-labelledby="code-title" data-testid="code-walk">
            <h2 id="code-title">"The handbook's code, line by line, on this model's tensors"</h2>
            {move || too_wide().map(|why| view! { <p class="note" data-testid="code-too-wide">{why}</p> })}
            <FocusPicker focus walked />
            <div class="code-layout">
                <div>
                <p class="code-def"><code>"def efficient_multihead_attention(x, W_qkv, W_o, num_heads):"</code></p>
                <ol
                    class="code-lines"
                    tabindex="0"
                    role="listbox"
                    aria-label="efficient_multihead_attention, one line per step; arrow keys move between lines"
                    aria-activedescendant=move || format!("code-line-{}", line.get())
                    data-testid="code-lines"
                    on:keydown=on_key
                >
                    {Line::ALL
                        .iter()
                        .enumerate()
                        .map(|(i, l)| {
                            view! {
                                <li
                                    id=format!("code-line-{i}")
                                    role="option"
                                    aria-selected=move || (line.get() == i).to_string()
                                    class:current=move || line.get() == i
                                    data-testid=format!("code-line-{i}")
                                    on:click=move |_| go(i)
                                >
                                    <code>{l.code()}</code>
                                </li>
                            }
                        })
                        .collect_view()}
                </ol>
                </div>
                <TensorView line walked />
            </div>
            <div class="buttons">
                <button data-testid="code-prev" disabled=move || line.get() == 0 on:click=move |_| go(line.get().saturating_sub(1))>
                    "← Previous line"
                </button>
                <button data-testid="code-next" disabled=move || line.get() == last on:click=move |_| go(line.get() + 1)>
                    "Next line →"
                </button>
                <span class="muted" data-testid="code-position">{move || format!("Line {} of {}", line.get() + 1, last + 1)}</span>
            </div>
            <LoopAgainstBatched />
        </section>
    }
}

type Walked = Memo<Option<(Walk, f64, Vec<&'static str>)>>;

/// The head and the token whose slices are shown.
#[component]
fn FocusPicker(focus: RwSignal<Focus>, walked: Walked) -> impl IntoView {
    let state = AppState::get();
    let heads = move || (0..state.run().map_or(0, |r| r.config.num_heads)).map(|h| h.to_string()).collect();
    let words = move || {
        walked.with(|w| {
            w.as_ref()
                .map(|(_, _, words)| words.iter().enumerate().map(|(i, w)| format!("{i}: {w}")).collect())
        })
    };
    view! {
        <div class="controls code-focus">
            <IndexSelect label="Head " id="code-head" options=heads value=move || focus.get().head set=move |h| focus.update(|f| f.head = h) />
            <IndexSelect
                label="Token "
                id="code-token"
                options=move || words().unwrap_or_default()
                value=move || focus.get().token
                set=move |t| focus.update(|f| f.token = t)
            />
        </div>
    }
}

/// A labelled select of `options`, by index.
#[component]
fn IndexSelect(
    label: &'static str,
    id: &'static str,
    options: impl Fn() -> Vec<String> + Send + Sync + 'static,
    value: impl Fn() -> usize + Send + Sync + 'static,
    set: impl Fn(usize) + 'static,
) -> impl IntoView {
    view! {
        <label>
            {label}
            <select
                data-testid=id
                prop:value=move || value().to_string()
                on:change=move |ev| set(event_target_value(&ev).parse().unwrap_or(0))
            >
                {move || {
                    options()
                        .into_iter()
                        .enumerate()
                        .map(|(i, o)| view! { <option value=i.to_string()>{o}</option> })
                        .collect_view()
                }}
            </select>
        </label>
    }
}

/// The current line's tensor: its shape, what the line does, and a slice of its values.
#[component]
fn TensorView(line: RwSignal<usize>, walked: Walked) -> impl IntoView {
    let step = move || walked.with(|w| w.as_ref().map(|(w, sum, _)| (w.steps[line.get()].clone(), *sum)));
    let values = move || {
        step().map(|(s, sum)| {
            let shown: Vec<String> = match s.line {
                Line::HeadWidth => s.values.iter().map(|v| format!("{v:.0}")).collect(),
                _ => s.values.iter().map(|v| format!("{v:.4}")).collect(),
            };
            let more = if s.line == Line::Softmax {
                format!(" (the whole row sums to {sum:.6})")
            } else {
                String::new()
            };
            format!("[{}{}]{more}", shown.join(", "), if s.line == Line::HeadWidth { "" } else { ", …" })
        })
    };
    view! {
        <div class="tensor" aria-live="polite" data-testid="code-tensor">
            {move || {
                step()
                    .map(|(s, _)| {
                        view! {
                            <p class="code-explains">{s.line.explains()}</p>
                            <p>
                                "Shape: "
                                <strong data-testid="code-shape">
                                    {if s.shape.is_empty() { "a number".to_string() } else { s.shape_text() }}
                                </strong>
                                {(!s.shape.is_empty())
                                    .then(|| view! { <span class="muted">{format!(" = ({})", s.line.dims().join(", "))}</span> })}
                            </p>
                            <p>
                                <code data-testid="code-slice">{s.slice.clone()}</code>
                                " = "
                                <span class="code-values" data-testid="code-values">{values}</span>
                            </p>
                        }
                    })
            }}
            {move || step().is_none().then(|| view! { <p class="muted">"Waiting for the first pass…"</p> })}
            <p class="muted" data-testid="code-agreement">
                {move || {
                    walked.with(|w| {
                        w.as_ref().map(|(w, _, _)| {
                            format!(
                                "The walk computes head {}'s values in f64; the page's pass gave the same to {:.1e} of their size (float32 rounding).",
                                w.focus.head,
                                w.backend_difference,
                            )
                        })
                    })
                }}
            </p>
        </div>
    }
}

/// The same output, head by head in a loop, timed against the batched pass.
#[component]
fn LoopAgainstBatched() -> impl IntoView {
    let state = AppState::get();
    let result = RwSignal::new_local(None::<Result<LoopVsBatched, String>>);
    let measuring = RwSignal::new(false);
    let measure = move |_| {
        let Some(run) = state.run() else { return };
        let Some(session) = state.session.get_untracked() else { return };
        if let Some(why) = untimeable(&run.backend_in(&session), &run.config) {
            result.set(Some(Err(why)));
            return;
        }
        measuring.set(true);
        spawn_local(async move {
            yield_to_browser().await;
            let timed =
                time_loop(&run.backend_in(&session), run.config, run.seed, &PageHost, yield_to_browser).await;
            result.set(Some(timed.map_err(|e| e.to_string())));
            measuring.set(false);
        });
    };
    let text = move || {
        result.get().map(|r| match r {
            Ok(t) => format!(
                "On {}: the batched function {}; the same {} one by one ({} separate {}) {}: \
                 {:.2}x. {} Medians of {BATCHED_ROUNDS} rounds.",
                t.backend.label(),
                show_ms(t.batched_ms, t.step_ms),
                heads_count(t.config.num_heads),
                t.per_head().0 * t.config.num_heads,
                t.per_head().1,
                show_ms(t.loop_ms, t.step_ms),
                t.ratio(),
                if t.difference == 0.0 {
                    "The two outputs are equal bit for bit: the same sums, in the same order.".to_string()
                } else {
                    format!("Largest difference between the two outputs: {:.1e} of the largest value, float rounding.", t.difference)
                },
            ),
            Err(e) => format!("Not timed: {e}."),
        })
    };
    view! {
        <h3>"Batched against a loop over heads"</h3>
        <p>
            "A loop would project Q, K and V for each head with its own slice of W_qkv and add each head's output projection separately: the same arithmetic in many small products (on the GPU, many small dispatches). The batched function does it in one wide product and one batched attention. Both run on this page's backend."
        </p>
        <div class="buttons">
            <button data-testid="code-time-loop" disabled=move || measuring.get() || state.run().is_none() on:click=measure>
                {move || if measuring.get() { "Measuring…" } else { "Time both on this machine" }}
            </button>
        </div>
        <p class="measured" data-testid="code-loop-result" aria-live="polite">{text}</p>
    }
}
