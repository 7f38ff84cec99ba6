//! GPT-2-family decoders: the model ready to run ([`Decoder`]: its name, its weights and its
//! byte-level BPE tokenizer, from the page's model file as the loader makes it from a checkpoint
//! folder), its forward pass ([`gpt2`]), head-gate gradients of a text set's loss ([`gradient`]),
//! the next token and each token's loss ([`next_token`]), every head's importance to the next
//! token and the drift curve ([`next_importance`]), the induction test ([`induction`]) and the
//! text set its perplexity is measured on ([`texts`]).

pub mod cost;
pub mod gpt2;
pub mod gradient;
pub mod induction;
pub mod next_importance;
pub mod next_token;
pub mod precision;
pub mod sharded;
pub mod texts;

use std::rc::Rc;

use crate::attention::precision::Precision;
use crate::attention::turns::{at_once, AtOnce, Turns};
use crate::cpu::Kernel;
use crate::model::layers::CALIBRATION;
use crate::model::load::model_file;
use crate::model::load::ModelError;
use crate::model::spec::ModelSpec;
use crate::model::tokenize::bpe::Bpe;
use crate::model::tokenize::VocabError;
use gpt2::Gpt2;

/// A decoder and its tokenizer.
#[derive(Clone, Debug)]
pub struct Decoder {
    /// What the page calls it ("gpt2").
    pub name: String,
    /// A short hash of its file (16 hex digits).
    pub id: String,
    /// Every weight, and the shape.
    pub gpt2: Gpt2,
    /// The byte-level BPE tokenizer.
    pub bpe: Bpe,
}

/// A text as the decoder reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecoderTokens {
    /// The ids, at most the model's positions.
    pub ids: Vec<u32>,
    /// Tokens cut from the end because the text is longer than the model's context.
    pub cut: usize,
}

impl Decoder {
    /// The decoder in a model file (`bytes`), known as `id`.
    pub fn from_file(bytes: &[u8], id: String) -> Result<Decoder, ModelError> {
        Decoder::from_decoded(model_file::decode(bytes).map_err(ModelError::Asset)?, id)
    }

    /// The decoder in a decoded model file ([`model_file::decode`]).
    pub fn from_decoded(a: model_file::Asset, id: String) -> Result<Decoder, ModelError> {
        at_once(Decoder::from_decoded_in_steps(a, id, async || {}))
    }

    /// [`Decoder::from_decoded`] with `between()` awaited after each block is built.
    pub async fn from_decoded_in_steps(
        mut a: model_file::Asset,
        id: String,
        between: impl AsyncFnMut(),
    ) -> Result<Decoder, ModelError> {
        let d = a.description;
        if !d.architecture.is_decoder() {
            return Err(ModelError::Kind(format!(
                "{} is a {} encoder, not a decoder",
                d.name,
                d.architecture.model_type()
            )));
        }
        let gpt2 = Gpt2::from_tensors_in_steps(d.spec, |name| a.tensors.remove(name), between)
            .await
            .map_err(ModelError::Weights)?;
        let bpe =
            Bpe::from_tokenizer_json(&a.vocab).map_err(|e| ModelError::Vocab(VocabError(e.to_string())))?;
        if bpe.vocab_size() > d.spec.vocab {
            return Err(ModelError::Vocab(VocabError(format!(
                "it has {} pieces, the model's embeddings {} rows",
                bpe.vocab_size(),
                d.spec.vocab
            ))));
        }
        Ok(Decoder { name: d.name, id, gpt2, bpe })
    }

    /// The model's shape.
    pub fn spec(&self) -> &ModelSpec {
        &self.gpt2.spec
    }

    /// The precision its passes run at.
    pub fn precision(&self) -> Precision {
        self.gpt2.precision()
    }

    /// A copy of this decoder at `precision` ([`Gpt2::at_precision`]: an 8-bit copy is
    /// calibrated on [`CALIBRATION`] in this model's tokens, and shares the f32 weights).
    pub fn at_precision(&self, kernel: Kernel, precision: Precision) -> Decoder {
        at_once(self.at_precision_in_turns(kernel, precision, &AtOnce))
    }

    /// [`Decoder::at_precision`] in `turns`' steps ([`Gpt2::at_precision_in_turns`]).
    pub async fn at_precision_in_turns(
        &self,
        kernel: Kernel,
        precision: Precision,
        turns: &dyn Turns,
    ) -> Decoder {
        let calibration: Vec<Vec<u32>> = CALIBRATION.iter().map(|s| self.tokens(s).ids).collect();
        let gpt2 = self.gpt2.at_precision_in_turns(kernel, precision, &calibration, turns).await;
        Decoder { gpt2, ..self.clone() }
    }

    /// `model` at `precision`: itself, or its copy at it, made in `turns`' steps.
    pub async fn for_precision(model: &Rc<Decoder>, precision: Precision, turns: &dyn Turns) -> Rc<Decoder> {
        match model.precision() == precision {
            true => model.clone(),
            false => Rc::new(model.at_precision_in_turns(Kernel::Simd, precision, turns).await),
        }
    }

    /// `text`'s tokens, cut to the model's positions (the page says how many were cut).
    pub fn tokens(&self, text: &str) -> DecoderTokens {
        let (tokens, cut) = self.bpe.encode_within(text, self.spec().positions);
        DecoderTokens { ids: tokens.iter().map(|t| t.id).collect(), cut }
    }

    /// What the page says of a cut text, if it was cut.
    pub fn cut_note(&self, tokens: &DecoderTokens) -> Option<String> {
        (tokens.cut > 0).then(|| {
            format!(
                "The text is {} tokens long; {} reads at most {}, so the last {} were left out.",
                tokens.ids.len() + tokens.cut,
                self.name,
                self.spec().positions,
                tokens.cut
            )
        })
    }
}
