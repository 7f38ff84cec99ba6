//! Panics, and traps of the browser's wasm engine, become a visible banner. The banner lives in
//! `index.html`, outside the Leptos root, so it can be shown after the reactive system has
//! stopped (a wasm panic aborts the module; a trap unwinds it mid-step).

use js_sys::{JsString, Reflect};
use leptos::prelude::{document, window};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};

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
    show_traps();
}

/// Shows the banner for a `WebAssembly.RuntimeError` that no one caught (an `error` event, or a
/// rejection of the promise a callback into wasm ran in). A trap is no panic: the hook above
/// never runs, the tasks it interrupted stay stopped with their state half-changed (a `RefCell`
/// still borrowed), and the page would otherwise sit on "Computing…" for good. The engine may
/// trap on its own (docs/backends.md, "WebKitGTK's wasm trap") or when memory runs out.
/// The listener allocates nothing in wasm: the heap may be what failed.
fn show_traps() {
    let on_error = Closure::<dyn Fn(JsValue)>::new(|event: JsValue| {
        let thrown = ["error", "reason"]
            .into_iter()
            .filter_map(|key| Reflect::get(&event, &JsValue::from_str(key)).ok())
            .find(|v| v.is_instance_of::<js_sys::WebAssembly::RuntimeError>());
        // A panic aborts with a trap too: its own message, already on the banner, stays.
        let shown = document().get_element_by_id("panic-banner").is_some_and(|b| !b.has_attribute("hidden"));
        if let (Some(trap), false) = (thrown, shown) {
            let what = trap.unchecked_into::<js_sys::Error>().to_string();
            let opening = JsString::from("The browser's WebAssembly engine stopped the page's work (");
            show_banner(&opening.concat(&what).concat(&JsValue::from_str(").")));
        }
    });
    for kind in ["error", "unhandledrejection"] {
        let _ = window().add_event_listener_with_callback(kind, on_error.as_ref().unchecked_ref());
    }
    // The listener lives as long as the page.
    on_error.forget();
}

/// Shows `#panic-banner` with `message` in its `#panic-message`. The banner's own links offer
/// a reload with the same URL and a reload with defaults.
pub fn show_panic(message: &str) {
    show_banner(&JsValue::from_str(message));
}

/// [`show_panic`] for a message already in JavaScript.
fn show_banner(message: &JsValue) {
    let doc = document();
    if let Some(text) = doc.get_element_by_id("panic-message") {
        let _ = Reflect::set(&text, &JsValue::from_str("textContent"), message);
    }
    if let Some(banner) = doc.get_element_by_id("panic-banner") {
        let _ = banner.remove_attribute("hidden");
    }
}
