//! The trained models the page runs, by concern: their shape as data ([`spec::ModelSpec`]), the
//! layers both families are built from ([`layers`]), loading a checkpoint folder or the page's
//! model file ([`load`]), the tokenizers ([`tokenize`]), and the two families: BERT-family
//! encoders ([`encoder`]: the built-in all-MiniLM-L6-v2 and what the page measures on a sentence
//! embedding) and GPT-2-family decoders ([`decoder`]: the next token, each token's loss, the
//! induction test). Neither family's folder imports the other's (`tests/architecture.rs`).

pub mod decoder;
pub mod digits;
pub mod encoder;
pub mod intervals;
pub mod layers;
pub mod load;
pub mod spec;
pub mod tokenize;

use std::rc::Rc;

use crate::attention::turns::Turns;

use decoder::Decoder;
use encoder::Encoder;
use load::model_file::{self, FileBytes};
use load::ModelError;
use spec::ModelSpec;

/// A model the page runs: a BERT-family encoder or a GPT-2 decoder.
#[derive(Clone, Debug)]
pub enum Model {
    /// An encoder (its output: a sentence embedding).
    Encoder(Rc<Encoder>),
    /// A decoder (its output: the next token).
    Decoder(Rc<Decoder>),
}

impl Model {
    /// The model in a model file (`bytes`, known as `id`), whichever kind its header says.
    pub fn from_file(bytes: &[u8], id: String) -> Result<Model, ModelError> {
        if model_file::describe(bytes).map_err(ModelError::Asset)?.architecture.is_decoder() {
            Ok(Model::Decoder(Rc::new(Decoder::from_file(bytes, id)?)))
        } else {
            Ok(Model::Encoder(Rc::new(Encoder::from_file(bytes, id)?)))
        }
    }

    /// [`Model::from_file`] with a turn of `turns` after each step of the decoding and after
    /// each of a decoder's blocks is built (the page's thread gives the browser its turns there).
    ///
    /// The file may lie outside this thread's memory ([`FileBytes`]): a decoder converts each
    /// tensor as its block is built (it may be too large to hold in f32 at once,
    /// [`spec::Holding`]), so the file never comes in whole; an encoder's file is copied in and
    /// converted whole.
    pub async fn from_file_in_steps(
        bytes: &dyn FileBytes,
        id: String,
        turns: &dyn Turns,
    ) -> Result<Model, ModelError> {
        if model_file::describe_file(bytes).map_err(ModelError::Asset)?.architecture.is_decoder() {
            return Ok(Model::Decoder(Rc::new(Decoder::from_file_in_steps(bytes, id, turns).await?)));
        }
        let whole = bytes.get(0..bytes.byte_len());
        let asset = model_file::decode_in_steps(&whole, async || turns.turn().await)
            .await
            .map_err(ModelError::Asset)?;
        Ok(Model::Encoder(Rc::new(Encoder::from_decoded(asset, id)?)))
    }

    /// Bytes it takes in a page's wasm memory, its model file of `file_bytes` (f16) lying
    /// outside it: an encoder, and a decoder held in f32, its f32 weights and room for a copy at
    /// another precision (three times the file, as the loader counts it: [`spec::PAGE_BYTES`]);
    /// a decoder held at 8 bits only, its 8-bit weights ([`spec::Holding::model_bytes`]).
    pub fn page_bytes(&self, file_bytes: u64) -> u64 {
        match self {
            Model::Decoder(d) if d.holding() == spec::Holding::Int8Only => d.holding().model_bytes(d.spec()),
            _ => 3 * file_bytes,
        }
    }

    /// What the page calls it.
    pub fn name(&self) -> &str {
        match self {
            Model::Encoder(m) => &m.name,
            Model::Decoder(d) => &d.name,
        }
    }

    /// The short hash of its file.
    pub fn id(&self) -> &str {
        match self {
            Model::Encoder(m) => &m.id,
            Model::Decoder(d) => &d.id,
        }
    }

    /// Its shape.
    pub fn spec(&self) -> &ModelSpec {
        match self {
            Model::Encoder(m) => m.spec(),
            Model::Decoder(d) => d.spec(),
        }
    }
}

impl From<Rc<Encoder>> for Model {
    fn from(encoder: Rc<Encoder>) -> Model {
        Model::Encoder(encoder)
    }
}

impl From<Rc<Decoder>> for Model {
    fn from(decoder: Rc<Decoder>) -> Model {
        Model::Decoder(decoder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::turns::{at_once, AtOnce};
    use spec::Holding;

    /// In the page's wasm memory (its file lies outside it): in f32, its weights and room for a
    /// copy at another precision, three times the file; held at 8 bits only, its 8-bit weights
    /// alone, the file not counted.
    #[test]
    fn a_model_takes_in_the_pages_memory_its_weights_as_it_holds_them() {
        let file = decoder::tests::small_file();
        let f32 = Model::from_file(&file, "id".into()).unwrap();
        assert_eq!(f32.page_bytes(file.len() as u64), 3 * file.len() as u64);
        let held =
            at_once(Decoder::from_file_held(&file.as_slice(), "id".into(), Some(Holding::Int8Only), &AtOnce));
        let held = Model::Decoder(Rc::new(held.unwrap()));
        let want = Holding::Int8Only.model_bytes(held.spec());
        assert_eq!(held.page_bytes(file.len() as u64), want);
        assert_eq!(want + Holding::file_bytes(held.spec()), Holding::Int8Only.page_bytes(held.spec()));
        assert!(want < 3 * file.len() as u64, "{want} bytes at 8 bits, {} in f32", 3 * file.len());
    }
}
