//! The backend chosen once per session: the GPU or the CPU kernel, what the badge calls it, and
//! why the GPU is not in use when it is not.

use std::rc::Rc;

use crate::attention::{ModelConfig, Weights};
use crate::cpu::{self, Forward, Kernel};
use crate::gpu::{GpuContext, GpuError};
use crate::settings::Preference;

/// Where the forward pass runs.
#[derive(Clone)]
pub enum Backend {
    /// WebGPU (or Vulkan/Metal/DX12 natively) through wgpu.
    Gpu(Rc<GpuContext>),
    /// The CPU path on the given kernel.
    Cpu(Kernel),
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label())
    }
}

impl Backend {
    /// Chooses once: the GPU unless the reader asked for the CPU or no GPU can be had. The
    /// second value says why the GPU is not used, when it is not.
    pub async fn select(preference: Preference) -> (Backend, Option<GpuUnused>) {
        let cpu = Backend::Cpu(Kernel::Simd);
        if preference == Preference::Cpu {
            return (cpu, Some(GpuUnused::Declined));
        }
        match GpuContext::acquire().await {
            Ok(ctx) => (Backend::Gpu(Rc::new(ctx)), None),
            Err(e) => (cpu, Some(GpuUnused::Failed(e))),
        }
    }

    /// Short name for the badge, e.g. "WebGPU · Apple M2 (BrowserWebGpu)" or "CPU · wasm simd128".
    pub fn label(&self) -> String {
        match self {
            Backend::Gpu(ctx) if cfg!(target_arch = "wasm32") => {
                format!("WebGPU · {}", ctx.adapter_label())
            }
            Backend::Gpu(ctx) => format!("GPU · {}", ctx.adapter_label()),
            Backend::Cpu(kernel) => format!("CPU · {}", kernel.describe()),
        }
    }

    /// Whether this is a GPU backend.
    pub fn is_gpu(&self) -> bool {
        matches!(self, Backend::Gpu(_))
    }

    /// One forward pass on this backend. The CPU path cannot fail (its configuration was
    /// validated); the GPU path reports device loss and other faults as values.
    pub async fn forward(
        &self,
        config: &ModelConfig,
        x: &[f32],
        weights: &Weights,
    ) -> Result<Forward, GpuError> {
        match self {
            Backend::Gpu(ctx) => ctx.forward(config, x, weights).await,
            Backend::Cpu(kernel) => Ok(cpu::forward(*kernel, config, x, weights)),
        }
    }
}

/// Why the GPU is not in use.
#[derive(Clone, Debug, PartialEq)]
pub enum GpuUnused {
    /// The reader asked for the CPU (`?backend=cpu`).
    Declined,
    /// Getting a GPU failed.
    Failed(GpuError),
}

impl GpuUnused {
    /// Whether trying the GPU again could help: not when asked for the CPU, nor when the browser
    /// has no WebGPU at all.
    pub fn retryable(&self) -> bool {
        matches!(self, GpuUnused::Failed(e) if *e != GpuError::NoWebGpu)
    }
}

impl std::fmt::Display for GpuUnused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuUnused::Declined => f.write_str("CPU chosen with ?backend=cpu"),
            GpuUnused::Failed(e) => write!(f, "not using the GPU: {}", one_line(&e.to_string())),
        }
    }
}

/// The first line of a GPU error, at most 240 characters: browsers append multi-line
/// diagnostics (a WGSL parse error quotes the source) that belong in the console, not the page.
pub fn one_line(message: &str) -> String {
    let first = message.lines().next().unwrap_or("").trim_end_matches([':', ' ']);
    let cut: String = first.chars().take(240).collect();
    if cut.len() < message.trim_end().len() {
        format!("{cut}…")
    } else {
        cut
    }
}

// Natively only: pollster drives the futures.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    #[test]
    fn gpu_errors_are_shown_on_one_line() {
        assert_eq!(one_line("device lost"), "device lost");
        assert_eq!(
            one_line("pipeline creation failed: Error while parsing WGSL: :1:1 error: unexpected token\nthis is not WGSL\n^^^^"),
            "pipeline creation failed: Error while parsing WGSL: :1:1 error: unexpected token…"
        );
        assert_eq!(one_line(&"x".repeat(500)).chars().count(), 241);
    }
}
