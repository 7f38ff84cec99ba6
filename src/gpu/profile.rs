//! Timing the GPU path for the benchmark: each dispatch of a forward pass with timestamp
//! queries (where the adapter has them), and the adapter's matrix-product peak measured with the
//! same kernel on a large square product.

use super::forward::MatmulParams;
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
        let buffer = |usage| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("timestamps"),
                size: 8 * count as u64,
                usage,
                mapped_at_creation: false,
            })
        };
        let resolve = buffer(wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC);
        let read = buffer(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST);
        (set, resolve, read)
    }

    /// Milliseconds between consecutive pairs of resolved timestamps.
    async fn intervals(&self, read: &wgpu::Buffer) -> Result<Vec<f64>, GpuError> {
        let bytes = self.read_bytes(read).await?;
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
        let (n, d, h) = (config.seq_len, config.d_model, config.num_heads);
        let tiles = |extent: usize| extent.div_ceil(64) as u32;
        let (set, resolve, read) = self.timestamps(6);
        let mut enc =
            self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("timed") });
        let dispatches: [(&wgpu::ComputePipeline, (u32, u32, u32)); 3] = [
            (&self.matmul, (tiles(3 * d), tiles(n), 1)),
            (&self.attention, (n as u32, h as u32, 1)),
            (&self.matmul, (tiles(d), tiles(n), h as u32)),
        ];
        for (i, (pipeline, (gx, gy, gz))) in dispatches.into_iter().enumerate() {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("timed dispatch"),
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &set,
                    beginning_of_pass_write_index: Some(2 * i as u32),
                    end_of_pass_write_index: Some(2 * i as u32 + 1),
                }),
            });
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, plan.group(i), &[]);
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
        let storage = |label| {
            dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes,
                usage: wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            })
        };
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
        let uniform = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("square params"),
            size: std::mem::size_of::<MatmulParams>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.queue.write_buffer(&uniform, 0, bytemuck::bytes_of(&params));
        let group = dev.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &self.matmul.get_bind_group_layout(0),
            entries: &[&uniform, &a, &b, &c]
                .iter()
                .enumerate()
                .map(|(i, buf)| wgpu::BindGroupEntry { binding: i as u32, resource: buf.as_entire_binding() })
                .collect::<Vec<_>>(),
        });
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
                let tiles = size.div_ceil(64);
                pass.dispatch_workgroups(tiles, tiles, 1);
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
        times.sort_by(f64::total_cmp);
        Ok(Some(times[times.len() / 2]))
    }
}
