//! The jobs in the browser: the page's clock and turns ([`PageHost`]), the 8-bit kernel's form
//! for this CPU ([`choose_dot_form`]), downloads, loading a trained model from the page's server
//! or the reader's files ([`load`], [`files`]), its web workers as a
//! [`crate::jobs::pool::Pool`] ([`WebWorkers`]), and, inside a worker, serving the page's pieces
//! ([`worker`]).

mod download;
pub mod files;
mod host;
mod js_file;
pub mod load;
pub mod worker;
mod workers;

pub use download::{fetch_bytes, STALL_MS};
pub use host::{
    adopt_dot_form, choose_dot_form, clock_step_ms, memory_bytes, now_ms, retime_dot_form, settled_dot_form,
    time_dot_form, timed_dot_form, wait_ms, yield_to_browser, PageHost,
};
pub use js_file::JsFile;
pub use workers::{auto_threads, ModelFile, WebWorkers, AUTO_MAX};

use wasm_bindgen::{JsCast, JsValue};

/// What a thrown JavaScript value says: its text, an error's or a DOM exception's message, else
/// its debug form.
pub fn describe(e: &JsValue) -> String {
    e.as_string()
        .or_else(|| e.dyn_ref::<js_sys::Error>().map(|e| String::from(e.message())))
        .or_else(|| e.dyn_ref::<web_sys::DomException>().map(|e| e.message()))
        .unwrap_or_else(|| format!("{e:?}"))
}
