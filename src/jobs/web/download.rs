//! Downloading a file of the page's own origin with progress, abandoned when it stalls.

use std::cell::Cell;
use std::rc::Rc;

use js_sys::{Reflect, Uint8Array};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortController, ReadableStream, ReadableStreamDefaultReader, RequestInit, Response};

use super::host::{now_ms, yield_to_browser};

fn window() -> web_sys::Window {
    web_sys::window().expect("a page has a window")
}

/// A download that receives no data for this long is abandoned, with a message and a retry.
pub const STALL_MS: f64 = 15_000.0;

/// Fetches `url` from the page's own origin as bytes, reporting `(received, total if known)` as
/// it arrives; gives up when the data stops coming for [`STALL_MS`].
///
/// The body is read as the stream the browser hands over, each piece copied into the page's
/// memory as it comes: never one buffer of the whole file on the JavaScript side, whose making
/// (XMLHttpRequest's `response` over the built-in model's 45 MB) held Chromium's thread for up
/// to 450 ms while the page was busy (BENCHMARKS.md section 20, sixth round).
pub async fn fetch_bytes(
    url: &str,
    progress: impl Fn(f64, Option<f64>) + 'static,
) -> Result<Vec<u8>, String> {
    let controller = AbortController::new().map_err(|e| format!("{e:?}"))?;
    let init = RequestInit::new();
    init.set_signal(Some(&controller.signal()));
    let last_data = Rc::new(Cell::new(now_ms()));
    // The watchdog: once a second, abort if nothing arrived for STALL_MS.
    let stalled = Rc::new(Cell::new(false));
    let watchdog = Closure::<dyn Fn()>::new({
        let (last_data, stalled) = (last_data.clone(), stalled.clone());
        move || {
            if now_ms() - last_data.get() > STALL_MS && !stalled.replace(true) {
                controller.abort();
            }
        }
    });
    let timer = window()
        .set_interval_with_callback_and_timeout_and_arguments_0(watchdog.as_ref().unchecked_ref(), 1000)
        .map_err(|e| format!("{e:?}"))?;
    let result = read_body(url, &init, &last_data, &progress).await;
    window().clear_interval_with_handle(timer);
    drop(watchdog);
    match result {
        Err(_) if stalled.get() => {
            Err(format!("the download stalled (no data for {:.0} s)", STALL_MS / 1000.0))
        }
        result => result,
    }
}

/// The longest the reading keeps the page's thread before it gives the browser a turn, ms: a
/// stream whose pieces are already there answers each read at once, in the same task.
const TURN_MS: f64 = 10.0;

/// The most bytes reserved ahead from a `Content-Length` (a larger file still arrives whole).
const RESERVE_AT_MOST: usize = 1 << 30;

/// `url`'s body, piece by piece as it arrives, `last_data` set at each piece.
async fn read_body(
    url: &str,
    init: &RequestInit,
    last_data: &Cell<f64>,
    progress: &dyn Fn(f64, Option<f64>),
) -> Result<Vec<u8>, String> {
    let failed = |_| "the download failed".to_string();
    let response: Response =
        JsFuture::from(window().fetch_with_str_and_init(url, init)).await.map_err(failed)?.unchecked_into();
    if response.status() != 200 {
        return Err(format!("the server answered {}", response.status()));
    }
    // The length on the wire is the file's only when the server sent it as is.
    let headers = response.headers();
    let encoded = headers.get("content-encoding").ok().flatten().is_some_and(|e| e.trim() != "identity");
    let total = headers.get("content-length").ok().flatten().and_then(|l| l.trim().parse::<f64>().ok());
    let total = total.filter(|_| !encoded);
    let mut bytes = Vec::with_capacity(total.map_or(0, |t| (t as usize).min(RESERVE_AT_MOST)));
    let Some(body) = response.body() else { return Ok(bytes) };
    let reader: ReadableStreamDefaultReader = ReadableStream::get_reader(&body).unchecked_into();
    let mut turn = now_ms();
    loop {
        let read = JsFuture::from(reader.read()).await.map_err(failed)?;
        if Reflect::get(&read, &JsValue::from_str("done")).map_err(failed)?.is_truthy() {
            return Ok(bytes);
        }
        let piece: Uint8Array =
            Reflect::get(&read, &JsValue::from_str("value")).map_err(failed)?.dyn_into().map_err(failed)?;
        let start = bytes.len();
        bytes.resize(start + piece.length() as usize, 0);
        piece.copy_to(&mut bytes[start..]);
        last_data.set(now_ms());
        progress(bytes.len() as f64, total);
        if now_ms() - turn > TURN_MS {
            yield_to_browser().await;
            turn = now_ms();
        }
    }
}
