//! The page's test hooks, in one place: wasm exports the end-to-end tests call to force what
//! cannot be caused from outside (a lost GPU device, a GPU fault, a panic), to read what cannot be
//! seen from outside (wasm memory), and to compute the CPU core's numbers for comparison. They
//! change nothing unless called; a reader can call them from the console to see the fallbacks.

use wasm_bindgen::prelude::wasm_bindgen;

use crate::attention::{drift, HeadSet, Inputs, LayerWeights};
use crate::cpu::{self, Kernel};
use crate::gpu::{self, Fault};
use crate::settings::Settings;

/// Loses the page's GPU device, as a driver reset would, at its next use: the page switches to
/// the CPU kernel, keeping every setting. Returns whether there was a GPU device to lose.
#[wasm_bindgen]
pub fn simulate_gpu_loss() -> bool {
    let open = gpu::live_devices() > 0;
    if open {
        gpu::inject_fault(Fault::DeviceLoss);
    }
    open
}

/// Arms a GPU fault (`adapter`, `pipeline`, `map` or `device`) for the next operation of its
/// kind. Returns whether the name was known.
#[wasm_bindgen]
pub fn inject_gpu_fault(kind: &str) -> bool {
    Fault::parse(kind).map(gpu::inject_fault).is_some()
}

/// Panics on purpose, to show what a panic that escapes every check does: the banner with
/// "reload with defaults", and the state logged to the console.
#[wasm_bindgen]
pub fn simulate_panic() {
    panic!("a simulated panic (simulate_panic)");
}

/// Bytes of wasm linear memory: it only grows, so a leak shows as growth.
#[wasm_bindgen]
pub fn wasm_memory_bytes() -> f64 {
    (core::arch::wasm32::memory_size::<0>() * 65536) as f64
}

/// The drift the CPU core computes for the settings in `query` with heads `pruned` switched off,
/// as "cosine rel_l2" with the page's rounding: the page's numbers, on whichever backend it runs,
/// must equal these. Returns the configuration error's text if it cannot run.
#[wasm_bindgen]
pub fn cpu_core_drift(query: &str, pruned: Vec<u32>) -> String {
    let (settings, _) = Settings::from_query(query);
    let config = settings.config();
    if let Err(e) = config.validate() {
        return e.to_string();
    }
    let inputs = Inputs::generate(&config, settings.seed);
    let fwd = cpu::forward_layer(
        Kernel::Simd,
        &config,
        &inputs.x,
        &LayerWeights::for_config(&config, settings.seed),
    );
    let heads = HeadSet::with_pruned(config.num_heads, pruned.into_iter().map(|h| h as usize));
    let d = drift(&fwd.output, &fwd.contributions.recompose(&heads), config.d_model).overall;
    format!("{:.6} {:.4}", d.cosine, d.rel_l2)
}
