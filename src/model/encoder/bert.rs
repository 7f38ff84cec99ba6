//! A BERT encoder's forward pass on the CPU kernel, with any set of its heads pruned; its shape
//! is the model's [`ModelSpec`] (all-MiniLM-L6-v2's: 6 layers of 12 heads of 32); its layers are
//! the shared ones of [`crate::model::layers`].
//!
//! ```text
//! x = LayerNorm(word[id] + position[t] + token_type[0])
//! per layer: QKV = x W_{q,k,v}^T + b            (heads of d_k, attention as in crate::cpu::attend)
//!            x = LayerNorm(x + concat_masked(heads) W_o^T + b_o)
//!            x = LayerNorm(x + GELU(x W_i^T + b_i) W_2^T + b_2)
//! embedding = normalize(mean over tokens of x)
//! ```
//!
//! Weights keep PyTorch's `[out, in]` layout; products use the transposed view, so nothing is
//! copied at load time.

use std::sync::Arc;

use crate::attention::precision::Precision;
use crate::attention::turns::{at_once, AtOnce, Turns};
use crate::attention::HeadSet;
use crate::cpu::int8::IntBits;
use crate::cpu::{attend_in_turns, Kernel, Mask};
use crate::model::layers::{activate, layer_norm, linear, linear_in_turns, seeded, Linear, Norm};
use crate::model::load::names::encoder_names;
use crate::model::load::tensors::{checked, LoadError};
use crate::model::spec::{ModelSpec, Pooling};

/// One encoder layer.
#[derive(Clone, Debug, PartialEq)]
pub struct Layer {
    /// Query, key and value projections.
    pub qkv: [Linear; 3],
    /// Attention output projection.
    pub out: Linear,
    /// LayerNorm after attention.
    pub ln1: Norm,
    /// Feed-forward up-projection.
    pub ffn_in: Linear,
    /// Feed-forward down-projection.
    pub ffn_out: Linear,
    /// LayerNorm after the feed-forward layer.
    pub ln2: Norm,
}

impl Layer {
    /// The layer after its attention branch (in `branch`, `rows x d_model`):
    /// `x <- LayerNorm1(x + branch)`, then `x <- LayerNorm2(x + GELU(x W_i^T + b_i) W_2^T + b_2)`,
    /// with `branch` and `hidden` (`rows x ffn`) as scratch; its products in `turns`' steps.
    pub(super) async fn finish_in_turns(
        &self,
        kernel: Kernel,
        spec: &ModelSpec,
        x: &mut [f32],
        branch: &mut [f32],
        hidden: &mut [f32],
        turns: &dyn Turns,
    ) {
        let rows = x.len() / spec.d_model;
        x.iter_mut().zip(branch.iter()).for_each(|(a, b)| *a += b);
        layer_norm(x, &self.ln1, spec.layer_norm_eps);
        linear_in_turns(kernel, x, rows, &self.ffn_in, hidden, spec.ffn, turns).await;
        activate(kernel, spec.activation, hidden);
        linear_in_turns(kernel, hidden, rows, &self.ffn_out, branch, spec.d_model, turns).await;
        x.iter_mut().zip(branch.iter()).for_each(|(a, b)| *a += b);
        layer_norm(x, &self.ln2, spec.layer_norm_eps);
    }
}

/// Every weight of the model, and its shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Bert {
    /// The shape: every size below is the spec's.
    pub spec: ModelSpec,
    /// `vocab x d_model`.
    pub word: Vec<f32>,
    /// `positions x d_model`.
    pub position: Vec<f32>,
    /// Token type 0's embedding, `d_model`.
    pub token_type: Vec<f32>,
    /// LayerNorm of the embeddings.
    pub ln_embed: Norm,
    /// The layers.
    pub layers: Vec<Layer>,
}

impl Bert {
    /// Bytes its weights take in memory (f32, and the 8-bit copies where made).
    pub fn weight_bytes(&self) -> usize {
        let norm = |n: &Norm| n.w.len() + n.b.len();
        let lin = |l: &Linear| 4 * (l.w.len() + l.b.len()) + l.int8.as_ref().map_or(0, |q| q.bytes());
        let layers: usize = self
            .layers
            .iter()
            .map(|l| {
                l.qkv.iter().chain([&l.out, &l.ffn_in, &l.ffn_out]).map(lin).sum::<usize>()
                    + 4 * (norm(&l.ln1) + norm(&l.ln2))
            })
            .sum();
        layers + 4 * (self.word.len() + self.position.len() + self.token_type.len() + norm(&self.ln_embed))
    }

    /// Bytes of the weights its passes read, as the page stores them: every weight in f16
    /// ([`WEIGHT_BYTES`] each), except the dense layers' matrices at 8 bits
    /// when it runs at [`Precision::Int8`] (their bytes, W_2's 12-bit weights at a byte and a
    /// half, per-channel factors included; the biases stay f16). What the f16 weights beside them cost in memory is
    /// [`Bert::weight_bytes`]'s.
    pub fn stored_bytes(&self) -> u64 {
        use crate::model::spec::WEIGHT_BYTES;
        let layers: u64 = self
            .layers
            .iter()
            .map(|l| {
                l.qkv.iter().chain([&l.out, &l.ffn_in, &l.ffn_out]).map(Linear::stored_bytes).sum::<u64>()
                    + l.ln1.stored_bytes()
                    + l.ln2.stored_bytes()
            })
            .sum();
        let embeddings = self.word.len() + self.position.len() + self.token_type.len();
        layers + WEIGHT_BYTES * embeddings as u64 + self.ln_embed.stored_bytes()
    }

    /// The precision its dense layers run at.
    pub fn precision(&self) -> Precision {
        match self.layers.first() {
            Some(layer) if layer.out.int8.is_some() => Precision::Int8,
            _ => Precision::F16,
        }
    }

    /// Every dense layer at `precision`. For [`Precision::Int8`] the weights are quantized with
    /// the largest inputs each layer sees over `calibration` (token ids of a few sentences), as
    /// this model computes them in f32; for [`Precision::F16`] the 8-bit copies are dropped.
    pub fn set_precision(&mut self, kernel: Kernel, precision: Precision, calibration: &[Vec<u32>]) {
        if precision == self.precision() {
            return;
        }
        let maxima = match precision {
            Precision::F16 => None,
            Precision::Int8 => Some(self.input_maxima(kernel, calibration)),
        };
        for (l, layer) in self.layers.iter_mut().enumerate() {
            let [q, k, v] = &mut layer.qkv;
            let lins = [q, k, v, &mut layer.out, &mut layer.ffn_in, &mut layer.ffn_out];
            for (i, lin) in lins.into_iter().enumerate() {
                match &maxima {
                    None => lin.int8 = None,
                    Some(m) => {
                        let (input_max, bits) = int8_plan(i, &m[l]);
                        // Without maxima, no smoothing (every factor 1).
                        let unsmoothed = vec![0.0; lin.inp()];
                        lin.quantize(input_max.unwrap_or(&unsmoothed), bits);
                    }
                }
            }
        }
    }

    /// Per layer, the largest magnitude of each input feature of its smoothed products over the
    /// sentences `ids`: `[layer input (q, k, v), heads' outputs (W_o), after LayerNorm 1 (W_i)]`,
    /// all heads active, in f32.
    fn input_maxima(&self, kernel: Kernel, ids: &[Vec<u32>]) -> Vec<[Vec<f32>; 3]> {
        let spec = &self.spec;
        let d = spec.d_model;
        let mut maxima = vec![[vec![0.0f32; d], vec![0.0f32; d], vec![0.0f32; d]]; spec.layers];
        let all = HeadSet::all(spec.total_heads());
        for sentence in ids.iter().filter(|s| (1..=spec.positions).contains(&s.len())) {
            let pass = self.forward(kernel, sentence, &all);
            let n = sentence.len();
            for (l, layer) in self.layers.iter().enumerate() {
                let (x, heads) = (&pass.layer_inputs[l], &pass.head_outputs[l]);
                let mut after = vec![0.0f32; n * d];
                linear(kernel, heads, n, &layer.out, &mut after, d);
                after.iter_mut().zip(x).for_each(|(a, b)| *a += b);
                layer_norm(&mut after, &layer.ln1, spec.layer_norm_eps);
                for (max, values) in maxima[l].iter_mut().zip([&x[..], &heads[..], &after[..]]) {
                    for row in values.chunks_exact(max.len()) {
                        max.iter_mut().zip(row).for_each(|(m, v)| *m = m.max(v.abs()));
                    }
                }
            }
        }
        maxima
    }

    /// Builds a model of shape `spec` from a source of named f32 tensors (a checkpoint or the
    /// page's asset), checking every shape against the spec.
    pub fn from_tensors(
        spec: ModelSpec,
        get: impl FnMut(&str) -> Option<(Vec<usize>, Vec<f32>)>,
    ) -> Result<Bert, LoadError> {
        spec.validate().map_err(|e| LoadError(e.0))?;
        let mut take = checked(encoder_names(&spec), get);
        let mut layers = Vec::with_capacity(spec.layers);
        for l in 0..spec.layers {
            let p = format!("encoder.layer.{l}.");
            let mut lin = |name: &str| -> Result<Linear, LoadError> {
                Ok(Linear::new(take(&format!("{p}{name}.weight"))?, take(&format!("{p}{name}.bias"))?))
            };
            let qkv =
                [lin("attention.self.query")?, lin("attention.self.key")?, lin("attention.self.value")?];
            let (out, ffn_in, ffn_out) =
                (lin("attention.output.dense")?, lin("intermediate.dense")?, lin("output.dense")?);
            let mut norm = |name: &str| -> Result<Norm, LoadError> {
                Ok(Norm { w: take(&format!("{p}{name}.weight"))?, b: take(&format!("{p}{name}.bias"))? })
            };
            let (ln1, ln2) = (norm("attention.output.LayerNorm")?, norm("output.LayerNorm")?);
            layers.push(Layer { qkv, out, ln1, ffn_in, ffn_out, ln2 });
        }
        let token_types = take("embeddings.token_type_embeddings.weight")?;
        Ok(Bert {
            spec,
            word: take("embeddings.word_embeddings.weight")?,
            position: take("embeddings.position_embeddings.weight")?,
            token_type: token_types[..spec.d_model].to_vec(),
            ln_embed: Norm { w: take("embeddings.LayerNorm.weight")?, b: take("embeddings.LayerNorm.bias")? },
            layers,
        })
    }

    /// A model of shape `spec` with seeded random weights: uniform, each dense layer of unit gain
    /// (variance `1 / inputs`), LayerNorm scales near 1. For tests and benchmarks of shapes the
    /// page has no checkpoint for; never shown as a trained model.
    pub fn random(spec: ModelSpec, seed: u32) -> Bert {
        let values = seeded(seed.wrapping_mul(0x9e37_79b9), 0x0dd_ba11);
        let linear = |out: usize, inp: usize| {
            Linear::new(values(out * inp, (3.0 / inp as f32).sqrt()), values(out, 0.1))
        };
        let norm =
            |d: usize| Norm { w: values(d, 0.2).iter().map(|v: &f32| 1.0 + v).collect(), b: values(d, 0.1) };
        let (d, ffn) = (spec.d_model, spec.ffn);
        let layers = (0..spec.layers)
            .map(|_| Layer {
                qkv: [linear(d, d), linear(d, d), linear(d, d)],
                out: linear(d, d),
                ln1: norm(d),
                ffn_in: linear(ffn, d),
                ffn_out: linear(d, ffn),
                ln2: norm(d),
            })
            .collect();
        Bert {
            spec,
            word: values(spec.vocab * d, 1.0),
            position: values(spec.positions * d, 0.3),
            token_type: values(d, 0.1),
            ln_embed: norm(d),
            layers,
        }
    }

    /// The model's shape.
    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// Vocabulary size (rows of the word embedding).
    pub fn vocab_size(&self) -> usize {
        self.word.len() / self.spec.d_model
    }

    /// Runs the model on `ids` (1 to the spec's positions, each below the vocabulary size) with
    /// only `heads` (of the spec's total, numbered `layer * heads + head`) active.
    pub fn forward(&self, kernel: Kernel, ids: &[u32], heads: &HeadSet) -> BertOutput {
        self.forward_from(kernel, ids, heads, None)
    }

    /// [`Bert::forward`], reusing from `base` (a pass on the same `ids`) every layer before the
    /// first one whose pruned heads differ, and in that layer the heads' outputs and attention
    /// when `base` kept them (its input is `base`'s, so only the output projection and the
    /// feed-forward layer change): the result is the same, bit for bit.
    pub fn forward_from(
        &self,
        kernel: Kernel,
        ids: &[u32],
        heads: &HeadSet,
        base: Option<&BertOutput>,
    ) -> BertOutput {
        self.forward_patched(kernel, ids, heads, base, None)
    }

    /// [`Bert::forward_from`] with `patch`'s heads' outputs taken from its source pass (activation
    /// patching): in each patched head's layer, that head's output (its `n x d_k` columns before
    /// the output projection) is the source's, whatever this pass's input; everything after it
    /// follows. The layers before the first patched (or first differently pruned) one are
    /// `base`'s. With no heads listed, or a source on the same tokens, the result is
    /// [`Bert::forward_from`]'s, bit for bit.
    pub fn forward_patched(
        &self,
        kernel: Kernel,
        ids: &[u32],
        heads: &HeadSet,
        base: Option<&BertOutput>,
        patch: Option<Patch<'_>>,
    ) -> BertOutput {
        at_once(self.pass_in_turns(kernel, ids, heads, base, patch, Retained::Trace, &AtOnce))
    }

    /// The sentence embedding [`Bert::forward_patched`] computes, the same bits, without keeping
    /// what only a later pass or a heatmap reads: no layer's attention weights, head outputs or
    /// input are kept (one `n x n` buffer of attention weights serves every head of every layer,
    /// [`crate::cpu::attend_outputs`]). What the importance sweeps and patching run for each
    /// head, where only the embedding is compared.
    pub fn embed_patched(
        &self,
        kernel: Kernel,
        ids: &[u32],
        heads: &HeadSet,
        base: Option<&BertOutput>,
        patch: Option<Patch<'_>>,
    ) -> Vec<f32> {
        at_once(self.embed_in_turns(kernel, ids, heads, base, patch, &AtOnce))
    }

    /// [`Bert::forward_from`] with its products and heads in `turns`' steps: the same bits.
    pub async fn forward_in_turns(
        &self,
        kernel: Kernel,
        ids: &[u32],
        heads: &HeadSet,
        base: Option<&BertOutput>,
        turns: &dyn Turns,
    ) -> BertOutput {
        self.pass_in_turns(kernel, ids, heads, base, None, Retained::Trace, turns).await
    }

    /// [`Bert::embed_patched`] with its products and heads in `turns`' steps: the same bits.
    pub async fn embed_in_turns(
        &self,
        kernel: Kernel,
        ids: &[u32],
        heads: &HeadSet,
        base: Option<&BertOutput>,
        patch: Option<Patch<'_>>,
        turns: &dyn Turns,
    ) -> Vec<f32> {
        self.pass_in_turns(kernel, ids, heads, base, patch, Retained::Embedding, turns).await.embedding
    }

    #[allow(clippy::too_many_arguments)] // the pass's inputs, what it keeps and its turns
    async fn pass_in_turns(
        &self,
        kernel: Kernel,
        ids: &[u32],
        heads: &HeadSet,
        base: Option<&BertOutput>,
        patch: Option<Patch<'_>>,
        keep: Retained,
        turns: &dyn Turns,
    ) -> BertOutput {
        let spec = &self.spec;
        let (n, d, layers) = (ids.len(), spec.d_model, spec.layers);
        let patched_from = patch.and_then(|p| p.first_layer(spec)).unwrap_or(layers);
        if let Some(p) = patch {
            assert!(p.fits(spec, n), "a patch's source is a pass of {n} tokens that kept its heads' outputs");
        }
        let start = first_changed_layer(spec, base, n, heads).min(patched_from);
        // (A trace handed to a worker has no attention weights: only a pass that keeps nothing
        // starts from it.)
        let trace = base.filter(|b| {
            b.seq_len == n
                && b.layer_inputs.len() == layers
                && (keep == Retained::Embedding || b.attention.len() == layers)
        });
        let (mut attention, mut head_outputs, mut layer_inputs, mut x) = match trace {
            Some(b) if start == layers => return BertOutput { first_computed: layers, ..b.clone() },
            Some(b) if keep == Retained::Embedding => {
                (Vec::new(), Vec::new(), Vec::new(), b.layer_inputs[start].clone())
            }
            Some(b) => (
                b.attention[..start].to_vec(),
                b.head_outputs.get(..start).map_or(Vec::new(), <[_]>::to_vec),
                b.layer_inputs[..start].to_vec(),
                b.layer_inputs[start].clone(),
            ),
            None => (
                Vec::with_capacity(layers),
                Vec::with_capacity(layers),
                Vec::with_capacity(layers),
                self.embed(ids),
            ),
        };
        let mut first = trace
            .filter(|b| b.head_outputs.len() == layers)
            .map(|b| (b.attention.get(start).cloned(), b.head_outputs[start].clone()));
        let mut qkv = vec![0.0f32; n * 3 * d];
        let (mut concat, mut tmp, mut hidden) =
            (vec![0.0f32; n * d], vec![0.0f32; n * d], vec![0.0f32; n * spec.ffn]);
        let (heads_per_layer, d_k) = (spec.heads, spec.d_k());
        // Where a pass that keeps nothing writes every head's attention weights (one head at a
        // time) and every layer's head outputs.
        let mut scratch = (keep == Retained::Embedding).then(|| (vec![0.0f32; n * n], vec![0.0f32; n * d]));
        for (l, layer) in self.layers.iter().enumerate().skip(start) {
            if keep == Retained::Trace {
                layer_inputs.push(x.clone());
            }
            let kept = match first.take() {
                Some(kept) => Some(kept),
                None => {
                    for (i, lin) in layer.qkv.iter().enumerate() {
                        linear_in_turns(kernel, &x, n, lin, &mut qkv[i * d..], 3 * d, turns).await;
                    }
                    let h = heads_per_layer;
                    match &mut scratch {
                        Some((probs, outs)) => {
                            attend_in_turns(kernel, &qkv, n, h, d_k, Mask::None, probs, outs, turns).await;
                            None
                        }
                        None => {
                            let (mut att, mut outs) = (vec![0.0f32; h * n * n], vec![0.0f32; n * d]);
                            attend_in_turns(kernel, &qkv, n, h, d_k, Mask::None, &mut att, &mut outs, turns)
                                .await;
                            Some((Some(Arc::new(att)), Arc::new(outs)))
                        }
                    }
                }
            };
            let patched = patch.filter(|p| p.heads.iter().any(|&h| spec.layer_of(h) == l));
            match kept {
                Some((att, outs)) => {
                    let outs = match patched {
                        Some(p) => p.apply(spec, l, &outs),
                        None => outs,
                    };
                    concat.copy_from_slice(&outs);
                    if keep == Retained::Trace {
                        attention
                            .push(att.expect("a pass that keeps its trace starts from one with attention"));
                        head_outputs.push(outs);
                    }
                }
                None => {
                    let own = &scratch.as_ref().expect("a pass that keeps nothing computes here").1;
                    match patched {
                        Some(p) => concat.copy_from_slice(&p.apply(spec, l, own)),
                        None => concat.copy_from_slice(own),
                    }
                }
            }
            for h in heads.pruned_in_layer(l, heads_per_layer) {
                concat.chunks_exact_mut(d).for_each(|row| row[h * d_k..(h + 1) * d_k].fill(0.0));
            }
            linear_in_turns(kernel, &concat, n, &layer.out, &mut tmp, d, turns).await;
            layer.finish_in_turns(kernel, spec, &mut x, &mut tmp, &mut hidden, turns).await;
        }
        // A trace with a gap (the layers before `start` from a backend that kept no head outputs)
        // is not kept: a later pass recomputes that layer's heads.
        if head_outputs.len() != layers {
            head_outputs.clear();
        }

        BertOutput {
            embedding: pool(spec, &x),
            attention,
            head_outputs,
            seq_len: n,
            layer_inputs,
            heads: heads.clone(),
            first_computed: start,
        }
    }

    /// The input of the first layer: `LayerNorm(word[id] + position[t] + token_type[0])`.
    pub fn embed(&self, ids: &[u32]) -> Vec<f32> {
        let (n, d) = (ids.len(), self.spec.d_model);
        assert!((1..=self.spec.positions).contains(&n), "1 to {} tokens", self.spec.positions);
        let mut x = vec![0.0f32; n * d];
        for (t, &id) in ids.iter().enumerate() {
            let id = id as usize;
            assert!(id < self.vocab_size(), "token id {id} out of range");
            for j in 0..d {
                x[t * d + j] = self.word[id * d + j] + self.position[t * d + j] + self.token_type[j];
            }
        }
        layer_norm(&mut x, &self.ln_embed, self.spec.layer_norm_eps);
        x
    }
}

/// The sentence embedding of the last layer's rows (`tokens x d_model`), pooled as `spec` says:
/// the mean of the rows or the first row, L2-normalised or not (sums in f64).
pub fn pool(spec: &ModelSpec, hidden: &[f32]) -> Vec<f32> {
    let d = spec.d_model;
    let (rows, normalize) = match spec.pooling {
        Pooling::Mean { normalize } => (hidden.chunks_exact(d).collect::<Vec<_>>(), normalize),
        Pooling::Cls { normalize } => (hidden.chunks_exact(d).take(1).collect(), normalize),
    };
    let n = rows.len().max(1);
    let mut pooled = vec![0.0f64; d];
    for row in rows {
        pooled.iter_mut().zip(row).for_each(|(p, &v)| *p += v as f64 / n as f64);
    }
    let norm = if normalize { pooled.iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-12) } else { 1.0 };
    pooled.iter().map(|v| (v / norm) as f32).collect()
}

/// Heads whose outputs a pass takes from another pass (activation patching,
/// [`Bert::forward_patched`]): the source ran on tokens of the same count (position `t` of one is
/// position `t` of the other) and kept its heads' outputs (a CPU pass).
#[derive(Clone, Copy, Debug)]
pub struct Patch<'a> {
    /// The heads patched, numbered as in a [`HeadSet`].
    pub heads: &'a [usize],
    /// The pass their outputs come from.
    pub from: &'a BertOutput,
}

impl Patch<'_> {
    /// The first layer with a patched head (`None` when none is listed).
    fn first_layer(&self, spec: &ModelSpec) -> Option<usize> {
        self.heads.iter().map(|&h| spec.layer_of(h)).min()
    }

    /// Whether the source can patch a pass of `n` tokens of a model of shape `spec`.
    fn fits(&self, spec: &ModelSpec, n: usize) -> bool {
        self.from.seq_len == n
            && self.from.head_outputs.len() == spec.layers
            && self.heads.iter().all(|&h| h < spec.total_heads())
    }

    /// Layer `l`'s heads' outputs (`n x d_model`) with the patched heads' columns the source's.
    fn apply(&self, spec: &ModelSpec, l: usize, outs: &[f32]) -> Arc<Vec<f32>> {
        let (d, d_k, source) = (spec.d_model, spec.d_k(), &self.from.head_outputs[l]);
        let mut patched = outs.to_vec();
        for h in self.heads.iter().filter(|&&h| spec.layer_of(h) == l).map(|&h| spec.head_in_layer(h)) {
            for (row, from) in patched.chunks_exact_mut(d).zip(source.chunks_exact(d)) {
                row[h * d_k..(h + 1) * d_k].copy_from_slice(&from[h * d_k..(h + 1) * d_k]);
            }
        }
        Arc::new(patched)
    }
}

/// What a pass keeps besides the embedding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Retained {
    /// Every layer's attention weights, head outputs and input ([`BertOutput`]'s trace).
    Trace,
    /// Nothing: the trace's fields are left empty.
    Embedding,
}

/// What a forward pass of the trained model produces.
#[derive(Clone, Debug, PartialEq)]
pub struct BertOutput {
    /// The pooled sentence embedding, `d_model` values.
    pub embedding: Vec<f32>,
    /// Per layer, every head's attention weights: `heads x n x n` (shared with the passes that
    /// reuse the layer).
    pub attention: Vec<Arc<Vec<f32>>>,
    /// Per layer, every head's output before the output projection (`n x d_model`, pruned heads
    /// included), or nothing where the backend does not keep them (the GPU): a later pass that
    /// prunes heads of layer `l` first reuses layer `l`'s heads, not only its input.
    pub head_outputs: Vec<Arc<Vec<f32>>>,
    /// Number of tokens.
    pub seq_len: usize,
    /// Per layer, its input hidden states (`n x d_model`): a later pass that prunes only heads of
    /// layer `l` or later starts from `layer_inputs[l]`.
    pub layer_inputs: Vec<Vec<f32>>,
    /// The heads that were active.
    pub heads: HeadSet,
    /// The first layer this pass computed (0 for a full pass, the layer count if nothing changed).
    pub first_computed: usize,
}

/// The first layer of a model of shape `spec` whose computation changes when `base`'s active
/// heads become `heads`: layers before it can be reused. `0` if `base` cannot be reused (other
/// tokens, no trace).
pub fn first_changed_layer(
    spec: &ModelSpec,
    base: Option<&BertOutput>,
    ids_len: usize,
    heads: &HeadSet,
) -> usize {
    let total = spec.total_heads();
    assert_eq!(heads.len(), total, "a set of the model's {total} heads");
    let Some(base) = base.filter(|b| b.seq_len == ids_len && b.layer_inputs.len() == spec.layers) else {
        return 0;
    };
    base.heads.first_differing_layer(heads, spec.heads).unwrap_or(spec.layers)
}

/// How the `i`-th dense layer of a layer (`q, k, v, W_o, W_i, W_2`) runs in an 8-bit model, from
/// the largest inputs of the layer's smoothed products (`maxima`): its smoothing's activation
/// maxima (`None`: no smoothing) and its integers' width. Chosen by measurement on MiniLM
/// (`tests/minilm_reference.rs`, cosines of the embedding to the float64 reference and to the
/// f16 model at 8 to 512 tokens): the feed-forward layer's second product (GELU's output) runs
/// on 12-bit weights and activations, because in 8 bits it alone cost 0.9995 at 512 tokens, as
/// much as every other product together, with or without smoothing or clipping (all in 8 bits:
/// 0.9989), and no smoothing (with the residual plan, smoothing it only moved error into its
/// activations: worst cosine 0.9990 with, 0.9991 without; not measured again at 12 bits).
/// Its 12-bit product (worst cosine 0.9994, like the same product in f32) replaced a residual
/// one (its weights' rounding error in a second 8-bit product on the same 7-bit codes: worst
/// 0.9991, and twice the integer work: BENCHMARKS.md section 13).
fn int8_plan(i: usize, maxima: &[Vec<f32>; 3]) -> (Option<&[f32]>, IntBits) {
    match i {
        0..=2 => (Some(&maxima[0]), IntBits::Eight),
        3 => (Some(&maxima[1]), IntBits::Eight),
        4 => (Some(&maxima[2]), IntBits::Eight),
        _ => (None, IntBits::Twelve),
    }
}
