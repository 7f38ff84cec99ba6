//! Attention flow through the trained model: rollout from every token to the pooled sentence
//! embedding, layer by layer, with the reader's heads and with all of them.

use leptos::prelude::*;

use super::view::EncoderView;
use crate::attention::rollout::rollout;
use crate::model::encoder::bert::BertOutput;
use crate::model::encoder::roles::is_punctuation;
use crate::ui::flow_figure::FlowFigure;
use crate::viz::flow_picture::{picture, Picture};

/// Longest sentence drawn: rollout multiplies `n x n` matrices once per layer, twice per change.
pub const MAX_FLOW_TOKENS: usize = 192;

fn layers(out: &BertOutput) -> Vec<&[f32]> {
    out.attention.iter().map(|a| a.as_slice()).collect()
}

/// The trained model's flow picture and what pruning changed in it.
#[component]
pub fn EncoderFlow() -> impl IntoView {
    let view = EncoderView::get();
    let too_long = move || view.tokens.with(|t| t.len() > MAX_FLOW_TOKENS);
    let computed = Memo::new(move |_| {
        let (full, now) = (view.full_now()?, view.current_for_choices()?);
        // While a new sentence's passes run, the tokens are already the new sentence's (and
        // `now` is for them).
        if full.ids != now.ids || full.ids.len() > MAX_FLOW_TOKENS {
            return None;
        }
        let (tokens, content): (Vec<String>, Vec<bool>) = view.tokens.with(|t| {
            t.iter()
                .map(|t| {
                    (
                        t.piece.clone(),
                        !matches!(t.piece.as_str(), "[CLS]" | "[SEP]") && !is_punctuation(&t.piece),
                    )
                })
                .unzip()
        });
        let (n, per_layer) = (full.out.seq_len, view.spec().heads);
        let heads = now.out.heads.clone();
        let all = rollout(&layers(&full.out), per_layer, n, &full.out.heads);
        let pruned = rollout(&layers(&now.out), per_layer, n, &heads);
        Some(picture(&tokens, &content, (&all, &pruned), &heads, per_layer, |l| format!("layer {}", l + 1)))
    });
    let shown: Signal<Option<Picture>> = Signal::derive(move || computed.get());
    view! {
        <h3 id="flow-title">"How information flows to the sentence embedding"</h3>
        <p class="muted">
            {move || format!(
                "Attention rollout (Abnar and Zuidema 2020): per layer, the active heads' attention averaged, half of each token kept by the residual connection, multiplied through the {} layers. Each cell is the share of the mean-pooled embedding, after that layer, that comes from the token below it (percent); a pruned head drops out of its layer's average, a layer with every head pruned passes its tokens through unchanged.",
                view.spec().layers
            )}
        </p>
        {move || {
            too_long()
                .then(|| {
                    view! {
                        <p class="backend-note" data-testid="flow-too-long">
                            {format!("The flow is drawn for sentences of up to {MAX_FLOW_TOKENS} tokens; this one has {}.", view.tokens.with(Vec::len))}
                        </p>
                    }
                })
        }}
        <FlowFigure picture=shown file="headlab-minilm-flow.svg" />
    }
}
