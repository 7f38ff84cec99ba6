//! all-MiniLM-L6-v2's forward pass on the CPU kernel, with any set of its heads pruned.
//!
//! ```text
//! x = LayerNorm(word[id] + position[t] + token_type[0])
//! 6 times:  QKV = x W_{q,k,v}^T + b             (heads of 32, attention as in crate::cpu::attend)
//!           x = LayerNorm(x + concat_masked(heads) W_o^T + b_o)
//!           x = LayerNorm(x + GELU(x W_i^T + b_i) W_2^T + b_2)
//! embedding = normalize(mean over tokens of x)
//! ```
//!
//! Weights keep PyTorch's `[out, in]` layout; products use the transposed view, so nothing is
//! copied at load time.

use std::sync::Arc;

use crate::attention::HeadSet;
use crate::cpu::gelu::gelu_in_place;
use crate::cpu::gemm::{sgemm, MatMut, MatRef};
use crate::cpu::{attend, Kernel};

/// Width of the residual stream.
pub const D_MODEL: usize = 384;
/// Heads per layer.
pub const HEADS: usize = 12;
/// Per-head width.
pub const D_K: usize = D_MODEL / HEADS;
/// Layers.
pub const LAYERS: usize = 6;
/// Heads in the whole model, numbered `layer * HEADS + head`.
pub const TOTAL_HEADS: usize = LAYERS * HEADS;
/// Width of the feed-forward layer.
pub const FFN: usize = 1536;
/// Positions the model has embeddings for.
pub const MAX_POSITIONS: usize = 512;
const LN_EPS: f64 = 1e-12;

/// A dense layer `y = x W^T + b`, `W` stored `[out, in]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Linear {
    /// `out x in`, row-major.
    pub w: Vec<f32>,
    /// `out`.
    pub b: Vec<f32>,
}

/// LayerNorm's scale and shift.
#[derive(Clone, Debug, PartialEq)]
pub struct Norm {
    /// Scale.
    pub w: Vec<f32>,
    /// Shift.
    pub b: Vec<f32>,
}

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
    /// The layer after its attention branch (in `branch`, `rows x D_MODEL`):
    /// `x <- LayerNorm1(x + branch)`, then `x <- LayerNorm2(x + GELU(x W_i^T + b_i) W_2^T + b_2)`,
    /// with `branch` and `hidden` (`rows x FFN`) as scratch.
    pub(super) fn finish(&self, kernel: Kernel, x: &mut [f32], branch: &mut [f32], hidden: &mut [f32]) {
        let rows = x.len() / D_MODEL;
        x.iter_mut().zip(branch.iter()).for_each(|(a, b)| *a += b);
        layer_norm(x, &self.ln1);
        linear(kernel, x, rows, &self.ffn_in, hidden, FFN);
        gelu_in_place(kernel, hidden);
        linear(kernel, hidden, rows, &self.ffn_out, branch, D_MODEL);
        x.iter_mut().zip(branch.iter()).for_each(|(a, b)| *a += b);
        layer_norm(x, &self.ln2);
    }
}

/// Every weight of the model.
#[derive(Clone, Debug, PartialEq)]
pub struct Bert {
    /// `vocab x 384`.
    pub word: Vec<f32>,
    /// `512 x 384`.
    pub position: Vec<f32>,
    /// Token type 0's embedding, `384`.
    pub token_type: Vec<f32>,
    /// LayerNorm of the embeddings.
    pub ln_embed: Norm,
    /// The six layers.
    pub layers: Vec<Layer>,
}

/// Why weights could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError(pub String);

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the model's weights are unusable: {}", self.0)
    }
}

/// The names and shapes the model needs, in the checkpoint's naming.
pub fn tensor_names() -> Vec<(String, Vec<usize>)> {
    let mut names = vec![
        ("embeddings.word_embeddings.weight".to_string(), vec![30522, D_MODEL]),
        ("embeddings.position_embeddings.weight".into(), vec![MAX_POSITIONS, D_MODEL]),
        ("embeddings.token_type_embeddings.weight".into(), vec![2, D_MODEL]),
        ("embeddings.LayerNorm.weight".into(), vec![D_MODEL]),
        ("embeddings.LayerNorm.bias".into(), vec![D_MODEL]),
    ];
    for l in 0..LAYERS {
        let p = format!("encoder.layer.{l}.");
        for (name, out, inp) in [
            ("attention.self.query", D_MODEL, D_MODEL),
            ("attention.self.key", D_MODEL, D_MODEL),
            ("attention.self.value", D_MODEL, D_MODEL),
            ("attention.output.dense", D_MODEL, D_MODEL),
            ("intermediate.dense", FFN, D_MODEL),
            ("output.dense", D_MODEL, FFN),
        ] {
            names.push((format!("{p}{name}.weight"), vec![out, inp]));
            names.push((format!("{p}{name}.bias"), vec![out]));
        }
        for name in ["attention.output.LayerNorm", "output.LayerNorm"] {
            names.push((format!("{p}{name}.weight"), vec![D_MODEL]));
            names.push((format!("{p}{name}.bias"), vec![D_MODEL]));
        }
    }
    names
}

impl Bert {
    /// Builds the model from a source of named f32 tensors (a checkpoint or the page's asset),
    /// checking every shape.
    pub fn from_tensors(
        mut get: impl FnMut(&str) -> Option<(Vec<usize>, Vec<f32>)>,
    ) -> Result<Bert, LoadError> {
        let shapes: std::collections::HashMap<String, Vec<usize>> = tensor_names().into_iter().collect();
        let mut take = |name: &str| -> Result<Vec<f32>, LoadError> {
            let (shape, data) = get(name).ok_or_else(|| LoadError(format!("{name} is missing")))?;
            let want = &shapes[name];
            if &shape != want || data.len() != want.iter().product::<usize>() {
                return Err(LoadError(format!("{name} has shape {shape:?}, expected {want:?}")));
            }
            Ok(data)
        };
        let mut layers = Vec::with_capacity(LAYERS);
        for l in 0..LAYERS {
            let p = format!("encoder.layer.{l}.");
            let mut lin = |name: &str| -> Result<Linear, LoadError> {
                Ok(Linear { w: take(&format!("{p}{name}.weight"))?, b: take(&format!("{p}{name}.bias"))? })
            };
            let qkv =
                [lin("attention.self.query")?, lin("attention.self.key")?, lin("attention.self.value")?];
            let (out, ffn_in, ffn_out) =
                (lin("attention.output.dense")?, lin("intermediate.dense")?, lin("output.dense")?);
            let ln1 = lin("attention.output.LayerNorm")?;
            let ln2 = lin("output.LayerNorm")?;
            let norm = |l: Linear| Norm { w: l.w, b: l.b };
            layers.push(Layer { qkv, out, ln1: norm(ln1), ffn_in, ffn_out, ln2: norm(ln2) });
        }
        let token_types = take("embeddings.token_type_embeddings.weight")?;
        Ok(Bert {
            word: take("embeddings.word_embeddings.weight")?,
            position: take("embeddings.position_embeddings.weight")?,
            token_type: token_types[..D_MODEL].to_vec(),
            ln_embed: Norm { w: take("embeddings.LayerNorm.weight")?, b: take("embeddings.LayerNorm.bias")? },
            layers,
        })
    }

    /// Vocabulary size (rows of the word embedding).
    pub fn vocab_size(&self) -> usize {
        self.word.len() / D_MODEL
    }

    /// Runs the model on `ids` (at most 512, each below the vocabulary size) with only `heads`
    /// (of [`TOTAL_HEADS`], numbered `layer * HEADS + head`) active.
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
        let n = ids.len();
        let d = D_MODEL;
        let start = first_changed_layer(base, n, heads);
        let trace = base.filter(|b| b.seq_len == n && b.layer_inputs.len() == LAYERS);
        let (mut attention, mut head_outputs, mut layer_inputs, mut x) = match trace {
            Some(b) if start == LAYERS => return BertOutput { first_computed: LAYERS, ..b.clone() },
            Some(b) => (
                b.attention[..start].to_vec(),
                b.head_outputs.get(..start).map_or(Vec::new(), <[_]>::to_vec),
                b.layer_inputs[..start].to_vec(),
                b.layer_inputs[start].clone(),
            ),
            None => (
                Vec::with_capacity(LAYERS),
                Vec::with_capacity(LAYERS),
                Vec::with_capacity(LAYERS),
                self.embed(ids),
            ),
        };
        let mut first = trace
            .filter(|b| b.head_outputs.len() == LAYERS)
            .map(|b| (b.attention[start].clone(), b.head_outputs[start].clone()));
        let mut qkv = vec![0.0f32; n * 3 * d];
        let (mut concat, mut tmp, mut hidden) =
            (vec![0.0f32; n * d], vec![0.0f32; n * d], vec![0.0f32; n * FFN]);
        for (l, layer) in self.layers.iter().enumerate().skip(start) {
            layer_inputs.push(x.clone());
            let (att, outs) = first.take().unwrap_or_else(|| {
                for (i, lin) in layer.qkv.iter().enumerate() {
                    linear(kernel, &x, n, lin, &mut qkv[i * d..], 3 * d);
                }
                let mut att = vec![0.0f32; HEADS * n * n];
                let mut outs = vec![0.0f32; n * d];
                attend(kernel, &qkv, n, HEADS, D_K, &mut att, &mut outs);
                (Arc::new(att), Arc::new(outs))
            });
            concat.copy_from_slice(&outs);
            attention.push(att);
            head_outputs.push(outs);
            for h in heads.pruned_in_layer(l, HEADS) {
                concat.chunks_exact_mut(d).for_each(|row| row[h * D_K..(h + 1) * D_K].fill(0.0));
            }
            linear(kernel, &concat, n, &layer.out, &mut tmp, d);
            layer.finish(kernel, &mut x, &mut tmp, &mut hidden);
        }
        // A trace with a gap (the layers before `start` from a backend that kept no head outputs)
        // is not kept: a later pass recomputes that layer's heads.
        if head_outputs.len() != LAYERS {
            head_outputs.clear();
        }

        BertOutput {
            embedding: pool(&x),
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
        let (n, d) = (ids.len(), D_MODEL);
        assert!((1..=MAX_POSITIONS).contains(&n), "1 to 512 tokens");
        let mut x = vec![0.0f32; n * d];
        for (t, &id) in ids.iter().enumerate() {
            let id = id as usize;
            assert!(id < self.vocab_size(), "token id {id} out of range");
            for j in 0..d {
                x[t * d + j] = self.word[id * d + j] + self.position[t * d + j] + self.token_type[j];
            }
        }
        layer_norm(&mut x, &self.ln_embed);
        x
    }
}

/// The sentence embedding: the mean of the last layer's rows, L2-normalised.
pub fn pool(hidden: &[f32]) -> Vec<f32> {
    let n = (hidden.len() / D_MODEL).max(1);
    let mut pooled = vec![0.0f64; D_MODEL];
    for row in hidden.chunks_exact(D_MODEL) {
        pooled.iter_mut().zip(row).for_each(|(p, &v)| *p += v as f64 / n as f64);
    }
    let norm = pooled.iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-12);
    pooled.iter().map(|v| (v / norm) as f32).collect()
}

/// What a forward pass of the trained model produces.
#[derive(Clone, Debug, PartialEq)]
pub struct BertOutput {
    /// The L2-normalised mean-pooled sentence embedding, 384 values.
    pub embedding: Vec<f32>,
    /// Per layer, every head's attention weights: `12 x n x n` (shared with the passes that
    /// reuse the layer).
    pub attention: Vec<Arc<Vec<f32>>>,
    /// Per layer, every head's output before the output projection (`n x 384`, pruned heads
    /// included), or nothing where the backend does not keep them (the GPU): a later pass that
    /// prunes heads of layer `l` first reuses layer `l`'s heads, not only its input.
    pub head_outputs: Vec<Arc<Vec<f32>>>,
    /// Number of tokens.
    pub seq_len: usize,
    /// Per layer, its input hidden states (`n x 384`): a later pass that prunes only heads of
    /// layer `l` or later starts from `layer_inputs[l]`.
    pub layer_inputs: Vec<Vec<f32>>,
    /// The heads that were active.
    pub heads: HeadSet,
    /// The first layer this pass computed (0 for a full pass, `LAYERS` if nothing changed).
    pub first_computed: usize,
}

/// The first layer whose computation changes when `base`'s active heads become `heads`:
/// layers before it can be reused. `0` if `base` cannot be reused (other tokens, no trace).
pub fn first_changed_layer(base: Option<&BertOutput>, ids_len: usize, heads: &HeadSet) -> usize {
    assert_eq!(heads.len(), TOTAL_HEADS, "a set of the model's {TOTAL_HEADS} heads");
    let Some(base) = base.filter(|b| b.seq_len == ids_len && b.layer_inputs.len() == LAYERS) else {
        return 0;
    };
    base.heads.first_differing_layer(heads, HEADS).unwrap_or(LAYERS)
}

/// `y <- x W^T + b` for `x` (`n x in`); row `i` of the result goes to `y[i * rs..][..out]`.
pub(crate) fn linear(kernel: Kernel, x: &[f32], n: usize, lin: &Linear, y: &mut [f32], rs: usize) {
    let (out, inp) = (lin.b.len(), lin.w.len() / lin.b.len());
    sgemm(
        kernel,
        1.0,
        MatRef::row_major(x, n, inp),
        MatRef::row_major(&lin.w, out, inp).t(),
        0.0,
        MatMut::new(y, n, out, rs, 1),
    );
    for i in 0..n {
        y[i * rs..i * rs + out].iter_mut().zip(&lin.b).for_each(|(v, b)| *v += b);
    }
}

/// LayerNorm over each row of width 384, statistics in f64.
pub(crate) fn layer_norm(x: &mut [f32], norm: &Norm) {
    for row in x.chunks_exact_mut(D_MODEL) {
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / D_MODEL as f64;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / D_MODEL as f64;
        let inv = 1.0 / (var + LN_EPS).sqrt();
        for ((v, w), b) in row.iter_mut().zip(&norm.w).zip(&norm.b) {
            *v = ((*v as f64 - mean) * inv) as f32 * w + b;
        }
    }
}
