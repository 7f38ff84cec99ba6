//! Loading a model: a checkpoint folder's `config.json` ([`config`]) and its weights and tokenizer
//! ([`checkpoint`], read from any of the [`files`] back ends) converted into the page's own model
//! file ([`model_file`]: the built-in model's format, and what the workers are handed), GGUF
//! files' headers and tensors read and dequantized ([`gguf`]), with one
//! table per family of tensor names, prefixes and renames ([`names`]) and the shape-checked tensors
//! a family builds from ([`tensors`]). Every input here is untrusted: sizes are checked before
//! anything is allocated, and every refusal is a sentence that names the file and the problem.

pub mod checkpoint;
pub mod config;
pub mod fields;
pub mod files;
pub mod gguf;
pub mod model_file;
pub mod names;
pub mod tensors;

/// Why the page's model file could not become a model. Each is a sentence for the page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelError {
    /// The file is not the asset this page was built with, or cannot be decoded.
    Asset(model_file::AssetError),
    /// A weight is missing or has the wrong shape.
    Weights(tensors::LoadError),
    /// The vocabulary lacks a special token, or has pieces the embeddings have no row for.
    Vocab(crate::model::tokenize::VocabError),
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
