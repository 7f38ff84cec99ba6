//! The page: Leptos components, the only code that touches the DOM, and only on wasm32.
//!
//! The page's state is owned once, by [`state::AppState`], which the root component creates and
//! shares by context: the reader's settings and pruned heads are signals; the forward pass is a
//! resource derived from the settings and the backend session; importance and drift are memos of
//! the pass and the pruned heads, so a toggle recomposes the output and nothing else. What is
//! computed, and how, lives outside `ui/` (`attention`, `model`, `backend`, and the trained
//! model's long work in `jobs`); components display it and dispatch the reader's changes.
//! Effects only push state outward: pixels into canvases, the settings into the URL and
//! `<html data-theme>`, heights to a host page.

mod app;
mod browser;
mod canvas;
mod debug;
mod files;
mod flow_figure;
mod host;
mod keyboard;
mod panels;
pub mod panic;
mod state;
mod trained;

pub use app::App;

use leptos::prelude::*;
use wasm_bindgen::JsCast;

/// Installs the panic banner and mounts the app into `#app` (or the body if the page has none),
/// replacing the loading indicator that `index.html` shows until the wasm has started. In one
/// of the page's web workers, serves the page's work instead.
pub fn start() {
    if let Some(scope) = crate::jobs::web::worker::scope() {
        return crate::jobs::web::worker::serve(scope);
    }
    panic::install();
    // The 8-bit kernel's form, timed once the page has painted, and again two seconds later,
    // when the engine has compiled both forms' optimized code (a round at a time, between turns).
    wasm_bindgen_futures::spawn_local(async {
        crate::jobs::web::yield_to_browser().await;
        crate::jobs::web::time_dot_form(false).await;
        crate::jobs::web::wait_ms(2000).await;
        crate::jobs::web::settled_dot_form().await;
    });
    let root = document().get_element_by_id("app").and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok());
    match root {
        Some(root) => {
            root.set_text_content(None);
            mount_to(root, App).forget()
        }
        None => mount_to_body(App),
    }
}
