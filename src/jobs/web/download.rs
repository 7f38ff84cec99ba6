//! Downloading a file of the page's own origin with progress, abandoned when it stalls.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use wasm_bindgen::closure::Closure;
use wasm_bindgen::JsCast;
use web_sys::{ProgressEvent, XmlHttpRequest, XmlHttpRequestResponseType};

use super::host::{now_ms, yield_to_browser};

fn window() -> web_sys::Window {
    web_sys::window().expect("a page has a window")
}

/// A download that receives no data for this long is abandoned, with a message and a retry.
pub const STALL_MS: f64 = 15_000.0;

/// Fetches `url` from the page's own origin as bytes, reporting `(received, total if known)` as
/// it arrives; gives up when the data stops coming for [`STALL_MS`].
pub async fn fetch_bytes(
    url: &str,
    progress: impl Fn(f64, Option<f64>) + 'static,
) -> Result<Vec<u8>, String> {
    let js = |e: wasm_bindgen::JsValue| format!("{e:?}");
    let xhr = XmlHttpRequest::new().map_err(js)?;
    xhr.open("GET", url).map_err(js)?;
    xhr.set_response_type(XmlHttpRequestResponseType::Arraybuffer);
    let last_data = Rc::new(Cell::new(now_ms()));
    let on_progress = Closure::<dyn Fn(ProgressEvent)>::new({
        let last_data = last_data.clone();
        move |e: ProgressEvent| {
            last_data.set(now_ms());
            progress(e.loaded(), e.length_computable().then(|| e.total()));
        }
    });
    // The watchdog: once a second, abort if nothing arrived for STALL_MS.
    let stalled = Rc::new(Cell::new(false));
    let watchdog = Closure::<dyn Fn()>::new({
        let (xhr, stalled) = (xhr.clone(), stalled.clone());
        move || {
            if now_ms() - last_data.get() > STALL_MS && !stalled.replace(true) {
                let _ = xhr.abort();
            }
        }
    });
    let timer = window()
        .set_interval_with_callback_and_timeout_and_arguments_0(watchdog.as_ref().unchecked_ref(), 1000)
        .map_err(js)?;
    xhr.set_onprogress(Some(on_progress.as_ref().unchecked_ref()));
    let (tx, rx) = futures_channel::oneshot::channel::<()>();
    let tx = RefCell::new(Some(tx));
    let on_end = Closure::<dyn Fn()>::new(move || {
        if let Some(tx) = tx.borrow_mut().take() {
            let _ = tx.send(());
        }
    });
    xhr.set_onloadend(Some(on_end.as_ref().unchecked_ref()));
    xhr.send().map_err(js)?;
    let _ = rx.await;
    window().clear_interval_with_handle(timer);
    drop((on_progress, on_end, watchdog));
    if stalled.get() {
        return Err(format!("the download stalled (no data for {:.0} s)", STALL_MS / 1000.0));
    }
    match xhr.status().unwrap_or(0) {
        200 => Ok(copy_in_turns(&js_sys::Uint8Array::new(&xhr.response().map_err(js)?)).await),
        0 => Err("the download failed".into()),
        status => Err(format!("the server answered {status}")),
    }
}

/// The most bytes copied into the page's memory in one turn: a few milliseconds of copying.
const PIECE_BYTES: usize = 8 << 20;

/// `array` copied into the page's memory a piece at a time, the browser given a turn between
/// pieces: the built-in model's file in one copy was part of a long hold of the page's thread
/// while the page was busy (BENCHMARKS.md section 20, fifth round). The memory is reserved once.
pub async fn copy_in_turns(array: &js_sys::Uint8Array) -> Vec<u8> {
    let length = array.length() as usize;
    let mut bytes = Vec::with_capacity(length);
    while bytes.len() < length {
        let (start, end) = (bytes.len(), (bytes.len() + PIECE_BYTES).min(length));
        bytes.resize(end, 0);
        array.subarray(start as u32, end as u32).copy_to(&mut bytes[start..end]);
        if end < length {
            yield_to_browser().await;
        }
    }
    bytes
}
