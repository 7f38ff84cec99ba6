//! The WebGPU backend inside a headless browser (`wasm-pack test --headless --chrome` and
//! `--firefox`): the forward pass against the f64 oracle on the browser's adapter, the fallback
//! when the browser has no WebGPU, and device loss.
//! Neither path is skipped silently. Chromium is started with `--enable-unsafe-webgpu` (by
//! webdriver.json) and must offer an adapter: a missing one fails there. An engine that offers
//! none (Firefox ESR headless, today) runs and checks the fallback in its place and says so.
#![cfg(target_arch = "wasm32")]

mod common;

use common::{case, check_forward};
use headlab::attention::ModelConfig;
use headlab::backend::{Backend, Preference};
use headlab::gpu::{GpuContext, GpuError};
use wasm_bindgen_test::{console_log, wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

/// The browser's user agent.
fn user_agent() -> String {
    web_sys::window().and_then(|w| w.navigator().user_agent().ok()).unwrap_or_default()
}

/// Whether this browser must offer a WebGPU adapter: headless Chromium does, with the flag
/// webdriver.json gives it.
fn must_offer_webgpu() -> bool {
    user_agent().contains("Chrome/")
}

/// The browser's WebGPU context, or None where an engine other than Chromium offers none; then
/// the automatic choice must be the CPU kernel with the reason shown in the page, which this
/// checks and logs in the test's place.
async fn webgpu_or_checked_fallback(test: &str) -> Option<GpuContext> {
    match GpuContext::acquire().await {
        Ok(ctx) => Some(ctx),
        Err(err) if !must_offer_webgpu() => {
            assert!(matches!(err, GpuError::NoWebGpu | GpuError::NoAdapter(_)), "{err:?}");
            let (backend, note) = Backend::select(Preference::Auto).await;
            assert_eq!(backend.label(), "CPU · wasm simd128");
            assert!(note.is_some(), "the page must say why it is not on the GPU");
            console_log!(
                "{test}: no WebGPU adapter here ({err}); ran the fallback instead: {} ({})",
                backend.label(),
                note.map(|n| n.to_string()).unwrap_or_default()
            );
            None
        }
        Err(err) => {
            panic!("headless Chromium with --enable-unsafe-webgpu offers WebGPU: {err} ({})", user_agent())
        }
    }
}

#[wasm_bindgen_test]
async fn webgpu_forward_matches_the_oracle_or_the_engine_runs_the_fallback() {
    let Some(ctx) = webgpu_or_checked_fallback("webgpu_forward_matches_the_oracle").await else { return };
    console_log!("WebGPU path ran on: {}", ctx.adapter_label());
    // A subset of the shape table (SwiftShader is slow): odd d_k, 1 token, 129 tokens, BERT width.
    let shapes = [(1, 4, 1), (3, 5, 7), (12, 7, 129), (8, 8, 64), (12, 64, 64)];
    let mut worst = 0.0f64;
    for (heads, d_k, seq_len) in shapes {
        let config = ModelConfig { d_model: heads * d_k, num_heads: heads, seq_len };
        let (weights, inputs) = case(&config, 5);
        ctx.fill_outputs(&config, None, f32::NAN).await.unwrap();
        let got = ctx.forward(&config, &inputs.x, &weights).await.unwrap();
        worst = worst.max(check_forward("webgpu", &config, &inputs, &weights, &got, 1e-4));
    }
    console_log!("WebGPU worst relative error vs f64 oracle: {worst:.2e}");
}

#[wasm_bindgen_test]
async fn a_browser_without_webgpu_falls_back_to_the_cpu_with_a_reason() {
    // Hide navigator.gpu for this test, as a browser without WebGPU would.
    let hide = js_sys::Function::new_no_args(
        "Object.defineProperty(navigator, 'gpu', { value: undefined, configurable: true });",
    );
    hide.call0(&wasm_bindgen::JsValue::NULL).unwrap();
    let (backend, note) = Backend::select(Preference::Auto).await;
    js_sys::Function::new_no_args("delete navigator.gpu;").call0(&wasm_bindgen::JsValue::NULL).unwrap();

    console_log!("fallback path ran: {} ({note:?})", backend.label());
    assert!(!backend.is_gpu());
    assert_eq!(backend.label(), "CPU · wasm simd128");
    assert_eq!(
        note.as_ref().map(ToString::to_string).as_deref(),
        Some("not using the GPU: this browser does not offer WebGPU")
    );
    assert!(!note.unwrap().retryable(), "without WebGPU, trying again cannot help");
    // And the CPU backend it chose computes.
    let config = ModelConfig { d_model: 15, num_heads: 3, seq_len: 7 };
    let (weights, inputs) = case(&config, 2);
    let got = backend.forward(&config, &inputs.x, &weights).await.unwrap();
    check_forward("fallback", &config, &inputs, &weights, &got, 1e-5);
}

#[wasm_bindgen_test]
async fn a_destroyed_device_is_reported_as_lost_or_the_engine_runs_the_fallback() {
    let Some(ctx) = webgpu_or_checked_fallback("a_destroyed_device_is_reported_as_lost").await else {
        return;
    };
    let config = ModelConfig { d_model: 16, num_heads: 2, seq_len: 5 };
    let (weights, inputs) = case(&config, 1);
    ctx.forward(&config, &inputs.x, &weights).await.unwrap();
    ctx.destroy();
    let err = ctx.forward(&config, &inputs.x, &weights).await.unwrap_err();
    assert!(matches!(err, GpuError::DeviceLost(_)), "{err:?}");
}
