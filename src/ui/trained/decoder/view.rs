//! The decoder on show and what the page computed from it: the state every part of the decoder's
//! panel reads, shared by context. The decoder runs on an [`Engine`] like an encoder: its page
//! passes on the session's backend, its measurements as jobs of the one driver on the page's
//! workers (or between the page's turns), each under a [`Slot`] of its own.

use std::any::Any;
use std::rc::Rc;
use std::sync::Arc;

use leptos::prelude::*;
use leptos::task::spawn_local;

use super::super::loader::Shown;
use crate::attention::precision::Precision;
use crate::backend::precision_speed::PrecisionCost;
use crate::jobs::decoder::curves::DecoderCurves;
use crate::jobs::decoder::precision::TimePrecisions;
use crate::jobs::decoder::{
    keep_for, DecoderRun, InductionRun, SetPerplexity, TextImportance, DECODER_KERNEL,
};
use crate::jobs::driver::{drive, drive_any, AnyPlan, Status};
use crate::jobs::engine::{Engine, Workers};
use crate::jobs::ticket::{Slot, Ticket};
use crate::jobs::web::{auto_threads, now_ms, yield_to_browser, PageHost, WebWorkers};
use crate::model::decoder::gpt2::{DecoderOutput, Keep};
use crate::model::decoder::induction::HalfLosses;
use crate::model::decoder::precision::PrecisionDrift;
use crate::model::decoder::texts::TextSet;
use crate::model::decoder::{Decoder, DecoderTokens};
use crate::model::spec::ModelSpec;
use crate::ui::state::{AppState, TrainedChoices};

/// One kind of measurement: the slot its jobs take their tickets from (a new one stops the one
/// in flight), and what the panel says of it.
#[derive(Clone, Copy)]
pub(super) struct Measurement {
    slot: StoredValue<Slot, LocalStorage>,
    /// How far the job in flight got, or why the last one stopped short (`None`: nothing to say).
    pub(super) status: RwSignal<Option<String>>,
    /// Whether a job is in flight.
    pub(super) running: RwSignal<bool>,
}

impl Measurement {
    fn new() -> Measurement {
        Measurement {
            slot: StoredValue::new_local(Slot::default()),
            status: RwSignal::new(None),
            running: RwSignal::new(false),
        }
    }

    /// A new ticket of this measurement (stopping the one in flight) that is also current only
    /// while `wanted()` holds; and the bare slot ticket, to tell whether this job is still the
    /// newest when it ends.
    fn ticket(self, wanted: impl Fn() -> bool + 'static) -> Option<(Ticket, Ticket)> {
        let mine = self.slot.try_with_value(Slot::ticket)?;
        let newest = mine.clone();
        Some((Ticket::while_wanted(move || mine.is_current() && wanted()), newest))
    }

    /// Says `status` while `mine` is the newest job (a disposed panel hears nothing).
    fn say(self, mine: &Ticket, status: Option<String>) {
        if mine.is_current() {
            self.status.try_set(status);
        }
    }

    /// Ends the job of `mine` with `status` said, if it is still the newest.
    fn end(self, mine: &Ticket, status: Option<String>) {
        if mine.is_current() {
            self.status.try_set(status);
            self.running.try_set(false);
        }
    }
}

/// The decoder on show and what the page computed from it, shared by the panel's parts.
#[derive(Clone, Copy)]
pub(super) struct DecoderView {
    pub(super) decoder: StoredValue<Rc<Decoder>, LocalStorage>,
    pub(super) choices: TrainedChoices,
    /// The reader's text's tokens.
    pub(super) tokens: Memo<DecoderTokens>,
    /// The decoder on the page's backend and its workers, once the backend is chosen.
    pub(super) engine: LocalResource<Option<Rc<Engine<Decoder>>>>,
    /// Where the measurements run, kept while the model is (the workers hold it).
    pub(super) workers: StoredValue<Rc<Workers>, LocalStorage>,
    /// Changes whenever the workers' pace, threads or failure does.
    pub(super) workers_changed: Trigger,
    /// Bytes of the model's file, which the page keeps outside its wasm memory for the workers.
    file_bytes: u64,
    /// The passes over the reader's text with every head and with the reader's heads (`None`
    /// for an empty text).
    pub(super) run: LocalResource<Option<Rc<DecoderRun>>>,
    /// The induction test's result, once the reader ran it.
    pub(super) induction: RwSignal<Option<Rc<InductionRun>>, LocalStorage>,
    /// The test sequence's halves' losses with the reader's heads.
    pub(super) halves: LocalResource<Option<HalfLosses>>,
    /// Every head's importance to the next token, on the text it was measured on.
    pub(super) importance: RwSignal<Option<Rc<TextImportance>>, LocalStorage>,
    /// The text set, once fetched and checked.
    pub(super) texts: StoredValue<Option<Rc<TextSet>>, LocalStorage>,
    /// The text set's perplexity with every head, and with the heads it was last measured with.
    pub(super) set_perplexity: RwSignal<Option<SetPair>, LocalStorage>,
    /// The three pruning curves on the text set, once computed.
    pub(super) curves: RwSignal<Option<Rc<DecoderCurves>>, LocalStorage>,
    /// The text set at both precisions, and a pass over the reader's text timed at both, once
    /// measured.
    pub(super) precisions: RwSignal<(Option<Rc<PrecisionDrift>>, Option<PrecisionCost>), LocalStorage>,
    /// The measurements: every head's importance, the text set's perplexity, the curves, the
    /// induction test.
    pub(super) importance_job: Measurement,
    pub(super) set_job: Measurement,
    pub(super) curves_job: Measurement,
    pub(super) induction_job: Measurement,
    pub(super) precision_job: Measurement,
}

/// Why the numbers on show are not yet the reader's: they were computed for the previous text,
/// or for the previous heads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Stale {
    Text,
    Heads,
}

impl Stale {
    /// What a number on show says until the one for the reader's choice lands.
    pub(super) fn note(self) -> &'static str {
        match self {
            Stale::Text => " (for your previous text: recomputing…)",
            Stale::Heads => " (for your previous heads: recomputing…)",
        }
    }
}

/// What makes a measurement's plan on the engine, or says why it cannot be made.
pub(super) type MakePlan = Box<dyn FnOnce(&Engine<Decoder>) -> Result<AnyPlan<Decoder>, String>>;

/// The text set's perplexity with every head and with the reader's heads.
pub(super) type SetPair = (Rc<SetPerplexity>, Rc<SetPerplexity>);

impl DecoderView {
    pub(super) fn new(decoder: Rc<Decoder>, shown: &Shown) -> DecoderView {
        let app = AppState::get();
        let choices = app.trained;
        let threads = app.settings.with_untracked(|s| s.threads.count(auto_threads()));
        let workers =
            Rc::new(Workers::new(Rc::new(WebWorkers::new(threads, shown.file.clone(), decoder.precision()))));
        let workers_changed = Trigger::new();
        workers.watch(move || workers_changed.notify());
        let workers = StoredValue::new_local(workers);
        let decoder = StoredValue::new_local(decoder);
        // The decoder on the session's backend: the CPU kernel until the session is chosen,
        // then its GPU if it has one (timed against the CPU kernel unless the reader forced it).
        let engine = LocalResource::new(move || {
            let (session, decoder, workers) = (app.session.get(), decoder.get_value(), workers.get_value());
            async move { Some(Rc::new(Engine::new(decoder, &*session?, workers, Rc::new(PageHost)).await)) }
        });
        let tokens = Memo::new(move |_| decoder.with_value(|d| choices.text.with(|t| d.tokens(t))));
        let run = text_passes(engine, decoder, choices, tokens);
        let induction = RwSignal::new_local(None::<Rc<InductionRun>>);
        let halves = LocalResource::new(move || {
            let (test, heads, decoder) = (induction.get(), choices.heads.get(), decoder.get_value());
            async move {
                let test = test?;
                yield_to_browser().await;
                (heads.len() == decoder.spec().total_heads())
                    .then(|| test.losses_with(&decoder, DECODER_KERNEL, &heads))
            }
        });
        DecoderView {
            decoder,
            choices,
            tokens,
            engine,
            workers,
            workers_changed,
            file_bytes: crate::model::load::model_file::FileBytes::byte_len(&shown.file.bytes) as u64,
            run,
            induction,
            halves,
            importance: RwSignal::new_local(None),
            texts: StoredValue::new_local(None),
            set_perplexity: RwSignal::new_local(None),
            curves: RwSignal::new_local(None),
            precisions: RwSignal::new_local((None, None)),
            importance_job: Measurement::new(),
            set_job: Measurement::new(),
            curves_job: Measurement::new(),
            induction_job: Measurement::new(),
            precision_job: Measurement::new(),
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

    /// What the run on show was computed for when it is not the reader's text and heads now (its
    /// numbers are marked stale until the run for these lands).
    pub(super) fn run_staleness(&self) -> Option<Stale> {
        let run = self.run_now()?;
        if self.tokens.with(|t| run.tokens.ids != t.ids) {
            Some(Stale::Text)
        } else {
            self.choices.heads.with(|h| run.pruned.heads != *h).then_some(Stale::Heads)
        }
    }

    /// The engine, once the backend is chosen.
    pub(super) fn engine_now(&self) -> Option<Rc<Engine<Decoder>>> {
        self.engine.get().flatten()
    }

    /// Whether the panel still shows `engine` (a new backend session stops its jobs; a panel a
    /// new model replaced is gone, and so is its engine).
    fn engine_is(self, engine: &Rc<Engine<Decoder>>) -> bool {
        self.engine.try_get_untracked().flatten().flatten().is_some_and(|e| Rc::ptr_eq(&e, engine))
    }

    /// Where the reader's text ran, and where the measurements run.
    pub(super) fn backend_sentence(&self) -> String {
        let cpu = || format!("the CPU kernel ({})", DECODER_KERNEL.describe());
        let on = self.run_now().map_or_else(cpu, |r| r.ran_on.clone());
        self.workers_changed.track();
        let measures = self.workers.with_value(|w| w.place().describe());
        let widened = match self.decoder.with_value(|d| d.precision()) {
            Precision::F16 => ", f16 weights widened to f32",
            Precision::Int8 => "",
        };
        format!(
            "Your text runs on {on}{widened}; the measurements below (importance, perplexity, the curves, the induction test) run on the CPU kernel, on {measures}. A decoder: each token reads only the tokens before it."
        )
    }

    /// Why the measurements run on the page's thread although workers were asked for, once known.
    pub(super) fn workers_note(&self) -> Option<String> {
        self.workers_changed.track();
        self.workers.with_value(|w| w.note())
    }

    /// What the page and each worker hold in memory ([`Workers::memory_note`]).
    pub(super) fn memory_note(&self) -> String {
        self.workers_changed.track();
        self.workers.with_value(|w| w.memory_note(crate::jobs::web::memory_bytes(), self.file_bytes))
    }

    /// The importance measured on the reader's text as it is now.
    pub(super) fn importance_now(&self) -> Option<Rc<TextImportance>> {
        let found = self.importance.get()?;
        self.choices.text.with(|t| *t == found.text).then_some(found)
    }

    /// Runs the plan `make` makes on the engine as `measurement`'s job, while `wanted()` holds,
    /// the panel shows this engine and no newer job of the measurement started; `describe` words
    /// its status. Its result, or `None` when it stopped (or the plan could not be made: `make`
    /// says why, and that is said). Every kind of plan goes through this one function and one
    /// instantiation of the driver ([`AnyPlan`]): the caller takes its result back by its type.
    pub(super) async fn run_job(
        self,
        measurement: Measurement,
        wanted: Box<dyn Fn() -> bool>,
        make: MakePlan,
        describe: Box<dyn Fn(&Status) -> String>,
    ) -> Option<Box<dyn Any>> {
        let Some(engine) = self.engine.try_get_untracked().flatten().flatten() else {
            measurement
                .status
                .try_set(Some("The decoder is still starting: measure again in a moment.".into()));
            measurement.running.try_set(false);
            return None;
        };
        let plan = match make(&engine) {
            Ok(plan) => plan,
            Err(why) => {
                measurement.status.try_set(Some(why));
                measurement.running.try_set(false);
                return None;
            }
        };
        let of = engine.clone();
        let (ticket, mine) = measurement.ticket(move || self.engine_is(&of) && wanted())?;
        measurement.running.try_set(true);
        let mut publish = |status: Status| measurement.say(&mine, Some(describe(&status)));
        let found = drive_any(&engine, plan, &ticket, &mut publish).await;
        measurement.end(&mine, None);
        found
    }

    /// A pass over `ids` with every head at f16 and at 8 bits, timed against each other on the
    /// page's thread ([`TimePrecisions`]) as a job of `measurement`: `None` when it stopped.
    pub(super) async fn time_precisions(
        self,
        measurement: Measurement,
        ids: Vec<u32>,
    ) -> Option<PrecisionCost> {
        let engine = self.engine.try_get_untracked().flatten().flatten()?;
        let of = engine.clone();
        let (ticket, mine) = measurement.ticket(move || self.engine_is(&of))?;
        measurement.running.try_set(true);
        measurement.say(&mine, Some("Timing a pass over your text at f16 and at 8 bits…".into()));
        let (f16, int8) = (engine.model_at(Precision::F16), engine.model_at(Precision::Int8));
        let cost = drive(&engine, TimePrecisions::new(f16, int8, ids), &ticket, |_, _| {}).await;
        measurement.end(&mine, None);
        cost
    }

    /// Starts `job` (an async block that runs jobs of `measurement`), saying `status` until its
    /// first job reports.
    pub(super) fn start(
        self,
        measurement: Measurement,
        status: String,
        job: impl std::future::Future<Output = ()> + 'static,
    ) {
        measurement.status.set(Some(status));
        measurement.running.set(true);
        spawn_local(job);
    }

    /// The text set, fetched from beside the page and checked against the hash built into it.
    pub(super) async fn text_set(self) -> Result<Rc<TextSet>, String> {
        if let Some(set) = self.texts.try_get_value().flatten() {
            return Ok(set);
        }
        let bytes = crate::ui::browser::fetch_bytes(crate::model::decoder::texts::TEXTS_URL, |_, _| {})
            .await
            .map_err(|e| format!("Could not load the text set: {e}."))?;
        let set =
            Rc::new(TextSet::from_file(&bytes).map_err(|e| format!("Could not load the text set: {e}."))?);
        self.texts.try_set_value(Some(set.clone()));
        Ok(set)
    }
}

/// The passes over the reader's text, full and with the reader's heads, on the engine's runner;
/// the full pass is kept while the text stays, so pruning reruns only the pruned model.
fn text_passes(
    engine: LocalResource<Option<Rc<Engine<Decoder>>>>,
    decoder: StoredValue<Rc<Decoder>, LocalStorage>,
    choices: TrainedChoices,
    tokens: Memo<DecoderTokens>,
) -> LocalResource<Option<Rc<DecoderRun>>> {
    let full = StoredValue::new_local(None::<Arc<DecoderOutput>>);
    // The last run, kept for as long as the panel is: passes whose text, heads or layer are
    // changed again, or whose panel is gone, end at their next turn and leave it on show.
    let last = StoredValue::new_local(None::<Rc<DecoderRun>>);
    LocalResource::new(move || {
        let engine = engine.get().flatten();
        let (text, heads, decoder) = (choices.text.get(), choices.heads.get(), decoder.get_value());
        let tokens = tokens.get();
        // A long text on a large model keeps only the layer on show (and reruns when it changes).
        let keep = keep_for(decoder.spec(), tokens.ids.len(), || choices.layer.get());
        async move {
            let engine = engine?;
            yield_to_browser().await;
            if tokens.ids.is_empty() || heads.len() != decoder.spec().total_heads() {
                return None;
            }
            let asked = || {
                let layer = match keep {
                    Keep::Layer(l) => choices.layer.try_get_untracked() == Some(l),
                    Keep::All => true,
                };
                last.try_with_value(|_| ()).is_some()
                    && layer
                    && choices.text.try_with_untracked(|t| *t == text).unwrap_or(false)
                    && choices.heads.try_with_untracked(|h| *h == heads).unwrap_or(false)
            };
            let (wanted, kept) = (&asked, full.try_get_value().flatten());
            let run =
                match DecoderRun::on_while(engine.runner(), tokens, (&heads, keep), kept, &now_ms, wanted)
                    .await
                {
                    Some(run) => Rc::new(run),
                    None => return last.try_get_value().flatten(),
                };
            full.try_set_value(Some(run.full.clone()));
            last.try_set_value(Some(run.clone()));
            Some(run)
        }
    })
}
