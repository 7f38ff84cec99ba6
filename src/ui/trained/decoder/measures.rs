//! The decoder's measurements: every head's importance (to the next token on the reader's text,
//! or by the text set's loss), the text set's perplexity and the three pruning curves. Each is a
//! job of `crate::jobs::decoder` that the one driver runs (on the page's workers, or between the
//! page's turns); the components here start them and display what they found.

use std::rc::Rc;

use crate::viz::surface::Surface;
use leptos::html;
use leptos::prelude::*;
use plotters_canvas::CanvasBackend;

use super::view::{DecoderView, Measurement};
use crate::attention::importance::Ranking;
use crate::attention::precision::Precision;
use crate::attention::HeadSet;
use crate::jobs::decoder::curves::{DecoderCurves, TextSetCurves};
use crate::jobs::decoder::importance::NextTokenImportance;
use crate::jobs::decoder::induction::InductionTest;
use crate::jobs::decoder::precision::{precision_text, SetAtBoth};
use crate::jobs::decoder::text_set::{TextSetGradient, TextSetLoss};
use crate::jobs::decoder::{
    random_heads, set_passages, DecoderMeasure, InductionRun, SetPerplexity, TextImportance,
};
use crate::jobs::driver::{boxed, Status};
use crate::jobs::engine::Engine;
use crate::model::decoder::next_importance::SweepPlan;
use crate::model::decoder::precision::PrecisionDrift;
use crate::model::decoder::texts::NAME as TEXTS_NAME;
use crate::model::decoder::Decoder;
use crate::model::intervals::Estimate;
use crate::model::spec::ModelSpec;
use crate::ui::canvas::{fit_to_screen, palette};
use crate::ui::panels::DriftChart;
use crate::ui::state::AppState;
use crate::viz::chart::DriftAxes;
use crate::viz::task_chart::{draw_task_chart, TaskChart};

impl DecoderView {
    /// Measures every head's importance on the reader's text (a job: each head removed alone,
    /// then the drift curve); a new measurement, or a change of text, stops the one in flight.
    fn measure_importance(self) {
        let (decoder, text) = (self.decoder.get_value(), self.choices.text.get_untracked());
        let ids = decoder.tokens(&text).ids;
        let job = self.importance_job;
        if ids.is_empty() {
            job.status.set(Some("Type some text first: the heads are measured on it.".into()));
            return;
        }
        let wanted = self.while_text_is(text.clone());
        self.start(job, "Measuring…".into(), async move {
            let make = move |engine: &Engine<Decoder>| {
                Ok(boxed(NextTokenImportance::new(engine, &text, ids, SweepPlan::PAGE)))
            };
            let words = importance_words(DecoderMeasure::NextToken);
            let found = self.run_job(job, wanted, Box::new(make), words).await;
            if let Some(found) = found.and_then(|f| f.downcast::<TextImportance>().ok()) {
                self.importance.try_set(Some(Rc::from(found)));
            }
        });
    }

    /// Ranks every head by the text set's loss (its gate gradients, a passage at a time), then
    /// measures the drift curve of the reader's text in that order.
    fn measure_by_set(self) {
        let (decoder, text) = (self.decoder.get_value(), self.choices.text.get_untracked());
        let ids = decoder.tokens(&text).ids;
        let job = self.importance_job;
        if ids.is_empty() {
            job.status.set(Some("Type some text first: the curve is measured on it.".into()));
            return;
        }
        self.start(job, format!("Loading the {TEXTS_NAME} passages…"), async move {
            let Some(passages) = self.passages(job, &decoder).await else { return };
            let total = decoder.spec().total_heads();
            let of = passages.len();
            let make =
                move |_: &Engine<Decoder>| Ok(boxed(TextSetGradient::new(&passages, &HeadSet::all(total))));
            let words = Box::new(move |status: &Status| {
                let at = (status.done + 1).min(of);
                format!("Gradients on {TEXTS_NAME}: passage {at} of {of}{}…", estimate(status))
            });
            let wanted = self.while_text_is(text.clone());
            let ranking = self.run_job(job, wanted, Box::new(make), words).await;
            let Some(ranking) = ranking.and_then(|r| r.downcast::<Ranking>().ok()) else { return };
            let wanted = self.while_text_is(text.clone());
            let make = move |engine: &Engine<Decoder>| {
                let plan = NextTokenImportance::new(engine, &text, ids, SweepPlan::PAGE);
                Ok(boxed(plan.ranked(&ranking, DecoderMeasure::SetLoss)))
            };
            let words = importance_words(DecoderMeasure::SetLoss);
            let found = self.run_job(job, wanted, Box::new(make), words).await;
            if let Some(found) = found.and_then(|f| f.downcast::<TextImportance>().ok()) {
                self.importance.try_set(Some(Rc::from(found)));
            }
        });
    }

    /// A condition that holds while the reader's text is `text` (and the panel is there).
    fn while_text_is(self, text: String) -> Box<dyn Fn() -> bool> {
        Box::new(move || self.choices.text.try_with_untracked(|t| *t == text).unwrap_or(false))
    }

    /// The text set's passages as the decoder reads them, or `None` with why said in
    /// `measurement`'s status.
    async fn passages(self, measurement: Measurement, decoder: &Decoder) -> Option<Vec<Vec<u32>>> {
        let failed = |why: String| {
            measurement.status.try_set(Some(why));
            measurement.running.try_set(false);
            None
        };
        match self.text_set().await {
            Err(e) => failed(e),
            Ok(set) => match set_passages(decoder, &set) {
                none if none.is_empty() => failed(
                    "No passage of the text set has two tokens for this model: nothing to predict.".into(),
                ),
                passages => Some(passages),
            },
        }
    }

    /// Measures the text set's perplexity with every head (once per model) and with the
    /// reader's heads; a change of heads stops it.
    fn measure_set(self) {
        let (decoder, heads) = (self.decoder.get_value(), self.choices.heads.get_untracked());
        let job = self.set_job;
        self.start(job, format!("Loading the {TEXTS_NAME} passages…"), async move {
            let Some(passages) = self.passages(job, &decoder).await else { return };
            let all = HeadSet::all(heads.len());
            let known = self.set_perplexity.try_get_untracked().flatten().map(|(full, _)| full);
            let sets: Vec<HeadSet> =
                [known.is_none().then(|| all.clone()), (heads != all).then(|| heads.clone())]
                    .into_iter()
                    .flatten()
                    .collect();
            let wanted_heads = heads.clone();
            let wanted =
                move || self.choices.heads.try_with_untracked(|h| *h == wanted_heads).unwrap_or(false);
            let of = passages.len();
            let full_first = known.is_none();
            let words = Box::new(move |status: &Status| {
                let which = if full_first && status.done < of { "every head" } else { "your heads" };
                let at = status.done % of.max(1) + 1;
                format!("Reading passage {at} of {of} with {which}{}…", estimate(status))
            });
            let make = move |_: &Engine<Decoder>| Ok(boxed(TextSetLoss::new(&passages, &sets)));
            let found = self.run_job(job, Box::new(wanted), Box::new(make), words).await;
            let Some(found) = found.and_then(|f| f.downcast::<Vec<SetPerplexity>>().ok()) else { return };
            let mut found = found.into_iter().map(Rc::new);
            let full = known.or_else(|| found.next());
            if let Some(full) = full {
                let pruned = found.next().unwrap_or_else(|| full.clone());
                self.set_perplexity.try_set(Some((full, pruned)));
            }
        });
    }

    /// Compares the model at f16 and at 8 bits: the text set at both on the workers, then a pass
    /// over the reader's text timed at both on the page's thread.
    fn compare_precisions(self) {
        let (decoder, ids) = (self.decoder.get_value(), self.tokens.get_untracked().ids);
        let job = self.precision_job;
        self.start(job, format!("Loading the {TEXTS_NAME} passages…"), async move {
            let Some(passages) = self.passages(job, &decoder).await else { return };
            let of = passages.len();
            let words = Box::new(move |status: &Status| {
                let at = (status.done + 1).min(of);
                format!("Reading passage {at} of {of} at f16 and at 8 bits{}…", estimate(status))
            });
            let make = move |_: &Engine<Decoder>| Ok(boxed(SetAtBoth::new(&passages)));
            let found = self.run_job(job, Box::new(|| true), Box::new(make), words).await;
            let Some(drift) = found.and_then(|f| f.downcast::<PrecisionDrift>().ok()) else { return };
            self.precisions.try_set((Some(Rc::new(*drift)), None));
            if ids.is_empty() {
                return;
            }
            let cost = self.time_precisions(job, ids).await;
            self.precisions.try_update(|p| p.1 = cost);
        });
    }

    /// Computes the three pruning curves on the text set (a job: a pass over the set at a time).
    fn compute_curves(self) {
        let decoder = self.decoder.get_value();
        let job = self.curves_job;
        self.start(job, format!("Loading the {TEXTS_NAME} passages…"), async move {
            let Some(passages) = self.passages(job, &decoder).await else { return };
            let total = decoder.spec().total_heads();
            let make = move |_: &Engine<Decoder>| {
                TextSetCurves::new(passages, total, 1)
                    .map(boxed)
                    .ok_or_else(|| "No passage to measure.".to_string())
            };
            let words = Box::new(|status: &Status| {
                let (done, total) = (status.done, status.total);
                format!("Computing the curves: {done} of {total} passes over a passage{}…", estimate(status))
            });
            let found = self.run_job(job, Box::new(|| true), Box::new(make), words).await;
            if let Some(curves) = found.and_then(|f| f.downcast::<DecoderCurves>().ok()) {
                self.curves.try_set(Some(Rc::from(curves)));
            }
        });
    }

    /// Runs the induction test (a job of one piece: a pass over a random sequence repeated
    /// once, and every head's scores).
    pub(super) fn find_induction_heads(self) {
        let decoder = self.decoder.get_value();
        let job = self.induction_job;
        self.start(job, "Testing…".into(), async move {
            let make = move |_: &Engine<Decoder>| InductionTest::new(&decoder, 1).map(boxed);
            let words = Box::new(|status: &Status| format!("Testing{}…", estimate(status)));
            let found = self.run_job(job, Box::new(|| true), Box::new(make), words).await;
            if let Some(test) = found.and_then(|f| f.downcast::<InductionRun>().ok()) {
                self.induction.try_set(Some(Rc::from(test)));
            }
        });
    }
}

/// ", about 14 s at the 27 GFLOP/s measured here" once the pace is known and the rest is worth
/// a word; nothing before.
fn estimate(status: &Status) -> String {
    status.estimate.as_ref().map(|e| format!(", {e}")).unwrap_or_default()
}

/// What the importance measurement says of itself, ranking the heads by `measure`.
fn importance_words(measure: DecoderMeasure) -> Box<dyn Fn(&Status) -> String> {
    let what = match measure {
        DecoderMeasure::NextToken => "one per head removed alone, then the curve's points",
        DecoderMeasure::SetLoss => "the curve's points on your text",
    };
    Box::new(move |status: &Status| {
        format!("Measuring: {} of {} passes ({what}){}…", status.done, status.total, estimate(status))
    })
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
            <button data-testid="decoder-measure" disabled=move || view.importance_job.running.get() || view.engine_now().is_none() on:click=move |_| view.measure_importance()>
                "Measure every head on this text"
            </button>
            <button data-testid="decoder-measure-set" disabled=move || view.importance_job.running.get() || view.engine_now().is_none() on:click=move |_| view.measure_by_set()>
                {format!("Rank them by the loss on {TEXTS_NAME} (gradient)")}
            </button>
        </p>
        <p class="muted" data-testid="decoder-importance-status" aria-live="polite">
            {move || {
                view.importance_job.status.get().or_else(|| {
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
            <button data-testid="set-measure" disabled=move || view.set_job.running.get() || view.engine_now().is_none() on:click=move |_| view.measure_set()>
                {format!("Measure on {TEXTS_NAME} with your heads")}
            </button>
        </p>
        <p class="muted" data-testid="set-status" aria-live="polite">
            {move || view.set_job.status.get().or_else(|| stale().then(|| "Your heads changed since: measure again.".to_string()))}
        </p>
        <p data-testid="set-perplexity" class:stale=stale data-full=move || view.set_perplexity.get().map(|(f, _)| f.perplexity.to_string()) data-pruned=move || view.set_perplexity.get().map(|(_, p)| p.perplexity.to_string())>
            {found}
        </p>
    }
}

/// What 8 bits change beside what pruning changes: the text set's next tokens and perplexity at
/// f16 and at 8 bits, a pass's time and the weights' bytes.
#[component]
pub(super) fn DecoderPrecision() -> impl IntoView {
    let view = DecoderView::get();
    let refused = view.decoder.with_value(|d| d.precision_refused(Precision::F16));
    let line = move || {
        view.precisions.with(|(drift, cost)| {
            (drift.is_some() || cost.is_some()).then(|| precision_text(drift.as_deref(), cost.as_ref()))
        })
    };
    // One closure type for the four figures (each its own would be its own code in the wasm).
    let figure = move |f: fn(&PrecisionDrift) -> Option<Estimate>| {
        move || view.precisions.with(|(d, _)| d.as_deref().and_then(f).map(|e| e.value.to_string()))
    };
    view! {
        <h3>"What 8 bits change"</h3>
        <p class="explain">
            {format!("The model with 8-bit weights and activations (12 bits for the feed-forward output) against its f16 weights, every head kept: on each position of the {TEXTS_NAME} passages, how far the next token's distribution moves (KL) and whether its most likely token stays; the perplexity at both, each with its 95 % interval over the passages; then a pass over your text timed at both on this page's thread. Set it beside what pruning heads costs above.")}
        </p>
        {refused.clone().map(|why| view! { <p class="backend-note" data-testid="decoder-precision-refused">{why}</p> })}
        <p class="buttons">
            <button data-testid="decoder-precision-run" disabled=move || refused.is_some() || view.precision_job.running.get() || view.engine_now().is_none() on:click=move |_| view.compare_precisions()>
                "Compare f16 and 8 bits"
            </button>
        </p>
        <p class="muted" data-testid="decoder-precision-status" aria-live="polite">{move || view.precision_job.status.get()}</p>
        <p
            data-testid="decoder-precision"
            data-f16=figure(|d| d.perplexity(Precision::F16))
            data-int8=figure(|d| d.perplexity(Precision::Int8))
            data-kl=figure(PrecisionDrift::kl)
            data-agree=figure(PrecisionDrift::agreement)
        >
            {line}
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
        let Some(mut backend) = canvas.get().and_then(CanvasBackend::with_canvas_object) else { return };
        let result = draw_task_chart(&Surface::area(&mut backend), &chart, palette(theme), scale);
        draw_error.set(result.err().map(|e| format!("could not draw the curves: {e}")));
    });
    view! {
        <h3>"Pruning curves on the text set"</h3>
        <p class="explain">
            {format!("Michel et al.'s three orders, a tenth of the heads at a time: iterative (the gate gradients of the loss on {TEXTS_NAME} measured again after each step), one-shot (the full model's gradients) and one random order; each point is the loss on every passage. Many passes: on a large model, minutes, shared among the page's workers.")}
        </p>
        <p class="buttons">
            <button data-testid="decoder-curves-run" disabled=move || view.curves_job.running.get() || view.engine_now().is_none() on:click=move |_| view.compute_curves()>
                "Compute the three pruning curves"
            </button>
        </p>
        <p class="muted" data-testid="decoder-curves-status" aria-live="polite">{move || view.curves_job.status.get()}</p>
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
