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
use crate::model::load::model_file::{self, FileBytes};
use crate::model::load::ModelError;
use crate::model::spec::{Holding, ModelSpec};
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
        at_once(Decoder::from_file_in_steps(&bytes, id, &AtOnce))
    }

    /// [`Decoder::from_file`] with a turn of `turns` after each block is built. Each tensor is
    /// converted from the file when its block is built ([`model_file::open`]); a model held at
    /// 8 bits only ([`Holding::for_spec`]) is quantized a block at a time, calibrated on
    /// [`CALIBRATION`] ([`Gpt2::held_at_8_bits_in_steps`]), so no thread ever holds all its
    /// weights in f32.
    pub async fn from_file_in_steps(
        bytes: &dyn FileBytes,
        id: String,
        turns: &dyn Turns,
    ) -> Result<Decoder, ModelError> {
        Decoder::from_file_held(bytes, id, None, turns).await
    }

    /// [`Decoder::from_file_in_steps`], held as `holding` says, or as its shape asks when `None`
    /// ([`Holding::for_spec`]). Not generic: one copy of both builders in the wasm for the page,
    /// the workers and the native callers.
    pub(crate) async fn from_file_held(
        bytes: &dyn FileBytes,
        id: String,
        holding: Option<Holding>,
        turns: &dyn Turns,
    ) -> Result<Decoder, ModelError> {
        let mut opened = model_file::open(bytes).map_err(ModelError::Asset)?;
        let d = opened.description.clone();
        if !d.architecture.is_decoder() {
            return Err(not_a_decoder(&d));
        }
        let bpe = tokenizer(&opened.vocab, &d.spec)?;
        let mut take = |name: &str| opened.take(name);
        let gpt2 = match holding.unwrap_or_else(|| Holding::for_spec(&d.spec)) {
            Holding::F32 => Gpt2::from_tensors_in_steps(d.spec, &mut take, turns).await,
            Holding::Int8Only => {
                let calibration: Vec<Vec<u32>> =
                    CALIBRATION.iter().map(|s| encode(&bpe, &d.spec, s)).collect();
                Gpt2::held_at_8_bits_in_steps(d.spec, &mut take, Kernel::Simd, &calibration, turns).await
            }
        };
        Ok(Decoder { name: d.name, id, gpt2: gpt2.map_err(ModelError::Weights)?, bpe })
    }

    /// How it holds its weights ([`Holding`]).
    pub fn holding(&self) -> Holding {
        match self.gpt2.holds_f32() {
            true => Holding::F32,
            false => Holding::Int8Only,
        }
    }

    /// The precisions it can run at: both, or only 8 bits when it is held at 8 bits only.
    pub fn precisions(&self) -> &'static [Precision] {
        match self.holding() {
            Holding::F32 => &[Precision::F16, Precision::Int8],
            Holding::Int8Only => &[Precision::Int8],
        }
    }

    /// Why it cannot run at `precision`, as a sentence; `None` if it can.
    pub fn precision_refused(&self, precision: Precision) -> Option<String> {
        (!self.precisions().contains(&precision)).then(|| {
            format!(
                "{} is held at 8 bits only: its {} file and its {} of f32 weights would not fit in a page's memory together, so it has no {} form to compare with.",
                self.name,
                crate::model::digits::bytes_text(2 * Holding::weights(self.spec())),
                crate::model::digits::bytes_text(4 * Holding::weights(self.spec())),
                precision.short()
            )
        })
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

    /// `model` at `precision`: itself, or its copy at it, made in `turns`' steps; itself when it
    /// cannot run at `precision` ([`Decoder::precision_refused`] says why).
    pub async fn for_precision(model: &Rc<Decoder>, precision: Precision, turns: &dyn Turns) -> Rc<Decoder> {
        match model.precision() == precision || !model.precisions().contains(&precision) {
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

/// The refusal of a file that holds an encoder.
fn not_a_decoder(d: &model_file::Description) -> ModelError {
    ModelError::Kind(format!("{} is a {} encoder, not a decoder", d.name, d.architecture.model_type()))
}

/// The byte-level BPE tokenizer in `vocab` (tokenizer.json's text), which must fit the model's
/// embedding rows.
fn tokenizer(vocab: &str, spec: &ModelSpec) -> Result<Bpe, ModelError> {
    let bpe = Bpe::from_tokenizer_json(vocab).map_err(|e| ModelError::Vocab(VocabError(e.to_string())))?;
    if bpe.vocab_size() > spec.vocab {
        return Err(ModelError::Vocab(VocabError(format!(
            "it has {} pieces, the model's embeddings {} rows",
            bpe.vocab_size(),
            spec.vocab
        ))));
    }
    Ok(bpe)
}

/// `text`'s token ids as a decoder of shape `spec` reads them (cut to its positions).
fn encode(bpe: &Bpe, spec: &ModelSpec, text: &str) -> Vec<u32> {
    bpe.encode_within(text, spec.positions).0.iter().map(|t| t.id).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::load::config::Architecture;
    use crate::model::load::model_file::Description;
    use crate::model::spec::Activation;
    use crate::model::spec::PAGE_BYTES;

    /// GPT-2's shapes by name: layers, heads, d_model (ffn 4 d_model, 50257 pieces, 1024 positions).
    fn gpt2(layers: usize, heads: usize, d_model: usize) -> ModelSpec {
        ModelSpec {
            layers,
            heads,
            d_model,
            ffn: 4 * d_model,
            vocab: 50257,
            positions: 1024,
            activation: Activation::GeluTanh,
            layer_norm_eps: 1e-5,
            ..ModelSpec::MINILM_L6_V2
        }
    }

    #[test]
    fn small_and_medium_are_held_in_f32_large_at_8_bits_and_xl_does_not_fit() {
        let (small, medium, large, xl) =
            (gpt2(12, 12, 768), gpt2(24, 16, 1024), gpt2(36, 20, 1280), gpt2(48, 25, 1600));
        // The published parameter counts: 124 M, 355 M, 774 M, 1558 M.
        for (spec, millions) in [(small, 124), (medium, 355), (large, 774), (xl, 1558)] {
            let weights = Holding::F32.page_bytes(&spec) / 6;
            assert_eq!((weights as f64 / 1e6).round() as u64, millions, "{spec:?}");
        }
        assert_eq!(Holding::for_spec(&small), Holding::F32);
        assert_eq!(Holding::for_spec(&medium), Holding::F32);
        assert_eq!(Holding::for_spec(&large), Holding::Int8Only);
        let at_8 = Holding::Int8Only.page_bytes(&large);
        // Its 1.5 GB file and about 1.0 GB of 8-bit blocks (W_mlp at a byte and a half a
        // weight), the head's 8-bit embedding and the f16 one.
        assert!(at_8 < PAGE_BYTES && (2_550_000_000..2_650_000_000).contains(&at_8), "{at_8}");
        assert!(Holding::Int8Only.page_bytes(&xl) > PAGE_BYTES, "XL's 3.1 GB file alone nearly fills a page");
    }

    /// A small random GPT-2's model file, with the tests' byte-level tokenizer.
    pub(crate) fn small_file() -> Vec<u8> {
        use crate::model::load::model_file;
        let spec = ModelSpec {
            layers: 2,
            heads: 4,
            d_model: 32,
            ffn: 64,
            vocab: 300,
            positions: 64,
            activation: Activation::GeluTanh,
            layer_norm_eps: 1e-5,
            ..ModelSpec::MINILM_L6_V2
        };
        let m = Gpt2::random(spec, 3);
        let description = Description {
            name: "tiny".into(),
            architecture: Architecture::Gpt2,
            casing: crate::model::tokenize::wordpiece::Casing::Cased,
            spec,
        };
        let vocab = crate::model::tokenize::bpe::tests::tiny().canonical_json();
        let named = crate::model::decoder::gpt2::tests::checkpoint_tensors(&m);
        model_file::encode(&description, &vocab, |name| named[name].clone())
    }

    #[test]
    fn a_file_held_at_8_bits_runs_as_the_8_bit_copy_of_the_file_in_f32() {
        use crate::attention::HeadSet;
        let file = small_file();
        let f32 = Decoder::from_file(&file, "id".into()).unwrap();
        assert_eq!((f32.holding(), f32.precisions().len()), (Holding::F32, 2));
        let held =
            at_once(Decoder::from_file_held(&file.as_slice(), "id".into(), Some(Holding::Int8Only), &AtOnce))
                .unwrap();
        assert_eq!((held.holding(), held.precisions()), (Holding::Int8Only, &[Precision::Int8][..]));
        let copy = f32.at_precision(Kernel::Simd, Precision::Int8);
        let ids = held.tokens("hello world, hello world").ids;
        let heads = HeadSet::with_pruned(8, [2]);
        assert_eq!(
            held.gpt2.forward(Kernel::Simd, &ids, &heads),
            copy.gpt2.forward(Kernel::Simd, &ids, &heads)
        );
        // It has no f16 form: asked for one, it stays as it is and says why.
        assert!(
            held.precision_refused(Precision::Int8).is_none()
                && f32.precision_refused(Precision::F16).is_none()
        );
        let why = held.precision_refused(Precision::F16).unwrap();
        assert!(why.starts_with("tiny is held at 8 bits only") && why.contains("no f16 form"), "{why}");
        let again = at_once(Decoder::for_precision(&Rc::new(held.clone()), Precision::F16, &AtOnce));
        assert_eq!(again.precision(), Precision::Int8);
    }
}
