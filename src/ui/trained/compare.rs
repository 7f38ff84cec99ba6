//! Two sentences side by side: the reader's sentence and a second one, run with the same heads;
//! every head's attention difference on the tokens that align ([`crate::attention::align`]),
//! the chosen layer's difference maps, and how far apart the two runs' hidden states and
//! embeddings are.

use std::rc::Rc;

use leptos::html;
use leptos::prelude::*;

use super::view::EncoderView;
use super::SentenceInput;
use crate::attention::align::{align, Alignment};
use crate::attention::cosine;
use crate::jobs::encoder::engine::Pass;
use crate::model::encoder::check::CANDIDATES;
use crate::model::tokenize::Token;
use crate::ui::canvas::draw_signed_heatmap;
use crate::ui::state::EXAMPLES;
use crate::viz::colormap::{viridis, wants_light_text};

/// The two runs, aligned.
struct Compared {
    first: Rc<Pass>,
    second: Rc<Pass>,
    alignment: Alignment,
    /// Every head's mean absolute difference on the aligned tokens.
    differences: Vec<f64>,
}

/// The section comparing the reader's sentence with a second one.
#[component]
pub fn ComparePanel() -> impl IntoView {
    let view = EncoderView::get();
    let second = RwSignal::new(EXAMPLES[1].to_string());
    let tokens = Memo::new(move |_| view.model().tokenizer.encode(&second.get()));
    // The last pass, kept while the section is shown: a pass whose sentence or heads are changed
    // again, or whose section is gone, ends at its next turn and leaves it on show.
    let last = StoredValue::new_local(None::<Rc<Pass>>);
    let pass = LocalResource::new(move || {
        let (engine, heads) = (view.engine.get().flatten(), view.choices.heads.get());
        let ids: Vec<u32> = tokens.with(|t| t.iter().map(|t| t.id).collect());
        async move {
            let engine = engine?;
            (heads.len() == engine.model().spec().total_heads()).then_some(())?;
            let same_ids = |t: &Vec<Token>| t.iter().map(|t| t.id).eq(ids.iter().copied());
            let wanted = || {
                last.try_with_value(|_| ()).is_some()
                    && view.choices.heads.try_with_untracked(|h| *h == heads).unwrap_or(false)
                    // (A memo, read with no observer: see `ui::state::pass`.)
                    && untrack(|| tokens.try_with_untracked(same_ids)).unwrap_or(false)
            };
            let Some(pass) = engine.pass_while(ids.clone(), &heads, None, &wanted).await else {
                return last.try_get_value().flatten();
            };
            let pass = Rc::new(pass);
            last.try_set_value(Some(pass.clone()));
            Some(pass)
        }
    });
    // A closure, not a Memo: the passes are not `Send`, and only the section's view reads it.
    let compared = move || {
        let (first, second) = (view.current_for_choices()?, pass.get().flatten()?);
        // While a new pass runs, a resource still holds the last one: only passes of the
        // sentences shown now, with the same heads, are compared.
        let second_ids: Vec<u32> = tokens.with(|t| t.iter().map(|t| t.id).collect());
        (second.ids == second_ids && first.out.heads == second.out.heads).then_some(())?;
        let pieces = |t: &[Token]| t.iter().map(|t| t.piece.clone()).collect::<Vec<_>>();
        let alignment = align(&view.tokens.with(|t| pieces(t)), &tokens.with(|t| pieces(t)));
        let differences =
            alignment.head_differences(&first.out.attention, &second.out.attention, view.spec().heads);
        Some(Rc::new(Compared { first, second, alignment, differences }))
    };
    let check_example = move |_| {
        view.choices.text.set(CANDIDATES[0].to_string());
        second.set(CANDIDATES[1].to_string());
    };
    view! {
        <section class="compare" aria-labelledby="compare-title" data-testid="compare">
            <h3 id="compare-title">"Two sentences side by side"</h3>
            <p class="muted">
                "The sentence above and a second one, run with the same heads. For every head, how differently it \
                 attends on the tokens the two share, the chosen layer's differences drawn (blue where the sentence \
                 above attends more, red where the second does), and how far apart the two runs' hidden states are \
                 before each layer."
            </p>
            <SentenceInput label="Second sentence " text=second testid="second-text" tokens=Signal::derive(move || tokens.get()) />
            <div class="buttons examples">
                <button data-testid="compare-check" on:click=check_example>"The meaning check's two sentences"</button>
            </div>
            {move || compared().map(|c| view! { <CompareResult compared=c /> })}
        </section>
    }
}

/// What the comparison found.
#[component]
fn CompareResult(compared: Rc<Compared>) -> impl IntoView {
    let view = EncoderView::get();
    let spec = view.spec();
    let c = &compared;
    let rule = view
        .tokens
        .with_untracked(|t| c.alignment.rule_text(&t.iter().map(|t| t.piece.clone()).collect::<Vec<_>>()));
    let embedding = cosine(&c.first.out.embedding, &c.second.out.embedding);
    let hidden =
        c.alignment.hidden_cosines(&c.first.out.layer_inputs, &c.second.out.layer_inputs, spec.d_model);
    let hidden_text: Vec<String> =
        hidden.iter().map(|h| h.map_or("-".into(), |v| format!("{v:.3}"))).collect();
    let largest = c.differences.iter().copied().fold(0.0f64, f64::max).max(1e-12);
    view! {
        <p data-testid="compare-rule">{rule}</p>
        <p data-testid="compare-outputs" data-cosine=embedding.to_string()>
            {format!(
                "Their sentence embeddings: cosine {embedding:.3}. The aligned tokens' hidden states, cosine before each layer (1 to {}): {}.",
                spec.layers,
                hidden_text.join(", ")
            )}
        </p>
        <figure class="share-grid" data-testid="compare-grid">
            <figcaption>"Each head's mean absolute difference on the aligned tokens (darker = more alike)"</figcaption>
            <div class="head-grid" style=format!("--heads: {}", spec.heads)>
                {(0..spec.layers)
                    .map(|l| {
                        view! {
                            <div class="head-grid-row">
                                <span class="muted">{format!("layer {}", l + 1)}</span>
                                {(0..spec.heads).map(|i| difference_cell(&spec.head_name(l * spec.heads + i), c.differences[l * spec.heads + i], largest)).collect_view()}
                            </div>
                        }
                    })
                    .collect_view()}
            </div>
        </figure>
        <LayerDifferences compared=compared.clone() />
    }
}

/// One head's mean difference, shaded on the viridis scale against the largest.
fn difference_cell(name: &str, v: f64, largest: f64) -> impl IntoView {
    let rgb = viridis((v / largest) as f32);
    let text = if wants_light_text(rgb) { "#fff" } else { "#000" };
    view! {
        <span
            class="share-cell"
            data-value=v.to_string()
            title=format!("{name}: mean |difference| {v:.4}")
            style=format!("background: rgb({},{},{}); color: {text}", rgb[0], rgb[1], rgb[2])
        >
            {format!("{:.0}", 1000.0 * v)}
        </span>
    }
}

/// The chosen layer's heads' difference maps on the aligned tokens.
#[component]
fn LayerDifferences(compared: Rc<Compared>) -> impl IntoView {
    let view = EncoderView::get();
    let spec = view.spec();
    let stored = StoredValue::new_local(compared);
    let layer = move || view.choices.layer.get().min(spec.layers - 1);
    view! {
        <p class="muted">
            {move || format!(
                "Layer {}'s heads on the aligned tokens (rows: queries, columns: keys; each row rescaled to sum \
                 to 1 over them; the grid's cells in thousandths). Blue: the sentence above attends more; red: \
                 the second does.",
                layer() + 1
            )}
        </p>
        <div class="heads compare-maps">
            {move || (0..spec.heads).map(|h| {
                let canvas = NodeRef::<html::Canvas>::new();
                let l = layer();
                Effect::new(move |_| {
                    let Some(canvas) = canvas.get() else { return };
                    stored.with_value(|c| {
                        let map = c.alignment.difference_map(&c.first.out.attention[l], &c.second.out.attention[l], h);
                        let _ = draw_signed_heatmap(&canvas, &map, c.alignment.pairs.len());
                    });
                });
                view! {
                    <figure class="head">
                        <canvas node_ref=canvas class="heatmap" data-testid=format!("compare-map-{h}") role="img"
                            aria-label=format!("Difference of head {h} of layer {} on the aligned tokens", l + 1)></canvas>
                        <figcaption><span>{format!("head {h}")}</span></figcaption>
                    </figure>
                }
            }).collect_view()}
        </div>
    }
}
