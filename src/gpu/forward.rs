//! Buffers per configuration, the three dispatches of a forward pass, and the readback.

use std::rc::Rc;

use bytemuck::{Pod, Zeroable};

use super::resources::{self, tiles, Owned};
use super::{GpuContext, GpuError};
use crate::attention::{Contributions, GeneratedWeights, HeadSet, LayerWeights, ModelConfig, Weights};
use crate::cpu::Forward;

const F32: u64 = 4;

/// Uniforms of `matmul.wgsl` (same field order).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(crate) struct MatmulParams {
    pub(super) m: u32,
    pub(super) n: u32,
    pub(super) k: u32,
    pub(super) batch: u32,
    pub(super) a: [u32; 4], // offset, row stride, column stride, batch stride
    pub(super) b: [u32; 4],
    pub(super) c_off: u32,
    pub(super) c_rs: u32,
    pub(super) c_bs: u32,
    pub(super) alpha: f32,
}

/// Uniforms of `attention.wgsl`, padded to 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct AttentionParams {
    n: u32,
    d: u32,
    d_k: u32,
    heads: u32,
    scale: f32,
    head0: u32,
    /// 1: a decoder's causal mask (query `i` reads keys `0..=i`).
    causal: u32,
    _pad: u32,
}

impl AttentionParams {
    /// `n` tokens, width `d`, heads of `d_k`, scores scaled by `1 / sqrt(d_k)`.
    pub(super) fn new(n: u32, d: u32, d_k: u32, heads: u32) -> Self {
        AttentionParams { n, d, d_k, heads, scale: 1.0 / (d_k as f32).sqrt(), head0: 0, causal: 0, _pad: 0 }
    }

    /// The same with a decoder's causal mask.
    pub(super) fn causal(self) -> Self {
        AttentionParams { causal: 1, ..self }
    }

    /// The same for head `head` alone (dispatched with one workgroup row).
    fn for_head(n: u32, d: u32, d_k: u32, heads: u32, head: u32) -> Self {
        AttentionParams { head0: head, ..Self::new(n, d, d_k, heads) }
    }
}

/// Uniforms of `matmul_generated_b.wgsl`: the generator stream's keys and the bound.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct GeneratorParams {
    k1: u32,
    k2: u32,
    bound: f32,
    _pad: u32,
}

/// Bytes of every storage buffer a configuration needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferSizes {
    /// `x`, `n x d`.
    pub input: u64,
    /// `W_qkv`, `d x 3d` (stored weights only).
    pub w_qkv: u64,
    /// `W_o`, `d x d` (stored weights only).
    pub w_o: u64,
    /// `QKV`, `n x 3d`.
    pub qkv: u64,
    /// Every head's attention weights, `H x n x n`.
    pub attention: u64,
    /// The concatenated head outputs, `n x d`.
    pub heads: u64,
    /// Every head's contribution to the output, `H x n x d`.
    pub contributions: u64,
}

impl BufferSizes {
    /// The readback holds attention weights, head outputs and contributions back to back.
    pub fn readback(&self) -> u64 {
        self.attention + self.heads + self.contributions
    }

    /// Each buffer with the name [`GpuError::TooLarge`] gives it; the weights' only when stored.
    pub fn named(&self, stored_weights: bool) -> Vec<(&'static str, u64)> {
        let mut all = vec![("input", self.input)];
        if stored_weights {
            all.extend([("W_qkv", self.w_qkv), ("W_o", self.w_o)]);
        }
        all.extend([
            ("QKV", self.qkv),
            ("attention weights", self.attention),
            ("head outputs", self.heads),
            ("per-head contributions", self.contributions),
        ]);
        all
    }
}

/// Every buffer with its name, weights included.
impl IntoIterator for BufferSizes {
    type Item = (&'static str, u64);
    type IntoIter = std::vec::IntoIter<(&'static str, u64)>;

    fn into_iter(self) -> Self::IntoIter {
        self.named(true).into_iter()
    }
}

/// Bytes of every storage buffer `config` needs.
pub fn buffer_sizes(config: &ModelConfig) -> BufferSizes {
    let (n, d, h) = (config.seq_len as u64, config.d_model as u64, config.num_heads as u64);
    BufferSizes {
        input: F32 * n * d,
        w_qkv: F32 * d * 3 * d,
        w_o: F32 * d * d,
        qkv: F32 * n * 3 * d,
        attention: F32 * h * n * n,
        heads: F32 * n * d,
        contributions: F32 * h * n * d,
    }
}

/// Refuses configurations whose buffers the device cannot hold, before allocating any. Generated
/// weights have no buffers.
fn check_fits(config: &ModelConfig, limits: &wgpu::Limits) -> Result<(), GpuError> {
    let binding = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
    let sizes = buffer_sizes(config);
    for (what, bytes) in sizes.named(!config.generates_weights()) {
        if bytes > binding {
            return Err(GpuError::TooLarge { what, bytes, limit: binding });
        }
    }
    let readback = sizes.readback();
    if readback > limits.max_buffer_size {
        return Err(GpuError::TooLarge { what: "readback", bytes: readback, limit: limits.max_buffer_size });
    }
    let (n, h) = (config.seq_len as u32, config.num_heads as u32);
    let groups = limits.max_compute_workgroups_per_dimension;
    if n > groups || h > groups {
        return Err(GpuError::TooLarge { what: "dispatch", bytes: n.max(h) as u64, limit: groups as u64 });
    }
    Ok(())
}

/// Where a pass's weights come from.
#[derive(Clone, Copy)]
enum WeightSource<'w> {
    /// Matrices uploaded to the plan's weight buffers.
    Stored(&'w Weights),
    /// Generated in the matrix-product kernel from the seed.
    Generated(GeneratedWeights),
}

impl WeightSource<'_> {
    fn d_model(&self) -> usize {
        match self {
            WeightSource::Stored(w) => w.d_model,
            WeightSource::Generated(g) => g.d_model,
        }
    }

    fn generated(&self) -> Option<GeneratedWeights> {
        match self {
            WeightSource::Stored(_) => None,
            WeightSource::Generated(g) => Some(*g),
        }
    }
}

/// Which of the context's pipelines a dispatch runs.
#[derive(Clone, Copy)]
enum Pipeline {
    Matmul,
    Attention,
}

/// One dispatch of a plan: the pipeline, its bind group and its workgroup counts.
type Dispatch = (Pipeline, wgpu::BindGroup, (u32, u32, u32));

/// Buffers and bind groups for one configuration (and, for generated weights, one seed).
pub(super) struct Plan {
    config: ModelConfig,
    generated: Option<GeneratedWeights>,
    x: wgpu::Buffer,
    qkv: wgpu::Buffer,
    /// `W_qkv` and `W_o`, when they are stored.
    weights: Option<(wgpu::Buffer, wgpu::Buffer)>,
    attn: wgpu::Buffer,
    heads: wgpu::Buffer,
    contrib: wgpu::Buffer,
    groups: [wgpu::BindGroup; 3],
    /// The head-by-head dispatches, built the first time a loop over heads runs.
    by_head: std::cell::OnceCell<Vec<Dispatch>>,
    /// Every buffer above and the uniforms, destroyed with the plan.
    owned: Owned,
}

impl Plan {
    /// The matrix-product pipeline of this plan's weights (stored, or generated in the kernel).
    pub(super) fn matmul<'c>(&self, ctx: &'c GpuContext) -> &'c wgpu::ComputePipeline {
        if self.generated.is_some() {
            &ctx.matmul_generated
        } else {
            &ctx.matmul
        }
    }

    /// The three dispatches of a pass: pipeline, bind group and workgroup counts.
    pub(super) fn dispatches<'a>(
        &'a self,
        ctx: &'a GpuContext,
    ) -> [(&'a wgpu::ComputePipeline, &'a wgpu::BindGroup, (u32, u32, u32)); 3] {
        let (n, d, h) = (self.config.seq_len, self.config.d_model, self.config.num_heads);
        [
            (self.matmul(ctx), &self.groups[0], (tiles(3 * d), tiles(n), 1)),
            (&ctx.attention, &self.groups[1], (n as u32, h as u32, 1)),
            (self.matmul(ctx), &self.groups[2], (tiles(d), tiles(n), h as u32)),
        ]
    }
}

impl Plan {
    /// The same pass as [`Plan::dispatches`] with the heads one after another, as a loop over
    /// heads would run them: per head, `Q_h`, `K_h` and `V_h` each from its own slice of `W_qkv`,
    /// the head's attention, and its output projection: `5 H` dispatches instead of 3. Stored
    /// weights only. Built once per plan (their uniforms and bind groups are the plan's).
    fn by_head_dispatches<'a>(
        &'a self,
        ctx: &'a GpuContext,
    ) -> Vec<(&'a wgpu::ComputePipeline, &'a wgpu::BindGroup, (u32, u32, u32))> {
        let list = self.by_head.get_or_init(|| self.build_by_head(ctx));
        let pipeline = |p: Pipeline| match p {
            Pipeline::Matmul => &ctx.matmul,
            Pipeline::Attention => &ctx.attention,
        };
        list.iter().map(|(p, group, size)| (pipeline(*p), group, *size)).collect()
    }

    fn build_by_head(&self, ctx: &GpuContext) -> Vec<Dispatch> {
        let (w_qkv, w_o) = self.weights.as_ref().expect("a loop over heads runs on stored weights");
        let (dev, q) = (&ctx.device, &ctx.queue);
        let c = &self.config;
        let (n, d, h_count, d_k) = (c.seq_len as u32, c.d_model as u32, c.num_heads as u32, c.d_k() as u32);
        let qkv = &self.qkv;
        let uniform = |label, bytes: &[u8]| self.owned.keep(resources::uniform(dev, q, label, bytes));
        let group =
            |pipeline, buffers: &[(u32, &wgpu::Buffer)]| resources::bind_group(dev, pipeline, buffers);
        let mut list = Vec::with_capacity(5 * h_count as usize);
        for h in 0..h_count {
            for which in 0..3 {
                let col = which * d + h * d_k;
                let params = MatmulParams {
                    m: n,
                    n: d_k,
                    k: d,
                    batch: 1,
                    a: [0, d, 1, 0],
                    b: [col, 3 * d, 1, 0],
                    c_off: col,
                    c_rs: 3 * d,
                    c_bs: 0,
                    alpha: 1.0,
                };
                let u = uniform("head projection params", bytemuck::bytes_of(&params));
                let g = group(&ctx.matmul, &[(0, &u), (1, &self.x), (2, w_qkv), (3, qkv)]);
                list.push((Pipeline::Matmul, g, (tiles(d_k as usize), tiles(n as usize), 1)));
            }
            let att = uniform(
                "head attention params",
                bytemuck::bytes_of(&AttentionParams::for_head(n, d, d_k, h_count, h)),
            );
            let g = group(&ctx.attention, &[(0, &att), (1, qkv), (2, &self.attn), (3, &self.heads)]);
            list.push((Pipeline::Attention, g, (n, 1, 1)));
            let params = MatmulParams {
                m: n,
                n: d,
                k: d_k,
                batch: 1,
                a: [h * d_k, d, 1, 0],
                b: [h * d_k * d, d, 1, 0],
                c_off: h * n * d,
                c_rs: d,
                c_bs: 0,
                alpha: 1.0,
            };
            let u = uniform("head output params", bytemuck::bytes_of(&params));
            let g = group(&ctx.matmul, &[(0, &u), (1, &self.heads), (2, w_o), (3, &self.contrib)]);
            list.push((Pipeline::Matmul, g, (tiles(d as usize), tiles(n as usize), 1)));
        }
        list
    }
}

/// `QKV (n x 3d) = x (n x d) @ W_qkv (d x 3d)`.
fn qkv_params(n: u32, d: u32) -> MatmulParams {
    MatmulParams {
        m: n,
        n: 3 * d,
        k: d,
        batch: 1,
        a: [0, d, 1, 0],
        b: [0, 3 * d, 1, 0],
        c_off: 0,
        c_rs: 3 * d,
        c_bs: 0,
        alpha: 1.0,
    }
}

/// For every head z: `C_z (n x d) = O_z (n x d_k, columns z*d_k of heads) @ W_o rows z*d_k..`.
fn output_params(n: u32, d: u32, h: u32, d_k: u32) -> MatmulParams {
    MatmulParams {
        m: n,
        n: d,
        k: d_k,
        batch: h,
        a: [0, d, 1, d_k],
        b: [0, d, 1, d_k * d],
        c_off: 0,
        c_rs: d,
        c_bs: n * d,
        alpha: 1.0,
    }
}

impl GpuContext {
    fn plan(&self, config: &ModelConfig, generated: Option<GeneratedWeights>) -> Result<Plan, GpuError> {
        check_fits(config, &self.limits)?;
        let (dev, q) = (&self.device, &self.queue);
        let owned = Owned::default();
        let sizes = buffer_sizes(config);
        let storage = |label, bytes, extra| owned.keep(resources::storage(dev, label, bytes, extra));
        let upload = wgpu::BufferUsages::COPY_DST;
        let download = wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
        let x = storage("input", sizes.input, upload);
        let qkv = storage("QKV", sizes.qkv, wgpu::BufferUsages::empty());
        let attn = storage("attention weights", sizes.attention, download);
        let heads = storage("head outputs", sizes.heads, download);
        let contrib = storage("per-head contributions", sizes.contributions, download);

        let (n, d, h, d_k) =
            (config.seq_len as u32, config.d_model as u32, config.num_heads as u32, config.d_k() as u32);
        let uniform = |label, bytes: &[u8]| owned.keep(resources::uniform(dev, q, label, bytes));
        let u_qkv = uniform("qkv params", bytemuck::bytes_of(&qkv_params(n, d)));
        let u_out = uniform("output params", bytemuck::bytes_of(&output_params(n, d, h, d_k)));
        let u_att = uniform("attention params", bytemuck::bytes_of(&AttentionParams::new(n, d, d_k, h)));
        let group =
            |pipeline, buffers: &[(u32, &wgpu::Buffer)]| resources::bind_group(dev, pipeline, buffers);
        let attention = group(&self.attention, &[(0, &u_att), (1, &qkv), (2, &attn), (3, &heads)]);
        let (weights, groups) = match generated {
            None => {
                let (w_qkv, w_o) = (storage("W_qkv", sizes.w_qkv, upload), storage("W_o", sizes.w_o, upload));
                let groups = [
                    group(&self.matmul, &[(0, &u_qkv), (1, &x), (2, &w_qkv), (3, &qkv)]),
                    attention,
                    group(&self.matmul, &[(0, &u_out), (1, &heads), (2, &w_o), (3, &contrib)]),
                ];
                (Some((w_qkv, w_o)), groups)
            }
            // Generated weights: binding 4 holds the generator's keys instead of a B buffer.
            Some(g) => {
                let keys = |m: crate::attention::synthetic::GeneratedMatrix| {
                    let (k1, k2) = m.stream.keys();
                    GeneratorParams { k1, k2, bound: m.bound, _pad: 0 }
                };
                let g_qkv = uniform("W_qkv generator", bytemuck::bytes_of(&keys(g.w_qkv())));
                let g_o = uniform("W_o generator", bytemuck::bytes_of(&keys(g.w_o())));
                let mm = &self.matmul_generated;
                let groups = [
                    group(mm, &[(0, &u_qkv), (1, &x), (3, &qkv), (4, &g_qkv)]),
                    attention,
                    group(mm, &[(0, &u_out), (1, &heads), (3, &contrib), (4, &g_o)]),
                ];
                (None, groups)
            }
        };
        let by_head = std::cell::OnceCell::new();
        Ok(Plan { config: *config, generated, x, qkv, weights, attn, heads, contrib, groups, by_head, owned })
    }

    /// One forward pass of `config` on `x` with `weights`, with the same contract and result
    /// layout as [`crate::cpu::forward`].
    pub async fn forward(
        &self,
        config: &ModelConfig,
        x: &[f32],
        weights: &Weights,
    ) -> Result<Forward, GpuError> {
        self.run(config, x, WeightSource::Stored(weights)).await
    }

    /// [`GpuContext::forward`] with every weight generated inside the matrix-product kernel
    /// from the seed (`matmul_generated_b.wgsl`): no weight buffer exists.
    pub async fn forward_generated(
        &self,
        config: &ModelConfig,
        x: &[f32],
        weights: GeneratedWeights,
    ) -> Result<Forward, GpuError> {
        self.run(config, x, WeightSource::Generated(weights)).await
    }

    /// [`GpuContext::forward`] or [`GpuContext::forward_generated`], as `weights` says.
    pub async fn forward_layer(
        &self,
        config: &ModelConfig,
        x: &[f32],
        weights: &LayerWeights,
    ) -> Result<Forward, GpuError> {
        let source = match weights {
            LayerWeights::Stored(w) => WeightSource::Stored(w),
            LayerWeights::Generated(g) => WeightSource::Generated(*g),
        };
        self.run(config, x, source).await
    }

    /// The same pass as [`GpuContext::forward`] with the heads dispatched one after another
    /// (see `Plan::by_head_dispatches`): what the code walk times the batched pass against.
    pub async fn forward_head_by_head(
        &self,
        config: &ModelConfig,
        x: &[f32],
        weights: &Weights,
    ) -> Result<Forward, GpuError> {
        self.run_as(config, x, WeightSource::Stored(weights), true).await
    }

    async fn run(
        &self,
        config: &ModelConfig,
        x: &[f32],
        weights: WeightSource<'_>,
    ) -> Result<Forward, GpuError> {
        self.run_as(config, x, weights, false).await
    }

    async fn run_as(
        &self,
        config: &ModelConfig,
        x: &[f32],
        weights: WeightSource<'_>,
        by_head: bool,
    ) -> Result<Forward, GpuError> {
        let (n, d, h) = (config.seq_len, config.d_model, config.num_heads);
        assert_eq!(x.len(), n * d, "x must be seq_len x d_model");
        assert_eq!(weights.d_model(), d, "weights are for another d_model");
        self.check()?;

        let plan = self.ensure_plan(config, weights.generated()).await?;
        // A readback buffer per call: a second forward started while this one awaits its
        // readback (the reader moved a slider) must not find the buffer already mapped. The
        // queue runs submissions in order, so sharing the other buffers is safe.
        let sizes = buffer_sizes(config);
        let pass_buffers = Owned::default();
        let readback = pass_buffers.keep(resources::readback(&self.device, sizes.readback()));

        let q = &self.queue;
        q.write_buffer(&plan.x, 0, bytemuck::cast_slice(x));
        if let (Some((w_qkv, w_o)), WeightSource::Stored(weights)) = (&plan.weights, weights) {
            q.write_buffer(w_qkv, 0, bytemuck::cast_slice(&weights.w_qkv));
            q.write_buffer(w_o, 0, bytemuck::cast_slice(&weights.w_o));
        }

        let mut enc =
            self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("forward") });
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("forward"),
                timestamp_writes: None,
            });
            let dispatches =
                if by_head { plan.by_head_dispatches(self) } else { plan.dispatches(self).to_vec() };
            for (pipeline, group, (gx, gy, gz)) in dispatches {
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, group, &[]);
                pass.dispatch_workgroups(gx, gy, gz);
            }
        }
        enc.copy_buffer_to_buffer(&plan.attn, 0, &readback, 0, sizes.attention);
        enc.copy_buffer_to_buffer(&plan.heads, 0, &readback, sizes.attention, sizes.heads);
        enc.copy_buffer_to_buffer(
            &plan.contrib,
            0,
            &readback,
            sizes.attention + sizes.heads,
            sizes.contributions,
        );
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        q.submit([enc.finish()]);
        if let Some(e) = scope.pop().await {
            return Err(GpuError::Internal(e.to_string()));
        }

        drop(plan);
        let data = self.read(&readback, sizes.readback()).await?;
        self.check()?;
        let (attn_len, heads_len) = (h * n * n, n * d);
        let mut data = data.into_iter();
        let attention: Vec<f32> = data.by_ref().take(attn_len).collect();
        let heads: Vec<f32> = data.by_ref().take(heads_len).collect();
        let contributions = Contributions { num_heads: h, seq_len: n, d_model: d, data: data.collect() };
        let output = contributions.recompose(&HeadSet::all(h));
        Ok(Forward { config: *config, attention, heads, contributions, output })
    }

    /// Builds (or keeps) the buffers and bind groups for `config`.
    async fn ensure_plan(
        &self,
        config: &ModelConfig,
        generated: Option<GeneratedWeights>,
    ) -> Result<Rc<Plan>, GpuError> {
        if let Some(plan) =
            self.plan.borrow().as_ref().filter(|p| p.config == *config && p.generated == generated)
        {
            return Ok(plan.clone());
        }
        // Drop the old buffers first, then build the new ones under an out-of-memory scope.
        self.plan.replace(None);
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let plan = self.plan(config, generated);
        if let Some(e) = scope.pop().await {
            return Err(GpuError::OutOfMemory(e.to_string()));
        }
        let plan = Rc::new(plan?);
        self.plan.replace(Some(plan.clone()));
        Ok(plan)
    }

    /// Overwrites the output buffers of `config`'s plan with `value`, so a test can prove the
    /// next forward pass writes every element (WebGPU zero-fills new buffers, which would hide
    /// an unwritten element).
    pub async fn fill_outputs(
        &self,
        config: &ModelConfig,
        generated: Option<GeneratedWeights>,
        value: f32,
    ) -> Result<(), GpuError> {
        let plan = self.ensure_plan(config, generated).await?;
        for buffer in [&plan.attn, &plan.heads, &plan.contrib] {
            let fill = vec![value; (buffer.size() / F32) as usize];
            self.queue.write_buffer(buffer, 0, bytemuck::cast_slice(&fill));
        }
        self.queue.submit([]);
        Ok(())
    }

    /// The plan of the last configuration run, if any.
    #[cfg(feature = "bench")]
    pub(super) fn current_plan(&self) -> Option<Rc<Plan>> {
        self.plan.borrow().clone()
    }

    /// Fails with the recorded device loss or error, if any (after losing the device first when
    /// [`super::Fault::DeviceLoss`] is armed).
    pub(super) fn check(&self) -> Result<(), GpuError> {
        if super::take_fault(super::Fault::DeviceLoss) {
            self.destroy();
        }
        self.failure().map_or(Ok(()), Err)
    }

    /// Maps the first `bytes` of `buffer` and copies them out as f32s: the one readback path, on
    /// the web and natively.
    pub(super) async fn read(&self, buffer: &wgpu::Buffer, bytes: u64) -> Result<Vec<f32>, GpuError> {
        Ok(bytemuck::cast_slice::<u8, f32>(&self.read_bytes(buffer, bytes).await?).to_vec())
    }

    /// Maps the first `bytes` of `buffer` and copies them out.
    pub(super) async fn read_bytes(&self, buffer: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>, GpuError> {
        if super::take_fault(super::Fault::Map) {
            // A destroyed buffer cannot be mapped: the map request itself fails, as it would
            // after an out-of-memory or a lost context.
            buffer.destroy();
        }
        let (tx, rx) = futures_channel::oneshot::channel();
        buffer.map_async(wgpu::MapMode::Read, ..bytes, move |result| {
            let _ = tx.send(result);
        });
        // Natively nothing makes progress unless polled; in the browser the event loop does it.
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| self.lost_or(GpuError::Readback(e.to_string())))?;
        let mapped = rx.await.map_err(|_| GpuError::Readback("the map request was dropped".into()))?;
        mapped.map_err(|e| self.lost_or(GpuError::Readback(e.to_string())))?;
        let data = {
            let view = buffer.get_mapped_range(..bytes).map_err(|e| GpuError::Readback(e.to_string()))?;
            view.to_vec()
        };
        buffer.unmap();
        Ok(data)
    }

    /// A recorded device loss explains a failure better than the failure itself.
    fn lost_or(&self, err: GpuError) -> GpuError {
        self.failure().unwrap_or(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_over_the_binding_limit_are_refused_by_name() {
        let limits = wgpu::Limits::default(); // 128 MiB bindings, 256 MiB buffers
        let bert = ModelConfig { d_model: 768, num_heads: 12, seq_len: 512 };
        assert_eq!(check_fits(&bert, &limits), Ok(()));
        // GPT-2 Large at 1024 tokens: 20 x 1024 x 1280 floats of contributions = 100 MiB, fits;
        // 2048-wide with 32 heads at 640 tokens needs 160 MiB of them.
        let gpt2_large = ModelConfig { d_model: 1280, num_heads: 20, seq_len: 1024 };
        assert_eq!(check_fits(&gpt2_large, &limits), Ok(()));
        let big = ModelConfig { d_model: 2048, num_heads: 32, seq_len: 640 };
        match check_fits(&big, &limits) {
            Err(GpuError::TooLarge { what, bytes, limit }) => {
                assert_eq!(what, "per-head contributions");
                assert_eq!(bytes, 4 * 32 * 640 * 2048);
                assert_eq!(limit, 128 << 20);
            }
            other => panic!("{other:?}"),
        }
        let msg = check_fits(&big, &limits).unwrap_err().to_string();
        assert!(msg.contains("160.0 MiB, over this GPU's limit of 128.0 MiB"), "{msg}");
    }

    #[test]
    fn uniform_layouts_match_the_shaders() {
        // 16 u32/f32 fields in matmul.wgsl; attention.wgsl's 5 fields padded to 32 bytes.
        assert_eq!(std::mem::size_of::<MatmulParams>(), 64);
        assert_eq!(std::mem::size_of::<AttentionParams>(), 32);
    }
}
