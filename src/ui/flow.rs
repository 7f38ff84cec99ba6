//! The attention-flow figure, shared by the synthetic layer's panel and the trained model's:
//! the picture ([`crate::viz::flow`]) inline, its text alternative, the sentence on what pruning
//! changed, and its SVG download.

use leptos::prelude::*;

use crate::ui::files;
use crate::viz::flow::Picture;

/// The figure for `picture` (none while the pass is computed); `file` names the download.
#[component]
pub fn FlowFigure(picture: Signal<Option<Picture>>, file: &'static str) -> impl IntoView {
    let error = RwSignal::new(None::<String>);
    let download = move |_| {
        let saved = match picture.get_untracked() {
            Some(p) => files::svg(file, &p.svg),
            None => Err("the flow is still being computed".to_string()),
        };
        error.set(saved.err());
    };
    view! {
        <div
            class="flow-scroll"
            tabindex="0"
            role="img"
            data-testid="flow-picture"
            aria-label=move || picture.with(|p| p.as_ref().map(|p| p.description.clone()))
            inner_html=move || picture.with(|p| p.as_ref().map(|p| p.svg.clone()).unwrap_or_default())
        ></div>
        <p data-testid="flow-change" aria-live="polite">{move || picture.with(|p| p.as_ref().map(|p| p.sentence.clone()))}</p>
        <div class="buttons">
            <button data-testid="flow-svg" disabled=move || picture.with(Option::is_none) on:click=download>
                "Flow (SVG)"
            </button>
        </div>
        {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
    }
}
