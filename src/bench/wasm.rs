//! The benchmarks as wasm exports, for `bench/node.mjs` and `bench/ort.mjs` (which run them in
//! Node with `performance.now()` as the clock).

use wasm_bindgen::prelude::wasm_bindgen;

use super::{generated_report, normwise_error, profile, run};
use crate::attention::{HeadSet, Inputs, ModelConfig, Weights};
use crate::cpu::{self, Forward, Kernel};

#[wasm_bindgen]
extern "C" {
    /// `performance.now()`: milliseconds from the page's or process's time origin.
    #[wasm_bindgen(js_namespace = performance)]
    fn now() -> f64;
}

/// Runs the CPU benchmark and returns the report as text.
#[wasm_bindgen]
pub fn bench_report(
    d_model: usize,
    num_heads: usize,
    seq_len: usize,
    rounds: usize,
) -> Result<String, String> {
    let config = ModelConfig { d_model, num_heads, seq_len };
    config.validate().map_err(|e| e.to_string())?;
    Ok(run(&now, config, rounds).to_string())
}

/// [`super::trained::pruned_report`] on the page's model asset (`asset`, the bytes of
/// minilm-f16.bin) at `lengths` tokens.
#[wasm_bindgen]
pub fn bench_pruned(asset: &[u8], lengths: Vec<u32>, rounds: usize) -> Result<String, String> {
    let model = crate::model::MiniLm::from_asset(asset).map_err(|e| e.to_string())?;
    let lengths: Vec<usize> = lengths.iter().map(|&n| n as usize).collect();
    Ok(super::trained::pruned_report(&now, &model, &lengths, rounds))
}

/// One quality evaluation of the page's sentence pairs (`pairs`, the bytes of sts-pairs.tsv):
/// every sentence embedded by the model with `pruned` heads removed, in the curves' pieces of
/// [`crate::model::curves::SENTENCES_PER_STEP`] sentences; the median of `rounds`, and GFLOP/s.
#[wasm_bindgen]
pub fn bench_evaluation(
    asset: &[u8],
    pairs: &[u8],
    pruned: Vec<u32>,
    rounds: usize,
) -> Result<String, String> {
    use crate::model::bert::TOTAL_HEADS;
    use crate::model::work::{Done, Work};
    let model = crate::model::MiniLm::from_asset(asset).map_err(|e| e.to_string())?;
    let pairs = crate::model::task::Pairs::from_file(pairs).map_err(|e| e.to_string())?;
    let ids = pairs.ids(&model.tokenizer);
    let heads =
        HeadSet::with_pruned(TOTAL_HEADS, pruned.iter().map(|&h| h as usize).filter(|&h| h < TOTAL_HEADS));
    let pieces: Vec<Work> = ids
        .chunks(crate::model::curves::SENTENCES_PER_STEP)
        .map(|ids| Work::Embed { heads: heads.clone(), ids: ids.to_vec() })
        .collect();
    let mut times = Vec::new();
    let mut quality = 0.0;
    for _ in 0..rounds.max(1) {
        let t0 = now();
        let done = pieces.iter().map(|w| w.run(&model.bert, Kernel::Simd)).collect();
        quality = pairs.quality(&Done::embeddings(done));
        times.push(now() - t0);
    }
    let ms = crate::attention::stats::median(&times).unwrap_or(f64::NAN);
    let lengths: Vec<usize> = ids.iter().map(Vec::len).collect();
    let gflop = crate::model::pruned::cost(&heads, &lengths).total_flops as f64 / 1e9;
    Ok(format!(
        "one evaluation, {} pruned: {} sentences, {} tokens, {gflop:.1} GFLOP in {ms:.0} ms ({:.1} GFLOP/s), quality {quality:.6}",
        heads.pruned_count(),
        ids.len(),
        lengths.iter().sum::<usize>(),
        gflop / ms * 1e3
    ))
}

/// [`generated_report`] at `seq_len`.
#[wasm_bindgen]
pub fn bench_generated(seq_len: usize, rounds: usize) -> String {
    generated_report(&now, seq_len, rounds)
}

/// One benchmark shape, its seeded weights and inputs, and its forward pass, for JavaScript:
/// `bench/ort.mjs` hands the same weights to onnxruntime-web and times both in one process.
#[wasm_bindgen]
pub struct MhaCase {
    config: ModelConfig,
    weights: Weights,
    inputs: Inputs,
    out: Forward,
}

#[wasm_bindgen]
impl MhaCase {
    /// The case for a shape, with weights and inputs from seed 42.
    #[wasm_bindgen(constructor)]
    pub fn new(d_model: usize, num_heads: usize, seq_len: usize) -> Result<MhaCase, String> {
        let config = ModelConfig { d_model, num_heads, seq_len };
        config.validate().map_err(|e| e.to_string())?;
        Ok(MhaCase {
            config,
            weights: Weights::generate(d_model, 42),
            inputs: Inputs::generate(&config, 42),
            out: Forward::filled(&config, f32::NAN),
        })
    }

    /// The input, `seq_len x d_model`, row-major.
    pub fn x(&self) -> Vec<f32> {
        self.inputs.x.clone()
    }

    /// `W_qkv`, `d_model x 3 d_model`, row-major, columns `[Q | K | V]`.
    pub fn w_qkv(&self) -> Vec<f32> {
        self.weights.w_qkv.clone()
    }

    /// `W_o`, `d_model x d_model`, row-major.
    pub fn w_o(&self) -> Vec<f32> {
        self.weights.w_o.clone()
    }

    /// One forward pass on the simd128 kernel, as the page runs it (attention weights and
    /// per-head contributions kept for pruning).
    pub fn forward(&mut self) {
        cpu::forward_into(Kernel::Simd, &self.config, &self.inputs.x, &self.weights, &mut self.out);
    }

    /// The last forward pass's output, `seq_len x d_model`.
    pub fn output(&self) -> Vec<f32> {
        self.out.output.clone()
    }

    /// The naive f64 oracle's output (slow: seconds at the largest shapes).
    pub fn oracle(&self) -> Vec<f64> {
        let heads = HeadSet::all(self.config.num_heads);
        crate::attention::oracle::multihead_attention(
            &self.config,
            &self.inputs.x,
            &self.weights.w_qkv,
            &self.weights.w_o,
            &heads,
        )
        .output
    }

    /// [`normwise_error`] of `y` against `reference`.
    pub fn error(y: &[f32], reference: &[f64]) -> f64 {
        normwise_error(y, reference)
    }

    /// [`profile`] of this shape over `rounds`, as a Markdown table.
    pub fn profile(&self, rounds: usize) -> String {
        profile(&now, self.config, rounds)
    }

    /// Floating-point operations of one forward pass.
    pub fn flops(&self) -> f64 {
        self.config.forward_flops() as f64
    }
}

/// The trained model as the page embeds one sentence (tokenizer, then the forward pass with
/// every head on the simd128 kernel, mean pooling and L2 normalisation), for
/// `bench/transformers.mjs`, which times it against transformers.js in the same process.
#[wasm_bindgen]
pub struct MiniLmCase {
    model: &'static crate::model::MiniLm,
    full: crate::model::pruned::PrunedBert<'static>,
}

#[wasm_bindgen]
impl MiniLmCase {
    /// The model in the page's asset (`asset`, the bytes of minilm-f16.bin), checked and decoded
    /// once. Its weights live as long as the wasm instance (a benchmark makes one or two).
    #[wasm_bindgen(constructor)]
    pub fn new(asset: &[u8]) -> Result<MiniLmCase, String> {
        let model = crate::model::MiniLm::from_asset(asset).map_err(|e| e.to_string())?;
        let model: &'static crate::model::MiniLm = Box::leak(Box::new(model));
        let all = HeadSet::all(crate::model::bert::TOTAL_HEADS);
        Ok(MiniLmCase { model, full: crate::model::pruned::PrunedBert::new(&model.bert, &all) })
    }

    /// The token ids of `text`, `[CLS]` and `[SEP]` included, as the page reads it.
    pub fn ids(&self, text: &str) -> Vec<u32> {
        self.model.ids(text)
    }

    /// The sentence embedding of `text` (384 values), tokenizing included, as the page's batch
    /// work embeds a sentence ([`crate::model::pruned::PrunedBert::embed`], every head kept).
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, String> {
        let ids = self.checked_ids(text)?;
        Ok(self.full.embed(Kernel::Simd, &ids))
    }

    /// The same embedding as the page's sentence view computes it ([`crate::model::bert::Bert::forward`]:
    /// every layer's attention weights and inputs kept for the heatmaps and for pruning).
    pub fn embed_traced(&self, text: &str) -> Result<Vec<f32>, String> {
        let ids = self.checked_ids(text)?;
        let all = HeadSet::all(crate::model::bert::TOTAL_HEADS);
        Ok(self.model.bert.forward(Kernel::Simd, &ids, &all).embedding)
    }

    fn checked_ids(&self, text: &str) -> Result<Vec<u32>, String> {
        let ids = self.model.ids(text);
        if ids.len() > crate::model::bert::MAX_POSITIONS {
            return Err(format!("{} tokens, the model reads at most 512", ids.len()));
        }
        Ok(ids)
    }
}
