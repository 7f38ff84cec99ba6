//! The model a thread holds for pieces of work: a decoder as it was loaded, or an encoder at the
//! precision it was loaded at and its copy at the other precision, made the first time a piece of
//! work asks for it: the task panel measures what 8 bits buy on the same workers that hold the
//! f16 model (and the reverse), without loading the model twice.

use std::cell::{OnceCell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use crate::attention::precision::Precision;
use crate::attention::turns::{at_once, AtOnce, Turns};
use crate::attention::HeadSet;
use crate::cpu::Kernel;
use crate::jobs::work::{Done, Piece};
use crate::model::decoder::Decoder;
use crate::model::encoder::pruned::{PrunedAttention, PrunedBert};
use crate::model::encoder::Encoder;
use crate::model::Model;

/// A model and, for an encoder, once asked for, its copy at the other precision; and the last cut
/// of heads an embedding piece ran with, so that the pieces of one evaluation (one set of heads,
/// every 48 sentences a piece) gather the kept heads' weights once per worker, not once per
/// piece.
pub struct Copies {
    model: Model,
    other: OnceCell<Result<Rc<Encoder>, String>>,
    /// A decoder's copy at the other precision, made the first time a piece asks for it.
    other_decoder: OnceCell<Rc<Decoder>>,
    cut: RefCell<Option<Cut>>,
}

/// The kept heads' weights of the model at `precision` with only `heads` kept.
struct Cut {
    precision: Precision,
    heads: HeadSet,
    gathered: Arc<Vec<PrunedAttention>>,
}

impl Copies {
    /// `model`, with no copy made yet.
    pub fn new(model: Model) -> Copies {
        Copies { model, other: OnceCell::new(), other_decoder: OnceCell::new(), cut: RefCell::new(None) }
    }

    /// The model as it was loaded.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The encoder at `precision`: itself, or its copy (made now if it is the first time), or why
    /// there is none (a decoder, or no room for a copy: [`Encoder::copy_refused`]).
    pub fn encoder_at(&self, precision: Precision) -> Result<&Rc<Encoder>, String> {
        let Model::Encoder(encoder) = &self.model else {
            return Err("a decoder has no copy at another precision".into());
        };
        if precision == encoder.precision() {
            return Ok(encoder);
        }
        // Two precisions: the other one is the only copy there can be.
        match self.other.get_or_init(|| encoder.at_precision(precision).map(Rc::new)) {
            Ok(copy) => Ok(copy),
            Err(why) => Err(why.clone()),
        }
    }

    /// The decoder at `precision`: itself, or its copy (made now if it is the first time; it
    /// shares the f32 weights, [`crate::model::decoder::gpt2::Gpt2::at_precision`]); or why there
    /// is none (an encoder: [`Copies::encoder_at`]).
    pub fn decoder_at(&self, precision: Precision) -> Result<&Rc<Decoder>, String> {
        let Model::Decoder(decoder) = &self.model else {
            return Err("an encoder's copies are encoder_at's".into());
        };
        if precision == decoder.precision() {
            return Ok(decoder);
        }
        Ok(self.other_decoder.get_or_init(|| Rc::new(decoder.at_precision(Kernel::Simd, precision))))
    }

    /// Runs `piece` with `kernel` on the model (an encoder's at the precision it names, the
    /// loaded one's when it names none), checked against that model first.
    pub fn run(&self, piece: &Piece, kernel: Kernel) -> Result<Done, String> {
        at_once(self.run_in_turns(piece, kernel, &AtOnce))
    }

    /// [`Copies::run`] with the piece's passes in `turns`' steps: the same result.
    pub async fn run_in_turns(
        &self,
        piece: &Piece,
        kernel: Kernel,
        turns: &dyn Turns,
    ) -> Result<Done, String> {
        let encoder = match &self.model {
            Model::Encoder(encoder) => encoder,
            Model::Decoder(decoder) => {
                piece.check(&self.model).map_err(|e| e.to_string())?;
                if let Piece::PrecisionDrift { .. } = piece {
                    let other = self.decoder_at(decoder.precision().other())?;
                    return Ok(piece.run_at_both_in_turns(decoder, other, kernel, turns).await);
                }
                return Ok(piece.run_on_decoder_in_turns(&decoder.gpt2, kernel, turns).await);
            }
        };
        let precision = piece.precision().unwrap_or(encoder.precision());
        let model = self.encoder_at(precision)?;
        piece.check_on_encoder(&model.bert).map_err(|e| e.to_string())?;
        let Piece::Embed { heads, ids, .. } = piece else {
            return Ok(piece.run_on_encoder_in_turns(&model.bert, kernel, turns).await);
        };
        // What `piece.run_on_encoder` does, with the cut's weights gathered once per set of heads
        // (out of the cell before the passes: another piece may run here during a turn).
        let gathered = {
            let mut cut = self.cut.borrow_mut();
            match cut.as_ref().filter(|c| c.precision == precision && c.heads == *heads) {
                Some(c) => c.gathered.clone(),
                None => {
                    let gathered = PrunedBert::new(&model.bert, heads).gathered().clone();
                    *cut = Some(Cut { precision, heads: heads.clone(), gathered: gathered.clone() });
                    gathered
                }
            }
        };
        let pruned = PrunedBert::with_gathered(&model.bert, heads, gathered);
        Ok(Done::Embeddings(pruned.embed_batch_in_turns(kernel, ids, turns).await))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::encoder::bert::Bert;
    use crate::model::spec::ModelSpec;
    use crate::model::tokenize::wordpiece::WordPiece;

    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn a_piece_runs_at_its_own_precision_and_the_copy_is_made_once() {
        let spec = ModelSpec::SMALL;
        let vocab: Vec<String> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
            .map(String::from)
            .into_iter()
            .chain((4..spec.vocab).map(|i| format!("w{i}")))
            .collect();
        let model = Rc::new(Encoder {
            name: "small".into(),
            id: "small".into(),
            architecture: crate::model::load::config::Architecture::Bert,
            bert: Bert::random(spec, 3),
            tokenizer: WordPiece::from_vocab(&vocab.join("\n"), spec.positions).unwrap(),
        });
        let copies = Copies::new(Model::Encoder(model.clone()));
        let ids = vec![vec![2, 5, 7, 9, 3], vec![2, 6, 3]];
        let heads = HeadSet::with_pruned(spec.total_heads(), [1]);
        let embed =
            |precision| Piece::Embed { heads: heads.clone(), ids: ids.clone(), precision: Some(precision) };
        let run = |w: &Piece| match copies.run(w, Kernel::Simd) {
            Ok(Done::Embeddings(e)) => e,
            other => panic!("{other:?}"),
        };
        // At the loaded precision: the model itself, no copy made.
        let loaded = run(&embed(Precision::F16));
        assert!(copies.other.get().is_none());
        let direct = |w: Piece, bert: &Bert| Done::embeddings(vec![w.run_on_encoder(bert, Kernel::Simd)]);
        assert_eq!(loaded, direct(embed(Precision::F16), &model.bert));
        // At 8 bits: the same numbers as a model set to 8 bits itself, close to the f16 ones.
        let int8 = run(&embed(Precision::Int8));
        let own = model.at_precision(Precision::Int8).unwrap();
        assert_eq!(int8, direct(embed(Precision::Int8), &own.bert));
        assert_ne!(int8, loaded);
        for (a, b) in int8.iter().zip(&loaded) {
            let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
            assert!(dot > 0.99, "cosine {dot}");
        }
        let made = copies.encoder_at(Precision::Int8).unwrap().clone();
        assert!(Rc::ptr_eq(copies.encoder_at(Precision::Int8).unwrap(), &made), "the copy is made once");
        assert_eq!(copies.encoder_at(Precision::F16).unwrap().precision(), Precision::F16);
        // The cut is gathered once per set of heads and precision, and gives the same bits.
        let gathered = copies.cut.borrow().as_ref().map(|c| c.gathered.clone()).unwrap();
        assert_eq!(run(&embed(Precision::Int8)), int8);
        assert!(Arc::ptr_eq(&copies.cut.borrow().as_ref().unwrap().gathered, &gathered), "reused");
        assert_eq!(run(&embed(Precision::F16)), loaded);
        assert!(!Arc::ptr_eq(&copies.cut.borrow().as_ref().unwrap().gathered, &gathered), "another model's");
        let other =
            Piece::Embed { heads: HeadSet::all(spec.total_heads()), ids: ids.clone(), precision: None };
        assert_eq!(run(&other), direct(other.clone(), &model.bert));
        // A piece that does not fit the model is refused, at either precision.
        let bad = Piece::Embed { heads: HeadSet::all(3), ids: ids.clone(), precision: Some(Precision::Int8) };
        assert!(copies.run(&bad, Kernel::Simd).is_err());
    }
    #[test]
    fn every_kind_of_piece_in_steps_gives_the_result_of_the_piece_at_once() {
        use crate::attention::turns::InSteps;
        use crate::model::decoder::{gpt2::Gpt2, Decoder};
        // MiniLM's 6 x 12 heads (the samples' head sets) of 2 values, and its vocabulary's size.
        let spec = ModelSpec { d_model: 24, ffn: 40, vocab: 8000, positions: 16, ..ModelSpec::MINILM_L6_V2 };
        let vocab: Vec<String> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
            .map(String::from)
            .into_iter()
            .chain((4..spec.vocab).map(|i| format!("w{i}")))
            .collect();
        let encoder = Encoder {
            name: "random".into(),
            id: "random".into(),
            architecture: crate::model::load::config::Architecture::Bert,
            bert: Bert::random(spec, 5),
            tokenizer: WordPiece::from_vocab(&vocab.join("\n"), spec.positions).unwrap(),
        };
        let decoder_spec =
            ModelSpec { layers: 2, heads: 3, d_model: 12, ffn: 20, vocab: 30, positions: 12, ..spec };
        let decoder = Decoder {
            name: "random".into(),
            id: "random".into(),
            gpt2: Gpt2::random(decoder_spec, 3),
            bpe: crate::model::tokenize::bpe::tests::tiny(),
        };
        let families = [
            (Model::Encoder(Rc::new(encoder)), crate::jobs::work::encoder::tests::samples()),
            (Model::Decoder(Rc::new(decoder)), crate::jobs::work::decoder::tests::samples()),
        ];
        for (model, samples) in families {
            let (at_once, in_steps) = (Copies::new(model.clone()), Copies::new(model.clone()));
            for piece in samples.iter().filter(|p| p.check(&model).is_ok()) {
                let turns = InSteps::of(64);
                let stepped =
                    crate::attention::turns::at_once(in_steps.run_in_turns(piece, Kernel::Simd, &turns));
                assert_eq!(stepped, at_once.run(piece, Kernel::Simd), "{piece:?}");
                let empty = matches!(piece, Piece::Embed { ids, .. } if ids.is_empty());
                assert!(empty || turns.taken() > 1, "{piece:?} in one step");
            }
            if let Model::Decoder(_) = model {
                // The drift piece made the 8-bit copy once; it is the one every later piece gets.
                use crate::attention::precision::Precision;
                let at = |p| in_steps.decoder_at(p).unwrap().clone();
                assert!(Rc::ptr_eq(&at(Precision::Int8), &at(Precision::Int8)));
                assert_eq!(
                    (at(Precision::Int8).precision(), at(Precision::F16).precision()),
                    (Precision::Int8, Precision::F16)
                );
            }
        }
    }
}
