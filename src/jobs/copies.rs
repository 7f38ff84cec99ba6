//! The model a thread holds for pieces of work: a decoder as it was loaded, or an encoder at the
//! precision it was loaded at and its copy at the other precision, made the first time a piece of
//! work asks for it: the task panel measures what 8 bits buy on the same workers that hold the
//! f16 model (and the reverse), without loading the model twice.

use std::cell::{OnceCell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use crate::attention::precision::Precision;
use crate::attention::HeadSet;
use crate::cpu::Kernel;
use crate::jobs::work::{Done, Piece};
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
        Copies { model, other: OnceCell::new(), cut: RefCell::new(None) }
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

    /// Runs `piece` with `kernel` on the model (an encoder's at the precision it names, the
    /// loaded one's when it names none), checked against that model first.
    pub fn run(&self, piece: &Piece, kernel: Kernel) -> Result<Done, String> {
        let Model::Encoder(encoder) = &self.model else {
            return piece.run(&self.model, kernel).map_err(|e| e.to_string());
        };
        let precision = piece.precision().unwrap_or(encoder.precision());
        let model = self.encoder_at(precision)?;
        piece.check_on_encoder(&model.bert).map_err(|e| e.to_string())?;
        let Piece::Embed { heads, ids, .. } = piece else {
            return Ok(piece.run_on_encoder(&model.bert, kernel));
        };
        // What `piece.run_on_encoder` does, with the cut's weights gathered once per set of heads.
        let mut cut = self.cut.borrow_mut();
        let pruned = match cut.as_ref().filter(|c| c.precision == precision && c.heads == *heads) {
            Some(c) => PrunedBert::with_gathered(&model.bert, heads, c.gathered.clone()),
            None => {
                let pruned = PrunedBert::new(&model.bert, heads);
                let gathered = pruned.gathered().clone();
                *cut = Some(Cut { precision, heads: heads.clone(), gathered });
                pruned
            }
        };
        Ok(Done::Embeddings(pruned.embed_batch(kernel, ids)))
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
}
