//! The trained model on the GPU: the same computation as [`crate::model::bert`], ten dispatches
//! a layer in one submission. The embeddings (a table look-up and one LayerNorm) and the final
//! mean pooling stay on the CPU; everything between runs on the device.

use std::rc::Rc;

use super::forward::{AttentionParams, MatmulParams};
use super::{shaders, GpuContext, GpuError};
use crate::model::bert::{first_changed_layer, Bert, BertOutput, D_K, D_MODEL, FFN, HEADS, LAYERS};

/// Uniforms of `bert.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct RowParams {
    rows: u32,
    cols: u32,
    flag: u32,
    eps: f32,
}

struct LayerBuffers {
    w_qkv: wgpu::Buffer, // [Wq; Wk; Wv], 1152 x 384 as stored by PyTorch
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

/// The model's weights on the device and the pipelines that run it.
pub struct GpuBert {
    ctx: Rc<GpuContext>,
    layers: Vec<LayerBuffers>,
    bias_act: wgpu::ComputePipeline,
    residual_norm: wgpu::ComputePipeline,
    mask_heads: wgpu::ComputePipeline,
}

impl GpuBert {
    /// Uploads `bert`'s layer weights (about 85 MiB as f32) and builds the pipelines.
    pub async fn new(ctx: Rc<GpuContext>, bert: &Bert) -> Result<GpuBert, GpuError> {
        ctx.check()?;
        let dev = &ctx.device;
        let scope = dev.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let upload = |label: &str, data: &[f32]| {
            let buffer = dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: (data.len() * 4) as u64,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            ctx.queue.write_buffer(&buffer, 0, bytemuck::cast_slice(data));
            buffer
        };
        let concat = |parts: &[&[f32]]| parts.concat();
        let layers = bert
            .layers
            .iter()
            .map(|l| LayerBuffers {
                w_qkv: upload("W_qkv", &concat(&[&l.qkv[0].w, &l.qkv[1].w, &l.qkv[2].w])),
                b_qkv: upload("b_qkv", &concat(&[&l.qkv[0].b, &l.qkv[1].b, &l.qkv[2].b])),
                w_out: upload("W_o", &l.out.w),
                b_out: upload("b_o", &l.out.b),
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
        let (bias_act, residual_norm, mask_heads) =
            (pipeline("bias_act"), pipeline("residual_norm"), pipeline("mask_heads"));
        if let Some(e) = scope.pop().await {
            return Err(GpuError::Internal(format!("pipeline creation failed: {e}")));
        }
        Ok(GpuBert { ctx, layers, bias_act, residual_norm, mask_heads })
    }

    /// Runs the model on `ids` with the heads in `pruned` (`layer * 12 + head`) switched off;
    /// the same contract and result as [`Bert::forward`], given the same embeddings.
    pub async fn forward(
        &self,
        bert: &Bert,
        ids: &[u32],
        pruned: &[bool; LAYERS * HEADS],
    ) -> Result<BertOutput, GpuError> {
        self.forward_from(bert, ids, pruned, None).await
    }

    /// [`GpuBert::forward`], reusing from `base` every layer before the first one whose pruned
    /// heads differ (as [`Bert::forward_from`] does).
    pub async fn forward_from(
        &self,
        bert: &Bert,
        ids: &[u32],
        pruned: &[bool; LAYERS * HEADS],
        base: Option<&BertOutput>,
    ) -> Result<BertOutput, GpuError> {
        let ctx = &self.ctx;
        ctx.check()?;
        let dev = &ctx.device;
        let n = ids.len();
        let d = D_MODEL;
        let start = first_changed_layer(base, n, pruned);
        let x0 = match base {
            Some(b) if start == LAYERS => return Ok(BertOutput { first_computed: LAYERS, ..b.clone() }),
            Some(b) if start > 0 => b.layer_inputs[start].clone(),
            _ => bert.embed(ids),
        };

        // Every buffer of this pass, destroyed when it returns (see `Owned`).
        let owned = super::Owned::default();
        let storage = |label: &str, floats: usize, extra: wgpu::BufferUsages| {
            owned.keep(dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: (floats * 4) as u64,
                usage: wgpu::BufferUsages::STORAGE | extra,
                mapped_at_creation: false,
            }))
        };
        let copy = wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
        let x = storage("x", n * d, copy);
        ctx.queue.write_buffer(&x, 0, bytemuck::cast_slice(&x0));
        let qkv = storage("qkv", n * 3 * d, wgpu::BufferUsages::empty());
        let heads = storage("heads", n * d, wgpu::BufferUsages::empty());
        let branch = storage("branch", n * d, wgpu::BufferUsages::empty());
        let hidden = storage("hidden", n * FFN, wgpu::BufferUsages::empty());
        // One attention buffer and one head mask per layer: storage bindings at an offset must be
        // 256-byte aligned, which per-layer slices of one buffer would not be.
        let attn: Vec<wgpu::Buffer> =
            (0..LAYERS).map(|_| storage("attention", HEADS * n * n, copy)).collect();
        let masks: Vec<wgpu::Buffer> = pruned
            .chunks_exact(HEADS)
            .map(|layer| {
                let flags: Vec<f32> = layer.iter().map(|&p| if p { 1.0 } else { 0.0 }).collect();
                let b = storage("mask", HEADS, wgpu::BufferUsages::COPY_DST);
                ctx.queue.write_buffer(&b, 0, bytemuck::cast_slice(&flags));
                b
            })
            .collect();
        // Final hidden states, then each computed layer's attention, then each one's input.
        let computed = LAYERS - start;
        let readback_floats = n * d + computed * (HEADS * n * n + n * d);
        let readback = owned.keep(dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: (readback_floats * 4) as u64,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }));
        let uniform = |bytes: &[u8]| {
            let b = owned.keep(dev.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: bytes.len() as u64,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }));
            ctx.queue.write_buffer(&b, 0, bytes);
            b
        };
        // One dispatch: `buffers` bound whole, at bindings 0, 1, 2... in the order given.
        let dispatch = |pass: &mut wgpu::ComputePass,
                        pipeline: &wgpu::ComputePipeline,
                        buffers: &[&wgpu::Buffer],
                        (x, y): (u32, u32)| {
            let entries: Vec<wgpu::BindGroupEntry> = buffers
                .iter()
                .enumerate()
                .map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32, resource: b.as_entire_binding() })
                .collect();
            let group = dev.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &pipeline.get_bind_group_layout(0),
                entries: &entries,
            });
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(x, y, 1);
        };
        let (n32, d32) = (n as u32, d as u32);
        // y (m x out) = a (m x in) @ W^T, W stored out x in.
        let linear = |m: u32, inp: u32, out: u32| MatmulParams {
            m,
            n: out,
            k: inp,
            batch: 1,
            a: [0, inp, 1, 0],
            b: [0, 1, inp, 0],
            c_off: 0,
            c_rs: out,
            c_bs: 0,
            alpha: 1.0,
        };
        let u_qkv = uniform(bytemuck::bytes_of(&linear(n32, d32, 3 * d32)));
        let u_out = uniform(bytemuck::bytes_of(&linear(n32, d32, d32)));
        let u_in = uniform(bytemuck::bytes_of(&linear(n32, d32, FFN as u32)));
        let u_ffn_out = uniform(bytemuck::bytes_of(&linear(n32, FFN as u32, d32)));
        let u_att = uniform(bytemuck::bytes_of(&AttentionParams::new(n32, d32, D_K as u32, HEADS as u32)));
        let row = |cols: usize, flag: u32| RowParams { rows: n32, cols: cols as u32, flag, eps: 1e-12 };
        let u_bias_qkv = uniform(bytemuck::bytes_of(&row(3 * d, 0)));
        let u_gelu = uniform(bytemuck::bytes_of(&row(FFN, 1)));
        let u_norm = uniform(bytemuck::bytes_of(&row(d, 0)));
        let u_mask = uniform(bytemuck::bytes_of(&row(d, D_K as u32)));
        let tiles = |extent: usize| extent.div_ceil(64) as u32;
        let elems = |count: usize| count.div_ceil(256) as u32;

        let mut enc = dev.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("bert") });
        let attn_bytes = (HEADS * n * n * 4) as u64;
        let x_bytes = (n * d * 4) as u64;
        let inputs_at = x_bytes + computed as u64 * attn_bytes;
        let (h32, mm) = (HEADS as u32, &ctx.matmul);
        for (l, w) in self.layers.iter().enumerate().skip(start) {
            // Each layer's input is kept, so that a later pass can start there.
            enc.copy_buffer_to_buffer(&x, 0, &readback, inputs_at + (l - start) as u64 * x_bytes, x_bytes);
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("bert layer"),
                timestamp_writes: None,
            });
            {
                // Attention: QKV projection + bias, heads, pruned heads zeroed, output projection,
                // then x = LayerNorm(x + attention + b).
                dispatch(&mut pass, mm, &[&u_qkv, &x, &w.w_qkv, &qkv], (tiles(3 * d), tiles(n)));
                dispatch(&mut pass, &self.bias_act, &[&u_bias_qkv, &qkv, &w.b_qkv], (elems(n * 3 * d), 1));
                dispatch(&mut pass, &ctx.attention, &[&u_att, &qkv, &attn[l], &heads], (n32, h32));
                dispatch(&mut pass, &self.mask_heads, &[&u_mask, &heads, &masks[l]], (elems(n * d), 1));
                dispatch(&mut pass, mm, &[&u_out, &heads, &w.w_out, &branch], (tiles(d), tiles(n)));
                dispatch(&mut pass, &self.residual_norm, &[&u_norm, &branch, &w.b_out, &x, &w.ln1], (n32, 1));
                // Feed-forward: GELU(x W_i^T + b_i) W_2^T, then x = LayerNorm(x + that + b_2).
                dispatch(&mut pass, mm, &[&u_in, &x, &w.w_in, &hidden], (tiles(FFN), tiles(n)));
                dispatch(&mut pass, &self.bias_act, &[&u_gelu, &hidden, &w.b_in], (elems(n * FFN), 1));
                dispatch(&mut pass, mm, &[&u_ffn_out, &hidden, &w.w_ffn_out, &branch], (tiles(d), tiles(n)));
                let norm2: [&wgpu::Buffer; 5] = [&u_norm, &branch, &w.b_ffn_out, &x, &w.ln2];
                dispatch(&mut pass, &self.residual_norm, &norm2, (n32, 1));
            }
        }
        enc.copy_buffer_to_buffer(&x, 0, &readback, 0, x_bytes);
        for (i, a) in attn.iter().skip(start).enumerate() {
            enc.copy_buffer_to_buffer(a, 0, &readback, x_bytes + i as u64 * attn_bytes, attn_bytes);
        }
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        ctx.queue.submit([enc.finish()]);
        if let Some(e) = scope.pop().await {
            return Err(GpuError::Internal(e.to_string()));
        }
        let data = ctx.read(&readback).await?;
        ctx.check()?;
        let (hidden_states, rest) = data.split_at(n * d);
        let (new_attention, new_inputs) = rest.split_at(computed * HEADS * n * n);
        let reused =
            |v: fn(&BertOutput) -> &Vec<Vec<f32>>| base.map_or(Vec::new(), |b| v(b)[..start].to_vec());
        let mut attention = reused(|b| &b.attention);
        attention.extend(new_attention.chunks_exact(HEADS * n * n).map(<[f32]>::to_vec));
        let mut layer_inputs = reused(|b| &b.layer_inputs);
        layer_inputs.extend(new_inputs.chunks_exact(n * d).map(<[f32]>::to_vec));
        Ok(BertOutput {
            embedding: crate::model::bert::pool(hidden_states),
            attention,
            seq_len: n,
            layer_inputs,
            pruned: *pruned,
            first_computed: start,
        })
    }
}
