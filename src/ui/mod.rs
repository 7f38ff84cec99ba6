//! The page: Leptos components. The only module that touches the DOM, and only on wasm32.
//!
//! State lives in [`app::App`]: the reader's [`Settings`](crate::settings::Settings) and the set
//! of pruned heads are signals; the forward pass is a memo of the settings; drift is a memo of
//! the forward pass and the pruned set, so a toggle recomposes the output and nothing else.
//! Effects only push state outward: pixels into canvases, the settings into the URL.

pub mod app;
mod controls;
mod drift;
mod heads;
pub mod panic;

pub use app::App;

use leptos::prelude::*;
use wasm_bindgen::JsCast;

/// Installs the panic banner and mounts the app into `#app` (or the body if the page has none).
pub fn start() {
    panic::install();
    let root = document().get_element_by_id("app").and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok());
    match root {
        Some(root) => mount_to(root, App).forget(),
        None => mount_to_body(App),
    }
}

/// Milliseconds from the page's time origin.
pub(crate) fn now_ms() -> f64 {
    window().performance().map(|p| p.now()).unwrap_or_else(js_sys::Date::now)
}
