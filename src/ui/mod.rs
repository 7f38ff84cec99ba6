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
mod download;
mod drift;
mod embedding;
mod heads;
pub mod panic;
mod trained;

pub use app::App;

use leptos::prelude::*;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::JsCast;

/// Installs the panic banner and mounts the app into `#app` (or the body if the page has none),
/// replacing the loading indicator that `index.html` shows until the wasm has started.
pub fn start() {
    panic::install();
    let root = document().get_element_by_id("app").and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok());
    match root {
        Some(root) => {
            root.set_text_content(None);
            mount_to(root, App).forget()
        }
        None => mount_to_body(App),
    }
}

/// Arrow keys (and Home/End) move the focus between the elements of a grid: those inside the
/// event's current target with the same `data-nav` value as the focused one (all toggles, or all
/// heatmap buttons). Left/right go by one, up/down by a row, where a row is the elements laid out
/// at the same height. Other keys, and elements without `data-nav`, are left alone.
pub(crate) fn arrow_focus(ev: &web_sys::KeyboardEvent) {
    let step = |columns: usize| -> Option<isize> {
        Some(match ev.key().as_str() {
            "ArrowLeft" => -1,
            "ArrowRight" => 1,
            "ArrowUp" => -(columns as isize),
            "ArrowDown" => columns as isize,
            "Home" => isize::MIN,
            "End" => isize::MAX,
            _ => return None,
        })
    };
    let Some(grid) = ev.current_target().and_then(|t| t.dyn_into::<web_sys::Element>().ok()) else { return };
    let Some(focused) = document().active_element() else { return };
    // Values are this crate's own identifiers ("toggle", "enlarge", "grid"), safe in a selector.
    let Some(kind) =
        focused.get_attribute("data-nav").filter(|k| k.chars().all(|c| c.is_ascii_alphanumeric()))
    else {
        return;
    };
    let Ok(list) = grid.query_selector_all(&format!("[data-nav=\"{kind}\"]")) else { return };
    let items: Vec<web_sys::HtmlElement> =
        (0..list.length()).filter_map(|i| list.item(i)?.dyn_into().ok()).collect();
    let Some(at) = items.iter().position(|e| &focused == e.as_ref() as &web_sys::Element) else { return };
    let top = |e: &web_sys::HtmlElement| e.get_bounding_client_rect().top().round() as i64;
    let columns = items.iter().take_while(|e| top(e) == top(&items[0])).count().max(1);
    let Some(step) = step(columns) else { return };
    let last = items.len() as isize - 1;
    let to = match step {
        isize::MIN => 0,
        isize::MAX => last,
        s => at as isize + s,
    };
    if (0..=last).contains(&to) {
        ev.prevent_default();
        let _ = items[to as usize].focus();
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

/// Resolves after the browser has painted the current state: a status set before heavy work on
/// the main thread is then on screen while the work runs.
pub(crate) async fn after_next_paint() {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let after_frame = Closure::once_into_js(move || {
            let _ = window().set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, 0);
        });
        if window().request_animation_frame(after_frame.unchecked_ref()).is_err() {
            let _ = window()
                .set_timeout_with_callback_and_timeout_and_arguments_0(after_frame.unchecked_ref(), 0);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// Milliseconds from the page's time origin.
pub(crate) fn now_ms() -> f64 {
    window().performance().map(|p| p.now()).unwrap_or_else(js_sys::Date::now)
}
