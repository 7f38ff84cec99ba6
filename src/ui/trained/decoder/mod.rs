//! A GPT-2 decoder in the page: the reader's text and its tokens, the next token full against
//! pruned, each token's loss as a strip under the text, a layer's causal heatmaps, every head on
//! a grid to prune, and the induction test; the measurements (importance, perplexity, pruning
//! curves, the induction test) are in `measures`, the state every part reads in `view`. What is
//! computed is `crate::jobs::decoder`'s: the page's passes on the engine's backend, the
//! measurements as jobs on its workers; the components here display it.

use std::rc::Rc;

use leptos::either::Either;
use leptos::html;
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::attention::precision::Precision;
use crate::attention::turns::while_wanted;
use crate::attention::{HeadSet, Mask};
use crate::jobs::host::HostTurns;
use crate::jobs::web::{clock_step_ms, PageHost};
use crate::model::decoder::induction::DecoderRole;
use crate::model::decoder::Decoder;
use crate::ui::canvas::{draw_masked_heatmap, draw_soon};
use crate::viz::colormap::viridis_css_gradient;

use super::TextWithExamples;

mod measures;
mod view;

use measures::{DecoderCurvesChart, DecoderImportance, DecoderPrecision, TextSetPerplexity};
use view::{DecoderView, Stale};

/// Everything the panel shows of a decoder, at the reader's precision.
#[component]
pub fn DecoderPanel(
    decoder: Rc<Decoder>,
    shown: super::loader::Shown,
    precision: Precision,
) -> impl IntoView {
    let shown = StoredValue::new_local(shown);
    // A model held at 8 bits only runs at 8 bits whatever the reader chose; the choice is kept,
    // and the page says why it does not apply.
    let refused = decoder.precision_refused(precision);
    let unavailable = Precision::ALL.into_iter().find(|&p| decoder.precision_refused(p).is_some());
    let precision = if refused.is_some() { decoder.precision() } else { precision };
    // The model at the reader's precision: itself, or its copy made between the page's turns
    // (given up once the panel is gone).
    let copying = decoder.precision() != precision;
    let model = RwSignal::new_local((!copying).then(|| decoder.clone()));
    if copying {
        spawn_local(async move {
            let turns = HostTurns::new(Rc::new(PageHost));
            let copy = while_wanted(Decoder::for_precision(&decoder, precision, &turns), move || {
                !model.is_disposed()
            });
            if let Some(copy) = copy.await {
                model.try_set(Some(copy));
            }
        });
    }
    view! {
        <super::PrecisionChoice unavailable=unavailable />
        {refused.map(|why| view! {
            <p class="backend-note" data-testid="precision-note">{format!("{why} This panel runs it at 8 bits.")}</p>
        })}
        {move || match model.get() {
            Some(decoder) => Either::Left(view! { <DecoderModel decoder=decoder shown=shown.get_value() /> }),
            None => Either::Right(view! {
                <p class="muted" data-testid="decoder-quantizing" aria-live="polite">
                    "Making the model's 8-bit copy (a few calibration sentences, then each block's weights)…"
                </p>
            }),
        }}
    }
}

/// Everything the panel shows of a decoder at the precision it runs at.
#[component]
fn DecoderModel(decoder: Rc<Decoder>, shown: super::loader::Shown) -> impl IntoView {
    let view = DecoderView::new(decoder, &shown);
    provide_context(view);
    view! {
        <p class="muted" data-testid="trained-backend">{move || view.backend_sentence()}</p>
        {move || view.run_now().and_then(|r| r.note.clone()).map(|n| view! {
            <p class="backend-note" data-testid="decoder-backend-note">{n}</p>
        })}
        {move || view.workers_note().map(|n| view! { <p class="backend-note" data-testid="workers-note">{n}</p> })}
        <p class="muted" data-testid="memory-note">{move || view.memory_note()}</p>
        <DecoderText />
        <NextTokens />
        <LossStrip />
        <DecoderHeatmaps />
        <DecoderImportance />
        <TextSetPerplexity />
        <DecoderPrecision />
        <DecoderCurvesChart />
        <DecoderGrid />
        <InductionTest />
    }
}

/// The reader's text, example texts, its tokens, and what was cut.
#[component]
fn DecoderText() -> impl IntoView {
    let view = DecoderView::get();
    let text = view.choices.text;
    let tokens = move || view.tokens.get();
    let texts = move || {
        let ids = tokens().ids;
        view.decoder.with_value(|d| ids.iter().map(|&id| d.bpe.text_of(id)).collect::<Vec<_>>())
    };
    view! {
        <TextWithExamples label="Text " text=text />
        <p class="tokens" data-testid="tokens">
            {move || texts().into_iter().map(|t| view! { <span class="token">{visible(&t)}</span> }).collect_view()}
        </p>
        <p class="muted" data-testid="trained-pass">
            {move || view.run_now().filter(|_| view.choices.heads.read().any_pruned()).map(|r| r.cost_sentence(view.spec().layers, clock_step_ms()))}
        </p>
        <p class="muted token-count" data-testid="token-count">
            {move || format!("{} tokens (byte-level BPE; a space belongs to the word after it).", tokens().ids.len())}
        </p>
        {move || view.decoder.with_value(|d| d.cut_note(&tokens())).map(|n| view! { <p class="backend-note" data-testid="tokens-cut">{n}</p> })}
    }
}

/// A token's text as a chip shows it: spaces and line breaks made visible.
fn visible(text: &str) -> String {
    text.replace(' ', "\u{2423}").replace('\n', "\u{21b5}")
}

/// The next token after the text, full model against pruned.
#[component]
fn NextTokens() -> impl IntoView {
    let view = DecoderView::get();
    let table = move || {
        view.run_now().map(|r| {
            view.decoder.with_value(|d| {
                let t = r.next_table(d);
                let sentence = t.sentence(d);
                (t, sentence)
            })
        })
    };
    let percent = |p: f64| format!("{:.1} %", 100.0 * p);
    let staleness = move || view.run_staleness();
    let stale = move || staleness().is_some();
    view! {
        <h3>"The next token"</h3>
        {move || match table() {
            None => view! { <p class="muted" data-testid="next-drift">"Type some text: the model predicts what comes after it."</p> }.into_any(),
            Some((t, sentence)) => view! {
                <p data-testid="next-drift" class:stale=stale data-stale=move || stale().to_string() data-kl=t.drift.kl.to_string() data-changed=t.drift.top_changed().to_string()>
                    {sentence}
                    {move || staleness().map(Stale::note)}
                </p>
                <table class="next-tokens" class:stale=stale data-testid="next-tokens">
                    <thead><tr><th>"token"</th><th>"every head"</th><th>"your heads"</th></tr></thead>
                    <tbody>
                        {t.rows.into_iter().map(|r| view! {
                            <tr data-id=r.id.to_string()>
                                <td class="token-cell">{visible(&r.text)}</td>
                                <td>{percent(r.full)}</td>
                                <td>{percent(r.pruned)}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            }.into_any(),
        }}
    }
}

/// Each token's loss under both models, as a strip of bars under the tokens.
#[component]
fn LossStrip() -> impl IntoView {
    let view = DecoderView::get();
    let strip = move || view.run_now().map(|r| view.decoder.with_value(|d| r.loss_strip(d)));
    let staleness = move || view.run_staleness();
    let stale = move || staleness().is_some();
    view! {
        <h3>"How surprised the model is by each token"</h3>
        <p class="legend">"Each token's loss (−log p, nats) given the tokens before it: upper bar every head, lower bar your heads; taller is more surprised."</p>
        {move || strip().map(|s| {
            let max = s.full.iter().chain(&s.pruned).fold(1e-9f64, |m, &v| m.max(v));
            let bar = move |v: f64, class: &'static str| view! {
                <span class=class style=format!("height: {:.1}px", 2.0 + 28.0 * v / max)></span>
            };
            view! {
                <div class="loss-strip" class:stale=stale data-testid="loss-strip">
                    {s.tokens.iter().enumerate().skip(1).map(|(t, token)| {
                        let (f, p) = (s.full[t - 1], s.pruned[t - 1]);
                        view! {
                            <span class="loss-cell" title=format!("{:?}: loss {f:.3} with every head, {p:.3} with yours", token) data-full=f.to_string() data-pruned=p.to_string()>
                                <span class="loss-bars">{bar(f, "loss-bar full")}{bar(p, "loss-bar pruned")}</span>
                                <span class="token">{visible(token)}</span>
                            </span>
                        }
                    }).collect_view()}
                </div>
                <p data-testid="loss-summary" class:stale=stale>{s.sentence()}{move || staleness().map(Stale::note)}</p>
            }
        })}
    }
}

/// A layer's causal heatmaps.
#[component]
fn DecoderHeatmaps() -> impl IntoView {
    let view = DecoderView::get();
    let layer = view.choices.layer;
    let last = move || view.spec().layers - 1;
    view! {
        <h3>"Attention, layer by layer"</h3>
        <label>
            "Layer "
            <select
                data-testid="layer"
                prop:value=move || layer.get().to_string()
                on:change=move |ev| layer.set(event_target_value(&ev).parse().unwrap_or(0).min(last()))
            >
                {(0..view.spec().layers).map(|l| view! { <option value=l.to_string()>{format!("{}", l + 1)}</option> }).collect_view()}
            </select>
        </label>
        <p class="legend">
            "Rows are query tokens, columns key tokens; 0 "
            <span class="legend-bar" style=format!("background: {}", viridis_css_gradient())></span>
            " each head's largest weight; "
            <span class="legend-swatch masked"></span>
            " masked: a token never reads the tokens after it."
        </p>
        <div class="heads trained-heads" data-testid="trained-heads">
            {(0..view.spec().heads).map(|h| view! { <DecoderHead h=h /> }).collect_view()}
        </div>
    }
}

/// Head `h` of the selected layer, as the reader's pruned model attends.
#[component]
fn DecoderHead(h: usize) -> impl IntoView {
    let view = DecoderView::get();
    let layer = move || view.choices.layer.get().min(view.spec().layers - 1);
    let canvas = NodeRef::<html::Canvas>::new();
    let draw_error = RwSignal::new(None::<String>);
    Effect::new(move |_| {
        let (Some(canvas), Some(run)) = (canvas.get(), view.run_now()) else { return };
        let (n, l) = (run.pruned.seq_len, layer());
        // A pass that kept another layer only: the one for this layer is on its way.
        if !run.pruned.kept(l) {
            return;
        }
        // Drawn soon after, not in the Effect: the layer's heads share the browser's turns.
        let layer_weights = run.pruned.attention[l].clone();
        draw_soon(move || {
            let w = &layer_weights[h * n * n..(h + 1) * n * n];
            let drawn = draw_masked_heatmap(&canvas, w, n, Mask::Causal);
            draw_error.try_set(drawn.err().map(|e| format!("could not draw: {e:?}")));
        });
    });
    view! {
        <figure class="head">
            <canvas
                node_ref=canvas
                class="heatmap"
                data-testid=format!("decoder-heatmap-{h}")
                role="img"
                aria-label=move || format!("Causal attention weights of head {h} in layer {}", layer() + 1)
            ></canvas>
            <figcaption><span>{format!("head {h}")}</span></figcaption>
            {move || draw_error.get().map(|e| view! { <p class="error">{e}</p> })}
        </figure>
    }
}

/// Every head on a grid, layer by layer: select one to prune it; the induction test labels them.
#[component]
fn DecoderGrid() -> impl IntoView {
    let view = DecoderView::get();
    let heads = view.choices.heads;
    let spec = view.spec();
    let label = move |index: usize| {
        let role =
            view.induction.with(|t| t.as_ref().map(|t| t.scores[index].role().short()).unwrap_or_default());
        if role.is_empty() {
            (index % spec.heads).to_string()
        } else {
            role.to_string()
        }
    };
    view! {
        <h3>{format!("All {} heads: select one to prune it", spec.total_heads())}</h3>
        <p class="muted" data-testid="decoder-pruned">
            {move || format!("{} of {} heads pruned.", heads.read().pruned_count(), spec.total_heads())}
            " "
            <button data-testid="decoder-unprune" on:click=move |_| heads.set(HeadSet::all(spec.total_heads()))>"Prune none"</button>
        </p>
        <div class="head-grid" style=format!("--heads: {}", spec.heads) data-testid="head-grid">
            {(0..spec.layers).map(|l| view! {
                <div class="head-grid-row">
                    <span class="muted">{format!("layer {}", l + 1)}</span>
                    {(0..spec.heads).map(|h| {
                        let index = l * spec.heads + h;
                        // The reader's heads are the app's: a smaller model that replaces this
                        // one sets them before this grid is gone.
                        let pruned = move || heads.with(|s| index < s.len() && s.is_pruned(index));
                        let importance = move || view.importance_now().map(|i| (i.found.ranking.per_head[index], i.found.ranking.share(index)));
                        view! {
                            <button
                                class="grid-head"
                                aria-pressed=move || (!pruned()).to_string()
                                data-testid=format!("decoder-head-{index}")
                                data-importance=move || importance().map(|(v, _)| v.to_string())
                                style=move || format!("--weight: {:.3}", importance().map_or(0.0, |(_, share)| share))
                                aria-label=format!("layer {}, head {h}", l + 1)
                                title=move || {
                                    let measured = view.importance_now().zip(importance()).map(|(i, (v, _))| format!("; {}", i.measure.value_text(v))).unwrap_or_default();
                                    format!("layer {} head {h}: select to prune it or bring it back{measured}", l + 1)
                                }
                                on:click=move |_| heads.update(|s| s.toggle(index))
                            >{move || label(index)}</button>
                        }
                    }).collect_view()}
                </div>
            }).collect_view()}
        </div>
    }
}

/// The induction test: what it measures, a button that runs it, the heads it found, and the
/// repeated half's loss with the reader's heads.
#[component]
fn InductionTest() -> impl IntoView {
    let view = DecoderView::get();
    let found = move || {
        view.induction.with(|t| {
            t.as_ref().map(|t| {
                let spec = view.spec();
                let names =
                    |role| t.heads_with(role).into_iter().map(|h| spec.head_name(h)).collect::<Vec<_>>();
                let list = |role: DecoderRole| match names(role) {
                    n if n.is_empty() => format!("no {} heads", role.name()),
                    n => format!(
                        "{} {} head{}: {}",
                        n.len(),
                        role.name(),
                        if n.len() == 1 { "" } else { "s" },
                        n.join(", ")
                    ),
                };
                format!(
                    "On {} random tokens repeated once: {}; {}; {}.",
                    t.sequence.half,
                    list(DecoderRole::Induction),
                    list(DecoderRole::PreviousToken),
                    list(DecoderRole::DuplicateToken)
                )
            })
        })
    };
    let prune_them = move |_| {
        let Some(t) = view.induction.get_untracked() else { return };
        let total = view.spec().total_heads();
        view.choices.heads.set(HeadSet::with_pruned(total, t.heads_with(DecoderRole::Induction)));
    };
    let losses = move || {
        let (t, now) = (view.induction.get()?, view.halves.get().flatten()?);
        Some(format!(
            "Loss on the repeated half: {:.2} nats per token with every head, {:.2} with your heads (on the random first half: {:.2}).",
            t.full.repeated, now.repeated, t.full.first
        ))
    };
    view! {
        <h3>"Induction heads"</h3>
        <p class="explain">
            "An induction head completes patterns it has seen in this text: at a token it saw before, it attends to the token that came next last time and copies it (… A B … A → B). It needs a previous-token head in an earlier layer. The test runs the model on random tokens repeated once: only such heads can predict the second half."
        </p>
        <p class="buttons">
            <button data-testid="induction-run" disabled=move || view.induction_job.running.get() || view.engine_now().is_none() on:click=move |_| view.find_induction_heads()>
                {move || if view.induction_job.running.get() { "Testing…" } else { "Find the induction heads" }}
            </button>
            <button data-testid="induction-prune" disabled=move || view.induction.with(Option::is_none) on:click=prune_them>
                "Prune the induction heads"
            </button>
        </p>
        <p class="muted" data-testid="induction-status" aria-live="polite">{move || view.induction_job.status.get()}</p>
        <p data-testid="induction-result" aria-live="polite">{found}</p>
        <p data-testid="induction-losses">{losses}</p>
    }
}
