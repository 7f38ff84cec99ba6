//! The decoder on show and what the page computed from it: the state every part of the decoder's
//! panel reads, shared by context.

use std::rc::Rc;
use std::sync::Arc;

use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::backend::decoder::DecoderRunner;
use crate::jobs::decoder::{
    keep_for, DecoderRun, InductionRun, SetPerplexity, TextImportance, DECODER_KERNEL,
};
use crate::jobs::decoder_curves::DecoderCurves;
use crate::jobs::web::{now_ms, yield_to_browser};
use crate::model::decoder::gpt2::DecoderOutput;
use crate::model::decoder::induction::HalfLosses;
use crate::model::decoder::texts::TextSet;
use crate::model::decoder::Decoder;
use crate::model::spec::ModelSpec;
use crate::ui::state::{AppState, TrainedChoices};

/// The decoder on show and what the page computed from it, shared by the panel's parts.
#[derive(Clone, Copy)]
pub(super) struct DecoderView {
    pub(super) decoder: StoredValue<Rc<Decoder>, LocalStorage>,
    pub(super) choices: TrainedChoices,
    /// The passes over the reader's text with every head and with the reader's heads (`None`
    /// for an empty text).
    pub(super) run: LocalResource<Option<Rc<DecoderRun>>>,
    /// The induction test's result, once the reader ran it.
    pub(super) induction: RwSignal<Option<Rc<InductionRun>>, LocalStorage>,
    /// Whether the test is running.
    pub(super) testing: RwSignal<bool>,
    /// The test sequence's halves' losses with the reader's heads.
    pub(super) halves: LocalResource<Option<HalfLosses>>,
    /// Every head's importance to the next token, on the text it was measured on.
    pub(super) importance: RwSignal<Option<Rc<TextImportance>>, LocalStorage>,
    /// How far the measurement in flight got (`None`: none in flight).
    pub(super) measuring: RwSignal<Option<String>>,
    /// Bumped to stop the measurement in flight.
    pub(super) sweep_generation: StoredValue<u32>,
    /// Why the last measurement stopped short, if it did.
    pub(super) sweep_note: RwSignal<Option<String>>,
    /// The text set, once fetched and checked.
    pub(super) texts: StoredValue<Option<Rc<TextSet>>, LocalStorage>,
    /// The text set's perplexity with every head, and with the heads it was last measured with.
    pub(super) set_perplexity: RwSignal<Option<SetPair>, LocalStorage>,
    /// How far the text set's measurement got, or why it failed (`None`: none in flight).
    pub(super) set_status: RwSignal<Option<String>>,
    /// Whether the text set is being read.
    pub(super) reading_set: RwSignal<bool>,
    /// The three pruning curves on the text set, once computed.
    pub(super) curves: RwSignal<Option<Rc<DecoderCurves>>, LocalStorage>,
    /// How far their computation got, or why it stopped (`None`: not running).
    pub(super) curving: RwSignal<Option<String>>,
    /// Whether they are being computed.
    pub(super) computing_curves: RwSignal<bool>,
}

/// The text set's perplexity with every head and with the reader's heads.
type SetPair = (Rc<SetPerplexity>, Rc<SetPerplexity>);

impl DecoderView {
    pub(super) fn new(decoder: Rc<Decoder>) -> DecoderView {
        let choices = AppState::get().trained;
        let decoder = StoredValue::new_local(decoder);
        // The last full pass, kept while the text stays: pruning reruns only the pruned model.
        let full = StoredValue::new_local(None::<Arc<DecoderOutput>>);
        // Where the page's passes run: the CPU kernel until the session is chosen, then its GPU
        // if it has one (timed against the CPU kernel unless the reader forced the GPU).
        let session = AppState::get().session;
        let runner = LocalResource::new(move || {
            let (session, decoder) = (session.get(), decoder.get_value());
            async move {
                Rc::new(match session {
                    Some(s) => DecoderRunner::new(decoder, &s, &now_ms).await,
                    None => DecoderRunner::cpu(decoder),
                })
            }
        });
        let run = LocalResource::new(move || {
            let runner = runner.get();
            let (text, heads, decoder) = (choices.text.get(), choices.heads.get(), decoder.get_value());
            let tokens = decoder.tokens(&text);
            // A long text on a large model keeps only the layer on show (and reruns when it changes).
            let keep = keep_for(decoder.spec(), tokens.ids.len(), || choices.layer.get());
            async move {
                let runner = runner?;
                yield_to_browser().await;
                if tokens.ids.is_empty() || heads.len() != decoder.spec().total_heads() {
                    return None;
                }
                let run = DecoderRun::on(&runner, tokens, &heads, keep, full.get_value(), &now_ms).await;
                full.set_value(Some(run.full.clone()));
                Some(Rc::new(run))
            }
        });
        let induction = RwSignal::new_local(None::<Rc<InductionRun>>);
        let halves = LocalResource::new(move || {
            let (test, heads, decoder) = (induction.get(), choices.heads.get(), decoder.get_value());
            async move {
                let test = test?;
                yield_to_browser().await;
                Some(test.losses_with(&decoder, DECODER_KERNEL, &heads))
            }
        });
        DecoderView {
            decoder,
            choices,
            run,
            induction,
            testing: RwSignal::new(false),
            halves,
            importance: RwSignal::new_local(None),
            measuring: RwSignal::new(None),
            sweep_generation: StoredValue::new(0),
            sweep_note: RwSignal::new(None),
            texts: StoredValue::new_local(None),
            set_perplexity: RwSignal::new_local(None),
            set_status: RwSignal::new(None),
            reading_set: RwSignal::new(false),
            curves: RwSignal::new_local(None),
            curving: RwSignal::new(None),
            computing_curves: RwSignal::new(false),
        }
    }

    pub(super) fn get() -> DecoderView {
        expect_context::<DecoderView>()
    }

    pub(super) fn spec(&self) -> ModelSpec {
        *self.decoder.get_value().spec()
    }

    pub(super) fn run_now(&self) -> Option<Rc<DecoderRun>> {
        self.run.get().flatten()
    }

    /// Where the reader's text ran, and where the measurements run.
    pub(super) fn backend_sentence(&self) -> String {
        let cpu = || format!("the CPU kernel ({})", DECODER_KERNEL.describe());
        let on = self.run_now().map_or_else(cpu, |r| r.ran_on.clone());
        format!(
            "Your text runs on {on}, f16 weights widened to f32; the measurements below (importance, perplexity, the curves) run on this page's thread on the CPU kernel. A decoder: each token reads only the tokens before it."
        )
    }

    /// The importance measured on the reader's text as it is now.
    pub(super) fn importance_now(&self) -> Option<Rc<TextImportance>> {
        let found = self.importance.get()?;
        self.choices.text.with(|t| *t == found.text).then_some(found)
    }

    /// Runs the induction test on the page's thread (a few passes' time), once.
    pub(super) fn find_induction_heads(self) {
        if self.testing.get_untracked() {
            return;
        }
        self.testing.set(true);
        let decoder = self.decoder.get_value();
        spawn_local(async move {
            yield_to_browser().await;
            let test = InductionRun::new(&decoder, DECODER_KERNEL, 1);
            self.induction.set(Some(Rc::new(test)));
            self.testing.set(false);
        });
    }
}
