//! The engine for a decoder ([`Family`] for [`Decoder`]): its page passes run on a
//! [`DecoderRunner`] (the GPU while it works, else the CPU kernel); the next-token pieces it runs
//! on the page's thread, one head set at a time, start from the full model's pass of the text,
//! which it keeps (a worker's piece runs that pass once for all its sets).

use std::cell::RefCell;
use std::rc::Rc;

use crate::attention::turns::Turns;
use crate::backend::decoder::{DecoderRunner, DECODER_KERNEL};
use crate::backend::Session;
use crate::jobs::engine::{Engine, Family, Where};
use crate::jobs::host::HostClock;
use crate::jobs::work::{Done, Piece};
use crate::model::decoder::cost::next_logits_flops;
use crate::model::decoder::next_importance::NextKl;
use crate::model::decoder::Decoder;
use crate::model::spec::ModelSpec;
use crate::model::Model;

/// The full model's pass over the last text the page's thread measured the next token on.
#[derive(Default)]
pub struct FullPass(RefCell<Option<(Vec<u32>, Rc<NextKl>)>>);

impl FullPass {
    /// The full pass over `ids`: kept, or made now (and kept); and whether it was kept.
    async fn of(&self, engine: &Engine<Decoder>, ids: &[u32]) -> (Rc<NextKl>, bool) {
        if let Some((_, base)) = self.0.borrow().as_ref().filter(|(kept, _)| kept == ids) {
            return (base.clone(), true);
        }
        let pass = NextKl::new_in_turns(&engine.model().gpt2, DECODER_KERNEL, ids, engine.turns());
        let base = Rc::new(pass.await);
        *self.0.borrow_mut() = Some((ids.to_vec(), base.clone()));
        (base, false)
    }

    /// Whether the full pass over `ids` is kept.
    fn holds(&self, ids: &[u32]) -> bool {
        self.0.borrow().as_ref().is_some_and(|(kept, _)| kept == ids)
    }
}

impl Engine<Decoder> {
    /// The decoder at `precision` on the page's thread: the model itself, or the copy the page's
    /// thread runs pieces at that precision on (made the first time).
    pub fn model_at(&self, precision: crate::attention::precision::Precision) -> Rc<Decoder> {
        match self.page_thread().copies().decoder_at(precision) {
            Ok(model) => model.clone(),
            Err(_) => unreachable!("a decoder's engine holds a decoder"),
        }
    }
}

impl Family for Decoder {
    type Runner = DecoderRunner;
    type Kept = FullPass;

    fn held(model: &Rc<Self>) -> Model {
        Model::Decoder(model.clone())
    }

    fn shape(&self) -> &ModelSpec {
        self.spec()
    }

    async fn runner(
        model: &Rc<Self>,
        session: &Session,
        clock: &HostClock<'_>,
        turns: Rc<dyn Turns>,
    ) -> DecoderRunner {
        DecoderRunner::new(model.clone(), session, clock, turns).await
    }

    /// A next-token piece on the page's thread does not run the full pass it kept.
    fn flops(engine: &Engine<Self>, piece: &Piece) -> u64 {
        let spec = engine.spec();
        match piece {
            Piece::NextKl { ids, .. }
                if engine.place_of(piece) == Where::PageThread && engine.kept().holds(ids) =>
            {
                piece.flops(spec) - next_logits_flops(spec, ids.len(), 0)
            }
            _ => piece.flops(spec),
        }
    }

    /// A next-token piece starts from the kept full pass; every other piece runs as a worker
    /// runs it.
    async fn run_here(engine: &Engine<Self>, piece: &Piece) -> (Done, u64) {
        let Piece::NextKl { ids, sets } = piece else { return (engine.run_on_page_thread(piece).await, 0) };
        if let Err(e) = piece.check_on_decoder(&engine.model().gpt2) {
            panic!("a piece of this engine's own job: {e}");
        }
        let (base, kept) = engine.kept().of(engine, ids).await;
        let gpt2 = &engine.model().gpt2;
        let mut kls = Vec::with_capacity(sets.len());
        for heads in sets {
            kls.push(base.with_in_turns(gpt2, DECODER_KERNEL, heads, engine.turns()).await);
        }
        let spec = engine.spec();
        let saved = if kept { next_logits_flops(spec, ids.len(), 0) } else { 0 };
        (Done::Sums(kls), saved)
    }
}
