//! The page's backend over a session: the one selected, the CPU kernel for good once the GPU has
//! failed, what the badge and the note say, and the synthetic layer's calibrations by shape.

use std::cell::RefCell;
use std::rc::Rc;

use super::calibrate::{self, Probes, QUICK_CPU_FLOPS};
use super::choice::{one_line, Backend, GpuUnused};
use super::placement::{Choice, Crossover, Place};
use crate::attention::clock::Clock;
use crate::attention::config::MAX_SEQ_LEN;
use crate::attention::{Inputs, ModelConfig, Weights};
use crate::cpu::Kernel;
use crate::gpu::{GpuContext, GpuError};
use crate::settings::Preference;

/// The page's backend over a session: the one selected, and the CPU kernel for good once the GPU
/// has failed (until the reader asks for the GPU again, which starts a new session).
#[derive(Debug)]
pub struct Session {
    selected: Backend,
    unused: Option<GpuUnused>,
    retried: bool,
    failed: RefCell<Option<GpuError>>,
    /// Whether each pass runs where it was measured faster (the reader left `?backend=` alone).
    pub(super) measured: bool,
    /// The synthetic layer's calibrations so far, by shape (`d_model`, heads).
    layers: RefCell<Vec<((usize, usize), Crossover)>>,
}

impl Session {
    /// Selects a backend for `preference` ([`Backend::select`]); `retried` when the reader asked
    /// for the GPU again after it failed.
    pub async fn start(preference: Preference, retried: bool) -> Session {
        let (selected, unused) = Backend::select(preference).await;
        Session {
            selected,
            unused,
            retried,
            failed: RefCell::new(None),
            measured: preference == Preference::Auto,
            layers: RefCell::new(Vec::new()),
        }
    }

    /// A session on the CPU kernel, with nothing to say about the GPU: the quick first passes
    /// drawn while the page is still asking for a GPU.
    pub fn cpu_only() -> Session {
        Session {
            selected: Backend::Cpu(Kernel::Simd),
            unused: None,
            retried: false,
            failed: RefCell::new(None),
            measured: false,
            layers: RefCell::new(Vec::new()),
        }
    }

    /// Whether a pass of `config` will first time both backends for its shape (the reader left
    /// the choice to the page, it has a GPU, and the shape has not been measured yet).
    pub fn will_calibrate(&self, config: &ModelConfig) -> bool {
        self.measured
            && !config.generates_weights()
            && self.gpu().is_some()
            && self.calibrated(config).is_none()
    }

    /// The calibration of `config`'s shape (`d_model`, heads), once made.
    fn calibrated(&self, config: &ModelConfig) -> Option<Crossover> {
        let shape = (config.d_model, config.num_heads);
        self.layers.borrow().iter().find(|(s, _)| *s == shape).map(|(_, c)| *c)
    }

    /// Where a pass of the synthetic layer `config` (stored weights) runs on `ctx`: `None` when
    /// the reader forced the GPU; else the choice measured for its shape, calibrating the shape
    /// on its first pass (a few short passes on each backend with the pass's own `weights`,
    /// timed on `clock`).
    pub(super) async fn layer_choice(
        &self,
        ctx: &Rc<GpuContext>,
        config: &ModelConfig,
        weights: &Weights,
        clock: &impl Clock,
    ) -> Result<Option<Choice>, GpuError> {
        if !self.measured {
            return Ok(None);
        }
        let crossover = match self.calibrated(config) {
            Some(c) => c,
            None => {
                let c = calibrate_layer(ctx, config, weights, clock).await?;
                self.layers.borrow_mut().push(((config.d_model, config.num_heads), c));
                c
            }
        };
        Ok(Some(crossover.choose(config.forward_flops())))
    }

    /// Where passes run now.
    pub fn backend(&self) -> Backend {
        match (&self.selected, self.failed.borrow().is_some()) {
            (Backend::Gpu(_), true) => Backend::Cpu(Kernel::Simd),
            (selected, _) => selected.clone(),
        }
    }

    /// The GPU, while the session uses it.
    pub fn gpu(&self) -> Option<Rc<GpuContext>> {
        match self.backend() {
            Backend::Gpu(ctx) => Some(ctx),
            Backend::Cpu(_) => None,
        }
    }

    /// Records a GPU failure: every later pass of the session runs on the CPU kernel.
    pub fn fail(&self, e: GpuError) {
        self.failed.borrow_mut().get_or_insert(e);
    }

    /// The badge's text: where passes run now.
    pub fn label(&self) -> String {
        self.backend().label()
    }

    /// The badge's text when no single pass speaks for the page (the trained model's passes each
    /// go where they were measured faster): where passes run, or that both are in play.
    pub fn placement_label(&self) -> String {
        match self.gpu() {
            Some(ctx) if self.measured => format!(
                "CPU · {} or WebGPU · {}, measured per pass",
                Kernel::Simd.describe(),
                ctx.adapter_label()
            ),
            _ => self.label(),
        }
    }

    /// Why the GPU is not used, when it is not (and the session has something to say).
    pub fn note(&self) -> Option<String> {
        if let Some(e) = self.failed.borrow().as_ref() {
            return Some(format!(
                "switched to the CPU because {}; your settings are kept",
                one_line(&e.to_string())
            ));
        }
        self.unused.as_ref().map(|u| match self.retried {
            true => format!("tried the GPU again; {u}; still on the CPU, your settings are kept"),
            false => u.to_string(),
        })
    }

    /// Whether asking for the GPU again could help (it failed, and the browser has WebGPU).
    pub fn retryable(&self) -> bool {
        self.failed.borrow().is_some() || self.unused.as_ref().is_some_and(GpuUnused::retryable)
    }
}

/// Times the synthetic layer of `config`'s shape on both backends ([`calibrate::crossover`]): 4
/// tokens and the longest power of two within [`QUICK_CPU_FLOPS`], over the lengths it accepts.
/// It times the pass's own `weights` (made in pieces, up to 256 MiB): a second set made here
/// would be made in one call, and the timing depends on the shape alone.
async fn calibrate_layer(
    ctx: &Rc<GpuContext>,
    config: &ModelConfig,
    weights: &Weights,
    clock: &impl Clock,
) -> Result<Crossover, GpuError> {
    let at = |n: usize| ModelConfig { seq_len: n, ..*config };
    let largest = (1..=MAX_SEQ_LEN).rev().find(|&n| at(n).validate().is_ok()).unwrap_or(config.seq_len);
    let probes = Probes::within(|n| at(n).forward_flops(), QUICK_CPU_FLOPS, largest);
    let inputs = [probes.small, probes.large].map(|n| Inputs::generate(&at(n), 1));
    let (gpu, cpu) = (Backend::Gpu(ctx.clone()), Backend::Cpu(Kernel::Simd));
    calibrate::crossover(
        probes,
        |n| at(n).forward_flops(),
        clock,
        async |place, n| {
            let x = &inputs[usize::from(n != probes.small)].x;
            let backend = if place == Place::Gpu { &gpu } else { &cpu };
            backend.forward(&at(n), x, weights).await.map(drop)
        },
    )
    .await
}

// Natively only: pollster drives the futures.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    #[test]
    fn a_session_says_why_the_gpu_is_not_used_and_whether_to_try_again() {
        let declined = pollster::block_on(Session::start(Preference::Cpu, false));
        assert_eq!(declined.label(), Backend::Cpu(Kernel::Simd).label());
        assert_eq!(declined.placement_label(), declined.label(), "no GPU in play: the CPU kernel alone");
        assert_eq!(declined.note().as_deref(), Some("CPU chosen with ?backend=cpu"));
        assert!(!declined.retryable() && declined.gpu().is_none());
        let quick = Session::cpu_only();
        assert_eq!((quick.note(), quick.retryable()), (None, false));
        quick.fail(GpuError::DeviceLost("destroyed".into()));
        quick.fail(GpuError::Internal("a consequence".into()));
        assert_eq!(
            quick.note().as_deref(),
            Some("switched to the CPU because the GPU device was lost (destroyed); your settings are kept")
        );
        assert!(quick.retryable());
        let retried = Session {
            selected: Backend::Cpu(Kernel::Simd),
            unused: Some(GpuUnused::Failed(GpuError::NoAdapter("rejected".into()))),
            retried: true,
            failed: RefCell::new(None),
            measured: true,
            layers: RefCell::new(Vec::new()),
        };
        assert!(retried.retryable());
        assert!(retried
            .note()
            .unwrap()
            .starts_with("tried the GPU again; not using the GPU: no WebGPU adapter"));
    }
}
