//! The trained models: a BERT encoder whose shape is data ([`spec::ModelSpec`]; the page's
//! built-in one is all-MiniLM-L6-v2, 6 layers of 12 heads), its tokenizer, its forward pass, the
//! page's f16 copy of its weights, and what the page measures on it; and a GPT-2 decoder
//! ([`gpt2`], [`bpe`], [`decoder`]: the next token, each token's loss, the induction test).

pub mod asset;
pub mod bert;
pub mod bpe;
pub mod check;
pub mod checkpoint;
pub mod config;
pub mod contrast;
pub mod copies;
pub mod curves;
pub mod decoder;
pub mod decoder_gradient;
pub mod digits;
pub mod filter;
pub mod gpt2;
pub mod gradient;
pub mod induction;
pub mod intervals;
pub mod next_importance;
pub mod next_token;
pub mod patching;
pub mod pruned;
pub mod roles;
pub mod runner;
pub mod sharded;
pub mod spec;
pub mod task;
pub mod texts;
pub mod tokenizer;
pub mod work;

use crate::attention::precision::Precision;
use bert::{Bert, LoadError};
use spec::ModelSpec;
use tokenizer::{Tokenizer, VocabError};

/// A trained model, ready to run: its name, its weights (with its shape) and its tokenizer.
#[derive(Clone, Debug)]
pub struct Model {
    /// What the page calls it ("all-MiniLM-L6-v2").
    pub name: String,
    /// The family its checkpoint came from.
    pub architecture: config::Architecture,
    /// A short hash of its weights (16 hex digits): what the page's caches and links know it by.
    pub id: String,
    /// Every weight, and the shape ([`Bert::spec`]).
    pub bert: Bert,
    /// The WordPiece tokenizer of its vocabulary, cut at the model's positions.
    pub tokenizer: Tokenizer,
}

/// Why the page's model file could not become a model. Each is a sentence for the page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelError {
    /// The file is not the asset this page was built with, or cannot be decoded.
    Asset(asset::AssetError),
    /// A weight is missing or has the wrong shape.
    Weights(LoadError),
    /// The vocabulary lacks a special token, or has pieces the embeddings have no row for.
    Vocab(VocabError),
    /// The file holds another kind of model than the one asked for (a decoder where an encoder
    /// is run, or the reverse).
    Kind(String),
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelError::Asset(e) => e.fmt(f),
            ModelError::Weights(e) => e.fmt(f),
            ModelError::Vocab(e) => e.fmt(f),
            ModelError::Kind(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for ModelError {}

/// A model the page runs: a BERT-family encoder or a GPT-2 decoder.
#[derive(Clone, Debug)]
pub enum AnyModel {
    /// An encoder (its output: a sentence embedding).
    Encoder(std::rc::Rc<Model>),
    /// A decoder (its output: the next token).
    Decoder(std::rc::Rc<decoder::Decoder>),
}

impl AnyModel {
    /// The model in a model file (`bytes`, known as `id`), whichever kind its header says.
    pub fn from_file(bytes: &[u8], id: String) -> Result<AnyModel, ModelError> {
        if asset::describe(bytes).map_err(ModelError::Asset)?.architecture.is_decoder() {
            Ok(AnyModel::Decoder(std::rc::Rc::new(decoder::Decoder::from_file(bytes, id)?)))
        } else {
            Ok(AnyModel::Encoder(std::rc::Rc::new(Model::from_file(bytes, id)?)))
        }
    }

    /// What the page calls it.
    pub fn name(&self) -> &str {
        match self {
            AnyModel::Encoder(m) => &m.name,
            AnyModel::Decoder(d) => &d.name,
        }
    }

    /// The short hash of its file.
    pub fn id(&self) -> &str {
        match self {
            AnyModel::Encoder(m) => &m.id,
            AnyModel::Decoder(d) => &d.id,
        }
    }

    /// Its shape.
    pub fn spec(&self) -> &ModelSpec {
        match self {
            AnyModel::Encoder(m) => m.spec(),
            AnyModel::Decoder(d) => d.spec(),
        }
    }
}

/// What the page knows a model file by: the first 16 hex digits of its SHA-256 (the file is
/// made deterministically from the weights, so the same checkpoint always has the same id).
pub fn file_id(bytes: &[u8]) -> String {
    asset::sha256_hex(bytes)[..16].to_string()
}

/// The largest model (bytes of its f32 weights) the page copies for another precision: BERT-base's
/// 440 MB fits, BERT-large's 1.3 GB does not.
pub const MAX_COPY_BYTES: usize = 600 << 20;

/// The name of the model in the page's asset.
pub const BUILT_IN_NAME: &str = "all-MiniLM-L6-v2";

impl Model {
    /// The model in the page's asset `bytes` (all-MiniLM-L6-v2), checked against the SHA-256
    /// built into the page before a byte is decoded: a damaged file is refused whole, never
    /// half-loaded.
    pub fn from_asset(bytes: &[u8]) -> Result<Model, ModelError> {
        asset::verify(bytes).map_err(ModelError::Asset)?;
        Model::from_file(bytes, asset::ASSET_SHA256[..16].to_string())
    }

    /// The model in a model file (`bytes`, [`asset`]'s format: the built-in one, or a
    /// checkpoint the page converted), known as `id` ([`file_id`] of the bytes).
    pub fn from_file(bytes: &[u8], id: String) -> Result<Model, ModelError> {
        let mut a = asset::decode(bytes).map_err(ModelError::Asset)?;
        let d = a.description;
        if d.architecture.is_decoder() {
            return Err(ModelError::Kind(format!(
                "{} is a GPT-2 decoder, not an encoder: open it with AnyModel::from_file",
                d.name
            )));
        }
        let bert = Bert::from_tensors(d.spec, |name| a.tensors.remove(name)).map_err(ModelError::Weights)?;
        let tokenizer =
            Tokenizer::with_casing(&a.vocab, d.spec.positions, d.casing).map_err(ModelError::Vocab)?;
        if tokenizer.vocab_size() > d.spec.vocab {
            return Err(ModelError::Vocab(VocabError(format!(
                "it has {} pieces, the model's embeddings {} rows",
                tokenizer.vocab_size(),
                d.spec.vocab
            ))));
        }
        Ok(Model { name: d.name, architecture: d.architecture, id, bert, tokenizer })
    }

    /// The model's shape.
    pub fn spec(&self) -> &ModelSpec {
        self.bert.spec()
    }

    /// The token ids of `text`, as the model reads it.
    pub fn ids(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text).iter().map(|t| t.id).collect()
    }

    /// What caches of its measured numbers know it by: its id, and its precision when that is
    /// not the f16 weights' (an 8-bit model's curves are its own).
    pub fn cache_id(&self) -> String {
        match self.precision() {
            Precision::F16 => self.id.clone(),
            p => format!("{}-{}", self.id, p.key()),
        }
    }

    /// The precision its passes run at.
    pub fn precision(&self) -> Precision {
        self.bert.precision()
    }

    /// Runs its passes at `precision`; an 8-bit model is calibrated on [`CALIBRATION`] in this
    /// model's own tokens.
    pub fn set_precision(&mut self, kernel: crate::cpu::Kernel, precision: Precision) {
        let calibration: Vec<Vec<u32>> = CALIBRATION.iter().map(|s| self.ids(s)).collect();
        self.bert.set_precision(kernel, precision, &calibration);
    }

    /// A copy of this model at `precision` (this one unchanged), or why the page cannot hold
    /// one: the copy keeps its f32 weights beside the 8-bit ones (the feed-forward layer's
    /// second product, the gradients and the GPU read them), so it needs the model's memory
    /// again, and a page's wasm memory ends at 4 GiB.
    pub fn at_precision(&self, precision: Precision) -> Result<Model, String> {
        if let Some(why) = self.copy_refused(precision) {
            return Err(why);
        }
        let mut model = self.clone();
        model.set_precision(crate::cpu::Kernel::Simd, precision);
        Ok(model)
    }

    /// Why the page cannot hold a copy of this model at `precision` beside it, if it cannot
    /// ([`Model::at_precision`]).
    pub fn copy_refused(&self, precision: Precision) -> Option<String> {
        let bytes = self.bert.weight_bytes();
        (precision != self.precision() && bytes > MAX_COPY_BYTES).then(|| {
            format!(
                "the 8-bit model is a second copy of the weights beside this one's, and this model's {} MB leave no room for it in the page's memory (at most {} MB); it runs with its f16 weights",
                bytes >> 20,
                MAX_COPY_BYTES >> 20
            )
        })
    }

    /// `model` at `precision`: itself when it already is, else a copy
    /// ([`Model::at_precision`]); when no copy can be had, itself and why.
    pub fn for_precision(
        model: &std::rc::Rc<Model>,
        precision: Precision,
    ) -> (std::rc::Rc<Model>, Option<String>) {
        if model.precision() == precision {
            return (model.clone(), None);
        }
        match model.at_precision(precision) {
            Ok(m) => (std::rc::Rc::new(m), None),
            Err(why) => (model.clone(), Some(format!("No 8-bit model: {why}."))),
        }
    }
}

/// The text an 8-bit model is calibrated on: the largest input each dense layer sees here sets
/// how its weights are quantized (which features are outliers). Plain English of several kinds;
/// any text of a few hundred tokens would do, the outlier features are the model's, not the text's.
pub const CALIBRATION: &[&str] = &[
    "The bank raised its interest rates again this spring, and savers moved their money.",
    "She sat on the river bank and watched the water run past the old mill.",
    "A man is playing a guitar on the street while children dance around him.",
    "Attention lets every token look at every other token and take what it needs.",
    "In 1905 Einstein published four papers that changed physics; one explained the photoelectric effect.",
    "Please send the report by Friday, or call me if anything is unclear!",
    "The recipe needs two eggs, a cup of flour, some sugar and a pinch of salt.",
    "Why do cats sleep so much? Nobody knows for sure, but they seem to enjoy it.",
];
