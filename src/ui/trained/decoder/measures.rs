//! The decoder's measurements: every head's importance (to the next token on the reader's text,
//! or by the text set's loss), the text set's perplexity and the three pruning curves; each is
//! computed on the page's thread a slice at a time by `crate::jobs::decoder`'s steppers, and the
//! components here start them and display what they found.

use std::rc::Rc;

use leptos::html;
use leptos::prelude::*;
use leptos::task::spawn_local;
use plotters::prelude::IntoDrawingArea;
use plotters_canvas::CanvasBackend;

use super::view::DecoderView;
use crate::attention::HeadSet;
use crate::jobs::decoder::{
    random_heads, DecoderMeasure, SetGradient, SetLoss, SetPerplexity, Steps, SweepProgress, TextSweep,
    DECODER_KERNEL,
};
use crate::jobs::decoder_curves::{CurveRun, DecoderCurves};
use crate::jobs::web::{now_ms, yield_to_browser};
use crate::model::decoder::next_importance::SweepPlan;
use crate::model::decoder::texts::{TextSet, NAME as TEXTS_NAME, TEXTS_URL};
use crate::model::decoder::Decoder;
use crate::model::spec::ModelSpec;
use crate::ui::browser::fetch_bytes;
use crate::ui::canvas::{fit_to_screen, palette};
use crate::ui::panels::DriftChart;
use crate::ui::state::AppState;
use crate::viz::chart::DriftAxes;
use crate::viz::task_chart::{draw_task_chart, TaskChart};

/// Milliseconds a measurement works before letting the browser draw.
const SWEEP_SLICE_MS: f64 = 40.0;

impl DecoderView {
    /// Measures every head's importance on the reader's text on the page's thread, a slice at a
    /// time; a new measurement stops the one in flight.
    fn measure_importance(self) {
        let generation = self.start_sweep("Measuring…".into());
        let (decoder, text) = (self.decoder.get_value(), self.choices.text.get_untracked());
        spawn_local(async move {
            yield_to_browser().await;
            let sweep = TextSweep::new(&decoder, DECODER_KERNEL, &text, SweepPlan::PAGE);
            self.run_sweep(&decoder, sweep, generation).await;
        });
    }

    /// Ranks every head by the text set's loss (its gate gradients, a passage at a time), then
    /// measures the drift curve of the reader's text in that order.
    fn measure_by_set(self) {
        let generation = self.start_sweep(format!("Loading the {TEXTS_NAME} passages…"));
        let (decoder, text) = (self.decoder.get_value(), self.choices.text.get_untracked());
        spawn_local(async move {
            let set = match self.text_set().await {
                Ok(set) => set,
                Err(e) => return self.end_sweep(generation, Some(e)),
            };
            let mut job = SetGradient::new(&decoder, &set);
            let ranking = loop {
                if self.sweep_generation.try_get_value() != Some(generation) {
                    return;
                }
                if let Some(ranking) = job.work_for(&decoder, DECODER_KERNEL, &now_ms, SWEEP_SLICE_MS) {
                    break ranking;
                }
                let (done, of) = job.progress();
                self.measuring.set(Some(format!("Gradients on {TEXTS_NAME}: passage {} of {of}…", done + 1)));
                yield_to_browser().await;
            };
            let sweep = TextSweep::ranked(
                &decoder,
                DECODER_KERNEL,
                &text,
                SweepPlan::PAGE,
                &ranking,
                DecoderMeasure::SetLoss,
            );
            self.run_sweep(&decoder, sweep, generation).await;
        });
    }

    /// Starts a measurement (stopping the one in flight) and says `status`; its generation.
    fn start_sweep(self, status: String) -> u32 {
        let generation = self.sweep_generation.get_value().wrapping_add(1);
        self.sweep_generation.set_value(generation);
        self.sweep_note.set(None);
        self.measuring.set(Some(status));
        generation
    }

    /// Ends measurement `generation`, if it is still the current one, with `note` said.
    fn end_sweep(self, generation: u32, note: Option<String>) {
        if self.sweep_generation.try_get_value() == Some(generation) {
            self.measuring.set(None);
            self.sweep_note.set(note);
        }
    }

    /// Works `sweep` to its end a slice at a time; stops when another measurement starts or the
    /// panel is gone.
    async fn run_sweep(self, decoder: &Decoder, sweep: Option<TextSweep>, generation: u32) {
        let Some(mut sweep) = sweep else { return self.end_sweep(generation, None) };
        while self.sweep_generation.try_get_value() == Some(generation) {
            match sweep.work_for(decoder, DECODER_KERNEL, &now_ms, SWEEP_SLICE_MS) {
                SweepProgress::Done(found) => {
                    self.importance.set(Some(found));
                    return self.end_sweep(generation, None);
                }
                SweepProgress::Working { .. } => self.measuring.set(Some(sweep.progress_text())),
            }
            yield_to_browser().await;
        }
    }

    /// The text set, fetched from beside the page and checked against the hash built into it.
    async fn text_set(self) -> Result<Rc<TextSet>, String> {
        if let Some(set) = self.texts.get_value() {
            return Ok(set);
        }
        let bytes = fetch_bytes(TEXTS_URL, |_, _| {})
            .await
            .map_err(|e| format!("Could not load the text set: {e}."))?;
        let set =
            Rc::new(TextSet::from_file(&bytes).map_err(|e| format!("Could not load the text set: {e}."))?);
        self.texts.set_value(Some(set.clone()));
        Ok(set)
    }

    /// Measures the text set's perplexity with every head (once per model) and with the
    /// reader's heads, a slice at a time.
    fn measure_set(self) {
        if self.reading_set.get_untracked() {
            return;
        }
        self.reading_set.set(true);
        self.set_status.set(Some(format!("Loading the {TEXTS_NAME} passages…")));
        let (decoder, heads) = (self.decoder.get_value(), self.choices.heads.get_untracked());
        spawn_local(async move {
            let result = self.read_set(&decoder, &heads).await;
            self.set_status.set(result.err());
            self.reading_set.set(false);
        });
    }

    async fn read_set(self, decoder: &Decoder, heads: &HeadSet) -> Result<(), String> {
        let set = self.text_set().await?;
        let all = HeadSet::all(heads.len());
        let known = self.set_perplexity.get_untracked().map(|(full, _)| full);
        let mut measured = Vec::new();
        for (which, heads) in [("every head", &all), ("your heads", heads)] {
            if let Some(full) = known.as_ref().filter(|f| f.heads == *heads) {
                measured.push(full.clone());
                continue;
            }
            if let Some(same) = measured.iter().find(|m: &&Rc<SetPerplexity>| m.heads == *heads) {
                measured.push(same.clone());
                continue;
            }
            let mut job = SetLoss::new(decoder, &set, heads);
            let found = loop {
                if let Some(found) = job.work_for(decoder, DECODER_KERNEL, &now_ms, SWEEP_SLICE_MS) {
                    break found;
                }
                let (done, of) = job.progress();
                self.set_status.set(Some(format!("Reading passage {} of {of} with {which}…", done + 1)));
                yield_to_browser().await;
            };
            measured.push(Rc::new(found));
        }
        let pruned = measured.pop().expect("two");
        self.set_perplexity.set(Some((measured.pop().expect("two"), pruned)));
        Ok(())
    }

    /// Computes the three pruning curves on the text set, a slice at a time, saying how far it got.
    fn compute_curves(self) {
        if self.computing_curves.get_untracked() {
            return;
        }
        self.computing_curves.set(true);
        self.curving.set(Some(format!("Loading the {TEXTS_NAME} passages…")));
        let decoder = self.decoder.get_value();
        spawn_local(async move {
            let set = match self.text_set().await {
                Ok(set) => set,
                Err(e) => {
                    self.curving.set(Some(e));
                    self.computing_curves.set(false);
                    return;
                }
            };
            let Some(mut run) = CurveRun::new(&decoder, &set, 1) else {
                self.curving.set(Some(
                    "No passage of the text set has two tokens for this model: nothing to predict.".into(),
                ));
                self.computing_curves.set(false);
                return;
            };
            let mut worked = 0.0;
            // Stops when the panel is gone.
            while self.computing_curves.try_get_untracked() == Some(true) {
                let started = now_ms();
                let done = run.work_for(&decoder, DECODER_KERNEL, &now_ms, SWEEP_SLICE_MS);
                worked += now_ms() - started;
                if let Some(curves) = done {
                    self.curves.set(Some(Rc::new(curves)));
                    self.curving.set(None);
                    self.computing_curves.set(false);
                    return;
                }
                self.curving.set(Some(run.progress_text(worked)));
                yield_to_browser().await;
            }
        });
    }
}

/// Which heads the next token needs: every head removed alone, the k least important or k at
/// random pruned, and the drift curve of both orders.
#[component]
pub(super) fn DecoderImportance() -> impl IntoView {
    let view = DecoderView::get();
    let heads = view.choices.heads;
    let total = view.spec().total_heads();
    let k = RwSignal::new(0usize);
    let seed = RwSignal::new(1u32);
    let prune_least = move |count: usize| {
        k.set(count);
        if let Some(found) = view.importance_now() {
            heads.set(found.found.ranking.least(count));
        }
    };
    let prune_random = move |_| {
        seed.update(|s| *s += 1);
        heads.set(random_heads(total, k.get_untracked(), seed.get_untracked()));
    };
    let stale = move || view.importance.with(Option::is_some) && view.importance_now().is_none();
    let curve = move || view.importance_now().map(|i| i.found.curve.clone());
    let ranked = Signal::derive(move || curve().map(|c| c.dense(&c.ranked)).unwrap_or_default());
    let random = Signal::derive(move || curve().map(|c| c.dense(&c.random)).unwrap_or_default());
    let current = Signal::derive(move || {
        let run = view.run_now()?;
        let kl = crate::model::decoder::next_token::kl(&run.full.next_logits, &run.pruned.next_logits);
        Some((run.pruned.heads.pruned_count(), kl))
    });
    let settings = AppState::get().settings;
    let theme = Signal::derive(move || settings.read().theme);
    view! {
        <h3>"Which heads the next token needs"</h3>
        <p class="explain">
            {format!("A head's importance here: how far the next-token distribution moves (KL divergence) when that head alone is removed, on your text (one pass per head, each from the first layer it changes); or, as Michel et al. measure it, how strongly the loss on {TEXTS_NAME}'s passages depends on the head (the gradient of a gate on its output, one forward and backward pass per passage). The curve below then prunes heads least important first and at random, and measures the next token after your text.")}
        </p>
        <p class="buttons">
            <button data-testid="decoder-measure" disabled=move || view.measuring.with(Option::is_some) on:click=move |_| view.measure_importance()>
                "Measure every head on this text"
            </button>
            <button data-testid="decoder-measure-set" disabled=move || view.measuring.with(Option::is_some) on:click=move |_| view.measure_by_set()>
                {format!("Rank them by the loss on {TEXTS_NAME} (gradient)")}
            </button>
        </p>
        <p class="muted" data-testid="decoder-importance-status" aria-live="polite">
            {move || {
                view.measuring.get().or_else(|| view.sweep_note.get()).or_else(|| {
                    stale().then(|| "Measured on an earlier text: measure again for this one.".to_string())
                })
            }}
        </p>
        <p data-testid="decoder-importance">{move || view.importance_now().map(|i| i.sentence(&view.spec()))}</p>
        <label class="prune-k">
            {move || format!("Prune the {} least important heads ", k.get())}
            <input
                type="range"
                min="0"
                max=total.to_string()
                data-testid="decoder-prune-k"
                disabled=move || view.importance_now().is_none()
                prop:value=move || k.get().to_string()
                on:input=move |ev| prune_least(event_target_value(&ev).parse().unwrap_or(0))
            />
        </label>
        <p class="buttons">
            <button data-testid="decoder-prune-random" on:click=prune_random>
                {move || format!("Prune {} at random instead", k.get())}
            </button>
        </p>
        {move || view.importance_now().is_some().then(|| view! {
            <DriftChart ranked=ranked random=random current=current theme=theme axes=DriftAxes::next_token(SweepPlan::PAGE.random_orders) />
        })}
    }
}

/// The decoder's perplexity on the shipped text set, with every head and with the reader's.
#[component]
pub(super) fn TextSetPerplexity() -> impl IntoView {
    let view = DecoderView::get();
    let heads = view.choices.heads;
    let found =
        move || view.set_perplexity.get().map(|(full, pruned)| SetPerplexity::sentence(&full, &pruned));
    let stale = move || {
        view.set_perplexity.with(|p| p.as_ref().is_some_and(|(_, pruned)| heads.with(|h| *h != pruned.heads)))
    };
    view! {
        <h3>"Perplexity on a text set"</h3>
        <p class="explain">
            {format!("How well the model predicts ordinary prose: the perplexity (e to the mean loss per token) on passages of {TEXTS_NAME} (Herman Melville, 1851, public domain), shipped with the page. Lower is better; pruning heads a model needs raises it.")}
        </p>
        <p class="buttons">
            <button data-testid="set-measure" disabled=move || view.reading_set.get() on:click=move |_| view.measure_set()>
                {format!("Measure on {TEXTS_NAME} with your heads")}
            </button>
        </p>
        <p class="muted" data-testid="set-status" aria-live="polite">
            {move || view.set_status.get().or_else(|| stale().then(|| "Your heads changed since: measure again.".to_string()))}
        </p>
        <p data-testid="set-perplexity" data-full=move || view.set_perplexity.get().map(|(f, _)| f.perplexity.to_string()) data-pruned=move || view.set_perplexity.get().map(|(_, p)| p.perplexity.to_string())>
            {found}
        </p>
    }
}

/// Michel et al.'s three pruning curves on the text set's loss, and the reader's set.
#[component]
pub(super) fn DecoderCurvesChart() -> impl IntoView {
    let view = DecoderView::get();
    let settings = AppState::get().settings;
    let canvas = NodeRef::<html::Canvas>::new();
    let draw_error = RwSignal::new(None::<String>);
    let scale = fit_to_screen(canvas, 640.0, 380.0 / 640.0);
    // The reader's set, once the text set's loss is measured for the heads pruned now.
    let current = move || {
        let (_, pruned) = view.set_perplexity.get()?;
        view.choices
            .heads
            .with(|h| *h == pruned.heads)
            .then(|| (pruned.heads.pruned_count(), pruned.mean_loss))
    };
    Effect::new(move |_| {
        let Some(curves) = view.curves.get() else { return };
        let chart = curves_chart(&view.spec(), &curves, current());
        let (theme, scale) = (settings.read().theme, scale.get());
        let Some(backend) = canvas.get().and_then(CanvasBackend::with_canvas_object) else { return };
        let result = draw_task_chart(&backend.into_drawing_area(), &chart, palette(theme), scale);
        draw_error.set(result.err().map(|e| format!("could not draw the curves: {e}")));
    });
    view! {
        <h3>"Pruning curves on the text set"</h3>
        <p class="explain">
            {format!("Michel et al.'s three orders, a tenth of the heads at a time: iterative (the gate gradients of the loss on {TEXTS_NAME} measured again after each step), one-shot (the full model's gradients) and one random order; each point is the loss on every passage. Many passes: on a large model, minutes on this page's thread.")}
        </p>
        <p class="buttons">
            <button data-testid="decoder-curves-run" disabled=move || view.computing_curves.get() on:click=move |_| view.compute_curves()>
                "Compute the three pruning curves"
            </button>
        </p>
        <p class="muted" data-testid="decoder-curves-status" aria-live="polite">{move || view.curving.get()}</p>
        <p data-testid="decoder-curves-summary">{move || view.curves.get().map(|c| c.sentence())}</p>
        <canvas
            node_ref=canvas
            width="640"
            height="380"
            class="chart"
            hidden=move || view.curves.with(Option::is_none)
            data-testid="decoder-curves-chart"
            data-curves=move || view.curves.get().map(|c| c.to_json())
            role="img"
            aria-label="The loss on the text set against heads pruned: iterative, one-shot and random orders, with Michel et al.'s 20 and 40 % marks"
        ></canvas>
        {move || draw_error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
    }
}

/// The curves as the chart draws them, for a decoder of shape `spec`.
fn curves_chart(spec: &ModelSpec, curves: &DecoderCurves, current: Option<(usize, f64)>) -> TaskChart {
    let [m20, m40] = spec.michel_marks();
    let points = |v: &[f64]| curves.ks.iter().copied().zip(v.iter().copied()).collect::<Vec<_>>();
    TaskChart {
        heads: spec.total_heads(),
        iterative: points(&curves.iterative),
        one_shot: points(&curves.one_shot),
        random: curves.ks.iter().zip(&curves.random).map(|(&k, &v)| (k, v, v, v)).collect(),
        bands: [vec![], vec![]],
        iterative_step: curves.ks.get(1).copied().unwrap_or(1),
        marks: vec![(m20, "20 %: WMT (Michel et al.)"), (m40, "40 %: BERT/MNLI")],
        one_per_layer: None,
        current,
        y_desc: "loss on the text set (nats per token)",
        one_shot_label: "the full model's gradients",
        random_seeds: 1,
    }
}
