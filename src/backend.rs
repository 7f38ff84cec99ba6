//! The backend that runs the attention: chosen once, named in the page's badge.
//!
//! Today that is always the CPU kernel; the WebGPU backend (`src/gpu/`, `shaders/`) joins here
//! as a second variant with a fallback to this one.

use crate::attention::{ModelConfig, Weights};
use crate::cpu::{self, Forward, Kernel};

/// Where the forward pass runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The CPU path on the given kernel.
    Cpu(Kernel),
}

impl Backend {
    /// The best backend this build can use.
    pub fn detect() -> Self {
        Backend::Cpu(Kernel::Simd)
    }

    /// Short name for the badge, e.g. "CPU · wasm simd128".
    pub fn label(&self) -> String {
        match self {
            Backend::Cpu(kernel) => format!("CPU · {}", kernel.describe()),
        }
    }

    /// One forward pass on this backend.
    pub fn forward(&self, config: &ModelConfig, x: &[f32], weights: &Weights) -> Forward {
        match self {
            Backend::Cpu(kernel) => cpu::forward(*kernel, config, x, weights),
        }
    }
}
