//! Panics become a visible banner. The banner lives in `index.html`, outside the Leptos root, so
//! it can be shown after the reactive system has stopped (a wasm panic aborts the module).

use leptos::prelude::document;

/// Logs panics to the console with their message and location and the state that caused them
/// (the page's link holds all of it), and shows the banner.
pub fn install() {
    std::panic::set_hook(Box::new(|info| {
        console_error_panic_hook::hook(info);
        let state = leptos::prelude::window().location().href().unwrap_or_default();
        web_sys::console::error_1(
            &format!("headlab state at the panic (reload it to reproduce): {state}").into(),
        );
        show_panic(&info.to_string());
    }));
}

/// Shows `#panic-banner` with `message` in its `#panic-message`. The banner's own links offer
/// a reload with the same URL and a reload with defaults.
pub fn show_panic(message: &str) {
    let doc = document();
    if let Some(text) = doc.get_element_by_id("panic-message") {
        text.set_text_content(Some(message));
    }
    if let Some(banner) = doc.get_element_by_id("panic-banner") {
        let _ = banner.remove_attribute("hidden");
    }
}
