//! A trained model's shape as one value, for both families: layers, heads, widths, vocabulary,
//! positions, the feed-forward activation, the LayerNorm epsilon, and (for an encoder) the
//! pooling. Every loop, head set, grid, link and mark reads it from the loaded model; nothing
//! else in the crate knows a model's numbers.

use crate::attention::HeadSet;

/// Bytes per stored weight in the page's asset (f16).
pub const WEIGHT_BYTES: u64 = 2;

/// How a thread holds a decoder's weights (the decoder family's choice): in f32 (the page's "f16"
/// precision, f16 weights widened, with an 8-bit copy made beside them on demand), or at 8 bits
/// only, when its file and its f32 weights would not fit in a page's memory together
/// ([`PAGE_BYTES`]): GPT-2 Large's 774 M weights are 1.5 GB in the file and would be 3.1 GB more
/// in f32, at 8 bits about 1.3 GB. A model held at 8 bits only has no f16 form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holding {
    /// f32 weights (and an 8-bit copy beside them when asked for).
    F32,
    /// The blocks' products and the output head at 8 bits only, built a block at a time.
    Int8Only,
}

/// The most bytes a model may take in a page's wasm memory: its weights, and its file where that
/// memory holds it too. A wasm page has 4 GiB of memory, and the page, the previous model until
/// the new one is ready, and the passes need the rest.
pub const PAGE_BYTES: u64 = 3 << 30;

impl Holding {
    /// How many weights a GPT-2-family decoder of shape `spec` has, biases and norms included.
    pub fn weights(spec: &ModelSpec) -> u64 {
        let (d, ffn, layers) = (spec.d_model as u64, spec.ffn as u64, spec.layers as u64);
        // Per block: W_attn, W_proj, W_fc, W_mlp, their biases, two LayerNorms; and the final one.
        (spec.vocab as u64 + spec.positions as u64) * d
            + layers * (4 * d * d + 2 * d * ffn + 9 * d + ffn)
            + 2 * d
    }

    /// Bytes of a decoder of shape `spec`'s model file's weights (f16).
    pub fn file_bytes(spec: &ModelSpec) -> u64 {
        WEIGHT_BYTES * Holding::weights(spec)
    }

    /// How a decoder of shape `spec` is held: in f32 if its file and f32 weights fit in
    /// [`PAGE_BYTES`] together (its file lies outside the page's wasm memory now, but that much
    /// leaves room for a copy at another precision beside the f32 weights), else at 8 bits only.
    pub fn for_spec(spec: &ModelSpec) -> Holding {
        match Holding::F32.page_bytes(spec) <= PAGE_BYTES {
            true => Holding::F32,
            false => Holding::Int8Only,
        }
    }

    /// Bytes a page needs to hold a decoder of shape `spec` this way, its model file (f16)
    /// included: [`Holding::model_bytes`] and [`Holding::file_bytes`].
    pub fn page_bytes(self, spec: &ModelSpec) -> u64 {
        Holding::file_bytes(spec) + self.model_bytes(spec)
    }

    /// Bytes the model itself takes, held this way: in f32, 4 bytes a weight; at 8 bits only,
    /// each block weight's byte (a byte and a half for `W_mlp`'s 12-bit weights), and the
    /// embedding in f16 beside the head's 8-bit copy.
    pub fn model_bytes(self, spec: &ModelSpec) -> u64 {
        let (d, ffn, layers) = (spec.d_model as u64, spec.ffn as u64, spec.layers as u64);
        let (vocab, positions) = (spec.vocab as u64, spec.positions as u64);
        match self {
            Holding::F32 => 4 * Holding::weights(spec),
            Holding::Int8Only => {
                // W_attn, W_proj and W_fc a byte a weight, W_mlp a byte and a half; each output's
                // scale and sum and each input's smoothing factor; the biases and norms in f32.
                let products = 4 * d * d + d * ffn + 3 * ffn * d / 2 + 8 * (5 * d + ffn) + 4 * (3 * d + ffn);
                let others = 4 * (9 * d + ffn);
                layers * (products + others) + (2 + 1) * vocab * d + 4 * positions * d
            }
        }
    }
}

/// The feed-forward layer's activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// The exact GELU, `x Φ(x)` (BERT's `"gelu"`).
    Gelu,
    /// GELU's tanh approximation, `x (1 + tanh(sqrt(2 / π) (x + 0.044715 x^3))) / 2` (GPT-2's and
    /// some BERTs' `"gelu_new"`, PyTorch's `"gelu_pytorch_tanh"`).
    GeluTanh,
}

/// How the last layer's rows become the sentence embedding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// The mean over tokens (sentence-transformers' mean pooling), L2-normalised when
    /// `normalize` (its `Normalize` module).
    Mean {
        /// Whether the embedding is scaled to unit length.
        normalize: bool,
    },
    /// The first token's row (`[CLS]`; sentence-transformers' CLS pooling), L2-normalised when
    /// `normalize`.
    Cls {
        /// Whether the embedding is scaled to unit length.
        normalize: bool,
    },
}

/// The shape of a trained model of either family: a BERT-family encoder (whose layers are
/// post-LayerNorm and whose output is a pooled sentence embedding) or a GPT-2 decoder (whose
/// blocks are pre-LayerNorm and causal, and whose output is the next token; [`ModelSpec::pooling`]
/// is unused there). Heads are numbered `layer * heads + head` in both.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelSpec {
    /// Layers (an encoder's layers, a decoder's blocks).
    pub layers: usize,
    /// Heads per layer.
    pub heads: usize,
    /// Width of the residual stream.
    pub d_model: usize,
    /// Width of the feed-forward layer.
    pub ffn: usize,
    /// Rows of the word embedding.
    pub vocab: usize,
    /// Positions the model has embeddings for: the longest input, in tokens.
    pub positions: usize,
    /// The feed-forward activation.
    pub activation: Activation,
    /// How an encoder's sentence embedding is pooled (a decoder's file keeps the default).
    pub pooling: Pooling,
    /// LayerNorm's epsilon.
    pub layer_norm_eps: f64,
}

/// Why a shape cannot be a model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError(pub String);

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the model's shape is unusable: {}", self.0)
    }
}

impl std::error::Error for SpecError {}

impl ModelSpec {
    /// sentence-transformers/all-MiniLM-L6-v2, as its `config.json` gives it: the page's
    /// built-in model.
    pub const MINILM_L6_V2: ModelSpec = ModelSpec {
        layers: 6,
        heads: 12,
        d_model: 384,
        ffn: 1536,
        vocab: 30522,
        positions: 512,
        activation: Activation::Gelu,
        pooling: Pooling::Mean { normalize: true },
        layer_norm_eps: 1e-12,
    };

    /// Every size positive and the heads dividing the width evenly.
    pub fn validate(&self) -> Result<(), SpecError> {
        let sizes = [
            ("layers", self.layers),
            ("heads", self.heads),
            ("d_model", self.d_model),
            ("the feed-forward width", self.ffn),
            ("the vocabulary", self.vocab),
            ("positions", self.positions),
        ];
        if let Some((name, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return Err(SpecError(format!("{name} is 0")));
        }
        if !self.d_model.is_multiple_of(self.heads) {
            return Err(SpecError(format!(
                "d_model {} is not a multiple of {} heads",
                self.d_model, self.heads
            )));
        }
        if !(self.layer_norm_eps > 0.0 && self.layer_norm_eps < 1.0) {
            return Err(SpecError(format!("LayerNorm's epsilon {} is not in (0, 1)", self.layer_norm_eps)));
        }
        Ok(())
    }

    /// Per-head width.
    pub fn d_k(&self) -> usize {
        self.d_model / self.heads
    }

    /// Heads in the whole model, numbered `layer * heads + head`.
    pub fn total_heads(&self) -> usize {
        self.layers * self.heads
    }

    /// The layer of head `h` (of [`ModelSpec::total_heads`]).
    pub fn layer_of(&self, h: usize) -> usize {
        h / self.heads
    }

    /// Head `h`'s index within its layer.
    pub fn head_in_layer(&self, h: usize) -> usize {
        h % self.heads
    }

    /// Head `h` as the page names it: "layer 3 head 7" (layers from 1, heads from 0, as the grid
    /// labels them).
    pub fn head_name(&self, h: usize) -> String {
        format!("layer {} head {}", self.layer_of(h) + 1, self.head_in_layer(h))
    }

    /// The heads of layer `layer` (0-based), as model-wide indices.
    pub fn layer_heads(&self, layer: usize) -> std::ops::Range<usize> {
        layer * self.heads..(layer + 1) * self.heads
    }

    /// Every head of layer `layer` (0-based) pruned, and no other.
    pub fn layer_pruned(&self, layer: usize) -> HeadSet {
        HeadSet::with_pruned(self.total_heads(), self.layer_heads(layer))
    }

    /// A link's heads and layer for this model (`name` names it in the notes): the heads it has
    /// keep their state and the rest are dropped, a layer it has not shows the first; with a note
    /// for each, for the page.
    pub fn fit_link(&self, name: &str, heads: &HeadSet, layer: usize) -> (HeadSet, usize, Vec<String>) {
        let total = self.total_heads();
        let mut notes = Vec::new();
        let missing: Vec<String> = heads.pruned().filter(|&h| h >= total).map(|h| h.to_string()).collect();
        if !missing.is_empty() {
            let listed = if missing.len() > 5 {
                format!("{} and {} more", missing[..5].join(", "), missing.len() - 5)
            } else {
                missing.join(", ")
            };
            notes.push(format!(
                "pruned= names heads {name} does not have ({listed}; it has {total}); they are ignored."
            ));
        }
        let fitted = if layer < self.layers {
            layer
        } else {
            notes.push(format!("layer={layer} is past {name}'s {} layers; showing layer 1.", self.layers));
            0
        };
        (heads.resized(total), fitted, notes)
    }

    /// Michel et al.'s marks for this model: 20 % of its heads (their WMT result) and 40 % (BERT
    /// on MNLI), rounded.
    pub fn michel_marks(&self) -> [usize; 2] {
        let total = self.total_heads() as f64;
        [(total * 0.2).round() as usize, (total * 0.4).round() as usize]
    }

    /// Heads pruned when each layer keeps one: the one-head-per-layer point of the curves.
    pub fn one_per_layer_pruned(&self) -> usize {
        self.total_heads() - self.layers
    }
}

/// A small shape for tests: 2 layers of 4 heads of 5, FFN 36, 50 pieces, 16 positions.
#[cfg(test)]
impl ModelSpec {
    pub(crate) const SMALL: ModelSpec = ModelSpec {
        layers: 2,
        heads: 4,
        d_model: 20,
        ffn: 36,
        vocab: 50,
        positions: 16,
        ..ModelSpec::MINILM_L6_V2
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minilms_shape_is_its_config() {
        let m = ModelSpec::MINILM_L6_V2;
        assert_eq!(m.validate(), Ok(()));
        assert_eq!((m.d_k(), m.total_heads(), m.one_per_layer_pruned()), (32, 72, 66));
        assert_eq!(m.michel_marks(), [14, 29]);
        assert_eq!((m.layer_of(13), m.head_in_layer(13), m.head_name(13)), (1, 1, "layer 2 head 1".into()));
        assert_eq!(m.layer_heads(5), 60..72);
    }

    #[test]
    fn a_links_heads_and_layer_fit_the_loaded_model_with_a_note_for_what_it_lacks() {
        let m = ModelSpec::MINILM_L6_V2;
        let (heads, layer, notes) = m.fit_link("all-MiniLM-L6-v2", &HeadSet::with_pruned(14, [2, 13]), 5);
        assert_eq!((heads, layer, notes), (HeadSet::with_pruned(72, [2, 13]), 5, vec![]));
        let (heads, layer, notes) = m.fit_link("m", &HeadSet::with_pruned(201, [3, 72, 200]), 6);
        assert_eq!((heads, layer), (HeadSet::with_pruned(72, [3]), 0));
        assert_eq!(
            notes,
            [
                "pruned= names heads m does not have (72, 200; it has 72); they are ignored.",
                "layer=6 is past m's 6 layers; showing layer 1."
            ]
        );
        let many = HeadSet::with_pruned(90, 72..90);
        assert!(m.fit_link("m", &many, 0).2[0].contains("(72, 73, 74, 75, 76 and 13 more;"));
    }

    #[test]
    fn a_small_model_has_marks_of_its_own_and_bad_shapes_are_named() {
        let small = ModelSpec { layers: 2, heads: 4, d_model: 24, ffn: 40, ..ModelSpec::MINILM_L6_V2 };
        assert_eq!(small.validate(), Ok(()));
        assert_eq!((small.total_heads(), small.michel_marks(), small.one_per_layer_pruned()), (8, [2, 3], 6));
        let odd = ModelSpec { heads: 5, ..small };
        assert!(odd.validate().unwrap_err().to_string().contains("not a multiple of 5 heads"));
        let empty = ModelSpec { layers: 0, ..small };
        assert!(empty.validate().unwrap_err().to_string().contains("layers is 0"));
        let eps = ModelSpec { layer_norm_eps: f64::NAN, ..small };
        assert!(eps.validate().is_err());
    }
}
