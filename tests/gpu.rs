//! The WebGPU backend natively: every shader validated by naga with WebGPU's capabilities, and
//! the forward pass on a real adapter (Mesa's lavapipe in CI) against the f64 oracle over the
//! same shape table as the CPU kernel. No adapter is a failure, not a skip: scripts/test.sh
//! installs lavapipe (`mesa-vulkan-drivers`).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::{case, check_forward, shape_table};
use headlab::attention::config::MAX_SEQ_LEN;
use headlab::attention::ModelConfig;
use headlab::gpu::{shaders, GpuContext, GpuError};

/// GPU results must match the f64 oracle to this normwise relative error.
const GPU_TOLERANCE: f64 = 1e-4;

#[test]
fn every_shader_parses_and_validates_for_webgpu() {
    for (name, source) in shaders::ALL {
        let module = naga::front::wgsl::parse_str(source)
            .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(source)));
        // naga's default capabilities are WebGPU's baseline.
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::default(),
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(source)));
    }
}

#[test]
fn attention_shader_row_buffer_covers_the_longest_sequence() {
    let line = format!("const MAX_SEQ: u32 = {MAX_SEQ_LEN}u;");
    assert!(shaders::ATTENTION.contains(&line), "attention.wgsl must declare `{line}`");
}

fn context() -> GpuContext {
    let ctx = pollster::block_on(GpuContext::acquire()).unwrap_or_else(|e| {
        panic!("no GPU adapter for the native GPU tests ({e}); install mesa-vulkan-drivers (lavapipe)")
    });
    println!("GPU adapter under test: {}", ctx.adapter_label());
    ctx
}

#[test]
fn forward_matches_oracle_on_the_shape_table() {
    let ctx = context();
    let mut worst = 0.0f64;
    for config in shape_table() {
        let (weights, inputs) = case(&config, 7);
        // Poison the output buffers so an element the kernels skip shows up as NaN.
        pollster::block_on(ctx.fill_outputs(&config, None, f32::NAN)).unwrap();
        let got = pollster::block_on(ctx.forward(&config, &inputs.x, &weights)).unwrap();
        worst = worst.max(check_forward("gpu", &config, &inputs, &weights, &got, GPU_TOLERANCE));
    }
    println!("GPU ({}): worst relative error vs f64 oracle {worst:.2e}", ctx.adapter_label());
}

#[test]
fn the_heads_dispatched_one_by_one_give_the_batched_pass_on_the_shape_table() {
    let ctx = context();
    let mut worst = 0.0f64;
    for config in shape_table() {
        let (weights, inputs) = case(&config, 11);
        pollster::block_on(ctx.fill_outputs(&config, None, f32::NAN)).unwrap();
        let looped = pollster::block_on(ctx.forward_head_by_head(&config, &inputs.x, &weights)).unwrap();
        worst =
            worst.max(check_forward("gpu, head by head", &config, &inputs, &weights, &looped, GPU_TOLERANCE));
        let batched = pollster::block_on(ctx.forward(&config, &inputs.x, &weights)).unwrap();
        assert_eq!(looped.output, batched.output, "{config:?}: the same sums on the same kernels");
    }
    println!("GPU head by head ({}): worst relative error vs f64 oracle {worst:.2e}", ctx.adapter_label());
}

#[test]
fn generated_weights_on_the_gpu_match_the_oracle_of_the_stored_ones() {
    use headlab::attention::GeneratedWeights;
    let ctx = context();
    let mut worst = 0.0f64;
    for config in shape_table() {
        let (weights, inputs) = case(&config, 7);
        let generated = GeneratedWeights { d_model: config.d_model, seed: 7 };
        pollster::block_on(ctx.fill_outputs(&config, Some(generated), f32::NAN)).unwrap();
        let got = pollster::block_on(ctx.forward_generated(&config, &inputs.x, generated)).unwrap();
        worst = worst.max(check_forward("gpu, generated", &config, &inputs, &weights, &got, GPU_TOLERANCE));
        // The kernel generates each weight bit for bit as the CPU does, so the stored path on
        // the same device gives the same numbers.
        let stored = pollster::block_on(ctx.forward(&config, &inputs.x, &weights)).unwrap();
        assert_eq!(got.output, stored.output, "{config:?}");
    }
    println!("GPU, generated weights: worst relative error vs f64 oracle {worst:.2e}");
}

#[test]
fn gpu_and_cpu_agree_at_the_largest_supported_sequence() {
    let ctx = context();
    let config = ModelConfig { d_model: 64, num_heads: 2, seq_len: MAX_SEQ_LEN };
    let (weights, inputs) = case(&config, 3);
    let gpu = pollster::block_on(ctx.forward(&config, &inputs.x, &weights)).unwrap();
    let cpu = headlab::cpu::forward(headlab::cpu::Kernel::Simd, &config, &inputs.x, &weights);
    let cpu64: Vec<f64> = cpu.output.iter().map(|&v| v as f64).collect();
    common::assert_close("gpu vs cpu output", &gpu.output, &cpu64, GPU_TOLERANCE);
    let cpu_attn: Vec<f64> = cpu.attention.iter().map(|&v| v as f64).collect();
    common::assert_close("gpu vs cpu attention", &gpu.attention, &cpu_attn, GPU_TOLERANCE);
}

#[test]
fn a_lost_device_is_a_typed_error_not_a_panic() {
    let ctx = context();
    let config = ModelConfig { d_model: 16, num_heads: 2, seq_len: 5 };
    let (weights, inputs) = case(&config, 1);
    pollster::block_on(ctx.forward(&config, &inputs.x, &weights)).unwrap();
    ctx.destroy();
    let err = pollster::block_on(ctx.forward(&config, &inputs.x, &weights)).unwrap_err();
    assert!(matches!(err, GpuError::DeviceLost(_)), "{err:?}");
    assert!(err.to_string().contains("device was lost"), "{err}");
}

/// Milliseconds since the first call: the native tests' clock.
fn elapsed_ms() -> f64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64() * 1e3
}

#[test]
fn an_automatic_session_runs_each_pass_where_it_measured_it_faster() {
    use headlab::backend::{self, Place, Preference, Session};
    let pass = |session: &Session, seq_len: usize| {
        let config = ModelConfig { d_model: 96, num_heads: 12, seq_len };
        pollster::block_on(backend::run(session, config, 7, &elapsed_ms, async |_| true)).unwrap()
    };
    let cpu = pollster::block_on(Session::start(Preference::Cpu, false));
    let auto = pollster::block_on(Session::start(Preference::Auto, false));
    assert!(auto.gpu().is_some(), "the automatic session found the adapter");
    assert!(auto.placement_label().ends_with(", measured per pass"), "{}", auto.placement_label());
    let mut crossing = None;
    for seq_len in [5, 64, 300] {
        let run = pass(&auto, seq_len);
        let choice = run.choice.expect("an automatic session with a GPU chooses by measurement");
        println!("d_model 96, 12 heads, {seq_len} tokens on {}: {}", run.backend.label(), choice.why());
        assert!(choice.cpu_ms.is_finite() && choice.gpu_ms.is_finite() && choice.cpu_ms > 0.0);
        assert_eq!(run.backend.is_gpu(), choice.place == Place::Gpu);
        assert_eq!(choice.place == Place::Gpu, choice.gpu_ms < choice.cpu_ms);
        assert!(run.badge().ends_with("· measured faster here"), "{}", run.badge());
        // One calibration per shape: every length is placed on the same lines.
        assert_eq!(*crossing.get_or_insert(choice.gpu_from), choice.gpu_from);
        let want = pass(&cpu, seq_len);
        let scale = want.forward.output.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let worst = run
            .forward
            .output
            .iter()
            .zip(&want.forward.output)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(worst <= 1e-4 * scale, "{seq_len} tokens: {worst} from the CPU kernel's output");
    }
    // Forced, the GPU runs every pass and nothing is measured.
    let forced = pollster::block_on(Session::start(Preference::Gpu, false));
    let run = pass(&forced, 5);
    assert!(run.backend.is_gpu() && run.choice.is_none() && !run.badge().contains("measured"));
}
