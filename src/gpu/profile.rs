//! Timing the GPU path for the benchmark: each dispatch of a forward pass with timestamp
//! queries (where the adapter has them), and the adapter's matrix-product peak measured with the
//! same kernel on a large square product.

use super::forward::MatmulParams;
use super::resources::{self, tiles};
use super::{GpuContext, GpuError};
use crate::attention::{ModelConfig, Weights};

/// GPU time of each of a forward pass's three dispatches, milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DispatchTimes {
    /// `QKV = x @ W_qkv`.
    pub qkv_ms: f64,
    /// Scores, softmax and weighted sum for every head.
    pub attention_ms: f64,
    /// Every head's output projection.
    pub output_ms: f64,
}

impl DispatchTimes {
    /// The three together.
    pub fn total_ms(&self) -> f64 {
        self.qkv_ms + self.attention_ms + self.output_ms
    }
}

impl GpuContext {
    /// Whether the device records timestamps (`timestamp-query`).
    pub fn has_timestamps(&self) -> bool {
        self.device.features().contains(wgpu::Features::TIMESTAMP_QUERY)
    }

    fn timestamps(&self, count: u32) -> (wgpu::QuerySet, wgpu::Buffer, wgpu::Buffer) {
        let set = self.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("timestamps"),
            ty: wgpu::QueryType::Timestamp,
            count,
        });
        let bytes = 8 * count as u64;
        let resolve = resources::buffer(
            &self.device,
            "timestamps",
            bytes,
            wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        );
        let read = resources::readback(&self.device, bytes);
        (set, resolve, read)
    }

    /// Milliseconds between consecutive pairs of resolved timestamps.
    async fn intervals(&self, read: &wgpu::Buffer) -> Result<Vec<f64>, GpuError> {
        let bytes = self.read_bytes(read, read.size()).await?;
        let ticks: &[u64] = bytemuck::cast_slice(&bytes);
        let period_ns = self.queue.get_timestamp_period() as f64;
        Ok(ticks.chunks_exact(2).map(|t| t[1].saturating_sub(t[0]) as f64 * period_ns / 1e6).collect())
    }

    /// Runs `config`'s three dispatches, each in its own timed compute pass; `None` without
    /// timestamp queries.
    pub async fn time_dispatches(
        &self,
        config: &ModelConfig,
        x: &[f32],
        weights: &Weights,
    ) -> Result<Option<DispatchTimes>, GpuError> {
        if !self.has_timestamps() {
            return Ok(None);
        }
        // A full pass first: it builds (or reuses) the plan and uploads x and the weights.
        self.forward(config, x, weights).await?;
        let plan =
            self.current_plan().ok_or_else(|| GpuError::Internal("no plan after a forward pass".into()))?;
        let (set, resolve, read) = self.timestamps(6);
        let mut enc =
            self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("timed") });
        for (i, (pipeline, group, (gx, gy, gz))) in plan.dispatches(self).into_iter().enumerate() {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("timed dispatch"),
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &set,
                    beginning_of_pass_write_index: Some(2 * i as u32),
                    end_of_pass_write_index: Some(2 * i as u32 + 1),
                }),
            });
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, group, &[]);
            pass.dispatch_workgroups(gx, gy, gz);
        }
        enc.resolve_query_set(&set, 0..6, &resolve, 0);
        enc.copy_buffer_to_buffer(&resolve, 0, &read, 0, 48);
        self.queue.submit([enc.finish()]);
        let t = self.intervals(&read).await?;
        self.check()?;
        Ok(Some(DispatchTimes { qkv_ms: t[0], attention_ms: t[1], output_ms: t[2] }))
    }

    /// GPU milliseconds of one `size x size x size` product on the forward pass's matrix-product
    /// kernel (the median of `rounds` after a warm-up); `None` without timestamp queries.
    pub async fn time_square_matmul(&self, size: u32, rounds: usize) -> Result<Option<f64>, GpuError> {
        if !self.has_timestamps() {
            return Ok(None);
        }
        let dev = &self.device;
        let bytes = 4 * size as u64 * size as u64;
        let binding = self.limits.max_storage_buffer_binding_size.min(self.limits.max_buffer_size);
        if bytes > binding {
            return Err(GpuError::TooLarge { what: "square product", bytes, limit: binding });
        }
        let storage = |label| resources::storage(dev, label, bytes, wgpu::BufferUsages::empty());
        let (a, b, c) = (storage("a"), storage("b"), storage("c"));
        let params = MatmulParams {
            m: size,
            n: size,
            k: size,
            batch: 1,
            a: [0, size, 1, 0],
            b: [0, size, 1, 0],
            c_off: 0,
            c_rs: size,
            c_bs: 0,
            alpha: 1.0,
        };
        let uniform = resources::uniform(dev, &self.queue, "square params", bytemuck::bytes_of(&params));
        let group = resources::bind_in_order(dev, &self.matmul, &[&uniform, &a, &b, &c]);
        let mut times = Vec::new();
        for round in 0..=rounds.max(1) {
            let (set, resolve, read) = self.timestamps(2);
            let mut enc =
                dev.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("square") });
            {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("square product"),
                    timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                        query_set: &set,
                        beginning_of_pass_write_index: Some(0),
                        end_of_pass_write_index: Some(1),
                    }),
                });
                pass.set_pipeline(&self.matmul);
                pass.set_bind_group(0, &group, &[]);
                let t = tiles(size as usize);
                pass.dispatch_workgroups(t, t, 1);
            }
            enc.resolve_query_set(&set, 0..2, &resolve, 0);
            enc.copy_buffer_to_buffer(&resolve, 0, &read, 0, 16);
            self.queue.submit([enc.finish()]);
            let t = self.intervals(&read).await?[0];
            if round > 0 {
                times.push(t);
            }
        }
        self.check()?;
        Ok(crate::attention::stats::median(&times))
    }
}
