//! What the page needs from the browser besides the DOM: a clock and a turn for the browser
//! between pieces of work and downloading a file with progress (the jobs' own, `jobs::web`), and
//! the browser's storage.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use leptos::prelude::{on_cleanup, window};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::JsCast;

use crate::jobs::encoder::curves::Store;
use crate::viz::in_view::ScrollView;

pub use crate::jobs::web::{clock_step_ms, fetch_bytes, now_ms, yield_to_browser, PageHost};

/// Resolves after the browser has painted the current state: a status set before heavy work on
/// the main thread is then on screen while the work runs. A page that paints no frames (a tab
/// in the background, a frame out of sight: browsers pause their animation frames) goes on after
/// [`UNPAINTED_MS`].
pub async fn after_next_paint() {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let at_once = resolve.clone();
        let after_frame = Closure::once_into_js(move || {
            let _ = window().set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, 0);
        });
        if window().request_animation_frame(after_frame.unchecked_ref()).is_err() {
            let _ = window()
                .set_timeout_with_callback_and_timeout_and_arguments_0(after_frame.unchecked_ref(), 0);
        }
        // Whichever comes first resolves: the other call does nothing.
        let _ = window().set_timeout_with_callback_and_timeout_and_arguments_0(&at_once, UNPAINTED_MS);
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// How long [`after_next_paint`] waits for a frame that may never come, ms.
const UNPAINTED_MS: i32 = 200;

/// The browser's `localStorage`: a browser that refuses (private mode, full storage) only loses
/// the saving.
pub struct BrowserStore;

impl Store for BrowserStore {
    fn load(&self, key: &str) -> Option<String> {
        window().local_storage().ok().flatten()?.get_item(key).ok().flatten()
    }

    fn save(&self, key: &str, value: &str) {
        if let Some(storage) = window().local_storage().ok().flatten() {
            let _ = storage.set_item(key, value);
        }
    }
}

/// Whether the reactive owner current when it was made (a component) is still on the page. A
/// task that awaits checks it before it touches the owner's values again: reading a value whose
/// owner is gone panics, and a reader who switches the preset or the model during a load or a
/// pass removes the owner while the task waits.
#[derive(Clone, Debug)]
pub struct Alive(Arc<AtomicBool>);

impl Alive {
    /// Alive until the current owner is cleaned up.
    pub fn here() -> Alive {
        let flag = Arc::new(AtomicBool::new(true));
        let gone = flag.clone();
        on_cleanup(move || gone.store(false, Ordering::Relaxed));
        Alive(flag)
    }

    /// Whether the owner is still there.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Which way a scroll box scrolls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    /// Left to right.
    Across,
    /// Top to bottom.
    Down,
}

/// The scroll box a scroll event came from, and where it stands along `axis`.
pub fn scrolled(ev: &web_sys::Event, axis: Axis) -> (web_sys::Element, ScrollView) {
    let el = leptos::prelude::event_target::<web_sys::Element>(ev);
    let (offset, extent) = match axis {
        Axis::Across => (el.scroll_left(), el.client_width()),
        Axis::Down => (el.scroll_top(), el.client_height()),
    };
    (el, ScrollView { offset: f64::from(offset), extent: f64::from(extent) })
}
