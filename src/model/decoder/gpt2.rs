//! A GPT-2-family decoder's forward pass on the CPU kernel, with any set of its heads pruned; its
//! shape is the model's [`ModelSpec`] (gpt2: 12 layers of 12 heads of 64; gpt2-medium: 24 of 16
//! of 64; distilgpt2: 6 of 12 of 64).
//!
//! ```text
//! x = word[id] + position[t]
//! per layer: a = LayerNorm1(x)
//!            QKV = a W_attn + b                     (n x 3d, one Conv1D; heads of d_k)
//!            x = x + concat_masked(causal heads) W_proj + b      (row t reads tokens 0..=t)
//!            x = x + GELU_tanh(LayerNorm2(x) W_fc + b) W_mlp + b
//! logits = LayerNorm_f(x) word^T                    (the output head is the word embedding)
//! ```
//!
//! GPT-2 stores its dense layers as `Conv1D`, `[in, out]`: [`Gpt2::from_tensors`] takes them in
//! that layout (as the checkpoint and the page's model file hold them) and keeps the transpose,
//! `[out, in]`, so the products are the shared layers' ([`crate::model::layers::linear`]).

use std::sync::Arc;

use crate::attention::precision::Precision;
use crate::attention::turns::{at_once, AtOnce, Turns};
use crate::attention::HeadSet;
use crate::cpu::int8::{IntBits, QuantizedWeights};
use crate::cpu::{attend_in_turns, Kernel, Mask};
use crate::model::layers::{
    activate, layer_norm, linear_in_turns, product_in_turns, seeded, Linear, Norm, Rows,
};
use crate::model::load::names::decoder_names;
use crate::model::load::tensors::{checked, transpose, LoadError};
use crate::model::spec::ModelSpec;

/// Where a builder takes each named tensor from: its shape and f32 values, `None` if missing.
pub type TensorSource<'a> = dyn FnMut(&str) -> Option<(Vec<usize>, Vec<f32>)> + 'a;

/// One decoder block.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// LayerNorm before attention.
    pub ln1: Norm,
    /// Query, key and value projections, fused: `3d x d` (`[out, in]`), outputs `[Q | K | V]`.
    pub qkv: Linear,
    /// Attention output projection.
    pub out: Linear,
    /// LayerNorm before the feed-forward layer.
    pub ln2: Norm,
    /// Feed-forward up-projection.
    pub ffn_in: Linear,
    /// Feed-forward down-projection.
    pub ffn_out: Linear,
}

/// Every weight of a GPT-2-family decoder, and its shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Gpt2 {
    /// The shape: every size below is the spec's.
    pub spec: ModelSpec,
    /// `vocab x d_model`: the token embedding, and the output head (tied); shared with the
    /// model's copy at another precision. In f16 in a model held at 8 bits only, whose head
    /// runs on its 8-bit copy ([`Gpt2::held_at_8_bits_in_steps`]).
    pub word: Rows,
    /// `positions x d_model`.
    pub position: Arc<[f32]>,
    /// The blocks.
    pub blocks: Vec<Block>,
    /// The final LayerNorm.
    pub ln_f: Norm,
    /// At [`Precision::Int8`], the output head quantized as a dense layer: `word` (shared) with
    /// no bias and its 8-bit copy. `None` at f16: the logits are `word`'s f32 product.
    pub head: Option<Linear>,
}

/// What a decoder's forward pass produces.
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderOutput {
    /// The last layer's rows after the final LayerNorm, `n x d_model`: the logits of any
    /// position are one product away ([`Gpt2::logits`]).
    pub hidden: Vec<f32>,
    /// Per layer, every head's attention weights, `heads x n x n`: row `i` is 0 after column `i`
    /// (empty for a layer the pass did not keep: [`Keep`]).
    pub attention: Vec<Arc<Vec<f32>>>,
    /// Per layer, every head's output before the output projection (`n x d_model`, head `h` in
    /// columns `h d_k..(h + 1) d_k`, pruned heads included): what a head writes, for its direct
    /// effect on the logits ([`crate::model::decoder::induction`]) (empty for a layer not kept).
    pub head_outputs: Vec<Arc<Vec<f32>>>,
    /// The logits of the token after the text (the last position's), `vocab` values.
    pub next_logits: Vec<f32>,
    /// Per position `t < n - 1`, the loss (negative natural log-probability) of the text's token
    /// `t + 1`, in f64: the cross-entropy the model was trained on.
    pub losses: Vec<f64>,
    /// Number of tokens.
    pub seq_len: usize,
    /// The heads that were active.
    pub heads: HeadSet,
}

impl Gpt2 {
    /// Builds a decoder of shape `spec` from a source of named f32 tensors ([`decoder_names`]),
    /// checking every shape against the spec.
    pub fn from_tensors(
        spec: ModelSpec,
        get: impl FnMut(&str) -> Option<(Vec<usize>, Vec<f32>)>,
    ) -> Result<Gpt2, LoadError> {
        let mut get = get;
        at_once(Gpt2::from_tensors_in_steps(spec, &mut get, &AtOnce))
    }

    /// [`Gpt2::from_tensors`] with a turn of `turns` after each block: each block's four
    /// products are transposed from the checkpoint's `[in, out]` (GPT-2 small's 85 M values at
    /// once held the page's thread for over 300 ms, BENCHMARKS.md section 20).
    pub async fn from_tensors_in_steps(
        spec: ModelSpec,
        get: &mut TensorSource<'_>,
        turns: &dyn Turns,
    ) -> Result<Gpt2, LoadError> {
        Gpt2::build_in_steps(spec, get, None, turns).await
    }

    /// [`Gpt2::from_tensors_in_steps`] held at 8 bits only: each block is built in f32, calibrated
    /// on `calibration` (token ids of a few texts, carried through the blocks built so far),
    /// quantized as [`Gpt2::at_precision`] quantizes it, and its f32 weights dropped before the
    /// next block is taken; a turn of `turns` after each text's pass through a block and
    /// after each block. The model never holds more
    /// than one block in f32: GPT-2 Large's 3.1 GB of f32 weights would not fit beside its file in
    /// a page's 4 GiB ([`crate::model::spec::Holding`]). The embedding is kept in f16 ([`Rows`]),
    /// the output head only at 8 bits. Its passes give the bits of
    /// `from_tensors(..).at_precision(kernel, Precision::Int8, calibration)`'s, whose
    /// calibration passes see the same f32 inputs, when the embedding's values are f16 (a model
    /// file's are).
    pub async fn held_at_8_bits_in_steps(
        spec: ModelSpec,
        get: &mut TensorSource<'_>,
        kernel: Kernel,
        calibration: &[Vec<u32>],
        turns: &dyn Turns,
    ) -> Result<Gpt2, LoadError> {
        Gpt2::build_in_steps(spec, get, Some((kernel, calibration)), turns).await
    }

    /// Both builders in one (one state machine in the wasm): in f32, or, with `at_8_bits`'s
    /// kernel and calibration texts, held at 8 bits only.
    async fn build_in_steps(
        spec: ModelSpec,
        get: &mut TensorSource<'_>,
        at_8_bits: Option<(Kernel, &[Vec<u32>])>,
        turns: &dyn Turns,
    ) -> Result<Gpt2, LoadError> {
        spec.validate().map_err(|e| LoadError(e.0))?;
        let mut take = checked(decoder_names(&spec), get);
        let mut model = Gpt2::without_blocks(spec, &mut take)?;
        let Some((kernel, calibration)) = at_8_bits else {
            for l in 0..spec.layers {
                model.blocks.push(block_from(&spec, l, &mut take)?);
                turns.turn().await;
            }
            return Ok(model);
        };
        let d = spec.d_model;
        let texts: Vec<&Vec<u32>> = calibration.iter().filter(|t| model.reads(t)).collect();
        // Each calibration text's stream as it leaves the blocks built so far, in f32.
        let mut streams: Vec<Vec<f32>> = texts.iter().map(|t| model.embed(t)).collect();
        // The embedding in f16 from here on (the file's values: exact), before any block is
        // built, so the f32 table's memory serves the blocks.
        model.word = model.word.in_f16();
        let all = HeadSet::all(spec.total_heads());
        let mut seen = vec![[vec![0.0; d], vec![0.0; d], vec![0.0; d]]; spec.layers];
        for l in 0..spec.layers {
            model.blocks.push(block_from(&spec, l, &mut take)?);
            for x in streams.iter_mut() {
                let mut scratch = Scratch::new(&spec, x.len() / d);
                scratch.seen = Some(std::mem::take(&mut seen));
                model.layer_in_turns(kernel, l, x, &all, &mut scratch, false, &AtOnce).await;
                seen = scratch.seen.take().unwrap_or_default();
                turns.turn().await;
            }
            model.blocks[l].quantize(&seen[l], spec.ffn, F32Weights::Dropped);
            turns.turn().await;
        }
        let mut head_max = vec![0.0; d];
        for x in streams.iter_mut() {
            layer_norm(x, &model.ln_f, spec.layer_norm_eps);
            largest(&mut head_max, x);
        }
        model.head = Some(model.quantized_head(&head_max));
        Ok(model)
    }

    /// The model's embeddings and final LayerNorm from `take`, with no block yet.
    fn without_blocks(
        spec: ModelSpec,
        take: &mut impl FnMut(&str) -> Result<Vec<f32>, LoadError>,
    ) -> Result<Gpt2, LoadError> {
        let (word, position) = (take("wte.weight")?, take("wpe.weight")?);
        Ok(Gpt2 {
            spec,
            word: Rows::from(word),
            position: position.into(),
            blocks: Vec::with_capacity(spec.layers),
            ln_f: Norm { w: take("ln_f.weight")?, b: take("ln_f.bias")? },
            head: None,
        })
    }

    /// Whether a pass can read `ids`: 1 to the spec's positions, each below the vocabulary size.
    fn reads(&self, ids: &[u32]) -> bool {
        (1..=self.spec.positions).contains(&ids.len())
            && ids.iter().all(|&id| (id as usize) < self.spec.vocab)
    }

    /// The output head at 8 bits: the word embedding smoothed by `input_max`, the largest
    /// magnitude of each feature after the final LayerNorm. An f32 embedding is shared as the
    /// head's f32 weights; an f16 one is quantized as read, and the head holds its 8-bit copy
    /// only (the same bits as from the f32 table of the same values).
    fn quantized_head(&self, input_max: &[f32]) -> Linear {
        let (vocab, d) = (self.spec.vocab, self.spec.d_model);
        match &self.word {
            Rows::F32(word) => {
                let mut head = Linear { w: word.clone(), b: vec![0.0; vocab], int8: None };
                head.quantize(input_max, IntBits::Eight);
                head
            }
            Rows::F16(word) => Linear {
                w: Arc::from(Vec::new()),
                b: vec![0.0; vocab],
                int8: Some(Arc::new(QuantizedWeights::smoothed(word, vocab, d, input_max, IntBits::Eight))),
            },
        }
    }

    /// Whether its blocks hold their f32 weights (else they are held at 8 bits only, and the
    /// model has no f16 form: [`crate::model::spec::Holding::Int8Only`]).
    pub fn holds_f32(&self) -> bool {
        self.blocks.iter().all(|b| b.qkv.holds_f32())
    }

    /// A decoder of shape `spec` with seeded random weights (as [`crate::model::encoder::bert::Bert::random`]):
    /// for tests and benchmarks of shapes there is no checkpoint for.
    pub fn random(spec: ModelSpec, seed: u32) -> Gpt2 {
        let values = seeded(seed.wrapping_mul(0x85eb_ca6b), 0x0dec_0de5);
        let linear = |out: usize, inp: usize| {
            Linear::new(values(out * inp, (3.0 / inp as f32).sqrt()), values(out, 0.1))
        };
        let norm = |d: usize| Norm { w: values(d, 0.2).iter().map(|v| 1.0 + v).collect(), b: values(d, 0.1) };
        let (d, ffn) = (spec.d_model, spec.ffn);
        let blocks = (0..spec.layers)
            .map(|_| Block {
                ln1: norm(d),
                qkv: linear(3 * d, d),
                out: linear(d, d),
                ln2: norm(d),
                ffn_in: linear(ffn, d),
                ffn_out: linear(d, ffn),
            })
            .collect();
        Gpt2 {
            spec,
            word: Rows::from(values(spec.vocab * d, 1.0)),
            position: values(spec.positions * d, 0.3).into(),
            blocks,
            ln_f: norm(d),
            head: None,
        }
    }

    /// The model's shape.
    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// Bytes of the weights its passes read, as the page stores them: every weight in f16
    /// ([`WEIGHT_BYTES`](crate::model::spec::WEIGHT_BYTES) each), except, at
    /// [`Precision::Int8`], the blocks' dense matrices and the output head at 8 bits (their bytes,
    /// `W_mlp`'s 12-bit weights at a byte and a half, and the per-channel factors; the biases
    /// stay f16; the embedding rows the first layer reads are the head's bytes).
    pub fn stored_bytes(&self) -> u64 {
        use crate::model::spec::WEIGHT_BYTES;
        let blocks: u64 = self
            .blocks
            .iter()
            .map(|b| {
                [&b.qkv, &b.out, &b.ffn_in, &b.ffn_out].into_iter().map(Linear::stored_bytes).sum::<u64>()
                    + b.ln1.stored_bytes()
                    + b.ln2.stored_bytes()
            })
            .sum();
        let head = match self.head.as_ref().and_then(|h| h.int8.as_ref()) {
            Some(q) => q.bytes() as u64,
            None => WEIGHT_BYTES * self.word.len() as u64,
        };
        blocks + head + WEIGHT_BYTES * self.position.len() as u64 + self.ln_f.stored_bytes()
    }

    /// The precision its dense layers run at.
    pub fn precision(&self) -> Precision {
        match self.blocks.first() {
            Some(b) if b.out.int8.is_some() => Precision::Int8,
            _ => Precision::F16,
        }
    }

    /// A copy at `precision`: for [`Precision::Int8`] every block's four products and the
    /// output head are quantized per output column (`W_attn`, `W_proj`, `W_fc` and the head at 8
    /// bits, smoothed by the largest input each sees over `calibration`, token ids of a few
    /// texts, as this model computes them in f32; `W_mlp`, whose inputs GELU leaves with long
    /// tails, at 12 bits: the encoder's plan, [`crate::cpu::int8`]); for [`Precision::F16`] the
    /// 8-bit copies are dropped (a model held at 8 bits only has no f16 form and stays as it is,
    /// [`crate::model::spec::Holding`]). The f32 weights are shared with `self`, not copied: the copy
    /// costs only its 8-bit bytes.
    pub fn at_precision(&self, kernel: Kernel, precision: Precision, calibration: &[Vec<u32>]) -> Gpt2 {
        at_once(self.at_precision_in_turns(kernel, precision, calibration, &AtOnce))
    }

    /// [`Gpt2::at_precision`] in `turns`' steps: the calibration passes' products and heads, and
    /// a turn after each block's four products are quantized and after the head's (GPT-2 small's
    /// calibration and 85 M weights at once held the page's thread for most of a second). The
    /// same copy.
    pub async fn at_precision_in_turns(
        &self,
        kernel: Kernel,
        precision: Precision,
        calibration: &[Vec<u32>],
        turns: &dyn Turns,
    ) -> Gpt2 {
        let mut copy = self.clone();
        // A model held at 8 bits only has no f32 weights to run at f16 with.
        if precision == self.precision() || !self.holds_f32() {
            return copy;
        }
        if precision == Precision::F16 {
            copy.blocks
                .iter_mut()
                .flat_map(|b| [&mut b.qkv, &mut b.out, &mut b.ffn_in, &mut b.ffn_out])
                .for_each(|l| l.int8 = None);
            copy.head = None;
            return copy;
        }
        let seen = self.input_maxima(kernel, calibration, turns).await;
        for (block, m) in copy.blocks.iter_mut().zip(&seen.layers) {
            block.quantize(m, self.spec.ffn, F32Weights::Kept);
            turns.turn().await;
        }
        copy.head = Some(self.quantized_head(&seen.head));
        turns.turn().await;
        copy
    }

    /// The largest magnitude of each input feature of the 8-bit products over the texts `ids`
    /// (those this model can read), every head active, in f32 ([`Seen`]).
    async fn input_maxima(&self, kernel: Kernel, ids: &[Vec<u32>], turns: &dyn Turns) -> Seen {
        let (spec, d) = (&self.spec, self.spec.d_model);
        let mut seen = Seen {
            layers: vec![[vec![0.0; d], vec![0.0; d], vec![0.0; d]]; spec.layers],
            head: vec![0.0; d],
        };
        let all = HeadSet::all(spec.total_heads());
        for text in ids.iter().filter(|t| self.reads(t)) {
            let mut x = self.embed(text);
            let mut scratch = Scratch::new(spec, text.len());
            scratch.seen = Some(std::mem::take(&mut seen.layers));
            for l in 0..spec.layers {
                self.layer_in_turns(kernel, l, &mut x, &all, &mut scratch, false, turns).await;
            }
            seen.layers = scratch.seen.take().unwrap_or_default();
            layer_norm(&mut x, &self.ln_f, spec.layer_norm_eps);
            largest(&mut seen.head, &x);
        }
        seen
    }

    /// Runs the decoder on `ids` (1 to the spec's positions, each below the vocabulary size) with
    /// only `heads` (of the spec's total, numbered `layer * heads + head`) active, keeping every
    /// layer's attention.
    pub fn forward(&self, kernel: Kernel, ids: &[u32], heads: &HeadSet) -> DecoderOutput {
        self.forward_keeping(kernel, ids, heads, Keep::All)
    }

    /// [`Gpt2::forward`], keeping the attention and head outputs of the layers `keep` names.
    pub fn forward_keeping(&self, kernel: Kernel, ids: &[u32], heads: &HeadSet, keep: Keep) -> DecoderOutput {
        at_once(self.forward_in_turns(kernel, ids, heads, keep, &AtOnce))
    }

    /// [`Gpt2::forward_keeping`] with its products and heads in `turns`' steps: the same bits.
    pub async fn forward_in_turns(
        &self,
        kernel: Kernel,
        ids: &[u32],
        heads: &HeadSet,
        keep: Keep,
        turns: &dyn Turns,
    ) -> DecoderOutput {
        let spec = &self.spec;
        assert_eq!(heads.len(), spec.total_heads(), "a set of the model's {} heads", spec.total_heads());
        let mut x = self.embed(ids);
        let mut scratch = Scratch::new(spec, ids.len());
        let (mut attention, mut head_outputs) =
            (Vec::with_capacity(spec.layers), Vec::with_capacity(spec.layers));
        for l in 0..spec.layers {
            let kept =
                self.layer_in_turns(kernel, l, &mut x, heads, &mut scratch, keep.keeps(l), turns).await;
            let (att, outputs) = kept.unwrap_or_default();
            attention.push(att);
            head_outputs.push(outputs);
        }
        layer_norm(&mut x, &self.ln_f, spec.layer_norm_eps);
        let (next_logits, losses) = self.read_out(kernel, &x, ids, turns).await;
        DecoderOutput {
            hidden: x,
            attention,
            head_outputs,
            next_logits,
            losses,
            seq_len: ids.len(),
            heads: heads.clone(),
        }
    }

    /// The full model's pass over `ids` kept as the residual stream entering each layer, so that
    /// a pass with heads of layer `l` and later pruned can start there
    /// ([`Gpt2::next_logits_from`]); and the next token's logits.
    pub fn residuals(&self, kernel: Kernel, ids: &[u32]) -> Residuals {
        at_once(self.residuals_in_turns(kernel, ids, &AtOnce))
    }

    /// [`Gpt2::residuals`] with its products and heads in `turns`' steps: the same bits.
    pub async fn residuals_in_turns(&self, kernel: Kernel, ids: &[u32], turns: &dyn Turns) -> Residuals {
        let spec = &self.spec;
        let all = HeadSet::all(spec.total_heads());
        let mut x = self.embed(ids);
        let mut scratch = Scratch::new(spec, ids.len());
        let mut inputs = Vec::with_capacity(spec.layers);
        for l in 0..spec.layers {
            inputs.push(x.clone());
            self.layer_in_turns(kernel, l, &mut x, &all, &mut scratch, false, turns).await;
        }
        let next_logits = self.next_logits_of(kernel, &mut x, turns).await;
        Residuals { inputs, next_logits }
    }

    /// The next token's logits with `heads` active, from `trace`'s stream entering layer `from`:
    /// equal to [`Gpt2::forward`]'s when every head before layer `from` is active. Keeps no
    /// attention.
    pub fn next_logits_from(
        &self,
        kernel: Kernel,
        trace: &Residuals,
        from: usize,
        heads: &HeadSet,
    ) -> Vec<f32> {
        at_once(self.next_logits_from_in_turns(kernel, trace, from, heads, &AtOnce))
    }

    /// [`Gpt2::next_logits_from`] with its products and heads in `turns`' steps: the same bits.
    pub async fn next_logits_from_in_turns(
        &self,
        kernel: Kernel,
        trace: &Residuals,
        from: usize,
        heads: &HeadSet,
        turns: &dyn Turns,
    ) -> Vec<f32> {
        let spec = &self.spec;
        assert_eq!(heads.len(), spec.total_heads(), "a set of the model's {} heads", spec.total_heads());
        assert!(
            (0..from * spec.heads).all(|h| heads.is_active(h)),
            "a pass from layer {from} has every earlier head"
        );
        let Some(input) = trace.inputs.get(from) else { return trace.next_logits.clone() };
        let mut x = input.clone();
        let mut scratch = Scratch::new(spec, x.len() / spec.d_model);
        for l in from..spec.layers {
            self.layer_in_turns(kernel, l, &mut x, heads, &mut scratch, false, turns).await;
        }
        self.next_logits_of(kernel, &mut x, turns).await
    }

    /// The last row of the stream `x`, through the final LayerNorm and the output head.
    async fn next_logits_of(&self, kernel: Kernel, x: &mut [f32], turns: &dyn Turns) -> Vec<f32> {
        let d = self.spec.d_model;
        let rows = x.len() / d;
        let last = &mut x[(rows - 1) * d..];
        layer_norm(last, &self.ln_f, self.spec.layer_norm_eps);
        self.logits_in_turns(kernel, last, turns).await
    }

    /// Layer `l` on the stream `x` (`n x d_model`) with `heads` active, its products and heads
    /// in `turns`' steps; with `keep`, its attention weights and its heads' outputs (before
    /// pruning).
    #[allow(clippy::too_many_arguments)] // the layer's inputs and its turns
    async fn layer_in_turns(
        &self,
        kernel: Kernel,
        l: usize,
        x: &mut [f32],
        heads: &HeadSet,
        s: &mut Scratch,
        keep: bool,
        turns: &dyn Turns,
    ) -> Option<LayerKept> {
        let (spec, block) = (&self.spec, &self.blocks[l]);
        let (d, d_k, h, n) = (spec.d_model, spec.d_k(), spec.heads, s.n);
        s.a.copy_from_slice(x);
        layer_norm(&mut s.a, &block.ln1, spec.layer_norm_eps);
        s.observe(l, 0, Input::Norm);
        linear_in_turns(kernel, &s.a, n, &block.qkv, &mut s.qkv, 3 * d, turns).await;
        // Kept weights go straight into their own buffer; else each head's pass through one.
        let kept = if keep {
            let mut att = vec![0.0f32; h * n * n];
            attend_in_turns(kernel, &s.qkv, n, h, d_k, Mask::Causal, &mut att, &mut s.concat, turns).await;
            Some((Arc::new(att), Arc::new(s.concat.clone())))
        } else {
            attend_in_turns(kernel, &s.qkv, n, h, d_k, Mask::Causal, &mut s.probs, &mut s.concat, turns)
                .await;
            None
        };
        for p in heads.pruned_in_layer(l, h) {
            s.concat.chunks_exact_mut(d).for_each(|row| row[p * d_k..(p + 1) * d_k].fill(0.0));
        }
        s.observe(l, 1, Input::Heads);
        linear_in_turns(kernel, &s.concat, n, &block.out, &mut s.tmp, d, turns).await;
        x.iter_mut().zip(&s.tmp).for_each(|(x, t)| *x += t);
        s.a.copy_from_slice(x);
        layer_norm(&mut s.a, &block.ln2, spec.layer_norm_eps);
        s.observe(l, 2, Input::Norm);
        linear_in_turns(kernel, &s.a, n, &block.ffn_in, &mut s.hidden, spec.ffn, turns).await;
        activate(kernel, spec.activation, &mut s.hidden);
        linear_in_turns(kernel, &s.hidden, n, &block.ffn_out, &mut s.tmp, d, turns).await;
        x.iter_mut().zip(&s.tmp).for_each(|(x, t)| *x += t);
        kept
    }

    /// `word[id] + position[t]`.
    pub(crate) fn embed(&self, ids: &[u32]) -> Vec<f32> {
        let (n, d) = (ids.len(), self.spec.d_model);
        assert!((1..=self.spec.positions).contains(&n), "1 to {} tokens", self.spec.positions);
        let mut x = vec![0.0f32; n * d];
        for (t, &id) in ids.iter().enumerate() {
            let id = id as usize;
            assert!(id < self.spec.vocab, "token id {id} out of range");
            let word = self.word.row(id, d);
            for j in 0..d {
                x[t * d + j] = word[j] + self.position[t * d + j];
            }
        }
        x
    }

    /// The logits of the rows of `hidden` (`rows x d_model`, after the final LayerNorm):
    /// `rows x vocab`.
    pub fn logits(&self, kernel: Kernel, hidden: &[f32]) -> Vec<f32> {
        at_once(self.logits_in_turns(kernel, hidden, &AtOnce))
    }

    /// [`Gpt2::logits`] a block of the vocabulary at a time, in `turns`' steps.
    pub(crate) async fn logits_in_turns(
        &self,
        kernel: Kernel,
        hidden: &[f32],
        turns: &dyn Turns,
    ) -> Vec<f32> {
        let (d, vocab) = (self.spec.d_model, self.spec.vocab);
        let rows = hidden.len() / d;
        let mut out = vec![0.0f32; rows * vocab];
        match &self.head {
            Some(head) => linear_in_turns(kernel, hidden, rows, head, &mut out, vocab, turns).await,
            None => {
                let word = self.word.values(0..self.word.len());
                product_in_turns(kernel, hidden, rows, &word, &mut out, vocab, turns).await
            }
        }
        out
    }

    /// The last position's logits and every position's loss of the next token, the logits made
    /// [`READ_OUT_ROWS`] rows at a time (all of them at once would be `n x vocab` floats: 200 MB
    /// for gpt2 at 1024 tokens).
    async fn read_out(
        &self,
        kernel: Kernel,
        hidden: &[f32],
        ids: &[u32],
        turns: &dyn Turns,
    ) -> (Vec<f32>, Vec<f64>) {
        let (d, vocab, n) = (self.spec.d_model, self.spec.vocab, ids.len());
        let mut losses = Vec::with_capacity(n.saturating_sub(1));
        let mut next = Vec::new();
        for (c, rows) in hidden.chunks(READ_OUT_ROWS * d).enumerate() {
            let logits = self.logits_in_turns(kernel, rows, turns).await;
            for (r, row) in logits.chunks_exact(vocab).enumerate() {
                let t = c * READ_OUT_ROWS + r;
                match ids.get(t + 1) {
                    Some(&target) => {
                        losses.push(crate::model::decoder::next_token::loss(kernel, row, target as usize))
                    }
                    None => next = row.to_vec(),
                }
            }
        }
        (next, losses)
    }
}

/// Which layers' attention (and head outputs) a pass keeps: all of them take
/// `layers x heads x n x n` floats, 1.6 GB for gpt2-medium at 1024 tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// Every layer's.
    All,
    /// One layer's.
    Layer(usize),
}

impl Keep {
    /// Whether layer `l`'s is kept.
    pub fn keeps(self, l: usize) -> bool {
        match self {
            Keep::All => true,
            Keep::Layer(k) => k == l,
        }
    }
}

impl DecoderOutput {
    /// Whether the pass kept layer `l`'s attention.
    pub fn kept(&self, l: usize) -> bool {
        self.attention.get(l).is_some_and(|a| !a.is_empty())
    }
}

/// The residual stream of a full pass entering each layer, and its next-token logits.
#[derive(Clone, Debug, PartialEq)]
pub struct Residuals {
    /// Per layer, `n x d_model`.
    pub inputs: Vec<Vec<f32>>,
    /// The logits of the token after the text.
    pub next_logits: Vec<f32>,
}

/// Block `l` from `take`: its four `Conv1D` products transposed from the checkpoint's
/// `[in, out]` to `[out, in]`, and its two LayerNorms.
fn block_from(
    spec: &ModelSpec,
    l: usize,
    take: &mut impl FnMut(&str) -> Result<Vec<f32>, LoadError>,
) -> Result<Block, LoadError> {
    let p = format!("h.{l}.");
    let mut conv = |name: &str, inp: usize| -> Result<Linear, LoadError> {
        let w = take(&format!("{p}{name}.weight"))?;
        let b = take(&format!("{p}{name}.bias"))?;
        Ok(Linear::new(transpose(&w, inp, b.len()), b))
    };
    let (d, ffn) = (spec.d_model, spec.ffn);
    // The largest first: while a product is transposed it is held twice, beside those taken
    // before it (GPT-2 Large's block peaks at 92 MB this way, at 105 MB in the file's order).
    let (ffn_out, ffn_in) = (conv("mlp.c_proj", ffn)?, conv("mlp.c_fc", d)?);
    let (qkv, out) = (conv("attn.c_attn", d)?, conv("attn.c_proj", d)?);
    let mut norm = |name: &str| -> Result<Norm, LoadError> {
        Ok(Norm { w: take(&format!("{p}{name}.weight"))?, b: take(&format!("{p}{name}.bias"))? })
    };
    Ok(Block { ln1: norm("ln_1")?, qkv, out, ln2: norm("ln_2")?, ffn_in, ffn_out })
}

impl Block {
    /// Its four products quantized per output column, smoothed by `seen`, the largest input of
    /// `W_attn`, `W_proj` and `W_fc`: those at 8 bits, `W_mlp` (its `ffn` inputs GELU leaves with
    /// long tails) at 12 ([`Gpt2::at_precision`]).
    /// With [`F32Weights::Dropped`], each product's f32 weights go as soon as it is quantized,
    /// before the next product's 8-bit copy is made: the build's peak is then the block in f32
    /// and one product's 8-bit copy, not the block at both widths (BENCHMARKS.md section 28).
    fn quantize(&mut self, seen: &[Vec<f32>; 3], ffn: usize, f32_weights: F32Weights) {
        let unsmoothed = vec![0.0; ffn];
        let inputs = [(&seen[0], IntBits::Eight), (&seen[1], IntBits::Eight), (&seen[2], IntBits::Eight)];
        let inputs = inputs.into_iter().chain([(&unsmoothed, IntBits::Twelve)]);
        let products = [&mut self.qkv, &mut self.out, &mut self.ffn_in, &mut self.ffn_out];
        for (linear, (input_max, bits)) in products.into_iter().zip(inputs) {
            linear.quantize(input_max, bits);
            if f32_weights == F32Weights::Dropped {
                linear.drop_f32();
            }
        }
    }
}

/// Whether a block quantized at 8 bits keeps its f32 weights (a copy at another precision) or
/// drops them (a model held at 8 bits only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum F32Weights {
    Kept,
    Dropped,
}

/// A layer's attention weights and its heads' outputs, as [`DecoderOutput`] keeps them.
type LayerKept = (Arc<Vec<f32>>, Arc<Vec<f32>>);

/// The largest magnitude of each input feature that the 8-bit products see: per layer, `W_attn`'s
/// (after LayerNorm 1), `W_proj`'s (the heads' outputs) and `W_fc`'s (after LayerNorm 2); and the
/// output head's (after the final LayerNorm).
struct Seen {
    layers: Vec<[Vec<f32>; 3]>,
    head: Vec<f32>,
}

/// `max[k] <- max(max[k], |row[k]|)` over the rows of `values`.
fn largest(max: &mut [f32], values: &[f32]) {
    for row in values.chunks_exact(max.len()) {
        max.iter_mut().zip(row).for_each(|(m, v)| *m = m.max(v.abs()));
    }
}

/// Which scratch buffer holds a product's input when [`Scratch::observe`] is called.
enum Input {
    Norm,
    Heads,
}

/// The buffers a pass over `n` tokens reuses from layer to layer.
struct Scratch {
    /// When calibrating, the largest inputs seen so far ([`Seen::layers`]).
    seen: Option<Vec<[Vec<f32>; 3]>>,
    n: usize,
    a: Vec<f32>,
    qkv: Vec<f32>,
    /// One head's attention weights (`n x n`), for a layer that keeps none.
    probs: Vec<f32>,
    concat: Vec<f32>,
    tmp: Vec<f32>,
    hidden: Vec<f32>,
}

impl Scratch {
    fn new(spec: &ModelSpec, n: usize) -> Scratch {
        let d = spec.d_model;
        Scratch {
            seen: None,
            n,
            a: vec![0.0; n * d],
            qkv: vec![0.0; n * 3 * d],
            probs: vec![0.0; n * n],
            concat: vec![0.0; n * d],
            tmp: vec![0.0; n * d],
            hidden: vec![0.0; n * spec.ffn],
        }
    }
}

impl Scratch {
    /// When calibrating, takes the largest magnitudes of the input of layer `l`'s product `i`.
    fn observe(&mut self, l: usize, i: usize, input: Input) {
        if let Some(seen) = &mut self.seen {
            let values = match input {
                Input::Norm => &self.a,
                Input::Heads => &self.concat,
            };
            largest(&mut seen[l][i], values);
        }
    }
}

/// Rows of logits made at once by a forward pass.
pub const READ_OUT_ROWS: usize = 32;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::spec::Activation;

    fn small() -> ModelSpec {
        ModelSpec {
            layers: 2,
            heads: 4,
            d_model: 20,
            ffn: 36,
            vocab: 50,
            positions: 40,
            activation: Activation::GeluTanh,
            layer_norm_eps: 1e-5,
            ..ModelSpec::MINILM_L6_V2
        }
    }

    #[test]
    fn a_token_reads_no_later_token() {
        let m = Gpt2::random(small(), 3);
        let all = HeadSet::all(8);
        let long = m.forward(Kernel::Scalar, &[4, 9, 1, 33, 2, 7], &all);
        let short = m.forward(Kernel::Scalar, &[4, 9, 1], &all);
        let d = m.spec.d_model;
        assert_eq!(
            &long.hidden[..3 * d],
            &short.hidden[..],
            "the first three rows see only the first three tokens"
        );
        assert_eq!(&long.losses[..2], &short.losses[..]);
        assert_eq!(short.next_logits, m.logits(Kernel::Scalar, &long.hidden[2 * d..3 * d]));
    }

    #[test]
    fn a_pass_in_steps_gives_the_bits_of_a_pass_at_once() {
        use crate::attention::turns::{at_once, InSteps};
        // A vocabulary wider than a strip, so the read-out is cut too.
        let m = Gpt2::random(ModelSpec { vocab: 77, ..small() }, 5);
        let ids = [4, 9, 1, 33, 2, 7, 7, 40, 11, 0, 76];
        for (kernel, pruned, keep) in [
            (Kernel::Simd, vec![], Keep::All),
            (Kernel::Simd, vec![1, 6], Keep::Layer(1)),
            (Kernel::Scalar, vec![0, 3, 5], Keep::All),
        ] {
            let heads = HeadSet::with_pruned(8, pruned.clone());
            let whole = m.forward_keeping(kernel, &ids, &heads, keep);
            for step in [1, 600, 5000] {
                let turns = InSteps::of(step);
                let cut = at_once(m.forward_in_turns(kernel, &ids, &heads, keep, &turns));
                assert_eq!(cut, whole, "{kernel:?}, {pruned:?} pruned, steps of {step}");
                // Each layer: three products cut, four heads; and the read-out.
                assert!(turns.taken() > 2 * (3 + 4 + 1), "{} turns in steps of {step}", turns.taken());
            }
        }
    }

    /// Texts of the small model's vocabulary for calibration and checks.
    fn texts(count: usize, len: usize, seed: u32) -> Vec<Vec<u32>> {
        let hash = crate::attention::synthetic::hash32;
        (0..count).map(|t| (0..len).map(|i| hash(seed ^ (t * 131 + i) as u32) % 50).collect()).collect()
    }

    #[test]
    fn an_8_bit_copy_shares_the_f32_weights_and_stays_near_them() {
        use crate::model::decoder::next_token::kl;
        let spec =
            ModelSpec { layers: 3, heads: 4, d_model: 64, ffn: 256, vocab: 50, positions: 40, ..small() };
        let m = Gpt2::random(spec, 11);
        let q = m.at_precision(Kernel::Simd, Precision::Int8, &texts(4, 30, 1));
        assert_eq!((m.precision(), q.precision()), (Precision::F16, Precision::Int8));
        let Rows::F32(word) = &m.word else { panic!("a random model's embedding is f32") };
        assert!(matches!(&q.word, Rows::F32(w) if Arc::ptr_eq(w, word)));
        assert!(Arc::ptr_eq(&m.blocks[2].ffn_in.w, &q.blocks[2].ffn_in.w));
        assert!(q.head.as_ref().is_some_and(|h| Arc::ptr_eq(&h.w, word)));
        // One byte a weight (a byte and a half for the 12-bit W_mlp) in place of f16's two,
        // beside the same positions, norms and biases: under 0.8 of the bytes at this small shape.
        assert!(q.stored_bytes() < m.stored_bytes() * 8 / 10, "{} of {}", q.stored_bytes(), m.stored_bytes());
        let all = HeadSet::all(12);
        let mut worst = 0.0f64;
        for (ids, heads) in texts(3, 33, 9).iter().zip([all.clone(), HeadSet::with_pruned(12, [1, 6]), all]) {
            let (f, g) = (m.forward(Kernel::Simd, ids, &heads), q.forward(Kernel::Simd, ids, &heads));
            let drift = kl(&f.next_logits, &g.next_logits);
            worst = worst.max(drift);
            // Random weights have no outlier features for smoothing to take, and logits up to
            // about 15 (losses near 10 nats): each of the four kinds of product adds 1e-5 to 1e-3
            // of KL and 0.01 to 0.15 nats to the worst loss (measured one at a time); together
            // 3.5e-3 and a mean change of 0.11 nats, about 1% of the loss.
            let change = f.losses.iter().zip(&g.losses).map(|(a, b)| (a - b).abs()).sum::<f64>() / 32.0;
            let mean = f.losses.iter().sum::<f64>() / 32.0;
            assert!(
                drift < 1e-2 && change < 0.02 * mean,
                "KL {drift:.1e}, mean loss change {change:.1e} of {mean:.1}"
            );
            // The scalar twin runs the same integers.
            assert_eq!(q.forward(Kernel::Scalar, ids, &heads).losses.len(), g.losses.len());
        }
        println!("8-bit decoder: next-token KL to f32 at most {worst:.1e}");
        let back = q.at_precision(Kernel::Simd, Precision::F16, &[]);
        assert_eq!(back, m, "dropping the 8-bit copies gives the f16 model back");
    }

    #[test]
    fn an_8_bit_pass_in_steps_gives_the_bits_of_a_pass_at_once() {
        use crate::attention::turns::{at_once, InSteps};
        let m = Gpt2::random(ModelSpec { vocab: 77, ..small() }, 5);
        let q = m.at_precision(Kernel::Simd, Precision::Int8, &texts(3, 20, 4));
        let ids = [4, 9, 1, 33, 2, 7, 7, 40, 11, 0, 76];
        let heads = HeadSet::with_pruned(8, [2]);
        let whole = q.forward(Kernel::Simd, &ids, &heads);
        for step in [1, 600, 5000] {
            let cut = at_once(q.forward_in_turns(Kernel::Simd, &ids, &heads, Keep::All, &InSteps::of(step)));
            assert_eq!(cut, whole, "steps of {step}");
        }
        // The copy made in steps is the copy made at once, with a turn after each block at least.
        let steps = InSteps::of(600);
        let stepped =
            at_once(m.at_precision_in_turns(Kernel::Simd, Precision::Int8, &texts(3, 20, 4), &steps));
        assert_eq!(stepped, q);
        assert!(steps.taken() > 2 * 3, "{} turns", steps.taken());
        let trace = q.residuals(Kernel::Simd, &ids);
        assert_eq!(
            q.next_logits_from(Kernel::Simd, &trace, 1, &HeadSet::with_pruned(8, [5])),
            q.forward(Kernel::Simd, &ids, &HeadSet::with_pruned(8, [5])).next_logits
        );
    }

    #[test]
    fn a_pass_from_a_later_layer_equals_the_whole_pass() {
        let m = Gpt2::random(small(), 7);
        let ids = [4, 9, 1, 33, 2, 7, 7, 40];
        let trace = m.residuals(Kernel::Scalar, &ids);
        let all = HeadSet::all(8);
        assert_eq!(trace.next_logits, m.forward(Kernel::Scalar, &ids, &all).next_logits);
        for (from, pruned) in [(0, vec![0]), (0, vec![1, 6]), (1, vec![5]), (1, vec![4, 7]), (2, vec![])] {
            let heads = HeadSet::with_pruned(8, pruned.clone());
            let whole = m.forward(Kernel::Scalar, &ids, &heads).next_logits;
            let resumed = m.next_logits_from(Kernel::Scalar, &trace, from, &heads);
            assert_eq!(resumed, whole, "from layer {from} with {pruned:?} pruned");
        }
    }

    #[test]
    fn a_pass_keeping_one_layer_gives_the_same_numbers_and_only_that_layers_attention() {
        let m = Gpt2::random(small(), 8);
        let ids = [3, 1, 4, 1, 5, 9, 2, 6];
        let heads = HeadSet::with_pruned(8, [2]);
        let all = m.forward(Kernel::Scalar, &ids, &heads);
        let one = m.forward_keeping(Kernel::Scalar, &ids, &heads, Keep::Layer(1));
        assert_eq!(
            (&one.next_logits, &one.losses, &one.hidden),
            (&all.next_logits, &all.losses, &all.hidden)
        );
        assert!(!one.kept(0) && one.kept(1) && !one.kept(2) && all.kept(0) && all.kept(1));
        assert_eq!((one.attention[0].len(), one.head_outputs[0].len()), (0, 0));
        assert_eq!(one.attention[1], all.attention[1]);
        assert_eq!(one.head_outputs[1], all.head_outputs[1]);
    }

    #[test]
    #[should_panic(expected = "every earlier head")]
    fn a_pass_from_a_later_layer_refuses_heads_pruned_before_it() {
        let m = Gpt2::random(small(), 7);
        let trace = m.residuals(Kernel::Scalar, &[1, 2, 3]);
        m.next_logits_from(Kernel::Scalar, &trace, 1, &HeadSet::with_pruned(8, [2]));
    }

    #[test]
    fn the_tensors_round_trip_through_the_checkpoint_layout() {
        let m = Gpt2::random(small(), 5);
        let spec = m.spec;
        let mut named = checkpoint_tensors(&m);
        let shapes: std::collections::HashMap<_, _> =
            crate::model::load::names::decoder_names(&spec).into_iter().collect();
        let back = Gpt2::from_tensors(spec, |n| Some((shapes[n].clone(), named.get(n)?.clone()))).unwrap();
        assert_eq!(back, m);
        named.remove("h.1.mlp.c_fc.bias");
        let e = Gpt2::from_tensors(spec, |n| Some((shapes[n].clone(), named.get(n)?.clone()))).unwrap_err();
        assert!(e.to_string().contains("h.1.mlp.c_fc.bias is missing"), "{e}");
        let e = Gpt2::from_tensors(spec, |n| Some((vec![1], named.get(n).cloned().unwrap_or_default())))
            .unwrap_err();
        assert!(e.to_string().contains("wte.weight has shape [1], expected [50, 20]"), "{e}");
    }

    /// `m`'s weights by the checkpoint's names, in its `[in, out]` layout.
    pub(crate) fn checkpoint_tensors(m: &Gpt2) -> std::collections::HashMap<String, Vec<f32>> {
        let mut named = std::collections::HashMap::new();
        named.insert("wte.weight".to_string(), m.word.values(0..m.word.len()).into_owned());
        named.insert("wpe.weight".to_string(), m.position.to_vec());
        named.insert("ln_f.weight".to_string(), m.ln_f.w.clone());
        named.insert("ln_f.bias".to_string(), m.ln_f.b.clone());
        for (l, b) in m.blocks.iter().enumerate() {
            for (name, lin) in [
                ("attn.c_attn", &b.qkv),
                ("attn.c_proj", &b.out),
                ("mlp.c_fc", &b.ffn_in),
                ("mlp.c_proj", &b.ffn_out),
            ] {
                named.insert(format!("h.{l}.{name}.weight"), transpose(&lin.w, lin.out(), lin.inp()));
                named.insert(format!("h.{l}.{name}.bias"), lin.b.clone());
            }
            for (name, norm) in [("ln_1", &b.ln1), ("ln_2", &b.ln2)] {
                named.insert(format!("h.{l}.{name}.weight"), norm.w.clone());
                named.insert(format!("h.{l}.{name}.bias"), norm.b.clone());
            }
        }
        named
    }

    #[test]
    fn a_model_held_at_8_bits_gives_the_bits_of_the_8_bit_copy_with_no_f32_weights() {
        // Odd widths, a vocabulary wider than a strip, a calibration text too long to read.
        let shapes = [
            (ModelSpec { layers: 3, heads: 4, d_model: 64, ffn: 256, ..small() }, 11),
            (ModelSpec { vocab: 77, ..small() }, 5),
            (ModelSpec { layers: 2, heads: 3, d_model: 27, ffn: 41, vocab: 93, positions: 48, ..small() }, 7),
        ];
        for (spec, seed) in shapes {
            let m = with_f16_embedding(Gpt2::random(spec, seed));
            let mut calibration = texts(4, 30, seed);
            calibration.push(vec![1; spec.positions + 1]);
            let copy = m.at_precision(Kernel::Simd, Precision::Int8, &calibration);
            let (held, turns) = held_at_8_bits(&m, &calibration);
            // A turn after each readable text's pass through a block, and after each block.
            assert_eq!(turns, spec.layers * 5, "{spec:?}");
            assert!(copy.holds_f32() && !held.holds_f32());
            let products = |g: &Gpt2| -> Vec<usize> {
                g.blocks
                    .iter()
                    .flat_map(|b| [&b.qkv, &b.out, &b.ffn_in, &b.ffn_out])
                    .map(|l| l.w.len())
                    .collect()
            };
            assert!(products(&held).iter().all(|&len| len == 0), "no f32 weights in a block");
            assert!(matches!(held.word, Rows::F16(_)) && held.head.as_ref().is_some_and(|h| !h.holds_f32()));
            assert_eq!(held.word.bytes(), 2 * (spec.vocab * spec.d_model) as u64, "the embedding in f16");
            assert_eq!((held.precision(), held.stored_bytes()), (Precision::Int8, copy.stored_bytes()));
            assert_eq!(held.blocks[1].ffn_out.inp(), spec.ffn);
            let ids: Vec<u32> = (0..33).map(|i| (i * 7 + 3) % 50).collect();
            for (kernel, pruned) in [(Kernel::Simd, vec![]), (Kernel::Scalar, vec![1, 5])] {
                let heads = HeadSet::with_pruned(spec.total_heads(), pruned);
                assert_eq!(
                    held.forward(kernel, &ids, &heads),
                    copy.forward(kernel, &ids, &heads),
                    "{spec:?}"
                );
            }
            assert_eq!(held.at_precision(Kernel::Simd, Precision::F16, &[]), held, "no f16 form");
        }
    }

    /// `m` with its embedding rounded to f16, as a model file holds it (so a model held at 8
    /// bits only, which keeps it in f16, reads the same values).
    pub(crate) fn with_f16_embedding(mut m: Gpt2) -> Gpt2 {
        m.word = Rows::from(m.word.in_f16().values(0..m.word.len()).into_owned());
        m
    }

    /// `m` held at 8 bits only, built from its checkpoint tensors and calibrated on `calibration`
    /// ([`Gpt2::held_at_8_bits_in_steps`]), and the number of turns it took.
    pub(crate) fn held_at_8_bits(m: &Gpt2, calibration: &[Vec<u32>]) -> (Gpt2, usize) {
        use crate::attention::turns::{at_once, InSteps};
        let (named, names) = (checkpoint_tensors(m), crate::model::load::names::decoder_names(&m.spec));
        let shapes: std::collections::HashMap<_, _> = names.into_iter().collect();
        let mut get = |n: &str| Some((shapes[n].clone(), named.get(n)?.clone()));
        let turns = InSteps::of(usize::MAX);
        let held =
            at_once(Gpt2::held_at_8_bits_in_steps(m.spec, &mut get, Kernel::Simd, calibration, &turns));
        (held.unwrap(), turns.taken())
    }
}
