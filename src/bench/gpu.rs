//! The GPU benchmark (`bench/native/gpu.rs`): the adapter's matrix-product peak, then per
//! configuration the end-to-end forward time and each dispatch's GPU time.

use super::median;
use crate::attention::{Inputs, ModelConfig, Weights};

/// The GPU benchmark: the adapter's matrix-product peak (a `peak_size` cube on the forward
/// pass's own kernel), then for each configuration the end-to-end forward time (upload, three
/// dispatches, readback; wall clock) and each dispatch's GPU time from timestamp queries, with
/// GFLOP/s against that peak. `now` is a millisecond clock. Natively: `bench/native/gpu.rs`.
pub async fn gpu_report(
    ctx: &crate::gpu::GpuContext,
    now: &dyn Fn() -> f64,
    configs: &[ModelConfig],
    peak_size: u32,
    rounds: usize,
) -> Result<String, crate::gpu::GpuError> {
    let mut text = format!(
        "GPU: {} (timestamp queries: {}); 3 dispatches per forward pass (QKV projection, fused attention, output projection)\n",
        ctx.adapter_label(),
        if ctx.has_timestamps() { "yes" } else { "no: wall-clock times only" }
    );
    let peak = match ctx.time_square_matmul(peak_size, rounds).await? {
        Some(ms) => {
            let gflops = 2.0 * (peak_size as f64).powi(3) / 1e6 / ms;
            text += &format!(
                "matrix-product peak ({peak_size}^3 on matmul.wgsl): {ms:.3} ms, {gflops:.1} GFLOP/s\n"
            );
            Some(gflops)
        }
        None => None,
    };
    text += "| config | n | end-to-end ms | QKV ms | attention ms | output ms | GPU GFLOP/s | of peak |\n";
    text += "|---|---:|---:|---:|---:|---:|---:|---:|\n";
    for config in configs {
        let weights = Weights::generate(config.d_model, 42);
        let inputs = Inputs::generate(config, 42);
        ctx.forward(config, &inputs.x, &weights).await?; // warm-up: buffers and pipelines
        let (mut wall, mut gpu) = (Vec::new(), Vec::new());
        for _ in 0..rounds.max(1) {
            let t0 = now();
            ctx.forward(config, &inputs.x, &weights).await?;
            wall.push(now() - t0);
            if let Some(t) = ctx.time_dispatches(config, &inputs.x, &weights).await? {
                gpu.push(t);
            }
        }
        let flops = config.forward_flops() as f64;
        let cell = |f: &dyn Fn(&crate::gpu::DispatchTimes) -> f64| {
            if gpu.is_empty() {
                "-".to_string()
            } else {
                format!("{:.3}", median(gpu.iter().map(f).collect()))
            }
        };
        let total = (!gpu.is_empty()).then(|| median(gpu.iter().map(|t| t.total_ms()).collect()));
        let gflops = total.map(|ms| flops / 1e6 / ms);
        text += &format!(
            "| {}/{} | {} | {:.2} | {} | {} | {} | {} | {} |\n",
            config.d_model,
            config.num_heads,
            config.seq_len,
            median(wall),
            cell(&|t| t.qkv_ms),
            cell(&|t| t.attention_ms),
            cell(&|t| t.output_ms),
            gflops.map_or("-".into(), |g| format!("{g:.1}")),
            match (gflops, peak) {
                (Some(g), Some(p)) => format!("{:.0} %", 100.0 * g / p),
                _ => "-".into(),
            }
        );
    }
    Ok(text)
}
