//! A GPT-2-family decoder on the GPU: the same computation as [`crate::model::decoder::gpt2`]. The
//! embeddings (a table look-up) stay on the CPU; the blocks (causal attention), the final
//! LayerNorm, the logits and each position's loss run on the device, and only what the page reads
//! comes back: the final rows, the next token's logits, the losses, and the attention and head
//! outputs of the layers a pass keeps ([`Keep`]).
//!
//! The logits are `n x vocab` floats (200 MB for gpt2 at 1024 tokens): they are made a block of
//! rows at a time into one buffer, and each block's losses are taken from it before the next
//! block overwrites it. The output head (the word embedding, 154 MB as f32 for gpt2) is uploaded
//! in blocks of rows that one binding can hold.

use std::ops::Range;
use std::rc::Rc;
use std::sync::Arc;

use super::forward::{AttentionParams, MatmulParams};
use super::layers::{linear_params, Dispatch, Pipelines, Plans, RowParams, Step};
use super::resources::{self, elementwise_groups, tiles, Owned};
use super::{GpuContext, GpuError};
use crate::attention::HeadSet;
use crate::model::decoder::gpt2::{DecoderOutput, Gpt2, Keep};
use crate::model::spec::ModelSpec;

/// Rows of logits made at once, at most.
const LOGIT_ROWS: usize = 256;

/// Sequence lengths whose plans are kept (a text, and the one before it).
const PLANS_KEPT: usize = 2;

/// One block's weights on the device, each dense layer `[out, in]` as [`Gpt2`] keeps it.
struct BlockBuffers {
    ln1: wgpu::Buffer, // [w | b]
    w_qkv: wgpu::Buffer,
    b_qkv: wgpu::Buffer,
    w_out: wgpu::Buffer,
    b_out: wgpu::Buffer,
    ln2: wgpu::Buffer,
    w_in: wgpu::Buffer,
    b_in: wgpu::Buffer,
    w_ffn_out: wgpu::Buffer,
    b_ffn_out: wgpu::Buffer,
}

/// A block of the output head's rows (token ids `rows`), `rows.len() x d_model`.
struct WordBlock {
    rows: Range<usize>,
    buffer: wgpu::Buffer,
}

/// A layer's dispatches: up to the attention (whose weights and head outputs a kept layer copies
/// out), then the rest.
struct LayerDispatches {
    attend: Vec<Dispatch>,
    rest: Vec<Dispatch>,
}

/// Everything a pass over `n` tokens uses, made once per length.
struct Plan {
    n: usize,
    x: wgpu::Buffer,
    normed: wgpu::Buffer,
    heads: wgpu::Buffer,
    attn: wgpu::Buffer,
    ids: wgpu::Buffer,
    losses: wgpu::Buffer,
    logits: wgpu::Buffer,
    /// Per layer, one flag per head (1.0 = active).
    keep: Vec<wgpu::Buffer>,
    layers: Vec<LayerDispatches>,
    /// The final LayerNorm, then per block of rows its logits and their losses.
    head: Vec<Dispatch>,
    /// Where the last row's logits are in `logits`: its row within the last block.
    last_row: usize,
    _owned: Owned,
}

/// A decoder's weights on the device and the pipelines that run it.
pub struct GpuGpt2 {
    ctx: Rc<GpuContext>,
    spec: ModelSpec,
    blocks: Vec<BlockBuffers>,
    word: Vec<WordBlock>,
    ln_f: wgpu::Buffer,
    pipelines: Pipelines,
    /// The most bytes of one block of the output head or of the logits.
    block_bytes: u64,
    plans: Plans<Plan>,
    _owned: Owned,
}

/// The bytes one binding of `ctx`'s device may hold.
fn binding_limit(ctx: &GpuContext) -> u64 {
    let limits = ctx.limits();
    limits.max_storage_buffer_binding_size.min(limits.max_buffer_size)
}

impl GpuGpt2 {
    /// Uploads `model`'s weights (f32: about 500 MB for gpt2) and builds the pipelines.
    pub async fn new(ctx: Rc<GpuContext>, model: &Gpt2) -> Result<GpuGpt2, GpuError> {
        let limit = binding_limit(&ctx);
        GpuGpt2::with_blocks_of(ctx, model, limit).await
    }

    /// [`GpuGpt2::new`] with the output head and the logits in blocks of at most `block_bytes`
    /// (at least a row): the device's binding limit, or smaller to test the blocks.
    pub async fn with_blocks_of(
        ctx: Rc<GpuContext>,
        model: &Gpt2,
        block_bytes: u64,
    ) -> Result<GpuGpt2, GpuError> {
        ctx.check()?;
        let (dev, q) = (&ctx.device, &ctx.queue);
        let spec = model.spec;
        let limit = binding_limit(&ctx);
        let block_bytes = block_bytes.min(limit);
        let owned = Owned::default();
        let scope = dev.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let upload = |label: &str, data: &[f32]| -> Result<wgpu::Buffer, GpuError> {
            let bytes = 4 * data.len() as u64;
            if bytes > limit {
                return Err(GpuError::TooLarge { what: "a weight matrix", bytes, limit });
            }
            Ok(owned.keep(resources::storage_with(dev, q, label, data)))
        };
        let norm = |n: &crate::model::layers::Norm| [n.w.as_slice(), n.b.as_slice()].concat();
        let mut blocks = Vec::with_capacity(spec.layers);
        for b in &model.blocks {
            blocks.push(BlockBuffers {
                ln1: upload("ln_1", &norm(&b.ln1))?,
                w_qkv: upload("c_attn", &b.qkv.weights())?,
                b_qkv: upload("c_attn bias", &b.qkv.b)?,
                w_out: upload("c_proj", &b.out.weights())?,
                b_out: upload("c_proj bias", &b.out.b)?,
                ln2: upload("ln_2", &norm(&b.ln2))?,
                w_in: upload("c_fc", &b.ffn_in.weights())?,
                b_in: upload("c_fc bias", &b.ffn_in.b)?,
                w_ffn_out: upload("mlp c_proj", &b.ffn_out.weights())?,
                b_ffn_out: upload("mlp c_proj bias", &b.ffn_out.b)?,
            });
        }
        let d = spec.d_model;
        let per_block = ((block_bytes / (4 * d as u64)) as usize).clamp(1, spec.vocab);
        let word = (0..spec.vocab)
            .step_by(per_block)
            .map(|start| {
                let rows = start..(start + per_block).min(spec.vocab);
                let buffer = upload("wte", &model.word.values(rows.start * d..rows.end * d))?;
                Ok(WordBlock { rows, buffer })
            })
            .collect::<Result<Vec<_>, GpuError>>()?;
        let ln_f = upload("ln_f", &norm(&model.ln_f))?;
        if let Some(e) = scope.pop().await {
            return Err(GpuError::OutOfMemory(e.to_string()));
        }
        let pipelines = Pipelines::new(&ctx).await?;
        let plans = Plans::new(PLANS_KEPT);
        Ok(GpuGpt2 { ctx, spec, blocks, word, ln_f, pipelines, block_bytes, plans, _owned: owned })
    }

    /// The device it runs on.
    pub fn context(&self) -> Rc<GpuContext> {
        self.ctx.clone()
    }

    /// The plan for `n` tokens (its buffers checked against the device's binding limit first):
    /// kept from an earlier pass, or made now.
    async fn plan(&self, n: usize) -> Result<Rc<Plan>, GpuError> {
        let limit = binding_limit(&self.ctx);
        let (spec, d) = (&self.spec, self.spec.d_model);
        for (what, floats) in [
            ("attention weights", spec.heads * n * n),
            ("feed-forward activations", n * spec.ffn),
            ("QKV", n * 3 * d),
        ] {
            let bytes = 4 * floats as u64;
            if bytes > limit {
                return Err(GpuError::TooLarge { what, bytes, limit });
            }
        }
        self.plans.get(&self.ctx, n, || self.make_plan(n)).await
    }

    fn make_plan(&self, n: usize) -> Plan {
        let (ctx, spec) = (&*self.ctx, &self.spec);
        let (d, ffn, vocab) = (spec.d_model, spec.ffn, spec.vocab);
        let owned = Owned::default();
        let copy = wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
        let storage = |label, floats: usize| {
            owned.keep(resources::storage(&ctx.device, label, 4 * floats.max(1) as u64, copy))
        };
        let uniform =
            |bytes: &[u8]| owned.keep(resources::uniform(&ctx.device, &ctx.queue, "gpt2 params", bytes));
        let rows_per_block = ((self.block_bytes / (4 * vocab as u64)) as usize).clamp(1, LOGIT_ROWS).min(n);
        let b = Buffers {
            n,
            x: storage("x", n * d),
            normed: storage("normed", n * d),
            qkv: storage("qkv", n * 3 * d),
            heads: storage("heads", n * d),
            branch: storage("branch", n * d),
            hidden: storage("hidden", n * ffn),
            attn: storage("attention", spec.heads * n * n),
            ids: storage("ids", n),
            losses: storage("losses", n),
            logits: storage("logits", rows_per_block * vocab),
            u_norm: uniform(RowParams::new(spec, n, d).bytes()),
        };
        let keep: Vec<wgpu::Buffer> = (0..spec.layers).map(|_| storage("head flags", spec.heads)).collect();
        let layers =
            self.blocks.iter().zip(&keep).map(|(w, flags)| self.layer(w, &b, flags, &uniform)).collect();
        let head = self.head(&b, rows_per_block, &uniform);
        let last_row = (n - 1) % rows_per_block;
        Plan {
            n,
            x: b.x,
            normed: b.normed,
            heads: b.heads,
            attn: b.attn,
            ids: b.ids,
            losses: b.losses,
            logits: b.logits,
            keep,
            layers,
            head,
            last_row,
            _owned: owned,
        }
    }

    /// One block's dispatches over `b`'s buffers.
    fn layer(
        &self,
        w: &BlockBuffers,
        b: &Buffers,
        flags: &wgpu::Buffer,
        uniform: &dyn Fn(&[u8]) -> wgpu::Buffer,
    ) -> LayerDispatches {
        let (ctx, spec, p) = (&*self.ctx, &self.spec, &self.pipelines);
        let (n, d, ffn, d_k, h) = (b.n, spec.d_model, spec.ffn, spec.d_k(), spec.heads);
        let dispatch = |step, buffers: &[&wgpu::Buffer], groups| p.dispatch(ctx, step, buffers, groups);
        let norm = |ln: &wgpu::Buffer| {
            p.dispatch_at(
                ctx,
                Step::LayerNorm,
                &[(0, &b.u_norm), (1, &b.normed), (3, &b.x), (4, ln)],
                (n as u32, 1),
            )
        };
        let matmul = |inp: usize, out: usize, a: &wgpu::Buffer, w: &wgpu::Buffer, c: &wgpu::Buffer| {
            let u = uniform(bytemuck::bytes_of(&linear_params(n, inp, out)));
            dispatch(Step::Matmul, &[&u, a, w, c], (tiles(out), tiles(n)))
        };
        let rows = |cols: usize| uniform(RowParams::new(spec, n, cols).bytes());
        let u_att = uniform(bytemuck::bytes_of(
            &AttentionParams::new(n as u32, d as u32, d_k as u32, h as u32).causal(),
        ));
        let u_mask = uniform(RowParams { head_width: d_k as u32, ..RowParams::new(spec, n, d) }.bytes());
        let u_gelu = uniform(RowParams::new(spec, n, ffn).activation(spec.activation).bytes());
        let u_d = rows(d);
        let add = |branch_bias: &wgpu::Buffer| {
            dispatch(Step::AddResidual, &[&u_d, &b.branch, branch_bias, &b.x], (elementwise_groups(n * d), 1))
        };
        let attend = vec![
            // a = LayerNorm1(x); QKV = a W + b; the causal heads.
            norm(&w.ln1),
            matmul(d, 3 * d, &b.normed, &w.w_qkv, &b.qkv),
            dispatch(Step::BiasAct, &[&rows(3 * d), &b.qkv, &w.b_qkv], (elementwise_groups(n * 3 * d), 1)),
            dispatch(Step::Attention, &[&u_att, &b.qkv, &b.attn, &b.heads], (n as u32, h as u32)),
        ];
        let rest = vec![
            // Pruned heads zeroed; x += heads W_proj + b.
            dispatch(Step::MaskHeads, &[&u_mask, &b.heads, flags], (elementwise_groups(n * d), 1)),
            matmul(d, d, &b.heads, &w.w_out, &b.branch),
            add(&w.b_out),
            // x += GELU_tanh(LayerNorm2(x) W_fc + b) W_mlp + b.
            norm(&w.ln2),
            matmul(d, ffn, &b.normed, &w.w_in, &b.hidden),
            dispatch(Step::BiasAct, &[&u_gelu, &b.hidden, &w.b_in], (elementwise_groups(n * ffn), 1)),
            matmul(ffn, d, &b.hidden, &w.w_ffn_out, &b.branch),
            add(&w.b_ffn_out),
        ];
        LayerDispatches { attend, rest }
    }

    /// The final LayerNorm into `normed`, then per block of `rows_per_block` rows its logits
    /// (one product per block of the output head's rows) and their losses.
    fn head(
        &self,
        b: &Buffers,
        rows_per_block: usize,
        uniform: &dyn Fn(&[u8]) -> wgpu::Buffer,
    ) -> Vec<Dispatch> {
        let (ctx, spec, p) = (&*self.ctx, &self.spec, &self.pipelines);
        let (n, d, vocab) = (b.n, spec.d_model, spec.vocab);
        let norm = [(0, &b.u_norm), (1, &b.normed), (3, &b.x), (4, &self.ln_f)];
        let mut out = vec![p.dispatch_at(ctx, Step::LayerNorm, &norm, (n as u32, 1))];
        for row0 in (0..n).step_by(rows_per_block) {
            let rows = rows_per_block.min(n - row0);
            for block in &self.word {
                let cols = block.rows.len();
                let params = MatmulParams {
                    a: [(row0 * d) as u32, d as u32, 1, 0],
                    c_off: block.rows.start as u32,
                    c_rs: vocab as u32,
                    ..linear_params(rows, d, cols)
                };
                let u = uniform(bytemuck::bytes_of(&params));
                out.push(p.dispatch(
                    ctx,
                    Step::Matmul,
                    &[&u, &b.normed, &block.buffer, &b.logits],
                    (tiles(cols), tiles(rows)),
                ));
            }
            let loss = RowParams { row0: row0 as u32, seq: n as u32, ..RowParams::new(spec, rows, vocab) };
            let u = uniform(loss.bytes());
            out.push(p.dispatch(ctx, Step::RowLoss, &[&u, &b.logits, &b.ids, &b.losses], (rows as u32, 1)));
        }
        out
    }

    /// Runs the decoder on `ids` with only `heads` active, keeping the attention and head outputs
    /// of the layers `keep` names: [`Gpt2::forward_keeping`]'s result, its losses from f32 logits.
    pub async fn forward(
        &self,
        model: &Gpt2,
        ids: &[u32],
        heads: &HeadSet,
        keep: Keep,
    ) -> Result<DecoderOutput, GpuError> {
        let (ctx, spec) = (&*self.ctx, &self.spec);
        ctx.check()?;
        assert_eq!(heads.len(), spec.total_heads(), "a set of the model's {} heads", spec.total_heads());
        let n = ids.len();
        let x0 = model.embed(ids);
        let plan = self.plan(n).await?;
        ctx.queue.write_buffer(&plan.x, 0, bytemuck::cast_slice(&x0));
        let targets: Vec<f32> = ids.iter().map(|&id| id as f32).collect();
        ctx.queue.write_buffer(&plan.ids, 0, bytemuck::cast_slice(&targets));
        for (l, flags) in plan.keep.iter().enumerate() {
            let on: Vec<f32> = (0..spec.heads)
                .map(|h| if heads.is_active(l * spec.heads + h) { 1.0 } else { 0.0 })
                .collect();
            ctx.queue.write_buffer(flags, 0, bytemuck::cast_slice(&on));
        }
        let data = self.submit_and_read(&plan, keep).await?;
        Ok(self.output(&plan, &data, heads, keep))
    }

    /// The bytes of a pass's readback: the final rows, the losses, the next token's logits, then
    /// per kept layer its attention and its heads' outputs.
    fn readback_layout(&self, n: usize, keep: Keep) -> (u64, u64, u64) {
        let (spec, f) = (&self.spec, 4u64);
        let fixed = f * (n * spec.d_model + n + spec.vocab) as u64;
        let per_layer = f * (spec.heads * n * n + n * spec.d_model) as u64;
        let kept = (0..spec.layers).filter(|&l| keep.keeps(l)).count() as u64;
        (fixed, per_layer, fixed + kept * per_layer)
    }

    async fn submit_and_read(&self, plan: &Plan, keep: Keep) -> Result<Vec<f32>, GpuError> {
        let (ctx, spec, n) = (&*self.ctx, &self.spec, plan.n);
        let (fixed, per_layer, total) = self.readback_layout(n, keep);
        let owned = Owned::default();
        let readback = owned.keep(resources::readback(&ctx.device, total));
        let (rows_bytes, attn_bytes) = (4 * (n * spec.d_model) as u64, 4 * (spec.heads * n * n) as u64);
        let mut enc =
            ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("gpt2") });
        let mut at = fixed;
        for (l, layer) in plan.layers.iter().enumerate() {
            self.pipelines.encode(ctx, &mut enc, &layer.attend);
            if keep.keeps(l) {
                enc.copy_buffer_to_buffer(&plan.attn, 0, &readback, at, attn_bytes);
                enc.copy_buffer_to_buffer(&plan.heads, 0, &readback, at + attn_bytes, rows_bytes);
                at += per_layer;
            }
            self.pipelines.encode(ctx, &mut enc, &layer.rest);
        }
        self.pipelines.encode(ctx, &mut enc, &plan.head);
        let vocab_bytes = 4 * spec.vocab as u64;
        enc.copy_buffer_to_buffer(&plan.normed, 0, &readback, 0, rows_bytes);
        enc.copy_buffer_to_buffer(&plan.losses, 0, &readback, rows_bytes, 4 * n as u64);
        let last = plan.last_row as u64 * vocab_bytes;
        enc.copy_buffer_to_buffer(&plan.logits, last, &readback, rows_bytes + 4 * n as u64, vocab_bytes);
        let scope = ctx.device.push_error_scope(wgpu::ErrorFilter::Validation);
        ctx.queue.submit([enc.finish()]);
        if let Some(e) = scope.pop().await {
            return Err(GpuError::Internal(e.to_string()));
        }
        let data = ctx.read(&readback, total).await?;
        ctx.check()?;
        Ok(data)
    }

    /// The readback's parts as a [`DecoderOutput`].
    fn output(&self, plan: &Plan, data: &[f32], heads: &HeadSet, keep: Keep) -> DecoderOutput {
        let (spec, n) = (&self.spec, plan.n);
        let (rows, rest) = data.split_at(n * spec.d_model);
        let (losses, rest) = rest.split_at(n);
        let (next, mut rest) = rest.split_at(spec.vocab);
        let (mut attention, mut head_outputs) = (Vec::new(), Vec::new());
        for l in 0..spec.layers {
            if keep.keeps(l) {
                let (att, more) = rest.split_at(spec.heads * n * n);
                let (outputs, more) = more.split_at(n * spec.d_model);
                attention.push(Arc::new(att.to_vec()));
                head_outputs.push(Arc::new(outputs.to_vec()));
                rest = more;
            } else {
                attention.push(Arc::default());
                head_outputs.push(Arc::default());
            }
        }
        DecoderOutput {
            hidden: rows.to_vec(),
            attention,
            head_outputs,
            next_logits: next.to_vec(),
            losses: losses[..n - 1].iter().map(|&l| l as f64).collect(),
            seq_len: n,
            heads: heads.clone(),
        }
    }
}

/// The buffers and shared uniforms a plan's dispatches bind.
struct Buffers {
    n: usize,
    x: wgpu::Buffer,
    normed: wgpu::Buffer,
    qkv: wgpu::Buffer,
    heads: wgpu::Buffer,
    branch: wgpu::Buffer,
    hidden: wgpu::Buffer,
    attn: wgpu::Buffer,
    ids: wgpu::Buffer,
    losses: wgpu::Buffer,
    logits: wgpu::Buffer,
    u_norm: wgpu::Buffer,
}
