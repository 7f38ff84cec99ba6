//! The page's test hooks, in one place: wasm exports the end-to-end tests call to force what
//! cannot be caused from outside (a lost GPU device, a GPU fault, a panic, a trap), to read what
//! cannot be seen from outside (wasm memory), and to compute the CPU core's numbers for
//! comparison. They change nothing unless called; a reader can call them from the console to see
//! the fallbacks.

use wasm_bindgen::prelude::wasm_bindgen;

use crate::backend::faults;
use crate::settings::Settings;

/// Loses the page's GPU device, as a driver reset would, at its next use: the page switches to
/// the CPU kernel, keeping every setting. Returns whether there was a GPU device to lose.
#[wasm_bindgen]
pub fn simulate_gpu_loss() -> bool {
    faults::lose_gpu()
}

/// Arms a GPU fault (`adapter`, `pipeline`, `map` or `device`) for the next operation of its
/// kind. Returns whether the name was known.
#[wasm_bindgen]
pub fn inject_gpu_fault(kind: &str) -> bool {
    faults::arm_gpu_fault(kind)
}

/// Panics on purpose, to show what a panic that escapes every check does: the banner with
/// "reload with defaults", and the state logged to the console.
#[wasm_bindgen]
pub fn simulate_panic() {
    panic!("a simulated panic (simulate_panic)");
}

/// Traps on purpose (`unreachable`), as an engine's fault or exhausted memory does: no panic hook
/// runs, and the banner must show all the same once the trap goes uncaught.
#[wasm_bindgen]
pub fn simulate_trap() {
    core::arch::wasm32::unreachable()
}

/// Bytes of wasm linear memory: it only grows, so a leak shows as growth.
#[wasm_bindgen]
pub fn wasm_memory_bytes() -> f64 {
    crate::jobs::web::memory_bytes() as f64
}

/// The form the relaxed build's 8-bit products run in on this CPU (`fused` or `split`,
/// [`crate::cpu::int8::DotForm`]), with `settled` once the page has timed it again; `untimed`
/// before the page has timed it (its first turn after start). The simd128 build has one form.
#[wasm_bindgen]
pub fn kernel_dot_form() -> String {
    match crate::jobs::web::timed_dot_form() {
        Some((form, true)) => format!("{} settled", form.key()),
        Some((form, false)) => form.key().to_string(),
        None => "untimed".to_string(),
    }
}

/// The drift the CPU core computes for the settings in `query` with heads `pruned` switched off,
/// as "cosine rel_l2" with the page's rounding: the page's numbers, on whichever backend it runs,
/// must equal these. Returns the configuration error's text if it cannot run.
#[wasm_bindgen]
pub fn cpu_core_drift(query: &str, pruned: Vec<u32>) -> String {
    let (settings, _) = Settings::from_query(query);
    faults::cpu_core_drift(&settings, pruned.into_iter().map(|h| h as usize))
}
