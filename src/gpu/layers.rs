//! What the trained models' passes on the GPU share ([`super::bert`], [`super::gpt2`]): the
//! uniforms of `bert.wgsl` and of a dense layer's product, the pipelines of `bert.wgsl`'s entry
//! points, and a layer's dispatches as data that a pass encodes in order.

use super::forward::MatmulParams;
use super::{shaders, GpuContext, GpuError};
use crate::model::spec::{Activation, ModelSpec};

/// Uniforms of `bert.wgsl` (same field order), padded to 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub(super) struct RowParams {
    pub(super) rows: u32,
    pub(super) cols: u32,
    /// `bias_act`: 1 applies the exact GELU after the bias, 2 its tanh approximation, 0 adds the
    /// bias only.
    pub(super) gelu: u32,
    /// `mask_heads`: columns per head.
    pub(super) head_width: u32,
    /// `residual_norm`, `layer_norm`: LayerNorm's epsilon.
    pub(super) eps: f32,
    /// `row_loss`: the block's first row within the text.
    pub(super) row0: u32,
    /// `row_loss`: the text's tokens.
    pub(super) seq: u32,
    pub(super) _pad: u32,
}

impl RowParams {
    /// `rows x cols`, the model's LayerNorm epsilon, everything else 0.
    pub(super) fn new(spec: &ModelSpec, rows: usize, cols: usize) -> Self {
        let eps = spec.layer_norm_eps as f32;
        RowParams {
            rows: rows as u32,
            cols: cols as u32,
            gelu: 0,
            head_width: 0,
            eps,
            row0: 0,
            seq: 0,
            _pad: 0,
        }
    }

    /// `bias_act`'s code for the model's activation.
    pub(super) fn activation(self, activation: Activation) -> Self {
        match activation {
            Activation::Gelu => RowParams { gelu: 1, ..self },
            Activation::GeluTanh => RowParams { gelu: 2, ..self },
        }
    }

    pub(super) fn bytes(&self) -> &[u8] {
        bytemuck::bytes_of(self)
    }
}

/// `y (n x out) = a (n x inp) @ W^T`, `W` stored `out x inp` (PyTorch's layout).
pub(super) fn linear_params(n: usize, inp: usize, out: usize) -> MatmulParams {
    let (inp, out) = (inp as u32, out as u32);
    MatmulParams {
        m: n as u32,
        n: out,
        k: inp,
        batch: 1,
        a: [0, inp, 1, 0],
        b: [0, 1, inp, 0],
        c_off: 0,
        c_rs: out,
        c_bs: 0,
        alpha: 1.0,
    }
}

/// The pipelines a layer's dispatches use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    Matmul,
    Attention,
    BiasAct,
    ResidualNorm,
    MaskHeads,
    LayerNorm,
    AddResidual,
    RowLoss,
}

/// One dispatch: its pipeline, bind group and workgroups.
pub(super) struct Dispatch {
    pub(super) step: Step,
    pub(super) group: wgpu::BindGroup,
    pub(super) workgroups: (u32, u32),
}

/// The pipelines of `bert.wgsl`'s entry points (the products and attention are the context's).
pub(super) struct Pipelines {
    bias_act: wgpu::ComputePipeline,
    residual_norm: wgpu::ComputePipeline,
    mask_heads: wgpu::ComputePipeline,
    layer_norm: wgpu::ComputePipeline,
    add_residual: wgpu::ComputePipeline,
    row_loss: wgpu::ComputePipeline,
}

impl Pipelines {
    /// Compiles `bert.wgsl` on `ctx`'s device, under a validation scope.
    pub(super) async fn new(ctx: &GpuContext) -> Result<Pipelines, GpuError> {
        let dev = &ctx.device;
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = dev.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("bert"),
            source: wgpu::ShaderSource::Wgsl(shaders::BERT.into()),
        });
        let pipeline = |entry: &str| {
            dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: None,
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
        };
        let pipelines = Pipelines {
            bias_act: pipeline("bias_act"),
            residual_norm: pipeline("residual_norm"),
            mask_heads: pipeline("mask_heads"),
            layer_norm: pipeline("layer_norm"),
            add_residual: pipeline("add_residual"),
            row_loss: pipeline("row_loss"),
        };
        if let Some(e) = scope.pop().await {
            return Err(GpuError::Internal(format!("pipeline creation failed: {e}")));
        }
        Ok(pipelines)
    }

    /// `step`'s pipeline on `ctx`.
    pub(super) fn get<'a>(&'a self, ctx: &'a GpuContext, step: Step) -> &'a wgpu::ComputePipeline {
        match step {
            Step::Matmul => &ctx.matmul,
            Step::Attention => &ctx.attention,
            Step::BiasAct => &self.bias_act,
            Step::ResidualNorm => &self.residual_norm,
            Step::MaskHeads => &self.mask_heads,
            Step::LayerNorm => &self.layer_norm,
            Step::AddResidual => &self.add_residual,
            Step::RowLoss => &self.row_loss,
        }
    }

    /// A dispatch of `step` over `buffers`, bound at 0, 1, 2... in that order.
    pub(super) fn dispatch(
        &self,
        ctx: &GpuContext,
        step: Step,
        buffers: &[&wgpu::Buffer],
        workgroups: (u32, u32),
    ) -> Dispatch {
        let group = super::resources::bind_in_order(&ctx.device, self.get(ctx, step), buffers);
        Dispatch { step, group, workgroups }
    }

    /// [`Pipelines::dispatch`] with each buffer at the binding named beside it.
    pub(super) fn dispatch_at(
        &self,
        ctx: &GpuContext,
        step: Step,
        buffers: &[(u32, &wgpu::Buffer)],
        workgroups: (u32, u32),
    ) -> Dispatch {
        let group = super::resources::bind_group(&ctx.device, self.get(ctx, step), buffers);
        Dispatch { step, group, workgroups }
    }

    /// Encodes `dispatches` in order into one compute pass of `encoder`.
    pub(super) fn encode(
        &self,
        ctx: &GpuContext,
        encoder: &mut wgpu::CommandEncoder,
        dispatches: &[Dispatch],
    ) {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("layer"),
            timestamp_writes: None,
        });
        for Dispatch { step, group, workgroups: (gx, gy) } in dispatches {
            pass.set_pipeline(self.get(ctx, *step));
            pass.set_bind_group(0, group, &[]);
            pass.dispatch_workgroups(*gx, *gy, 1);
        }
    }
}

/// Plans (everything a pass over `n` tokens uses) by sequence length, the most recently used
/// last, at most `kept` of them.
pub(super) struct Plans<P> {
    kept: usize,
    plans: std::cell::RefCell<Vec<(usize, std::rc::Rc<P>)>>,
}

impl<P> Plans<P> {
    pub(super) fn new(kept: usize) -> Plans<P> {
        Plans { kept, plans: std::cell::RefCell::new(Vec::new()) }
    }

    /// The plan for `n` tokens: kept from an earlier pass, or made by `make` now (under an
    /// out-of-memory scope on `ctx`'s device), replacing the least recently used.
    pub(super) async fn get(
        &self,
        ctx: &GpuContext,
        n: usize,
        make: impl FnOnce() -> P,
    ) -> Result<std::rc::Rc<P>, GpuError> {
        let found = {
            let mut plans = self.plans.borrow_mut();
            let at = plans.iter().position(|(m, _)| *m == n);
            at.map(|i| {
                let plan = plans.remove(i);
                plans.push(plan.clone());
                plan.1
            })
        };
        if let Some(plan) = found {
            return Ok(plan);
        }
        let scope = ctx.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let plan = std::rc::Rc::new(make());
        if let Some(e) = scope.pop().await {
            return Err(GpuError::OutOfMemory(e.to_string()));
        }
        let mut plans = self.plans.borrow_mut();
        if plans.len() == self.kept {
            plans.remove(0);
        }
        plans.push((n, plan.clone()));
        Ok(plan)
    }
}
