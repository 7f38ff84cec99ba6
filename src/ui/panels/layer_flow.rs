//! Attention flow through the synthetic layer: rollout of its one layer, with the reader's heads.

use leptos::prelude::*;

use crate::attention::rollout::one_layer_rollout;
use crate::ui::flow_figure::FlowFigure;
use crate::ui::state::AppState;
use crate::viz::flow_picture::picture;

/// The synthetic layer's flow picture and what pruning changed in it.
#[component]
pub fn FlowPanel() -> impl IntoView {
    let state = AppState::get();
    let computed = Memo::new(move |_| {
        let run = state.run()?;
        let (n, h) = (run.config.seq_len, run.config.num_heads);
        let heads = state.heads.with(|s| s.resized(h));
        let attention = run.forward.attention.as_slice();
        let all = one_layer_rollout(attention, n, &run.attention_sum, &crate::attention::HeadSet::all(h));
        let pruned = one_layer_rollout(attention, n, &run.attention_sum, &heads);
        let content: Vec<bool> = run.words.iter().map(|w| *w != ".").collect();
        Some(picture(&run.words, &content, (&all, &pruned), &heads, h, |_| "the layer".to_string()))
    });
    view! {
        <section class="panel flow" aria-labelledby="flow-title" data-testid="flow">
            <h2 id="flow-title">"How information flows to the output"</h2>
            <p class="muted">
                "Attention rollout (Abnar and Zuidema 2020) of this one layer: the active heads' attention averaged, half of each token kept by the residual connection. Each cell is the share of the mean output that comes from the token below it (percent). Prune heads above and watch it move."
            </p>
            <FlowFigure picture=Signal::derive(move || computed.get()) file="headlab-flow.svg" />
        </section>
    }
}
