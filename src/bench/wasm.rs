//! The benchmarks as wasm exports, for `bench/node.mjs` and `bench/ort.mjs` (which run them in
//! Node with `performance.now()` as the clock).

use wasm_bindgen::prelude::wasm_bindgen;

use super::{generated_report, normwise_error, profile, run};
use crate::attention::{HeadSet, Inputs, ModelConfig, Weights};
use crate::cpu::{self, Forward, Kernel};
use crate::jobs::web::choose_dot_form;
use crate::model::encoder::sharded::{BertShard, SplitPass};
use crate::model::layers::split::Step;

#[wasm_bindgen]
extern "C" {
    /// `performance.now()`: milliseconds from the page's or process's time origin.
    #[wasm_bindgen(js_namespace = performance)]
    pub(super) fn now() -> f64;
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

/// [`super::encoder::pruned_report`] on the page's model asset (`asset`, the bytes of
/// minilm-f16.bin) at `lengths` tokens.
#[wasm_bindgen]
pub fn bench_pruned(asset: &[u8], lengths: Vec<u32>, rounds: usize) -> Result<String, String> {
    let model = crate::model::encoder::Encoder::from_asset(asset).map_err(|e| e.to_string())?;
    let lengths: Vec<usize> = lengths.iter().map(|&n| n as usize).collect();
    Ok(super::encoder::pruned_report(&now, &model, &lengths, rounds))
}

/// The encoder in a model file ([`model_file`]: the built-in asset or a converted checkpoint)
/// at `precision` (`"f16"` or `"int8"`), its 8-bit products in the form the page would pick on
/// this CPU.
fn model_at(asset: &[u8], precision: &str) -> Result<crate::model::encoder::Encoder, String> {
    let precision = precision_of(precision)?;
    choose_dot_form();
    let mut model = model_file(asset)?;
    model.set_precision(Kernel::Simd, precision);
    Ok(model)
}

/// [`super::encoder::sweep_report`] on the page's model asset at `lengths` tokens, at
/// `precision` (`"f16"` or `"int8"`).
#[wasm_bindgen]
pub fn bench_sweep(
    asset: &[u8],
    lengths: Vec<u32>,
    rounds: usize,
    precision: &str,
) -> Result<String, String> {
    let model = model_at(asset, precision)?;
    let lengths: Vec<usize> = lengths.iter().map(|&n| n.clamp(2, 512) as usize).collect();
    Ok(super::encoder::sweep_report(&now, &model, &lengths, rounds))
}

/// [`super::encoder::layer_profile`] on the page's model asset at each of `lengths` tokens, at
/// `precision` (`"f16"` or `"int8"`).
#[wasm_bindgen]
pub fn bench_layer_profile(
    asset: &[u8],
    lengths: Vec<u32>,
    rounds: usize,
    precision: &str,
) -> Result<String, String> {
    let model = model_at(asset, precision)?;
    let tables = lengths
        .iter()
        .map(|&n| super::encoder::layer_profile(&now, &model, n.clamp(2, 512) as usize, rounds));
    Ok(tables.collect::<Vec<_>>().join("\n\n"))
}

/// One quality evaluation of the page's sentence pairs (`pairs`, the bytes of sts-pairs.tsv):
/// every sentence embedded by the model with `pruned` heads removed, in the curves' pieces of
/// [`crate::jobs::encoder::task::SENTENCES_PER_PIECE`] sentences; the median of `rounds`, and GFLOP/s.
#[wasm_bindgen]
pub fn bench_evaluation(
    asset: &[u8],
    pairs: &[u8],
    pruned: Vec<u32>,
    rounds: usize,
) -> Result<String, String> {
    use crate::jobs::work::{Done, Piece};
    let model = crate::model::encoder::Encoder::from_asset(asset).map_err(|e| e.to_string())?;
    let pairs = crate::model::encoder::task::Pairs::from_file(pairs).map_err(|e| e.to_string())?;
    let data = crate::jobs::encoder::task::TaskData::new(pairs, &model.tokenizer);
    let (pairs, ids) = (&data.pairs, &data.ids);
    let total = model.spec().total_heads();
    let heads = HeadSet::with_pruned(total, pruned.iter().map(|&h| h as usize));
    let pieces: Vec<Piece> = data.evaluation(&heads, None);
    // As a worker runs them (the cut's weights gathered once: jobs::copies), and each piece
    // gathering them itself (as workers did before 2026-12-03), rounds interleaved.
    let (mut worker, mut each) = (Vec::new(), Vec::new());
    let mut quality = 0.0;
    let model = std::rc::Rc::new(model);
    for _ in 0..rounds.max(1) {
        let copies = crate::jobs::copies::Copies::new(model.clone().into());
        let t0 = now();
        let done: Result<Vec<Done>, String> = pieces.iter().map(|w| copies.run(w, Kernel::Simd)).collect();
        quality = pairs.quality(&Done::embeddings(done?));
        worker.push(now() - t0);
        let t0 = now();
        let done = pieces.iter().map(|w| w.run_on_encoder(&model.bert, Kernel::Simd)).collect();
        std::hint::black_box(Done::embeddings(done));
        each.push(now() - t0);
    }
    let median = |t: &[f64]| crate::attention::stats::median(t).unwrap_or(f64::NAN);
    let (ms, each_ms) = (median(&worker), median(&each));
    let lengths: Vec<usize> = ids.iter().map(Vec::len).collect();
    let gflop = crate::model::encoder::pruned::cost(model.spec(), &heads, &lengths).total_flops as f64 / 1e9;
    Ok(format!(
        "one evaluation, {} pruned: {} sentences in {} pieces, {} tokens, {gflop:.1} GFLOP in {ms:.0} ms ({:.1} GFLOP/s), quality {quality:.6}; each piece gathering the kept heads' weights itself: {each_ms:.0} ms",
        heads.pruned_count(),
        ids.len(),
        pieces.len(),
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

    /// Heads `lo..hi` of a pass on `x` (a thread's share, [`cpu::head_shards::forward_heads`]), as the
    /// flat buffer a message carries.
    pub fn forward_heads(&self, x: &[f32], lo: usize, hi: usize) -> Result<Vec<f32>, String> {
        let (n, d) = (self.config.seq_len, self.config.d_model);
        if x.len() != n * d || lo > hi || hi > self.config.num_heads {
            return Err(format!(
                "heads {lo}..{hi} of a {n} x {d} input with {} heads",
                self.config.num_heads
            ));
        }
        Ok(cpu::head_shards::forward_heads(Kernel::Simd, &self.config, x, &self.weights, lo..hi).data)
    }

    /// The first of `count` shards of a pass on this case's input ([`cpu::head_shards::even_ranges`]),
    /// computed here and placed in the output buffers; [`MhaCase::assemble`] adds the others.
    pub fn forward_first(&mut self, count: usize) -> Result<(), String> {
        let heads = cpu::head_shards::even_ranges(self.config.num_heads, count.max(1))[0].clone();
        let data = self.forward_heads(&self.inputs.x, heads.start, heads.end)?;
        cpu::head_shards::place(&self.config, &heads, &data, &mut self.out);
        Ok(())
    }

    /// The pass from the first shard ([`MhaCase::forward_first`]) and the other threads' shards
    /// of the same cut into `count` (`others`: their flat buffers one after the other, in head
    /// order), into [`MhaCase::output`].
    pub fn assemble(&mut self, count: usize, others: &[f32]) -> Result<(), String> {
        let ranges = cpu::head_shards::even_ranges(self.config.num_heads, count.max(1));
        let lens: Vec<usize> =
            ranges.iter().map(|r| cpu::head_shards::HeadShard::len_for(&self.config, r)).collect();
        if others.len() != lens[1..].iter().sum::<usize>() {
            return Err(format!(
                "{} values from the other threads, {} expected",
                others.len(),
                lens[1..].iter().sum::<usize>()
            ));
        }
        let mut rest = others;
        for (heads, len) in ranges.iter().zip(&lens).skip(1) {
            let (data, tail) = rest.split_at(*len);
            cpu::head_shards::place(&self.config, heads, data, &mut self.out);
            rest = tail;
        }
        cpu::head_shards::sum_contributions(&mut self.out);
        Ok(())
    }
}

/// `0..len` cut into `count` ranges as the split passes cut heads ([`cpu::head_shards::even_ranges`]),
/// as `[start, end, start, end, ...]`, for the threads a benchmark hands them to.
#[wasm_bindgen]
pub fn even_ranges(len: usize, count: usize) -> Vec<u32> {
    cpu::head_shards::even_ranges(len, count.max(1))
        .into_iter()
        .flat_map(|r| [r.start as u32, r.end as u32])
        .collect()
}

/// The precision a benchmark names (`"f16"` or `"int8"`).
pub(super) fn precision_of(key: &str) -> Result<crate::attention::precision::Precision, String> {
    crate::attention::precision::Precision::from_key(key).ok_or_else(|| format!("no precision {key:?}"))
}

/// The model in a model file: the page's built-in asset (which must have the SHA-256 the page
/// expects, so a stale build is refused), or a checkpoint converted by the page's loader
/// (convert-model). The file is hashed and decoded once.
fn model_file(bytes: &[u8]) -> Result<crate::model::encoder::Encoder, String> {
    use crate::model::encoder::{Encoder, BUILT_IN_NAME};
    use crate::model::load::model_file;
    let hash = model_file::sha256_hex(bytes);
    let model = Encoder::from_file(bytes, hash[..16].to_string()).map_err(|e| e.to_string())?;
    if model.name == BUILT_IN_NAME && hash != model_file::ASSET_SHA256 {
        return Err(format!(
            "the built-in model's file has SHA-256 {}…, not the {}… this build expects",
            &hash[..12],
            &model_file::ASSET_SHA256[..12]
        ));
    }
    Ok(model)
}

/// A trained model as the page embeds one sentence (tokenizer, then the forward pass with
/// every head on the simd128 kernel, the model's pooling), for
/// `bench/transformers.mjs`, which times it against transformers.js in the same process.
#[wasm_bindgen]
pub struct EncoderCase {
    model: &'static crate::model::encoder::Encoder,
    full: crate::model::encoder::pruned::PrunedBert<'static>,
    split: Option<Split>,
}

/// A sentence's pass cut across threads, driven from here: this thread's shard (the first of
/// `count`), the pass, and this thread's partial branch of the current step.
struct Split {
    count: usize,
    shard: BertShard,
    pass: SplitPass<'static>,
    mine: Vec<f32>,
}

#[wasm_bindgen]
impl EncoderCase {
    /// The model in a model file (`asset`, [`model_file`]: minilm-f16.bin, or a converted
    /// checkpoint), checked and decoded once. Its weights live as long as the wasm instance (a benchmark makes one or two).
    #[wasm_bindgen(constructor)]
    pub fn new(asset: &[u8]) -> Result<EncoderCase, String> {
        let model = model_file(asset)?;
        let model: &'static crate::model::encoder::Encoder = Box::leak(Box::new(model));
        let all = HeadSet::all(model.spec().total_heads());
        Ok(EncoderCase {
            model,
            full: crate::model::encoder::pruned::PrunedBert::new(&model.bert, &all),
            split: None,
        })
    }

    /// The model at another precision (`"f16"` or `"int8"`), for [`EncoderCase::embed`].
    pub fn set_precision(&mut self, key: &str) -> Result<(), String> {
        let precision = precision_of(key)?;
        choose_dot_form();
        let mut model = self.model.clone();
        model.set_precision(Kernel::Simd, precision);
        self.model = Box::leak(Box::new(model));
        let all = HeadSet::all(self.model.spec().total_heads());
        self.full = crate::model::encoder::pruned::PrunedBert::new(&self.model.bert, &all);
        Ok(())
    }

    /// Starts `text`'s pass cut into `count` shards (1 to 12), this thread holding the first
    /// ([`crate::model::encoder::sharded`]); the other threads hold [`EncoderShard`]s of the same cut.
    pub fn split_begin(&mut self, text: &str, count: usize) -> Result<(), String> {
        let heads = self.model.spec().heads;
        if !(1..=heads).contains(&count) {
            return Err(format!("{count} shards: 1 to {heads}"));
        }
        let ids = self.checked_ids(text)?;
        let shard = match self.split.take() {
            Some(s) if s.count == count => s.shard,
            _ => BertShard::new(&self.model.bert, 0, count),
        };
        self.split =
            Some(Split { count, shard, pass: SplitPass::new(&self.model.bert, &ids), mine: Vec::new() });
        Ok(())
    }

    /// The current step's code ([`Step::code`]), or -1 once the pass is done.
    pub fn split_step(&self) -> i32 {
        self.split.as_ref().and_then(|s| s.pass.step()).map_or(-1, |step| step.code() as i32)
    }

    /// The current step's input, for the other threads.
    pub fn split_input(&self) -> Vec<f32> {
        self.split.as_ref().map_or_else(Vec::new, |s| s.pass.input().to_vec())
    }

    /// [`EncoderCase::split_input`] as a view on this instance's memory, without a copy or a new
    /// JS array (bench/int8.mjs copies it straight into the memory it shares with the worker;
    /// an array per step made the page's thread collect garbage).
    pub fn split_input_view(&self) -> js_sys::Float32Array {
        let x = self.split.as_ref().map_or(&[][..], |s| s.pass.input());
        // safety: the view shows memory this instance owns; the caller reads it before it calls
        // into the instance again, so nothing frees, changes or moves (memory growth) it meanwhile.
        unsafe { js_sys::Float32Array::view(x) }
    }

    /// This thread's partial branch of the current step, kept for [`EncoderCase::split_absorb`].
    pub fn split_local(&mut self) -> Result<(), String> {
        let s = self.split.as_mut().ok_or("no pass begun")?;
        let step = s.pass.step().ok_or("the pass is done")?;
        s.mine = s.shard.run(Kernel::Simd, step, s.pass.input());
        Ok(())
    }

    /// Adds this thread's partial branch and the other threads' (`others`: theirs one after the
    /// other) and moves to the next step.
    pub fn split_absorb(&mut self, others: &[f32]) -> Result<(), String> {
        let s = self.split.as_mut().ok_or("no pass begun")?;
        let len = s.mine.len();
        if len == 0 || s.pass.step().is_none() || others.len() != len * (s.count - 1) {
            return Err(format!(
                "{} values from the other threads, {} expected",
                others.len(),
                len * (s.count - 1)
            ));
        }
        let mut parts = vec![s.mine.as_slice()];
        parts.extend(others.chunks_exact(len));
        s.pass.absorb(&parts);
        s.mine.clear();
        Ok(())
    }

    /// The sentence embedding once every step is absorbed.
    pub fn split_embedding(&self) -> Result<Vec<f32>, String> {
        self.split.as_ref().and_then(|s| s.pass.embedding()).ok_or_else(|| "the pass is not done".to_string())
    }

    /// The token ids of `text`, `[CLS]` and `[SEP]` included, as the page reads it.
    pub fn ids(&self, text: &str) -> Vec<u32> {
        self.model.ids(text)
    }

    /// The sentence embedding of `text` (d_model values), tokenizing included, as the page's batch
    /// work embeds a sentence ([`crate::model::encoder::pruned::PrunedBert::embed`], every head kept).
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, String> {
        let ids = self.checked_ids(text)?;
        Ok(self.full.embed(Kernel::Simd, &ids))
    }

    /// The same embedding as the page's sentence view computes it ([`crate::model::encoder::bert::Bert::forward`]:
    /// every layer's attention weights and inputs kept for the heatmaps and for pruning).
    pub fn embed_traced(&self, text: &str) -> Result<Vec<f32>, String> {
        let ids = self.checked_ids(text)?;
        let all = HeadSet::all(self.model.spec().total_heads());
        Ok(self.model.bert.forward(Kernel::Simd, &ids, &all).embedding)
    }

    fn checked_ids(&self, text: &str) -> Result<Vec<u32>, String> {
        let (ids, positions) = (self.model.ids(text), self.model.spec().positions);
        if ids.len() > positions {
            return Err(format!("{} tokens, the model reads at most {positions}", ids.len()));
        }
        Ok(ids)
    }
}

/// Another thread's share of the trained model ([`BertShard`]), for a pass cut across threads.
#[wasm_bindgen]
pub struct EncoderShard {
    spec: crate::model::spec::ModelSpec,
    shard: BertShard,
    /// The last step's partial branch, for [`EncoderShard::run_view`].
    out: Vec<f32>,
}

#[wasm_bindgen]
impl EncoderShard {
    /// Shard `index` of `count` of the model in a model file (`asset`, [`model_file`]), at
    /// `precision` (`"f16"` or `"int8"`: quantized as [`EncoderCase::set_precision`] does, from
    /// the same calibration text, so the driver's and every shard's bytes are the same).
    #[wasm_bindgen(constructor)]
    pub fn new(asset: &[u8], index: usize, count: usize, precision: &str) -> Result<EncoderShard, String> {
        let precision = precision_of(precision)?;
        let mut model = model_file(asset)?;
        let spec = *model.spec();
        if index >= count || count > spec.heads {
            return Err(format!("shard {index} of {count}: at most {} shards", spec.heads));
        }
        // The 8-bit products' form is the page's: `bench_dot_form` with its key.
        model.set_precision(Kernel::Simd, precision);
        Ok(EncoderShard { spec, shard: BertShard::new(&model.bert, index, count), out: Vec::new() })
    }

    /// This shard's partial branch of the step `code` for the layer input `x`.
    pub fn run(&self, code: u32, x: &[f32]) -> Result<Vec<f32>, String> {
        let step = self.step(code, x)?;
        Ok(self.shard.run(Kernel::Simd, step, x))
    }

    /// The step `code` names, for a layer input of `x.len()` values.
    fn step(&self, code: u32, x: &[f32]) -> Result<Step, String> {
        let step = Step::from_code(code, self.spec.layers).ok_or_else(|| format!("no step {code}"))?;
        if x.is_empty() || !x.len().is_multiple_of(self.spec.d_model) {
            return Err(format!("{} values are no layer input", x.len()));
        }
        Ok(step)
    }

    /// [`EncoderShard::run`] into a buffer the shard keeps, returned as a view on this instance's
    /// memory: no new JS array per step (bench/int8.mjs's worker copies it into shared memory).
    pub fn run_view(&mut self, code: u32, x: &[f32]) -> Result<js_sys::Float32Array, String> {
        let step = self.step(code, x)?;
        self.out.resize(x.len(), 0.0);
        self.shard.run_into(Kernel::Simd, step, x, &mut self.out);
        // safety: the view shows `self.out`; the caller reads it before it calls into the instance
        // again, so nothing frees, changes or moves (memory growth) it meanwhile.
        Ok(unsafe { js_sys::Float32Array::view(&self.out) })
    }
}

/// One dense layer's product `y = x W^T + b` (`n x k` by `m x k`) in f32, in 8 bits (7-bit
/// activations), and in 12 bits (the model's `W_2`), the median of `rounds` interleaved, as a
/// line of milliseconds: what the integer kernels gain on their own.
#[wasm_bindgen]
pub fn bench_int8_product(n: usize, k: usize, m: usize, rounds: usize) -> String {
    use crate::cpu::int8::{qgemm, set_dot_form, DotForm, IntBits, QuantizedWeights, DOT_FORMS_DIFFER};
    let chosen = choose_dot_form();
    let value = |i: usize| ((crate::attention::synthetic::hash32(i as u32) >> 8) as f32 / 8_388_608.0) - 1.0;
    let x: Vec<f32> = (0..n * k).map(value).collect();
    let w: Vec<f32> = (0..m * k).map(|i| value(i + 7_777_777)).collect();
    let lin = crate::model::layers::Linear::new(w.clone(), vec![0.0; m]);
    let plain = QuantizedWeights::new(&w, m, k);
    let wide = QuantizedWeights::with_bits(&w, m, k, IntBits::Twelve);
    let mut y = vec![0.0f32; n * m];
    let mut times = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..rounds.max(1) {
        let t0 = now();
        crate::model::layers::linear(Kernel::Simd, &x, n, &lin, &mut y, m);
        let t1 = now();
        qgemm(Kernel::Simd, &x, n, &wide, &lin.b, &mut y, m);
        times[0].push(t1 - t0);
        times[1].push(now() - t1);
        for (form, samples) in DotForm::ALL.into_iter().zip(&mut times[2..]) {
            set_dot_form(form);
            let t0 = now();
            qgemm(Kernel::Simd, &x, n, &plain, &lin.b, &mut y, m);
            samples.push(now() - t0);
        }
        set_dot_form(chosen);
    }
    let [f, r, fused, split] = times.map(super::median);
    let eight = match DOT_FORMS_DIFFER {
        true => format!(
            "8-bit fused {fused:.3} ms = {:.2}x, split {split:.3} ms = {:.2}x (the page's pick: {})",
            fused / f,
            split / f,
            chosen.key()
        ),
        false => format!("8-bit {fused:.3} ms = {:.2}x", fused / f),
    };
    format!(
        "{n}x{k}x{m} ({}): f32 {f:.3} ms, {eight}, 12-bit {r:.3} ms = {:.2}x",
        Kernel::Simd.describe(),
        r / f
    )
}

/// The relaxed build's 8-bit micro-kernel form ([`crate::cpu::int8::DotForm`]) as the page
/// handles it: `"retime"` times the forms again (as the page does two seconds in, once the
/// engine has compiled both forms' optimized code: call it after a warm-up and a pause), a form's
/// key (`"fused"`, `"split"`) sets it (a worker: the page's answer); either way the key of the
/// form now in use.
#[wasm_bindgen]
pub fn bench_dot_form(how: &str) -> Result<String, String> {
    let form = match how {
        "retime" => crate::jobs::web::retime_dot_form(),
        key => {
            let form = crate::cpu::int8::DotForm::from_key(key)
                .ok_or_else(|| format!("no dot form {key:?}: fused, split or retime"))?;
            crate::jobs::web::adopt_dot_form(form);
            form
        }
    };
    Ok(form.key().to_string())
}
