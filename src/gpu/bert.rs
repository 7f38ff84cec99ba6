//! The trained model on the GPU: the same computation as [`crate::model::encoder::bert`], ten dispatches
//! a layer in one submission. The embeddings (a table look-up and one LayerNorm) and the final
//! mean pooling stay on the CPU; everything between runs on the device.
//!
//! Everything a pass uses is made once per sequence length (a [`Plan`]: activations, per-layer
//! attention and head flags, uniforms, the 60 bind groups, readback buffers) and reused by every
//! later pass of that length; a pass only writes its input and head flags and submits.
//!
//! The model on the device may be really pruned ([`GpuBert::pruned`]): each layer then holds only
//! its kept heads' weights and runs attention at their width, and a layer with none left skips
//! attention. Its head flags, and the attention maps it returns, are its kept heads'.

use std::cell::RefCell;
use std::rc::Rc;

use super::forward::AttentionParams;
use super::layers::{linear_params, Dispatch, Pipelines, Plans, RowParams, Step};
use super::resources::{self, elementwise_groups, tiles, Owned};
use super::{GpuContext, GpuError};
use crate::attention::HeadSet;
use crate::model::encoder::bert::{first_changed_layer, pool, Bert, BertOutput};
use crate::model::encoder::pruned::PrunedBert;
use crate::model::spec::ModelSpec;

struct LayerBuffers {
    /// The heads it has, as indices within the layer.
    kept: Vec<usize>,
    w_qkv: wgpu::Buffer, // [Wq; Wk; Wv], 3 * kept * d_k x d_model as stored by PyTorch
    b_qkv: wgpu::Buffer,
    w_out: wgpu::Buffer,
    b_out: wgpu::Buffer,
    ln1: wgpu::Buffer, // [w | b]
    w_in: wgpu::Buffer,
    b_in: wgpu::Buffer,
    w_ffn_out: wgpu::Buffer,
    b_ffn_out: wgpu::Buffer,
    ln2: wgpu::Buffer,
}

/// The buffers and uniforms every layer of a plan shares.
struct PassBuffers {
    n: usize,
    x: wgpu::Buffer,
    qkv: wgpu::Buffer,
    heads: wgpu::Buffer,
    branch: wgpu::Buffer,
    zeros: wgpu::Buffer,
    hidden: wgpu::Buffer,
    u_in: wgpu::Buffer,
    u_ffn_out: wgpu::Buffer,
    u_gelu: wgpu::Buffer,
    u_norm: wgpu::Buffer,
}

/// Sequence lengths whose plans are kept: a sentence and the three of the meaning check.
const PLANS_KEPT: usize = 4;

/// Everything a pass over `n` tokens uses, made once.
struct Plan {
    n: usize,
    x: wgpu::Buffer,
    /// Per layer: its attention weights (`kept heads x n x n`), and one flag per head (1.0 = active).
    /// Storage bindings at an offset must be 256-byte aligned, which slices of one buffer would not be.
    attn: Vec<wgpu::Buffer>,
    keep: Vec<wgpu::Buffer>,
    /// Per layer, its ten dispatches in order.
    layers: Vec<Vec<Dispatch>>,
    /// Readback buffers not in use: a pass takes one and gives it back once read, so passes that
    /// overlap (the reader toggles a head while importance is measured) never share a mapping.
    free_readbacks: RefCell<Vec<wgpu::Buffer>>,
    /// Every buffer above and the uniforms, destroyed with the plan.
    owned: Owned,
}

impl Plan {
    /// The final hidden states, every layer's attention and every layer's input.
    fn readback_bytes(&self, spec: &ModelSpec) -> u64 {
        let (n, d) = (self.n as u64, spec.d_model as u64);
        let attention: u64 = self.attn.iter().map(|a| a.size()).sum();
        4 * (n * d + spec.layers as u64 * n * d) + attention
    }

    fn take_readback(&self, device: &wgpu::Device, spec: &ModelSpec) -> wgpu::Buffer {
        let free = self.free_readbacks.borrow_mut().pop();
        free.unwrap_or_else(|| self.owned.keep(resources::readback(device, self.readback_bytes(spec))))
    }
}

/// The model's weights on the device and the pipelines that run it.
pub struct GpuBert {
    ctx: Rc<GpuContext>,
    spec: ModelSpec,
    layers: Vec<LayerBuffers>,
    pipelines: Pipelines,
    /// Plans of the lengths run last.
    plans: Plans<Plan>,
    /// The weights, destroyed with the model.
    _owned: Owned,
}

impl GpuBert {
    /// Uploads `bert`'s layer weights (all-MiniLM-L6-v2's: about 85 MiB as f32) and builds the
    /// pipelines.
    pub async fn new(ctx: Rc<GpuContext>, bert: &Bert) -> Result<GpuBert, GpuError> {
        GpuBert::pruned(ctx, &PrunedBert::new(bert, &HeadSet::all(bert.spec().total_heads()))).await
    }

    /// [`GpuBert::new`] for a really pruned model: each layer's kept heads' weights only.
    pub async fn pruned(ctx: Rc<GpuContext>, model: &PrunedBert<'_>) -> Result<GpuBert, GpuError> {
        ctx.check()?;
        let (dev, q) = (&ctx.device, &ctx.queue);
        let owned = Owned::default();
        let scope = dev.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        // A layer without heads still binds (empty) weights: WebGPU has no zero-size bindings.
        let upload = |label: &str, data: &[f32]| {
            let data = if data.is_empty() { &[0.0][..] } else { data };
            owned.keep(resources::storage_with(dev, q, label, data))
        };
        let concat = |parts: &[&[f32]]| parts.concat();
        let layers = model
            .base()
            .layers
            .iter()
            .zip(model.attention())
            .map(|(l, a)| LayerBuffers {
                kept: a.kept.clone(),
                w_qkv: upload("W_qkv", &concat(&[&a.qkv[0].w, &a.qkv[1].w, &a.qkv[2].w])),
                b_qkv: upload("b_qkv", &concat(&[&a.qkv[0].b, &a.qkv[1].b, &a.qkv[2].b])),
                w_out: upload("W_o", &a.out.w),
                b_out: upload("b_o", &a.out.b),
                ln1: upload("ln1", &concat(&[&l.ln1.w, &l.ln1.b])),
                w_in: upload("W_in", &l.ffn_in.w),
                b_in: upload("b_in", &l.ffn_in.b),
                w_ffn_out: upload("W_out", &l.ffn_out.w),
                b_ffn_out: upload("b_out", &l.ffn_out.b),
                ln2: upload("ln2", &concat(&[&l.ln2.w, &l.ln2.b])),
            })
            .collect();
        if let Some(e) = scope.pop().await {
            return Err(GpuError::OutOfMemory(e.to_string()));
        }
        let pipelines = Pipelines::new(&ctx).await?;
        Ok(GpuBert {
            ctx,
            spec: *model.base().spec(),
            layers,
            pipelines,
            plans: Plans::new(PLANS_KEPT),
            _owned: owned,
        })
    }

    /// The device it runs on.
    pub fn context(&self) -> Rc<GpuContext> {
        self.ctx.clone()
    }

    /// The plan for `n` tokens: kept from an earlier pass, or made now.
    async fn plan(&self, n: usize) -> Result<Rc<Plan>, GpuError> {
        self.plans.get(&self.ctx, n, || self.make_plan(n)).await
    }

    fn make_plan(&self, n: usize) -> Plan {
        let (dev, q) = (&self.ctx.device, &self.ctx.queue);
        let owned = Owned::default();
        let spec = &self.spec;
        let (d, ffn) = (spec.d_model, spec.ffn);
        let f32s = |count: usize| (count * 4) as u64;
        let storage = |label, floats: usize, extra| {
            owned.keep(resources::storage(dev, label, f32s(floats.max(1)), extra))
        };
        let none = wgpu::BufferUsages::empty();
        let copy = wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
        let uniform = |bytes: &[u8]| owned.keep(resources::uniform(dev, q, "bert params", bytes));
        let buffers = PassBuffers {
            n,
            x: storage("x", n * d, copy),
            qkv: storage("qkv", n * 3 * d, none),
            heads: storage("heads", n * d, none),
            branch: storage("branch", n * d, none),
            // Stays zero: the attention branch of a layer with no head left.
            zeros: storage("no heads", n * d, none),
            hidden: storage("hidden", n * ffn, none),
            u_in: uniform(bytemuck::bytes_of(&linear_params(n, d, ffn))),
            u_ffn_out: uniform(bytemuck::bytes_of(&linear_params(n, ffn, d))),
            u_gelu: uniform(bytemuck::bytes_of(&RowParams::new(spec, n, ffn).activation(spec.activation))),
            u_norm: uniform(bytemuck::bytes_of(&RowParams::new(spec, n, d))),
        };
        let attn: Vec<wgpu::Buffer> =
            self.layers.iter().map(|w| storage("attention", w.kept.len() * n * n, copy)).collect();
        let keep: Vec<wgpu::Buffer> = self
            .layers
            .iter()
            .map(|w| storage("head flags", w.kept.len(), wgpu::BufferUsages::COPY_DST))
            .collect();
        let layers = self
            .layers
            .iter()
            .enumerate()
            .map(|(l, w)| self.layer_dispatches(w, &buffers, &attn[l], &keep[l], &uniform))
            .collect();
        Plan { n, x: buffers.x, attn, keep, layers, free_readbacks: RefCell::new(Vec::new()), owned }
    }

    /// One layer's ten dispatches (four when it has no head left) over `b`'s buffers.
    fn layer_dispatches(
        &self,
        w: &LayerBuffers,
        b: &PassBuffers,
        attn: &wgpu::Buffer,
        keep: &wgpu::Buffer,
        uniform: &dyn Fn(&[u8]) -> wgpu::Buffer,
    ) -> Vec<Dispatch> {
        let spec = &self.spec;
        let (n, d, ffn, d_k) = (b.n, spec.d_model, spec.ffn, spec.d_k());
        let width = w.kept.len() * d_k;
        let dispatch = |step: Step, buffers: &[&wgpu::Buffer], workgroups: (u32, u32)| {
            self.pipelines.dispatch(&self.ctx, step, buffers, workgroups)
        };
        let mut dispatches = if width == 0 {
            // No head left: x = LayerNorm(x + 0 + b_o).
            vec![dispatch(Step::ResidualNorm, &[&b.u_norm, &b.zeros, &w.b_out, &b.x, &w.ln1], (n as u32, 1))]
        } else {
            let u_qkv = uniform(bytemuck::bytes_of(&linear_params(n, d, 3 * width)));
            let u_out = uniform(bytemuck::bytes_of(&linear_params(n, width, d)));
            let att = AttentionParams::new(n as u32, width as u32, d_k as u32, w.kept.len() as u32);
            let u_att = uniform(bytemuck::bytes_of(&att));
            let u_bias_qkv = uniform(bytemuck::bytes_of(&RowParams::new(spec, n, 3 * width)));
            let u_mask = uniform(bytemuck::bytes_of(&RowParams {
                head_width: d_k as u32,
                ..RowParams::new(spec, n, width)
            }));
            vec![
                // Attention: QKV projection + bias, heads, flagged-off heads zeroed, output
                // projection, then x = LayerNorm(x + attention + b).
                dispatch(Step::Matmul, &[&u_qkv, &b.x, &w.w_qkv, &b.qkv], (tiles(3 * width), tiles(n))),
                dispatch(
                    Step::BiasAct,
                    &[&u_bias_qkv, &b.qkv, &w.b_qkv],
                    (elementwise_groups(n * 3 * width), 1),
                ),
                dispatch(Step::Attention, &[&u_att, &b.qkv, attn, &b.heads], (n as u32, w.kept.len() as u32)),
                dispatch(Step::MaskHeads, &[&u_mask, &b.heads, keep], (elementwise_groups(n * width), 1)),
                dispatch(Step::Matmul, &[&u_out, &b.heads, &w.w_out, &b.branch], (tiles(d), tiles(n))),
                dispatch(Step::ResidualNorm, &[&b.u_norm, &b.branch, &w.b_out, &b.x, &w.ln1], (n as u32, 1)),
            ]
        };
        dispatches.extend([
            // Feed-forward: GELU(x W_i^T + b_i) W_2^T, then x = LayerNorm(x + that + b_2).
            dispatch(Step::Matmul, &[&b.u_in, &b.x, &w.w_in, &b.hidden], (tiles(ffn), tiles(n))),
            dispatch(Step::BiasAct, &[&b.u_gelu, &b.hidden, &w.b_in], (elementwise_groups(n * ffn), 1)),
            dispatch(Step::Matmul, &[&b.u_ffn_out, &b.hidden, &w.w_ffn_out, &b.branch], (tiles(d), tiles(n))),
            dispatch(Step::ResidualNorm, &[&b.u_norm, &b.branch, &w.b_ffn_out, &b.x, &w.ln2], (n as u32, 1)),
        ]);
        dispatches
    }

    /// Runs the model on `ids` with only `heads` active; the same contract and result as
    /// [`Bert::forward`], given the same embeddings.
    pub async fn forward(&self, bert: &Bert, ids: &[u32], heads: &HeadSet) -> Result<BertOutput, GpuError> {
        self.forward_from(bert, ids, heads, None).await
    }

    /// [`GpuBert::forward`], reusing from `base` every layer before the first one whose pruned
    /// heads differ (as [`Bert::forward_from`] does).
    pub async fn forward_from(
        &self,
        bert: &Bert,
        ids: &[u32],
        heads: &HeadSet,
        base: Option<&BertOutput>,
    ) -> Result<BertOutput, GpuError> {
        let ctx = &self.ctx;
        ctx.check()?;
        let (n, spec) = (ids.len(), &self.spec);
        let start = first_changed_layer(spec, base, n, heads);
        let x0 = match base {
            Some(b) if start == spec.layers => {
                return Ok(BertOutput { first_computed: spec.layers, ..b.clone() })
            }
            Some(b) if start > 0 => b.layer_inputs[start].clone(),
            _ => bert.embed(ids),
        };
        let plan = self.plan(n).await?;
        ctx.queue.write_buffer(&plan.x, 0, bytemuck::cast_slice(&x0));
        for (l, (flags, w)) in plan.keep.iter().zip(&self.layers).enumerate().skip(start) {
            let keep: Vec<f32> =
                w.kept.iter().map(|&h| if heads.is_active(l * spec.heads + h) { 1.0 } else { 0.0 }).collect();
            if !keep.is_empty() {
                ctx.queue.write_buffer(flags, 0, bytemuck::cast_slice(&keep));
            }
        }
        let readback = plan.take_readback(&ctx.device, spec);
        let data = self.submit_and_read(&plan, start, &readback).await?;
        plan.free_readbacks.borrow_mut().push(readback);

        // Final hidden states, then each computed layer's attention, then each one's input.
        let d = spec.d_model;
        let (hidden_states, mut rest) = data.split_at(n * d);
        let mut attention = base.map_or(Vec::new(), |b| b.attention[..start].to_vec());
        for w in &self.layers[start..] {
            let (layer, more) = rest.split_at(w.kept.len() * n * n);
            attention.push(std::sync::Arc::new(layer.to_vec()));
            rest = more;
        }
        let new_inputs = rest;
        let mut layer_inputs = base.map_or(Vec::new(), |b| b.layer_inputs[..start].to_vec());
        layer_inputs.extend(new_inputs.chunks_exact(n * d).map(<[f32]>::to_vec));
        Ok(BertOutput {
            embedding: pool(spec, hidden_states),
            attention,
            head_outputs: Vec::new(),
            seq_len: n,
            layer_inputs,
            heads: heads.clone(),
            first_computed: start,
        })
    }

    /// Encodes the layers from `start` on, submits them, and reads back the final hidden states,
    /// then each computed layer's attention, then each one's input, into `readback`.
    async fn submit_and_read(
        &self,
        plan: &Plan,
        start: usize,
        readback: &wgpu::Buffer,
    ) -> Result<Vec<f32>, GpuError> {
        let (ctx, n) = (&self.ctx, plan.n as u64);
        let attn_bytes = |w: &LayerBuffers| 4 * w.kept.len() as u64 * n * n;
        let x_bytes = 4 * n * self.spec.d_model as u64;
        let computed = (self.spec.layers - start) as u64;
        let inputs_at = x_bytes + self.layers[start..].iter().map(attn_bytes).sum::<u64>();
        let mut enc =
            ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("bert") });
        for (l, dispatches) in plan.layers.iter().enumerate().skip(start) {
            // Each layer's input is kept, so that a later pass can start there.
            enc.copy_buffer_to_buffer(
                &plan.x,
                0,
                readback,
                inputs_at + (l - start) as u64 * x_bytes,
                x_bytes,
            );
            self.pipelines.encode(ctx, &mut enc, dispatches);
        }
        enc.copy_buffer_to_buffer(&plan.x, 0, readback, 0, x_bytes);
        let mut at = x_bytes;
        for (a, w) in plan.attn.iter().zip(&self.layers).skip(start) {
            if attn_bytes(w) > 0 {
                enc.copy_buffer_to_buffer(a, 0, readback, at, attn_bytes(w));
            }
            at += attn_bytes(w);
        }
        let scope = ctx.device.push_error_scope(wgpu::ErrorFilter::Validation);
        ctx.queue.submit([enc.finish()]);
        if let Some(e) = scope.pop().await {
            return Err(GpuError::Internal(e.to_string()));
        }
        let data = ctx.read(readback, inputs_at + computed * x_bytes).await?;
        ctx.check()?;
        Ok(data)
    }
}
