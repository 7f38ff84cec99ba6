//! BERT-family encoders (BERT, DistilBERT, sentence-transformers models; the page's built-in
//! all-MiniLM-L6-v2, 6 layers of 12 heads): the model ready to run ([`Encoder`]), its forward pass
//! ([`bert`]), the really pruned model ([`pruned`]), head-gate gradients ([`gradient`]), and what
//! the page measures on a sentence embedding: the meaning check ([`check`]), the half-pruned
//! contrast ([`contrast`]), activation patching ([`patching`]), the heads' roles ([`roles`],
//! [`filter`]), the STS pairs and their quality ([`task`]), the pruning curves' saved form
//! ([`curves`]), where its passes run ([`runner`]) and one sentence's pass cut across threads
//! ([`sharded`]).

pub mod bert;
pub mod check;
pub mod contrast;
pub mod curves;
pub mod filter;
pub mod gradient;
pub mod patching;
pub mod pruned;
pub mod roles;
pub mod runner;
pub mod sharded;
pub mod task;

use crate::attention::precision::Precision;
use crate::model::load::model_file;
use crate::model::load::ModelError;
use crate::model::spec::ModelSpec;
use crate::model::tokenize::wordpiece::WordPiece;
use crate::model::tokenize::VocabError;
use bert::Bert;

/// A trained model, ready to run: its name, its weights (with its shape) and its tokenizer.
#[derive(Clone, Debug)]
pub struct Encoder {
    /// What the page calls it ("all-MiniLM-L6-v2").
    pub name: String,
    /// The family its checkpoint came from.
    pub architecture: crate::model::load::config::Architecture,
    /// A short hash of its weights (16 hex digits): what the page's caches and links know it by.
    pub id: String,
    /// Every weight, and the shape ([`Bert::spec`]).
    pub bert: Bert,
    /// The WordPiece tokenizer of its vocabulary, cut at the model's positions.
    pub tokenizer: WordPiece,
}

/// The largest model (bytes of its f32 weights) the page copies for another precision: BERT-base's
/// 440 MB fits, BERT-large's 1.3 GB does not.
pub const MAX_COPY_BYTES: usize = 600 << 20;

/// The name of the model in the page's asset.
pub const BUILT_IN_NAME: &str = "all-MiniLM-L6-v2";

impl Encoder {
    /// The model in the page's asset `bytes` (all-MiniLM-L6-v2), checked against the SHA-256
    /// built into the page before a byte is decoded: a damaged file is refused whole, never
    /// half-loaded.
    pub fn from_asset(bytes: &[u8]) -> Result<Encoder, ModelError> {
        model_file::verify(bytes).map_err(ModelError::Asset)?;
        Encoder::from_file(bytes, model_file::ASSET_SHA256[..16].to_string())
    }

    /// The model in a model file (`bytes`, [`asset`]'s format: the built-in one, or a
    /// checkpoint the page converted), known as `id` ([`model_file::file_id`] of the bytes).
    pub fn from_file(bytes: &[u8], id: String) -> Result<Encoder, ModelError> {
        Encoder::from_decoded(model_file::decode(bytes).map_err(ModelError::Asset)?, id)
    }

    /// The encoder in a decoded model file ([`model_file::decode`]).
    pub fn from_decoded(mut a: model_file::Asset, id: String) -> Result<Encoder, ModelError> {
        let d = a.description;
        if d.architecture.is_decoder() {
            return Err(ModelError::Kind(format!(
                "{} is a GPT-2 decoder, not an encoder: open it with Model::from_file",
                d.name
            )));
        }
        let bert = Bert::from_tensors(d.spec, |name| a.tensors.remove(name)).map_err(ModelError::Weights)?;
        let tokenizer =
            WordPiece::with_casing(&a.vocab, d.spec.positions, d.casing).map_err(ModelError::Vocab)?;
        if tokenizer.vocab_size() > d.spec.vocab {
            return Err(ModelError::Vocab(VocabError(format!(
                "it has {} pieces, the model's embeddings {} rows",
                tokenizer.vocab_size(),
                d.spec.vocab
            ))));
        }
        Ok(Encoder { name: d.name, architecture: d.architecture, id, bert, tokenizer })
    }

    /// The model's shape.
    pub fn spec(&self) -> &ModelSpec {
        self.bert.spec()
    }

    /// The token ids of `text`, as the model reads it.
    pub fn ids(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text).iter().map(|t| t.id).collect()
    }

    /// What the page says when `text` is longer than the model reads: how many tokens it has
    /// and how many were left out. `None` when nothing was cut (a text that fills the positions
    /// exactly lost nothing).
    pub fn cut_note(&self, text: &str) -> Option<String> {
        let (kept, cut) = self.tokenizer.encode_counting_cut(text);
        (cut > 0).then(|| {
            format!(
                "The sentence is {} tokens long; {} reads at most {}, so the last {cut} were left out ([SEP] ends what it reads).",
                kept.len() + cut,
                self.name,
                self.spec().positions,
            )
        })
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
    pub fn at_precision(&self, precision: Precision) -> Result<Encoder, String> {
        if let Some(why) = self.copy_refused(precision) {
            return Err(why);
        }
        let mut model = self.clone();
        model.set_precision(crate::cpu::Kernel::Simd, precision);
        Ok(model)
    }

    /// Why the page cannot hold a copy of this model at `precision` beside it, if it cannot
    /// ([`Encoder::at_precision`]).
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
    /// ([`Encoder::at_precision`]); when no copy can be had, itself and why.
    pub fn for_precision(
        model: &std::rc::Rc<Encoder>,
        precision: Precision,
    ) -> (std::rc::Rc<Encoder>, Option<String>) {
        if model.precision() == precision {
            return (model.clone(), None);
        }
        match model.at_precision(precision) {
            Ok(m) => (std::rc::Rc::new(m), None),
            Err(why) => (model.clone(), Some(format!("No 8-bit model: {why}."))),
        }
    }
}

pub use crate::model::layers::CALIBRATION;
