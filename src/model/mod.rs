//! The trained model: all-MiniLM-L6-v2 (a 6-layer, 12-head BERT), its tokenizer, its forward
//! pass, the page's f16 copy of its weights, and what the page measures on it.

pub mod analysis;
pub mod asset;
pub mod bert;
pub mod curves;
pub mod gradient;
pub mod pruned;
pub mod roles;
pub mod split;
pub mod task;
pub mod tokenizer;
pub mod work;

use bert::{Bert, LoadError};
use tokenizer::{Tokenizer, VocabError};

/// all-MiniLM-L6-v2, ready to run: its weights and its tokenizer.
#[derive(Clone, Debug)]
pub struct MiniLm {
    /// Every weight.
    pub bert: Bert,
    /// The WordPiece tokenizer of its vocabulary.
    pub tokenizer: Tokenizer,
}

/// Why the page's model file could not become a model. Each is a sentence for the page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelError {
    /// The file is not the asset this page was built with, or cannot be decoded.
    Asset(asset::AssetError),
    /// A weight is missing or has the wrong shape.
    Weights(LoadError),
    /// The vocabulary lacks a special token.
    Vocab(VocabError),
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelError::Asset(e) => e.fmt(f),
            ModelError::Weights(e) => e.fmt(f),
            ModelError::Vocab(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ModelError {}

impl MiniLm {
    /// The model in the page's asset `bytes`, checked against the SHA-256 built into the page
    /// before a byte is decoded: a damaged file is refused whole, never half-loaded.
    pub fn from_asset(bytes: &[u8]) -> Result<MiniLm, ModelError> {
        asset::verify(bytes).map_err(ModelError::Asset)?;
        let mut a = asset::decode(bytes).map_err(ModelError::Asset)?;
        let bert = Bert::from_tensors(|name| a.tensors.remove(name)).map_err(ModelError::Weights)?;
        let tokenizer = Tokenizer::from_vocab(&a.vocab).map_err(ModelError::Vocab)?;
        Ok(MiniLm { bert, tokenizer })
    }

    /// The token ids of `text`, as the model reads it.
    pub fn ids(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text).iter().map(|t| t.id).collect()
    }
}
