//! What the page's test hooks (`ui::debug`) reach below the page: GPU failures forced on purpose,
//! so that the page and its tests can show the fallback to the CPU kernel, and the CPU core's own
//! drift for a configuration, which the page's numbers must equal on any backend.

use crate::attention::{drift, HeadSet, Inputs, LayerWeights};
use crate::cpu::{self, Kernel};
use crate::gpu::{self, Fault};
use crate::settings::Settings;

/// Loses the page's GPU device at its next use, as a driver reset would. Returns whether there
/// was a GPU device to lose.
pub fn lose_gpu() -> bool {
    let open = gpu::live_devices() > 0;
    if open {
        gpu::inject_fault(Fault::DeviceLoss);
    }
    open
}

/// Arms a GPU fault (`adapter`, `pipeline`, `map` or `device`) for the next operation of its
/// kind. Returns whether the name was known.
pub fn arm_gpu_fault(kind: &str) -> bool {
    Fault::parse(kind).map(gpu::inject_fault).is_some()
}

/// The drift the CPU core computes for `settings` with heads `pruned` switched off, as
/// "cosine rel_l2" with the page's rounding; the configuration error's text if it cannot run.
pub fn cpu_core_drift(settings: &Settings, pruned: impl IntoIterator<Item = usize>) -> String {
    let config = settings.config();
    if let Err(e) = config.validate() {
        return e.to_string();
    }
    let inputs = Inputs::generate(&config, settings.seed);
    let weights = LayerWeights::for_config(&config, settings.seed);
    let fwd = cpu::forward_layer(Kernel::Simd, &config, &inputs.x, &weights);
    let heads = HeadSet::with_pruned(config.num_heads, pruned);
    let d = drift(&fwd.output, &fwd.contributions.recompose(&heads), config.d_model).overall;
    format!("{:.6} {:.4}", d.cosine, d.rel_l2)
}
