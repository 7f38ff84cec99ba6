//! The page's clock (`performance.now()`, with the step this browser coarsens it to) and a turn
//! for the browser between pieces of work.

use std::cell::Cell;

use crate::attention::clock::{step_from_tick, Clock};
use crate::cpu::int8::{faster_dot_form, set_dot_form, DotForm};
use crate::jobs::host::{Host, LocalFuture};

/// Milliseconds from the page's (or worker's) time origin.
pub fn now_ms() -> f64 {
    let performance = js_sys::Reflect::get(&js_sys::global(), &"performance".into())
        .ok()
        .and_then(|p| wasm_bindgen::JsCast::dyn_into::<web_sys::Performance>(p).ok());
    performance.map(|p| p.now()).unwrap_or_else(js_sys::Date::now)
}

/// The step of this browser's `performance.now()` (0.1 ms in Chromium, 1 ms in Firefox and
/// WebKit on a page that is not cross-origin isolated), found once by watching it tick for at
/// most 20 ms.
pub fn clock_step_ms() -> f64 {
    thread_local! {
        static STEP: Cell<Option<f64>> = const { Cell::new(None) };
    }
    STEP.with(|step| {
        if let Some(found) = step.get() {
            return found;
        }
        let (start, mut last, mut smallest, mut ticks) = (now_ms(), now_ms(), f64::INFINITY, 0);
        while ticks < 5 && last - start < 20.0 {
            let t = now_ms();
            if t != last {
                smallest = smallest.min(t - last);
                (last, ticks) = (t, ticks + 1);
            }
        }
        let found = step_from_tick(smallest);
        step.set(Some(found));
        found
    })
}

/// The relaxed build's 8-bit micro-kernel form for this CPU, timed the first time this wasm
/// instance asks (a few milliseconds; [`crate::cpu::int8::faster_dot_form`]) and set for every
/// later product. The page asks at start and hands its answer to its workers.
pub fn choose_dot_form() -> DotForm {
    thread_local! {
        static CHOSEN: Cell<Option<DotForm>> = const { Cell::new(None) };
    }
    CHOSEN.with(|chosen| {
        let form = chosen.get().unwrap_or_else(|| faster_dot_form(&PageHost));
        set_dot_form(form);
        chosen.set(Some(form));
        form
    })
}

/// Lets the browser render and handle events before the next piece of work.
pub async fn yield_to_browser() {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(window) = web_sys::window() {
            let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, 0);
        } else {
            let _ = resolve.call0(&wasm_bindgen::JsValue::NULL);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// The page as a job's host: `performance.now()`, with the step this browser coarsens it to, and
/// a turn of its event loop.
pub struct PageHost;

impl Clock for PageHost {
    fn now_ms(&self) -> f64 {
        now_ms()
    }

    fn resolution_ms(&self) -> f64 {
        clock_step_ms()
    }
}

impl Host for PageHost {
    fn turn(&self) -> LocalFuture<'static, ()> {
        Box::pin(yield_to_browser())
    }
}
