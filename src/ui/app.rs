//! The root component: creates the page's state from the link, shares it, and lays the panels
//! out for the page or for the framed view it shows.

use leptos::prelude::*;

use super::host::connect_host;
use super::panels::{
    BackendNote, Claims, CodeWalk, ConfigChart, ConfigError, DriftPanel, FlowPanel, HeadGrid, LinkNotes,
    Timing, Toolbar,
};
use super::state::AppState;
use super::trained::TrainedModel;
use crate::settings::{Link, Panels, Theme};

/// The whole page below its static header.
#[component]
pub fn App() -> impl IntoView {
    let search = window().location().search().unwrap_or_default();
    let (link, url_notes) = Link::from_query(&search);
    let state = AppState::new(link);
    state.provide();
    let panels = state.frame.with_value(|f| f.as_ref().map_or(Panels::All, |f| f.panels));
    if let Some(frame) = state.frame.get_value() {
        if let Some(root) = document().document_element() {
            let _ = root.set_attribute("data-embed", panels.as_str());
        }
        connect_host(&frame, state.settings);
    }
    push_outward(state);

    let trained = move || state.settings.read().is_trained();
    // The chart column of either layout; the synthetic presets add the claims beneath the chart.
    let chart_column = move |with_claims: bool| {
        panels.shows_chart().then(|| {
            view! {
                <div class="column-chart">
                    <ConfigChart />
                    {with_claims.then(|| view! { <Claims /> })}
                </div>
            }
        })
    };
    view! {
        <Toolbar />
        <BackendNote />
        <LinkNotes notes=url_notes />
        <ConfigError />
        <Timing />
        <Show
            when=trained
            fallback=move || {
                view! {
                    <div class="panels">
                        {chart_column(true)}
                        {panels.shows_heads().then(|| view! { <HeadGrid /> })}
                        {panels.shows_drift().then(|| view! { <DriftPanel /> })}
                    </div>
                    {(panels.shows_code() || panels.shows_flow())
                        .then(|| {
                            view! {
                                <div class="panels panels-wide">
                                    {panels.shows_flow().then(|| view! { <FlowPanel /> })}
                                    {panels.shows_code().then(|| view! { <CodeWalk /> })}
                                </div>
                            }
                        })}
                }
            }
        >
            <div class="panels trained-panels">
                {chart_column(false)}
                {(panels == Panels::Code)
                    .then(|| {
                        view! {
                            <p class="backend-note" data-testid="code-trained-note">
                                "The code walk follows the handbook's single layer: choose one of the seven models above to step through it."
                            </p>
                        }
                    })}
                <TrainedModel />
            </div>
        </Show>
    }
}

/// The effects that push the state out of the page's own DOM: the theme onto `<html>`, which the
/// stylesheet follows, and the whole state into the address bar, so that every view is a link.
fn push_outward(state: AppState) {
    Effect::new(move |_| {
        let theme = state.settings.read().theme;
        if let Some(root) = document().document_element() {
            let _ = match theme {
                Theme::Auto => root.remove_attribute("data-theme"),
                t => root.set_attribute("data-theme", t.as_str()),
            };
        }
    });
    Effect::new(move |_| {
        let query = format!("?{}", state.link().to_query());
        if let Ok(history) = window().history() {
            let _ = history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&query));
        }
    });
}
