//! The page's state, owned once and shared by context ([`AppState::provide`], [`AppState::get`]).
//!
//! The reader's choices are signals, written only by event handlers (controls, head toggles,
//! host messages, the "try the GPU again" button) and by the one task that selects the backend.
//! Everything else is derived: the synthetic layer's pass is a resource of the settings and the
//! backend session; importance and drift are memos of the pass and the pruned heads.

use std::rc::Rc;
use std::sync::Arc;

use leptos::prelude::*;
use leptos::task::spawn_local;

use super::browser::{after_next_paint, now_ms, yield_to_browser, PageHost};
use crate::attention::analysis::{measure_drift, DriftView, Importance};
use crate::attention::config::MAX_HEADS;
use crate::attention::precision::Precision;
use crate::attention::{ConfigError, HeadSet, ModelConfig};
use crate::backend::{self, Halted, Run, Session};
use crate::model::spec::ModelSpec;
use crate::settings::{Frame, Link, Measure, Preference, Settings, TrainedSource};

/// What a synthetic pass is computed from: the shape, the seed and the session it ran on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyntheticInput {
    config: ModelConfig,
    seed: u32,
    /// The session's address (0 before one is chosen): a new session means a new pass.
    session: usize,
}

/// Where the synthetic layer's pass stands, as the resource computing it last resolved.
#[derive(Clone, Debug)]
pub enum RunState {
    /// Nothing to compute: the trained model is shown, or a long pass waits for the backend.
    Idle,
    /// The pass for `SyntheticInput`.
    Ran(SyntheticInput, Rc<Run>),
    /// The configuration of `SyntheticInput` cannot run, and why.
    Refused(SyntheticInput, ConfigError),
}

impl RunState {
    fn work(&self) -> Option<SyntheticInput> {
        match self {
            RunState::Idle => None,
            RunState::Ran(w, _) | RunState::Refused(w, _) => Some(*w),
        }
    }
}

/// The trained model's part of the state (its computations are the panel's, made when it opens).
#[derive(Clone, Copy)]
pub struct TrainedChoices {
    /// The sentence.
    pub text: RwSignal<String>,
    /// The layer whose heatmaps are shown.
    pub layer: RwSignal<usize>,
    /// Its heads, as many as the loaded model has (a link's, sized by the last one it prunes,
    /// until the model is loaded).
    pub heads: RwSignal<HeadSet>,
    /// What makes a head important.
    pub measure: RwSignal<Measure>,
    /// The trained model's shape: the loaded model's, the built-in one's before.
    pub shape: RwSignal<ModelSpec>,
    /// Which trained model the link names: the built-in one, a served folder, the reader's files.
    pub source: RwSignal<TrainedSource>,
    /// The trained model's name, once one is loaded.
    pub name: RwSignal<Option<String>>,
}

/// The sentence the trained model starts with, and the others a reader can pick.
pub const EXAMPLES: [&str; 4] = [
    "He sat on the bank of the river and watched the water.",
    "She went to the bank to pay off her loan.",
    "The cat sat on the mat because it was tired.",
    "Attention heads that can be removed are redundant.",
];

/// Everything the page shows, owned once.
#[derive(Clone, Copy)]
pub struct AppState {
    /// What the reader chose.
    pub settings: RwSignal<Settings>,
    /// The synthetic layer's heads: [`MAX_HEADS`] of them, so that a selection survives moving
    /// between presets (a model with fewer heads uses the first ones).
    pub heads: RwSignal<HeadSet>,
    /// The trained model's sentence, layer and heads.
    pub trained: TrainedChoices,
    /// Where passes run: `None` until the backend is chosen.
    pub session: RwSignal<Option<Rc<Session>>, LocalStorage>,
    /// Whether the reader asked for the GPU again and the answer is awaited.
    pub retrying: RwSignal<bool>,
    /// How far a long pass (weights generated on the fly) has got, 0 to 1. Only the progress
    /// bar reads it; the pass writes it between its steps.
    pub progress: RwSignal<Option<f64>>,
    /// How the page is framed, fixed for its life (it comes from the iframe's `src`).
    pub frame: StoredValue<Option<Frame>>,
    work: Memo<Option<(ModelConfig, u32)>>,
    run: LocalResource<RunState>,
    /// Each head's importance and the drift curves of the last finished pass.
    pub importance: Memo<Option<Arc<Importance>>>,
    /// The drift of the heads pruned now.
    pub drift: Memo<Option<DriftView>>,
}

impl AppState {
    /// The state a link describes; starts choosing the backend.
    pub fn new(link: Link) -> AppState {
        let trained_link = link.settings.is_trained();
        let settings = RwSignal::new(link.settings);
        let heads =
            RwSignal::new(if trained_link { HeadSet::all(MAX_HEADS) } else { link.heads.resized(MAX_HEADS) });
        let trained = TrainedChoices {
            text: RwSignal::new(link.text.clone().unwrap_or_else(|| EXAMPLES[0].to_string())),
            layer: RwSignal::new(link.layer),
            measure: RwSignal::new(link.measure),
            heads: RwSignal::new(if trained_link { link.heads.clone() } else { HeadSet::default() }),
            shape: RwSignal::new(ModelSpec::MINILM_L6_V2),
            source: RwSignal::new(link.source.clone()),
            name: RwSignal::new(None),
        };
        let session = RwSignal::new_local(None::<Rc<Session>>);
        let progress = RwSignal::new(None::<f64>);
        // Only the shape and the seed decide the pass (not the theme or the backend choice); the
        // trained model runs its own.
        let work = Memo::new(move |_| settings.with(|s| (!s.is_trained()).then(|| (s.config(), s.seed))));
        let run = LocalResource::new(move || pass(work.get(), work, session.get(), progress));
        let importance = Memo::new(move |_| finished(run).map(|r| r.importance.clone()));
        let drift = Memo::new(move |_| {
            let r = finished(run)?;
            let on = heads.with(|h| h.resized(r.config.num_heads));
            Some(measure_drift(&r.forward.contributions, &r.forward.output, &on, now_ms))
        });
        let state = AppState {
            settings,
            heads,
            trained,
            session,
            retrying: RwSignal::new(false),
            progress,
            frame: StoredValue::new(link.frame),
            work,
            run,
            importance,
            drift,
        };
        state.select_backend(link.settings.backend, false);
        state
    }

    /// Shares this state with every component below the caller.
    pub fn provide(self) {
        provide_context(self);
    }

    /// The page's state, from any component below [`App`](super::App).
    pub fn get() -> AppState {
        expect_context::<AppState>()
    }

    /// Chooses where passes run (after the first heatmaps: while the browser's GPU process is
    /// busy starting, or tearing down another page's device, asking it for an adapter can hold
    /// this page for a second). `retried` when the reader asked for the GPU again.
    pub fn select_backend(self, preference: Preference, retried: bool) {
        spawn_local(async move {
            if !retried {
                yield_to_browser().await;
                yield_to_browser().await;
            }
            let chosen = Session::start(preference, retried).await;
            self.session.set(Some(Rc::new(chosen)));
            self.retrying.set(false);
        });
    }

    /// The reader asks for the GPU again; settings and pruned heads stay, and the pass repeats
    /// on whichever backend comes back: with `?backend=gpu` on the GPU, else wherever it is
    /// measured faster (the offer is never made with `?backend=cpu`).
    pub fn retry_gpu(self) {
        self.retrying.set(true);
        let preference = match self.settings.with_untracked(|s| s.backend) {
            Preference::Auto => Preference::Auto,
            Preference::Gpu | Preference::Cpu => Preference::Gpu,
        };
        self.select_backend(preference, true);
    }

    /// The whole state as a link (the trained model's heads when it is chosen, else the
    /// synthetic layer's).
    pub fn link(&self) -> Link {
        let settings = self.settings.get();
        let heads = if settings.is_trained() { self.trained.heads.get() } else { self.heads.get() };
        Link {
            settings,
            source: self.trained.source.get(),
            text: Some(self.trained.text.get()),
            layer: self.trained.layer.get(),
            measure: self.trained.measure.get(),
            heads,
            frame: self.frame.get_value(),
        }
    }

    /// The last finished pass (while a new one is computed, the previous one stays on show).
    pub fn run(&self) -> Option<Rc<Run>> {
        finished(self.run)
    }

    /// Why the configuration cannot run, when it cannot.
    pub fn refused(&self) -> Option<ConfigError> {
        self.run.with(|s| match s {
            Some(RunState::Refused(_, e)) => Some(e.clone()),
            _ => None,
        })
    }

    /// Whether a pass for the current settings is still to come.
    pub fn computing(&self) -> bool {
        let wanted =
            self.work.get().map(|(config, seed)| SyntheticInput { config, seed, session: self.session_id() });
        let shown = self.run.with(|s| s.as_ref().and_then(RunState::work));
        wanted.is_some() && wanted != shown
    }

    /// The session's badge, note and retry offer, as of the last pass (a failing GPU pass changes
    /// the session: reading the pass makes these follow it). The badge names where the last pass
    /// ran, and says when a measurement chose it; with the trained model chosen, what the session
    /// can run (its panel says where each pass ran).
    pub fn backend_status(&self) -> Option<(String, Option<String>, bool)> {
        let synthetic = !self.settings.with(Settings::is_trained);
        let badge = self.run().filter(|_| synthetic).map(|r| r.badge());
        // The trained model at 8 bits says so beside what the session runs.
        let precision = self.settings.with(|s| s.precision);
        let precision =
            (!synthetic && precision != Precision::F16).then(|| format!(" · {}", precision.short()));
        self.session.with(|s| {
            s.as_ref().map(|s| {
                let label = badge.unwrap_or_else(|| s.placement_label());
                (format!("{label}{}", precision.clone().unwrap_or_default()), s.note(), s.retryable())
            })
        })
    }

    /// Why the last synthetic pass ran where it did, when a measurement chose (and the synthetic
    /// layer is what the page shows).
    pub fn choice_why(&self) -> Option<String> {
        let synthetic = !self.settings.with(Settings::is_trained);
        self.run().filter(|_| synthetic).and_then(|r| r.choice).map(|c| c.why())
    }

    /// The name of what the chart shows: the trained model's (once loaded), the preset's, or the
    /// reader's configuration; and whether it is trained.
    pub fn shown_name(&self) -> (String, bool) {
        let settings = self.settings.get();
        match (settings.is_trained(), self.trained.name.get()) {
            (true, Some(name)) => (name, true),
            _ => (settings.model.name().to_string(), false),
        }
    }

    /// The shape on show, `(d_model, heads)`: the trained model's, or the synthetic layer's.
    pub fn shape(&self) -> (usize, usize) {
        match self.settings.with(Settings::is_trained) {
            true => self.trained.shape.with(|s| (s.d_model, s.heads)),
            false => self.settings.with(|s| (s.config().d_model, s.config().num_heads)),
        }
    }

    fn session_id(&self) -> usize {
        self.session.with(|s| s.as_ref().map_or(0, |s| Rc::as_ptr(s) as usize))
    }
}

/// The last finished pass, once the resource has resolved to one.
fn finished(run: LocalResource<RunState>) -> Option<Rc<Run>> {
    run.with(|s| match s {
        Some(RunState::Ran(_, run)) => Some(run.clone()),
        _ => None,
    })
}

/// The synthetic pass for `work` (what `wanted` holds now), on `session`. While the GPU starts
/// (adapter, device, pipelines: about a second on a software adapter), a configuration the CPU
/// kernel finishes in milliseconds is drawn from it at once; the GPU's pass replaces it when
/// the GPU is ready. Between two slices of a long pass it stops once `wanted` holds something else (the
/// reader moved on: a newer pass is on its way) or is gone with its owner.
async fn pass(
    work: Option<(ModelConfig, u32)>,
    wanted: Memo<Option<(ModelConfig, u32)>>,
    session: Option<Rc<Session>>,
    progress: RwSignal<Option<f64>>,
) -> RunState {
    let Some((config, seed)) = work else { return RunState::Idle };
    let input =
        SyntheticInput { config, seed, session: session.as_ref().map_or(0, |s| Rc::as_ptr(s) as usize) };
    let session = match session {
        Some(s) => s,
        None if backend::is_quick(&config) => Rc::new(Session::cpu_only()),
        None => return RunState::Idle,
    };
    // The CPU kernel holds the main thread: before a long pass, let the "Computing" status
    // paint first. A quick one just runs (waiting for a frame would delay the first heatmaps
    // while the browser is busy starting the GPU).
    if !backend::is_quick(&config) {
        after_next_paint().await;
    }
    // Read with no observer: inside this future the resource is the observer, and a memo brought
    // up to date while its own subscriber observes does not mark that subscriber dirty
    // (reactive_graph's `MemoInner::update_if_necessary`), so a change read here first would
    // never make the resource run again for the settings the reader moved on to.
    let still_wanted = || untrack(|| wanted.try_get_untracked()) == Some(work);
    let step = async |p: f64| {
        if !still_wanted() {
            return false;
        }
        progress.set(Some(p));
        yield_to_browser().await;
        still_wanted()
    };
    let result = backend::run(&session, config, seed, &PageHost, step).await;
    match result {
        Ok(run) => {
            progress.set(None);
            RunState::Ran(input, Rc::new(run))
        }
        Err(Halted::Refused(e)) => {
            progress.set(None);
            RunState::Refused(input, e)
        }
        // The newer pass owns the progress bar, and this state is never shown.
        Err(Halted::Stopped) => RunState::Idle,
    }
}
