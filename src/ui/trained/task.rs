//! What pruning costs on a task and what it buys: the pruning curves on the STS Benchmark, the
//! reader's own set's quality, FLOPs, forward time and weight bytes, and the heads' roles.

use crate::viz::surface::Surface;
use leptos::html;
use leptos::prelude::*;
use plotters_canvas::CanvasBackend;

use super::task_view::{CurveState, TaskView};
use super::view::EncoderView;
use crate::attention::clock::show_ms;
use crate::attention::HeadSet;
use crate::export::curves_csv;
use crate::jobs::encoder::curves::{iterative_step, method_text};
use crate::jobs::encoder::levers::lever_text;
use crate::jobs::encoder::task::ROLE_SENTENCES;
use crate::model::digits::{bytes_change_text, quality_text as q};
use crate::model::encoder::curves::{Curves, Order};
use crate::model::encoder::pruned::cost;
use crate::model::encoder::roles::roles_sentence;
use crate::model::spec::ModelSpec;
use crate::ui::canvas::{fit_to_screen, palette};
use crate::ui::files;
use crate::ui::state::AppState;
use crate::viz::svg;
use crate::viz::task_chart::{draw_task_chart, TaskChart};

/// The task section of the trained-model panel.
#[component]
pub fn TaskPanel() -> impl IntoView {
    let view = EncoderView::get();
    let threads = move || {
        view.workers_changed.track();
        view.workers.with_value(|w| w.used())
    };
    view! {
        <section class="task" aria-labelledby="task-title" data-testid="task" data-threads=threads>
            <h3 id="task-title">"What pruning costs on a task, and what it buys"</h3>
            <p class="muted">{move || method_text(&view.spec())}</p>
            <CurveStatus />
            <CurveChart />
            <p data-testid="task-summary">{summary}</p>
            <PrunedLine />
            <LeverLine />
            <p data-testid="roles-summary">{roles_summary}</p>
        </section>
    }
}

/// Progress of the curves, and pause/resume.
#[component]
fn CurveStatus() -> impl IntoView {
    let task = TaskView::get();
    let view = task.view;
    // Where the batch work runs, and the pace it has run at there (the curves' own jobs included).
    let place = move || {
        view.workers_changed.track();
        view.workers.with_value(|w| w.place())
    };
    let pace = move || view.workers.with_value(|w| w.pace(place()));
    // What the curves still need, at that pace.
    let estimate = move || task.planned.get()?.estimate(&pace());
    let no_points = move || task.curves.with(|c| c.points.is_empty());
    let status = move || {
        match task.data.get().flatten() {
        None => "Loading the sentence pairs…".to_string(),
        Some(Err(e)) => e,
        Some(Ok(data)) => match (task.progress.get(), task.run.get()) {
            (Some(p), _) => format!(
                "Computing the pruning curves on {} pairs: {} of {} evaluations, on {}{}…{}",
                data.pairs.pairs.len(),
                p.status.done,
                p.status.total,
                place().describe(),
                if task.importance_now().is_none() {
                    " (the one-shot order joins once this sentence's heads are ranked)"
                } else {
                    ""
                },
                p.time_left.map(|t| format!(" {t}")).unwrap_or_default()
            ),
            (None, Some(CurveState::Done)) => "All points measured.".to_string(),
            (None, Some(CurveState::Stopped)) if no_points() => {
                match estimate() {
                    Some(e) => format!("Computing the curves takes about 100 evaluations of {} sentences, {e}.", data.ids.len()),
                    None => format!(
                        "Computing the curves takes about 100 evaluations of {} sentences: minutes of this computer's CPU.",
                        data.ids.len()
                    ),
                }
            }
            (None, Some(CurveState::Stopped)) => format!(
                "Stopped; the points measured so far are kept (in this browser too).{}",
                estimate().map(|e| format!(" The rest is {e}.")).unwrap_or_default()
            ),
            _ => "Waiting for this sentence's head ranking…".to_string(),
        },
    }
    };
    let running = task.running;
    let done = move || task.run.get() == Some(CurveState::Done);
    let label = move || match (running.get(), no_points()) {
        (true, _) => "Pause",
        (false, true) => "Compute the pruning curves",
        (false, false) => "Continue",
    };
    view! {
        <p class="muted" data-testid="task-status" role="status">{status}</p>
        {move || {
            view.workers_changed.track();
            view.workers.with_value(|w| w.note()).map(|note| view! { <p class="note" data-testid="task-threads-note">{note}</p> })
        }}
        {move || {
            task.progress.get().map(|p| view! { <progress data-testid="task-progress" max=p.status.total value=p.status.done aria-label="Pruning curves computed"></progress> })
        }}
        <div class="buttons">
            <button data-testid="task-run" disabled=done on:click=move |_| running.update(|r| *r = !*r)>
                {label}
            </button>
        </div>
    }
}

/// The curves as the chart draws them, for a model of shape `spec`.
fn chart_of(spec: &ModelSpec, curves: &Curves, current: Option<(usize, f64)>) -> TaskChart {
    let [m20, m40] = spec.michel_marks();
    TaskChart {
        heads: spec.total_heads(),
        iterative: curves.curve(Order::Iterative),
        one_shot: curves
            .curve(Order::OneShot)
            .into_iter()
            .filter(|_| curves.points.contains_key(&Order::OneShot))
            .collect(),
        random: curves.random_band(),
        bands: [curves.band(Order::Iterative), curves.band(Order::OneShot)],
        iterative_step: iterative_step(spec),
        marks: vec![(m20, "20 %: WMT (Michel et al.)"), (m40, "40 %: BERT/MNLI")],
        one_per_layer: curves.one_per_layer.map(|v| (spec.one_per_layer_pruned(), v)),
        current,
        y_desc: "quality (Spearman)",
        one_shot_label: "the grid's order",
        random_seeds: crate::model::encoder::curves::RANDOM_SEEDS as usize,
    }
}

/// The reader's set and its quality, once measured for the heads pruned now.
fn current_point(task: TaskView, heads: RwSignal<HeadSet>) -> Option<(usize, f64)> {
    let score = task.quality.get().flatten()?;
    heads.with(|h| *h == score.heads).then(|| (score.heads.pruned_count(), score.quality))
}

/// The chart, and its CSV and PNG.
#[component]
fn CurveChart() -> impl IntoView {
    let (task, view, app) = (TaskView::get(), EncoderView::get(), AppState::get());
    let canvas = NodeRef::<html::Canvas>::new();
    let draw_error = RwSignal::new(None::<String>);
    let scale = fit_to_screen(canvas, 640.0, 380.0 / 640.0);
    let stem = move || files::stem(&app.settings.get_untracked());
    Effect::new(move |_| {
        let chart = task.curves.with(|c| chart_of(&view.spec(), c, current_point(task, view.choices.heads)));
        let (theme, scale) = (app.settings.read().theme, scale.get());
        let Some(mut backend) = canvas.get().and_then(CanvasBackend::with_canvas_object) else { return };
        let result = draw_task_chart(&Surface::area(&mut backend), &chart, palette(theme), scale);
        draw_error.set(result.err().map(|e| format!("could not draw the curves: {e}")));
    });
    let export_csv = move |_| {
        let text = task.curves.with_untracked(|c| {
            let bands = [c.band(Order::Iterative), c.band(Order::OneShot)];
            curves_csv(&c.curve(Order::Iterative), &c.curve(Order::OneShot), &c.random_band(), &bands)
        });
        draw_error.set(files::csv(&format!("{}-pruning-curves.csv", stem()), &text).err());
    };
    let export_png = move |_| {
        let Some(canvas) = canvas.get_untracked() else { return };
        draw_error.set(files::png(&canvas, &format!("{}-pruning-curves.png", stem()), 1).err());
    };
    let export_svg = move |_| {
        let spec = untrack(|| view.spec());
        let chart =
            task.curves.with_untracked(|c| chart_of(&spec, c, current_point(task, view.choices.heads)));
        let saved = svg::task_chart(&chart, palette(app.settings.read_untracked().theme))
            .and_then(|t| files::svg(&format!("{}-pruning-curves.svg", stem()), &t));
        draw_error.set(saved.err());
    };
    view! {
        <canvas
            node_ref=canvas
            width="640"
            height="380"
            class="chart"
            data-testid="task-chart"
            data-curves=move || task.curves.with(Curves::to_json)
            role="img"
            aria-label="Task quality against heads pruned: iterative, one-shot and random orders, with Michel et al.'s 20 and 40 % marks and the one-head-per-layer point"
        ></canvas>
        <div class="buttons">
            <span class="muted">"Download:"</span>
            <button data-testid="task-export-csv" on:click=export_csv>"Curves (CSV)"</button>
            <button data-testid="task-export-png" on:click=export_png>"Curves (PNG)"</button>
            <button data-testid="task-export-svg" on:click=export_svg>"Curves (SVG)"</button>
        </div>
        {move || draw_error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
    }
}

/// The quality of every order at the points the handbook names.
fn summary() -> Option<String> {
    let spec = EncoderView::get().spec();
    TaskView::get().curves.with(|c| c.summary(&spec))
}

/// The reader's set as a really pruned model: quality, FLOPs, forward time, weights.
#[component]
fn PrunedLine() -> impl IntoView {
    let (task, view) = (TaskView::get(), EncoderView::get());
    let line = move || {
        let heads = view.choices.heads.get();
        let k = heads.pruned_count();
        if k == 0 {
            return "Prune heads in the grid above (or with its slider) to see what the really pruned model costs and saves.".to_string();
        }
        let (lengths, spec) = (vec![view.ids().len()], view.spec());
        let total = spec.total_heads();
        if heads.len() != total {
            return String::new();
        }
        let (full, cut) = (cost(&spec, &HeadSet::all(total), &lengths), cost(&spec, &heads, &lengths));
        let quality = match (
            task.curves.with(|c| c.at(Order::Iterative, 0)),
            current_point(task, view.choices.heads),
        ) {
            (Some(full), Some((_, now))) => match task.change.get() {
                Some(change) => format!("quality {} -> {}: {}", q(full), q(now), change.change_text()),
                None => format!("quality {} -> {}", q(full), q(now)),
            },
            (None, Some((_, now))) => format!("quality {} (the full model's comes with the curves)", q(now)),
            _ => "quality: measuring…".to_string(),
        };
        let speed = match task.speed.get().flatten().filter(|(set, _)| *set == heads) {
            Some((_, s)) => format!(
                "forward 1.00 -> {:.2} (measured on {}: {} against {})",
                s.ratio(),
                if s.on_gpu { "the GPU" } else { "the CPU kernel" },
                show_ms(s.pruned_ms, s.step_ms),
                show_ms(s.full_ms, s.step_ms)
            ),
            None => "forward: measuring…".to_string(),
        };
        let less = |a: u64, b: u64| 100.0 * (1.0 - b as f64 / a as f64);
        format!(
            "{k} of {total} heads pruned ({:.0} %): {quality}, attention FLOPs -{:.0} % (all FLOPs -{:.0} %), {speed}, weights {}.",
            100.0 * k as f64 / total as f64,
            less(full.attention_flops, cut.attention_flops),
            less(full.total_flops, cut.total_flops),
            bytes_change_text(full.weight_bytes, cut.weight_bytes),
        )
    };
    let exact = move || current_point(task, view.choices.heads).map(|(_, quality)| quality.to_string());
    view! { <p data-testid="pruned-line" data-quality=exact>{line}</p> }
}

/// What 8-bit weights buy beside what pruning buys, once the reader asks (it evaluates the other
/// precision's copy on the pairs and times both on the sentence).
#[component]
fn LeverLine() -> impl IntoView {
    let task = TaskView::get();
    let line = move || {
        let quality = task.lever_quality.get().flatten();
        let cost = task.lever_cost.get().flatten();
        if let Some(Err(why)) = &cost {
            return lever_text(Some(&Err(why.clone())), None);
        }
        lever_text(quality.as_ref(), cost.as_ref().and_then(|c| c.as_ref().ok()))
    };
    view! {
        <Show
            when=move || task.lever_wanted.get()
            fallback=move || view! {
                <p>
                    <button data-testid="lever-run" on:click=move |_| task.lever_wanted.set(true)>
                        "Set 8-bit weights beside pruning"
                    </button>
                    " (the other compression lever: the model's quality and forward time at 8 bits, every head kept)"
                </p>
            }
        >
            <p data-testid="lever-line">{line}</p>
        </Show>
    }
}

/// Every head's role, and whether the specialised heads are the ones the iterative order prunes
/// last (Voita et al.).
fn roles_summary() -> Option<String> {
    let task = TaskView::get();
    let roles = task.roles.get().flatten()?;
    Some(task.curves.with(|c| roles_sentence(&roles, &c.iterative_order, ROLE_SENTENCES)))
}
