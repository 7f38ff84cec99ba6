//! Deterministic synthetic weights and inputs.
//!
//! Every number comes from a counter-based generator: value `i` of a stream is a pure function of
//! `(seed, stream, i)`, so any single weight can be computed on its own, in any order, on any
//! backend. That is what lets a later GPU kernel (or a model too large to store, like GPT-3's
//! 2.25 GiB of attention weights) regenerate weights on the fly and still agree bit for bit.
//! The generator only uses 32-bit multiplies, shifts and xors, which WGSL has.

use super::config::ModelConfig;

/// Bijective 32-bit integer hash ("lowbias32", C. Wellons): good avalanche from three multiplies.
#[inline]
pub const fn hash32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// The independent streams the synthetic model draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum StreamId {
    /// `W_qkv`, row-major `d_model x 3*d_model`.
    Wqkv = 1,
    /// `W_o`, row-major `d_model x d_model`.
    Wo = 2,
    /// The token embedding table, row-major `VOCAB.len() x d_model`.
    Embedding = 3,
    /// Which word sits at each position.
    Tokens = 4,
}

/// One stream of a counter-based generator: `bits(i)` is a pure function of `(seed, stream, i)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream {
    k1: u32,
    k2: u32,
}

impl Stream {
    /// The stream `id` of generator `seed`.
    pub const fn new(seed: u32, id: StreamId) -> Self {
        let k1 = hash32(seed ^ hash32(id as u32));
        Stream { k1, k2: hash32(k1 ^ 0x9e37_79b9) }
    }

    /// The two round keys, for a kernel that computes [`Stream::bits`] itself.
    pub const fn keys(&self) -> (u32, u32) {
        (self.k1, self.k2)
    }

    /// 32 random bits for counter `i`. Two keyed rounds, so that streams are not
    /// re-indexings of one another.
    #[inline]
    pub const fn bits(&self, i: u32) -> u32 {
        hash32(hash32(i ^ self.k1) ^ self.k2)
    }

    /// Uniform in the open interval (-1, 1), from the top 24 bits (exact in f32).
    #[inline]
    pub fn symmetric(&self, i: u32) -> f32 {
        let u = ((self.bits(i) >> 8) as f32 + 0.5) * (1.0 / 16_777_216.0);
        2.0 * u - 1.0
    }
}

/// Half-width of `W_qkv`'s uniform init. PyTorch's `nn.MultiheadAttention` initialises the
/// stacked in-projection with Xavier-uniform over `(3*d_model, d_model)`: `sqrt(6 / (4*d_model))`.
fn w_qkv_bound(d_model: usize) -> f32 {
    (6.0 / (4.0 * d_model as f32)).sqrt()
}

/// Half-width of `W_o`'s uniform init: `nn.Linear`'s default, `1 / sqrt(fan_in)`.
fn w_o_bound(d_model: usize) -> f32 {
    1.0 / (d_model as f32).sqrt()
}

/// `W_qkv[i][j]` computed on its own, equal to `Weights::generate(d_model, seed).w_qkv[i*3d + j]`.
#[inline]
pub fn w_qkv_at(seed: u32, d_model: usize, i: usize, j: usize) -> f32 {
    w_qkv_bound(d_model) * Stream::new(seed, StreamId::Wqkv).symmetric((i * 3 * d_model + j) as u32)
}

/// `W_o[i][j]` computed on its own, equal to `Weights::generate(d_model, seed).w_o[i*d + j]`.
#[inline]
pub fn w_o_at(seed: u32, d_model: usize, i: usize, j: usize) -> f32 {
    w_o_bound(d_model) * Stream::new(seed, StreamId::Wo).symmetric((i * d_model + j) as u32)
}

/// The attention layer's weights, row-major, oriented as in the seed: `x @ W_qkv`, `concat @ W_o`.
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    /// Width of the residual stream.
    pub d_model: usize,
    /// `d_model x 3*d_model`; columns are `[Q | K | V]`, each split into heads of `d_k` columns.
    pub w_qkv: Vec<f32>,
    /// `d_model x d_model`; rows `h*d_k .. (h+1)*d_k` take head `h` back to the residual stream.
    pub w_o: Vec<f32>,
}

impl Weights {
    /// Generates the weights for width `d_model` from `seed`.
    ///
    /// Callers validate the configuration first ([`ModelConfig::validate`]): this allocates
    /// `16 * d_model^2` bytes.
    pub fn generate(d_model: usize, seed: u32) -> Self {
        let mut weights = Weights::zeroed(d_model);
        weights.fill(seed, 0..weights.len());
        weights
    }

    /// Matrices of zeros for `d_model`, to [`Weights::fill`] in pieces.
    pub fn zeroed(d_model: usize) -> Self {
        Weights { d_model, w_qkv: vec![0.0; 3 * d_model * d_model], w_o: vec![0.0; d_model * d_model] }
    }

    /// Weights in both matrices, `W_qkv`'s then `W_o`'s.
    pub fn len(&self) -> usize {
        self.w_qkv.len() + self.w_o.len()
    }

    /// True for a layer of width zero.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Generates the weights at flat positions `range` of `W_qkv` then `W_o` (as
    /// [`Weights::generate`] does all of them): the page makes large matrices in pieces, with
    /// the browser getting a turn between them.
    pub fn fill(&mut self, seed: u32, range: std::ops::Range<usize>) {
        let (qkv, o) = (Stream::new(seed, StreamId::Wqkv), Stream::new(seed, StreamId::Wo));
        let (a_qkv, a_o) = (w_qkv_bound(self.d_model), w_o_bound(self.d_model));
        let split = self.w_qkv.len();
        for i in range.start..range.end.min(split) {
            self.w_qkv[i] = a_qkv * qkv.symmetric(i as u32);
        }
        for i in range.start.max(split)..range.end {
            self.w_o[i - split] = a_o * o.symmetric((i - split) as u32);
        }
    }
}

/// One of the layer's weight matrices as a pure function of its flat index: what a kernel
/// computes in place of reading a stored matrix. Element `(i, j)` of a view with flat `offset`
/// and row stride `rs` is `bound * stream.symmetric(offset + i * rs + j)`, which is exactly the
/// stored matrix's element at that flat index.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GeneratedMatrix {
    /// The generator stream of the whole matrix.
    pub stream: Stream,
    /// Half-width of the uniform distribution.
    pub bound: f32,
    /// Flat index of the view's element `(0, 0)`.
    pub offset: usize,
    /// Flat distance between rows.
    pub rs: usize,
}

impl GeneratedMatrix {
    /// Element `(i, j)` of the view.
    #[inline]
    pub fn at(&self, i: usize, j: usize) -> f32 {
        self.bound * self.stream.symmetric((self.offset + i * self.rs + j) as u32)
    }

    /// The view starting at element `(i, j)`.
    pub fn shifted(self, i: usize, j: usize) -> Self {
        GeneratedMatrix { offset: self.offset + i * self.rs + j, ..self }
    }
}

/// The weights of a layer too large to store (GPT-3's 2.25 GiB): the seed, from which kernels
/// generate each weight where they use it. Equal, weight for weight, to [`Weights::generate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GeneratedWeights {
    /// Width of the residual stream.
    pub d_model: usize,
    /// The generator seed.
    pub seed: u32,
}

impl GeneratedWeights {
    /// `W_qkv` (`d_model x 3 d_model`).
    pub fn w_qkv(&self) -> GeneratedMatrix {
        let stream = Stream::new(self.seed, StreamId::Wqkv);
        GeneratedMatrix { stream, bound: w_qkv_bound(self.d_model), offset: 0, rs: 3 * self.d_model }
    }

    /// `W_o` (`d_model x d_model`).
    pub fn w_o(&self) -> GeneratedMatrix {
        let stream = Stream::new(self.seed, StreamId::Wo);
        GeneratedMatrix { stream, bound: w_o_bound(self.d_model), offset: 0, rs: self.d_model }
    }
}

/// A layer's weights: stored, or generated where used when storing them would not fit
/// ([`ModelConfig::generates_weights`]).
#[derive(Clone, Debug, PartialEq)]
pub enum LayerWeights {
    /// Materialised matrices.
    Stored(Weights),
    /// Only the seed.
    Generated(GeneratedWeights),
}

impl LayerWeights {
    /// The weights `config` runs with, from `seed`: stored unless they are too large.
    pub fn for_config(config: &ModelConfig, seed: u32) -> Self {
        if config.generates_weights() {
            LayerWeights::Generated(GeneratedWeights { d_model: config.d_model, seed })
        } else {
            LayerWeights::Stored(Weights::generate(config.d_model, seed))
        }
    }
}

/// The words synthetic sentences are made of. Few enough that words repeat in a sequence of
/// modest length, which gives the heatmaps visible structure (equal tokens attend alike).
pub const VOCAB: [&str; 32] = [
    "the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "river", "bank", "loan", "paid", "by",
    "it", "was", "and", "then", "saw", "big", "small", "red", "bird", "tree", "over", "to", "house", "old",
    "new", "she", "he", ".",
];

/// A synthetic input sequence: which word sits at each position, and the embeddings `x`.
#[derive(Clone, Debug, PartialEq)]
pub struct Inputs {
    /// Index into [`VOCAB`] of each position's word.
    pub tokens: Vec<usize>,
    /// `seq_len x d_model`, row-major: token embedding plus sinusoidal position encoding.
    pub x: Vec<f32>,
}

impl Inputs {
    /// Generates a sequence for `config` from `seed`.
    ///
    /// Embeddings are U(-sqrt 3, sqrt 3) per component (unit variance, like a normal(0, 1)
    /// embedding init) plus the sinusoidal encoding of "Attention Is All You Need":
    /// `PE(t, 2i) = sin(t / 10000^(2i/d))`, `PE(t, 2i+1) = cos(t / 10000^(2i/d))`.
    pub fn generate(config: &ModelConfig, seed: u32) -> Self {
        let mut inputs = Inputs::tokens(config, seed);
        inputs.fill_rows(seed, 0..config.seq_len);
        inputs
    }

    /// The words for `config` from `seed`, their embeddings zeros until [`Inputs::fill_rows`].
    pub fn tokens(config: &ModelConfig, seed: u32) -> Self {
        let words = Stream::new(seed, StreamId::Tokens);
        let tokens = (0..config.seq_len).map(|t| words.bits(t as u32) as usize % VOCAB.len()).collect();
        Inputs { tokens, x: vec![0.0; config.seq_len * config.d_model] }
    }

    /// Computes the embeddings of positions `rows` (as [`Inputs::generate`] does all of them).
    pub fn fill_rows(&mut self, seed: u32, rows: std::ops::Range<usize>) {
        let d = self.x.len() / self.tokens.len().max(1);
        let emb = Stream::new(seed, StreamId::Embedding);
        let scale = 3f32.sqrt();
        for t in rows {
            let tok = self.tokens[t];
            for (j, x) in self.x[t * d..(t + 1) * d].iter_mut().enumerate() {
                let e = scale * emb.symmetric((tok * d + j) as u32);
                *x = e + positional(t, j, d);
            }
        }
    }

    /// The word at each position.
    pub fn words(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.tokens.iter().map(|&t| VOCAB[t])
    }
}

/// Sinusoidal position encoding of position `t`, component `j`, width `d`.
pub fn positional(t: usize, j: usize, d: usize) -> f32 {
    let pair = (j / 2 * 2) as f64;
    let angle = t as f64 / 10_000f64.powf(pair / d as f64);
    (if j.is_multiple_of(2) { angle.sin() } else { angle.cos() }) as f32
}
