//! The page's clock (`performance.now()`, with the step this browser coarsens it to) and a turn
//! for the browser between pieces of work.

use std::cell::Cell;

use crate::attention::clock::{step_from_tick, Clock};
use crate::cpu::int8::{faster_dot_form, set_dot_form, DotForm, DotFormTrial, DOT_FORMS_DIFFER};
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

thread_local! {
    /// This instance's [`DotForm`] once timed or adopted, and whether that answer is settled
    /// (timed again after a first timing, or the page's).
    static CHOSEN: Cell<Option<(DotForm, bool)>> = const { Cell::new(None) };
}

/// The relaxed build's 8-bit micro-kernel form for this CPU, timed the first time this wasm
/// instance asks ([`crate::cpu::int8::faster_dot_form`], at once) and set for every later
/// product. The benchmarks' instances use it; the page times its own between turns
/// ([`time_dot_form`]).
pub fn choose_dot_form() -> DotForm {
    match CHOSEN.with(Cell::get) {
        Some((form, _)) => form,
        None => keep(faster_dot_form(&PageHost), false),
    }
}

/// Times the forms again at once and keeps the answer as settled (the benchmarks, after their
/// warm-up: see [`time_dot_form`]).
pub fn retime_dot_form() -> DotForm {
    keep(faster_dot_form(&PageHost), true)
}

/// Times the forms a round at a time, the browser getting a turn between rounds (4-10 ms each in
/// Chromium, 20-40 ms on a 1 ms clock), and keeps the answer; `settled` marks it as timed after
/// the engine had compiled both forms' optimized code. The page times once it has painted and,
/// as settled, two seconds later: a first trial in a fresh instance can compare one form's
/// baseline code with the other's optimized code (the machine busy starting the page).
pub async fn time_dot_form(settled: bool) -> DotForm {
    if !DOT_FORMS_DIFFER {
        return keep(DotForm::Fused, true);
    }
    let mut trial = DotFormTrial::new();
    loop {
        if let Some(form) = trial.round(&PageHost) {
            return keep(form, settled);
        }
        yield_to_browser().await;
    }
}

/// [`choose_dot_form`] once settled: what the page hands its workers. A page that starts them
/// before its settled timing (within its first two seconds) times here first.
pub async fn settled_dot_form() -> DotForm {
    match CHOSEN.with(Cell::get) {
        Some((form, true)) => form,
        Some((_, false)) => time_dot_form(true).await,
        None => {
            time_dot_form(false).await;
            time_dot_form(true).await
        }
    }
}

/// Runs this instance's 8-bit products in `form` from now on, without timing (a worker: the
/// page's answer).
pub fn adopt_dot_form(form: DotForm) {
    keep(form, true);
}

/// This instance's form and whether it is settled, if it was timed or adopted yet.
pub fn timed_dot_form() -> Option<(DotForm, bool)> {
    CHOSEN.with(Cell::get)
}

fn keep(form: DotForm, settled: bool) -> DotForm {
    set_dot_form(form);
    CHOSEN.with(|chosen| chosen.set(Some((form, settled))));
    form
}

/// Lets the browser render and handle events before the next piece of work.
pub async fn yield_to_browser() {
    wait_ms(0).await
}

/// Resolves after about `ms` milliseconds, the browser free meanwhile (at once where there is no
/// window: a worker has no turn to give).
pub async fn wait_ms(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(window) = web_sys::window() {
            let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
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

/// Bytes of this thread's wasm memory (the page's, or a worker's own instance's): it only
/// grows, so it is the most the thread has held at once.
pub fn memory_bytes() -> u64 {
    core::arch::wasm32::memory_size::<0>() as u64 * 65536
}
