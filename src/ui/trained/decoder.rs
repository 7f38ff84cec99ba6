//! A GPT-2 decoder in the page: the reader's text and its tokens, the next token full against
//! pruned, each token's loss as a strip under the text, a layer's causal heatmaps, every head on
//! a grid to prune, and the induction test. What is computed is `crate::jobs::decoder`'s, run on
//! the page's thread between the browser's turns; the components here display it.

use std::rc::Rc;
use std::sync::Arc;

use leptos::html;
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::attention::{HeadSet, Mask};
use crate::jobs::decoder::{
    keep_for, random_heads, DecoderMeasure, DecoderRun, InductionRun, SetGradient, SetLoss, SetPerplexity,
    Steps, SweepProgress, TextImportance, TextSweep, PAGE_KERNEL,
};
use crate::jobs::decoder_curves::{CurveRun, DecoderCurves};
use crate::jobs::web::{clock_step_ms, now_ms, yield_to_browser};
use crate::model::decoder::Decoder;
use crate::model::gpt2::DecoderOutput;
use crate::model::induction::{DecoderRole, HalfLosses};
use crate::model::next_importance::SweepPlan;
use crate::model::spec::ModelSpec;
use crate::model::texts::{TextSet, NAME as TEXTS_NAME, TEXTS_URL};
use crate::ui::browser::fetch_bytes;
use crate::ui::canvas::{draw_masked_heatmap, fit_to_screen, palette};
use crate::ui::panels::DriftChart;
use crate::ui::state::{AppState, TrainedChoices};
use crate::viz::chart::DriftAxes;
use crate::viz::colormap::viridis_css_gradient;
use crate::viz::task_chart::{draw_task_chart, TaskChart};
use plotters::prelude::IntoDrawingArea;
use plotters_canvas::CanvasBackend;

use super::TextWithExamples;

/// The decoder on show and what the page computed from it, shared by the panel's parts.
#[derive(Clone, Copy)]
struct DecoderView {
    decoder: StoredValue<Rc<Decoder>, LocalStorage>,
    choices: TrainedChoices,
    /// The passes over the reader's text with every head and with the reader's heads (`None`
    /// for an empty text).
    run: LocalResource<Option<Rc<DecoderRun>>>,
    /// The induction test's result, once the reader ran it.
    induction: RwSignal<Option<Rc<InductionRun>>, LocalStorage>,
    /// Whether the test is running.
    testing: RwSignal<bool>,
    /// The test sequence's halves' losses with the reader's heads.
    halves: LocalResource<Option<HalfLosses>>,
    /// Every head's importance to the next token, on the text it was measured on.
    importance: RwSignal<Option<Rc<TextImportance>>, LocalStorage>,
    /// How far the measurement in flight got (`None`: none in flight).
    measuring: RwSignal<Option<String>>,
    /// Bumped to stop the measurement in flight.
    sweep_generation: StoredValue<u32>,
    /// Why the last measurement stopped short, if it did.
    sweep_note: RwSignal<Option<String>>,
    /// The text set, once fetched and checked.
    texts: StoredValue<Option<Rc<TextSet>>, LocalStorage>,
    /// The text set's perplexity with every head, and with the heads it was last measured with.
    set_perplexity: RwSignal<Option<SetPair>, LocalStorage>,
    /// How far the text set's measurement got, or why it failed (`None`: none in flight).
    set_status: RwSignal<Option<String>>,
    /// Whether the text set is being read.
    reading_set: RwSignal<bool>,
    /// The three pruning curves on the text set, once computed.
    curves: RwSignal<Option<Rc<DecoderCurves>>, LocalStorage>,
    /// How far their computation got, or why it stopped (`None`: not running).
    curving: RwSignal<Option<String>>,
    /// Whether they are being computed.
    computing_curves: RwSignal<bool>,
}

/// The text set's perplexity with every head and with the reader's heads.
type SetPair = (Rc<SetPerplexity>, Rc<SetPerplexity>);

/// Milliseconds the importance sweep works before letting the browser draw.
const SWEEP_SLICE_MS: f64 = 40.0;

impl DecoderView {
    fn new(decoder: Rc<Decoder>) -> DecoderView {
        let choices = AppState::get().trained;
        let decoder = StoredValue::new_local(decoder);
        // The last full pass, kept while the text stays: pruning reruns only the pruned model.
        let full = StoredValue::new_local(None::<Arc<DecoderOutput>>);
        let run = LocalResource::new(move || {
            let (text, heads, decoder) = (choices.text.get(), choices.heads.get(), decoder.get_value());
            let tokens = decoder.tokens(&text);
            // A long text on a large model keeps only the layer on show (and reruns when it changes).
            let keep = keep_for(decoder.spec(), tokens.ids.len(), || choices.layer.get());
            async move {
                yield_to_browser().await;
                if tokens.ids.is_empty() || heads.len() != decoder.spec().total_heads() {
                    return None;
                }
                let run = DecoderRun::on_page(&decoder, tokens, &heads, keep, full.get_value(), &now_ms);
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
                Some(test.losses_with(&decoder, PAGE_KERNEL, &heads))
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

    fn get() -> DecoderView {
        expect_context::<DecoderView>()
    }

    fn spec(&self) -> ModelSpec {
        *self.decoder.get_value().spec()
    }

    fn run_now(&self) -> Option<Rc<DecoderRun>> {
        self.run.get().flatten()
    }

    /// The importance measured on the reader's text as it is now.
    fn importance_now(&self) -> Option<Rc<TextImportance>> {
        let found = self.importance.get()?;
        self.choices.text.with(|t| *t == found.text).then_some(found)
    }

    /// Measures every head's importance on the reader's text on the page's thread, a slice at a
    /// time; a new measurement stops the one in flight.
    fn measure_importance(self) {
        let generation = self.start_sweep("Measuring…".into());
        let (decoder, text) = (self.decoder.get_value(), self.choices.text.get_untracked());
        spawn_local(async move {
            yield_to_browser().await;
            let sweep = TextSweep::new(&decoder, PAGE_KERNEL, &text, SweepPlan::PAGE);
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
                if let Some(ranking) = job.work_for(&decoder, PAGE_KERNEL, &now_ms, SWEEP_SLICE_MS) {
                    break ranking;
                }
                let (done, of) = job.progress();
                self.measuring.set(Some(format!("Gradients on {TEXTS_NAME}: passage {} of {of}…", done + 1)));
                yield_to_browser().await;
            };
            let sweep = TextSweep::ranked(
                &decoder,
                PAGE_KERNEL,
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
            match sweep.work_for(decoder, PAGE_KERNEL, &now_ms, SWEEP_SLICE_MS) {
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
                if let Some(found) = job.work_for(decoder, PAGE_KERNEL, &now_ms, SWEEP_SLICE_MS) {
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
                let done = run.work_for(&decoder, PAGE_KERNEL, &now_ms, SWEEP_SLICE_MS);
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

    /// Runs the induction test on the page's thread (a few passes' time), once.
    fn find_induction_heads(self) {
        if self.testing.get_untracked() {
            return;
        }
        self.testing.set(true);
        let decoder = self.decoder.get_value();
        spawn_local(async move {
            yield_to_browser().await;
            let test = InductionRun::new(&decoder, PAGE_KERNEL, 1);
            self.induction.set(Some(Rc::new(test)));
            self.testing.set(false);
        });
    }
}

/// Everything the panel shows of a decoder.
#[component]
pub fn DecoderPanel(decoder: Rc<Decoder>) -> impl IntoView {
    let view = DecoderView::new(decoder);
    provide_context(view);
    let precision = AppState::get().settings.with_untracked(|s| s.precision);
    view! {
        <p class="muted" data-testid="trained-backend">
            "Running on this page's thread: the CPU kernel (wasm simd128), f16 weights widened to f32. A decoder: each token reads only the tokens before it."
        </p>
        {(precision != crate::attention::precision::Precision::F16).then(|| view! {
            <p class="backend-note" data-testid="precision-note">"The 8-bit path is the encoders' so far: this decoder runs with its f16 weights."</p>
        })}
        <DecoderText />
        <NextTokens />
        <LossStrip />
        <DecoderHeatmaps />
        <DecoderImportance />
        <TextSetPerplexity />
        <DecoderCurvesChart />
        <DecoderGrid />
        <InductionTest />
    }
}

/// The reader's text, example texts, its tokens, and what was cut.
#[component]
fn DecoderText() -> impl IntoView {
    let view = DecoderView::get();
    let text = view.choices.text;
    let tokens = move || view.decoder.with_value(|d| d.tokens(&text.read()));
    let texts = move || {
        let ids = tokens().ids;
        view.decoder.with_value(|d| ids.iter().map(|&id| d.bpe.text_of(id)).collect::<Vec<_>>())
    };
    view! {
        <TextWithExamples label="Text " text=text />
        <p class="tokens" data-testid="tokens">
            {move || texts().into_iter().map(|t| view! { <span class="token">{visible(&t)}</span> }).collect_view()}
        </p>
        <p class="muted" data-testid="trained-pass">
            {move || view.run_now().filter(|_| view.choices.heads.read().any_pruned()).map(|r| r.cost_sentence(view.spec().layers, clock_step_ms()))}
        </p>
        <p class="muted token-count" data-testid="token-count">
            {move || format!("{} tokens (byte-level BPE; a space belongs to the word after it).", tokens().ids.len())}
        </p>
        {move || view.decoder.with_value(|d| d.cut_note(&tokens())).map(|n| view! { <p class="backend-note" data-testid="tokens-cut">{n}</p> })}
    }
}

/// A token's text as a chip shows it: spaces and line breaks made visible.
fn visible(text: &str) -> String {
    text.replace(' ', "\u{2423}").replace('\n', "\u{21b5}")
}

/// The next token after the text, full model against pruned.
#[component]
fn NextTokens() -> impl IntoView {
    let view = DecoderView::get();
    let table = move || {
        view.run_now().map(|r| {
            view.decoder.with_value(|d| {
                let t = r.next_table(d);
                let sentence = t.sentence(d);
                (t, sentence)
            })
        })
    };
    let percent = |p: f64| format!("{:.1} %", 100.0 * p);
    view! {
        <h3>"The next token"</h3>
        {move || match table() {
            None => view! { <p class="muted" data-testid="next-drift">"Type some text: the model predicts what comes after it."</p> }.into_any(),
            Some((t, sentence)) => view! {
                <p data-testid="next-drift" data-kl=t.drift.kl.to_string() data-changed=t.drift.top_changed().to_string()>{sentence}</p>
                <table class="next-tokens" data-testid="next-tokens">
                    <thead><tr><th>"token"</th><th>"every head"</th><th>"your heads"</th></tr></thead>
                    <tbody>
                        {t.rows.into_iter().map(|r| view! {
                            <tr data-id=r.id.to_string()>
                                <td class="token-cell">{visible(&r.text)}</td>
                                <td>{percent(r.full)}</td>
                                <td>{percent(r.pruned)}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            }.into_any(),
        }}
    }
}

/// Each token's loss under both models, as a strip of bars under the tokens.
#[component]
fn LossStrip() -> impl IntoView {
    let view = DecoderView::get();
    let strip = move || view.run_now().map(|r| view.decoder.with_value(|d| r.loss_strip(d)));
    view! {
        <h3>"How surprised the model is by each token"</h3>
        <p class="legend">"Each token's loss (−log p, nats) given the tokens before it: upper bar every head, lower bar your heads; taller is more surprised."</p>
        {move || strip().map(|s| {
            let max = s.full.iter().chain(&s.pruned).fold(1e-9f64, |m, &v| m.max(v));
            let bar = move |v: f64, class: &'static str| view! {
                <span class=class style=format!("height: {:.1}px", 2.0 + 28.0 * v / max)></span>
            };
            view! {
                <div class="loss-strip" data-testid="loss-strip">
                    {s.tokens.iter().enumerate().skip(1).map(|(t, token)| {
                        let (f, p) = (s.full[t - 1], s.pruned[t - 1]);
                        view! {
                            <span class="loss-cell" title=format!("{:?}: loss {f:.3} with every head, {p:.3} with yours", token) data-full=f.to_string() data-pruned=p.to_string()>
                                <span class="loss-bars">{bar(f, "loss-bar full")}{bar(p, "loss-bar pruned")}</span>
                                <span class="token">{visible(token)}</span>
                            </span>
                        }
                    }).collect_view()}
                </div>
                <p data-testid="loss-summary">{s.sentence()}</p>
            }
        })}
    }
}

/// A layer's causal heatmaps.
#[component]
fn DecoderHeatmaps() -> impl IntoView {
    let view = DecoderView::get();
    let layer = view.choices.layer;
    let last = move || view.spec().layers - 1;
    view! {
        <h3>"Attention, layer by layer"</h3>
        <label>
            "Layer "
            <select
                data-testid="layer"
                prop:value=move || layer.get().to_string()
                on:change=move |ev| layer.set(event_target_value(&ev).parse().unwrap_or(0).min(last()))
            >
                {(0..view.spec().layers).map(|l| view! { <option value=l.to_string()>{format!("{}", l + 1)}</option> }).collect_view()}
            </select>
        </label>
        <p class="legend">
            "Rows are query tokens, columns key tokens; 0 "
            <span class="legend-bar" style=format!("background: {}", viridis_css_gradient())></span>
            " each head's largest weight; "
            <span class="legend-swatch masked"></span>
            " masked: a token never reads the tokens after it."
        </p>
        <div class="heads trained-heads" data-testid="trained-heads">
            {(0..view.spec().heads).map(|h| view! { <DecoderHead h=h /> }).collect_view()}
        </div>
    }
}

/// Head `h` of the selected layer, as the reader's pruned model attends.
#[component]
fn DecoderHead(h: usize) -> impl IntoView {
    let view = DecoderView::get();
    let layer = move || view.choices.layer.get().min(view.spec().layers - 1);
    let canvas = NodeRef::<html::Canvas>::new();
    let draw_error = RwSignal::new(None::<String>);
    Effect::new(move |_| {
        let (Some(canvas), Some(run)) = (canvas.get(), view.run_now()) else { return };
        let (n, l) = (run.pruned.seq_len, layer());
        // A pass that kept another layer only: the one for this layer is on its way.
        if !run.pruned.kept(l) {
            return;
        }
        let w = &run.pruned.attention[l][h * n * n..(h + 1) * n * n];
        draw_error.set(
            draw_masked_heatmap(&canvas, w, n, Mask::Causal).err().map(|e| format!("could not draw: {e:?}")),
        );
    });
    view! {
        <figure class="head">
            <canvas
                node_ref=canvas
                class="heatmap"
                data-testid=format!("decoder-heatmap-{h}")
                role="img"
                aria-label=move || format!("Causal attention weights of head {h} in layer {}", layer() + 1)
            ></canvas>
            <figcaption><span>{format!("head {h}")}</span></figcaption>
            {move || draw_error.get().map(|e| view! { <p class="error">{e}</p> })}
        </figure>
    }
}

/// Every head on a grid, layer by layer: select one to prune it; the induction test labels them.
#[component]
fn DecoderGrid() -> impl IntoView {
    let view = DecoderView::get();
    let heads = view.choices.heads;
    let spec = view.spec();
    let label = move |index: usize| {
        let role =
            view.induction.with(|t| t.as_ref().map(|t| t.scores[index].role().short()).unwrap_or_default());
        if role.is_empty() {
            (index % spec.heads).to_string()
        } else {
            role.to_string()
        }
    };
    view! {
        <h3>{format!("All {} heads: select one to prune it", spec.total_heads())}</h3>
        <p class="muted" data-testid="decoder-pruned">
            {move || format!("{} of {} heads pruned.", heads.read().pruned_count(), spec.total_heads())}
            " "
            <button data-testid="decoder-unprune" on:click=move |_| heads.set(HeadSet::all(spec.total_heads()))>"Prune none"</button>
        </p>
        <div class="head-grid" style=format!("--heads: {}", spec.heads) data-testid="head-grid">
            {(0..spec.layers).map(|l| view! {
                <div class="head-grid-row">
                    <span class="muted">{format!("layer {}", l + 1)}</span>
                    {(0..spec.heads).map(|h| {
                        let index = l * spec.heads + h;
                        let pruned = move || heads.read().is_pruned(index);
                        let importance = move || view.importance_now().map(|i| (i.found.ranking.per_head[index], i.found.ranking.share(index)));
                        view! {
                            <button
                                class="grid-head"
                                aria-pressed=move || (!pruned()).to_string()
                                data-testid=format!("decoder-head-{index}")
                                data-importance=move || importance().map(|(v, _)| v.to_string())
                                style=move || format!("--weight: {:.3}", importance().map_or(0.0, |(_, share)| share))
                                aria-label=format!("layer {}, head {h}", l + 1)
                                title=move || {
                                    let measured = view.importance_now().zip(importance()).map(|(i, (v, _))| format!("; {}", i.measure.value_text(v))).unwrap_or_default();
                                    format!("layer {} head {h}: select to prune it or bring it back{measured}", l + 1)
                                }
                                on:click=move |_| heads.update(|s| s.toggle(index))
                            >{move || label(index)}</button>
                        }
                    }).collect_view()}
                </div>
            }).collect_view()}
        </div>
    }
}

/// Which heads the next token needs: every head removed alone, the k least important or k at
/// random pruned, and the drift curve of both orders.
#[component]
fn DecoderImportance() -> impl IntoView {
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
        let kl = crate::model::next_token::kl(&run.full.next_logits, &run.pruned.next_logits);
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
fn TextSetPerplexity() -> impl IntoView {
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
fn DecoderCurvesChart() -> impl IntoView {
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

/// The induction test: what it measures, a button that runs it, the heads it found, and the
/// repeated half's loss with the reader's heads.
#[component]
fn InductionTest() -> impl IntoView {
    let view = DecoderView::get();
    let found = move || {
        view.induction.with(|t| {
            t.as_ref().map(|t| {
                let spec = view.spec();
                let names =
                    |role| t.heads_with(role).into_iter().map(|h| spec.head_name(h)).collect::<Vec<_>>();
                let list = |role: DecoderRole| match names(role) {
                    n if n.is_empty() => format!("no {} heads", role.name()),
                    n => format!(
                        "{} {} head{}: {}",
                        n.len(),
                        role.name(),
                        if n.len() == 1 { "" } else { "s" },
                        n.join(", ")
                    ),
                };
                format!(
                    "On {} random tokens repeated once: {}; {}; {}.",
                    t.sequence.half,
                    list(DecoderRole::Induction),
                    list(DecoderRole::PreviousToken),
                    list(DecoderRole::DuplicateToken)
                )
            })
        })
    };
    let prune_them = move |_| {
        let Some(t) = view.induction.get_untracked() else { return };
        let total = view.spec().total_heads();
        view.choices.heads.set(HeadSet::with_pruned(total, t.heads_with(DecoderRole::Induction)));
    };
    let losses = move || {
        let (t, now) = (view.induction.get()?, view.halves.get().flatten()?);
        Some(format!(
            "Loss on the repeated half: {:.2} nats per token with every head, {:.2} with your heads (on the random first half: {:.2}).",
            t.full.repeated, now.repeated, t.full.first
        ))
    };
    view! {
        <h3>"Induction heads"</h3>
        <p class="explain">
            "An induction head completes patterns it has seen in this text: at a token it saw before, it attends to the token that came next last time and copies it (… A B … A → B). It needs a previous-token head in an earlier layer. The test runs the model on random tokens repeated once: only such heads can predict the second half."
        </p>
        <p class="buttons">
            <button data-testid="induction-run" disabled=move || view.testing.get() on:click=move |_| view.find_induction_heads()>
                {move || if view.testing.get() { "Testing…" } else { "Find the induction heads" }}
            </button>
            <button data-testid="induction-prune" disabled=move || view.induction.with(Option::is_none) on:click=prune_them>
                "Prune the induction heads"
            </button>
        </p>
        <p data-testid="induction-result" aria-live="polite">{found}</p>
        <p data-testid="induction-losses">{losses}</p>
    }
}
