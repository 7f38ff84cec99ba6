//! The page: Leptos components. The only module that touches the DOM, and only on wasm32.
//!
//! State lives in [`app::App`]: the reader's [`Settings`](crate::settings::Settings) and the set
//! of pruned heads are signals; the forward pass is a memo of the settings; drift is a memo of
//! the forward pass and the pruned set, so a toggle recomposes the output and nothing else.
//! Effects only push state outward: pixels into canvases, the settings into the URL.

pub mod app;
mod charts;
mod claims;
mod controls;
mod drift;
mod heads;
pub mod panic;
mod trained;

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

/// The colours charts use under the page's current theme.
pub(crate) fn palette(theme: crate::settings::Theme) -> &'static crate::viz::chart::Palette {
    use crate::settings::Theme;
    use crate::viz::chart::Palette;
    let dark = match theme {
        Theme::Dark => true,
        Theme::Light => false,
        Theme::Auto => {
            window().match_media("(prefers-color-scheme: dark)").ok().flatten().is_some_and(|m| m.matches())
        }
    };
    if dark {
        &Palette::DARK
    } else {
        &Palette::LIGHT
    }
}

/// Lets the browser render and handle events before the next piece of work.
pub(crate) async fn yield_to_browser() {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let _ = window().set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, 0);
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// Milliseconds from the page's time origin.
pub(crate) fn now_ms() -> f64 {
    window().performance().map(|p| p.now()).unwrap_or_else(js_sys::Date::now)
}
