//! The charts on canvases: d_model against heads, and drift against heads pruned.

use crate::viz::surface::Surface;
use leptos::html;
use leptos::prelude::*;
use plotters_canvas::CanvasBackend;
use web_sys::MouseEvent;

use crate::attention::analysis::heads_count;
use crate::settings::Theme;
use crate::ui::canvas::{canvas_point, fit_to_screen, palette};
use crate::ui::files;
use crate::ui::state::AppState;
use crate::viz::chart::{
    band_note, draw_config_chart, draw_drift_chart, ring_label, ConfigChartLayout, DriftAxes, Names,
};
use crate::viz::svg;

/// What the reader's ring on the chart is called (the trained model, once loaded, by its name).
fn ring_of(state: AppState) -> String {
    let ((d_model, heads), (name, trained)) = (state.shape(), state.shown_name());
    ring_label(trained.then_some(name.as_str()), d_model, heads)
}

/// The seed's models on log axes with lines of constant d_k; hover names a point.
#[component]
pub fn ConfigChart() -> impl IntoView {
    let state = AppState::get();
    let settings = state.settings;
    let canvas = NodeRef::<html::Canvas>::new();
    let layout = RwSignal::new(ConfigChartLayout::default());
    let hover = RwSignal::new(None::<String>);
    let draw_error = RwSignal::new(None::<String>);
    let scale = fit_to_screen(canvas, 600.0, 460.0 / 600.0);
    // Redraw when the shape, the theme or the canvas's size changes.
    Effect::new(move |_| {
        let ((d_model, heads), theme, scale) = (state.shape(), settings.read().theme, scale.get());
        let ring = ring_of(state);
        let Some(canvas) = canvas.get() else { return };
        let Some(mut backend) = CanvasBackend::with_canvas_object(canvas) else {
            draw_error.set(Some("this browser gave no 2D canvas for the chart".into()));
            return;
        };
        let area = Surface::area(&mut backend);
        let current = (heads > 0).then_some((d_model, heads));
        match draw_config_chart(&area, current, &ring, palette(theme), scale) {
            Ok(l) => {
                layout.set(l);
                draw_error.set(None);
            }
            Err(e) => draw_error.set(Some(format!("could not draw the chart: {e}"))),
        }
    });
    let on_move = move |ev: MouseEvent| {
        let Some(canvas) = canvas.get() else { return };
        let (x, y) = canvas_point(&canvas, &ev);
        let near = layout.with(|l| {
            l.points
                .iter()
                .map(|p| (p, (p.at.0 as f64 - x).hypot(p.at.1 as f64 - y)))
                .filter(|(_, dist)| *dist < 16.0 * scale.get_untracked())
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(p, _)| {
                    format!(
                        "{}: d_model {}, {}, d_k = {}",
                        p.label,
                        p.d_model,
                        heads_count(p.heads),
                        p.d_model / p.heads
                    )
                })
        });
        hover.set(near);
    };
    let summary = move || {
        let ((d_model, heads), (name, trained)) = (state.shape(), state.shown_name());
        band_note(&name, trained, d_model, heads)
    };
    let export_png = move |_| {
        let Some(canvas) = canvas.get_untracked() else { return };
        draw_error.set(files::png(&canvas, "headlab-config-chart.png", 1).err());
    };
    let export_svg = move |_| {
        let ((d_model, heads), theme) = (untrack(|| state.shape()), settings.read_untracked().theme);
        let current = (heads > 0).then_some((d_model, heads));
        let saved = svg::config_chart(current, &untrack(|| ring_of(state)), palette(theme))
            .and_then(|t| files::svg("headlab-config-chart.svg", &t));
        draw_error.set(saved.err());
    };
    view! {
        <section class="panel chart-panel" aria-labelledby="chart-title">
            <h2 id="chart-title">"Claim 1: per-head size stays 64..128 as models grow"</h2>
            <div class="chart-wrap">
                <canvas
                    node_ref=canvas
                    width="600"
                    height="460"
                    class="chart"
                    data-testid="config-chart"
                    role="img"
                    aria-label="d_model against number of heads for seven real models, with lines of constant d_k; all lie between d_k = 64 and d_k = 128"
                    data-points=move || {
                        layout.with(|l| {
                            l.points.iter().map(|p| format!("{}@{},{}", p.label, p.at.0, p.at.1)).collect::<Vec<_>>().join("|")
                        })
                    }
                    on:mousemove=on_move
                    on:mouseleave=move |_| hover.set(None)
                ></canvas>
                // The numbered points' key, for screen readers always; on screen when the
                // canvas had no room to draw it (a phone's column).
                <ol
                    class="chart-key"
                    class:sr-only=move || layout.with(|l| l.labels.iter().any(|x| x.names == Names::Key))
                    data-testid="chart-key"
                >
                    {crate::viz::chart::model_groups()
                        .into_iter()
                        .map(|(label, d, h)| view! { <li>{format!("{label}: d_model {d}, {}, d_k = {}", heads_count(h), d / h)}</li> })
                        .collect_view()}
                </ol>
                <p class="tooltip" data-testid="chart-hover" aria-live="polite">
                    {move || hover.get().unwrap_or_else(|| "Hover a point for its numbers.".into())}
                </p>
            </div>
            <p data-testid="chart-summary">{summary}</p>
            <super::table::ModelTable />
            <div class="buttons">
                <button data-testid="export-chart-png" on:click=export_png>
                    "Chart (PNG)"
                </button>
                <button data-testid="export-chart-svg" on:click=export_svg>
                    "Chart (SVG)"
                </button>
            </div>
            <p class="muted">
                "Every model from the 2017 Transformer to GPT-3 sits on the d_k = 64 or d_k = 128 line: as d_model grows, the head count grows with it. Too few dimensions per head limit what one head can express; too many heads with too few dimensions fragment the representation."
            </p>
            {move || draw_error.get().map(|e| view! { <p class="error">{e}</p> })}
        </section>
    }
}

/// Drift against heads pruned: least important first, at random, and where the reader is.
#[component]
pub fn DriftChart(
    ranked: Signal<Vec<f64>>,
    random: Signal<Vec<f64>>,
    current: Signal<Option<(usize, f64)>>,
    theme: Signal<Theme>,
    #[prop(default = DriftAxes::OUTPUT)] axes: DriftAxes,
) -> impl IntoView {
    let canvas = NodeRef::<html::Canvas>::new();
    let draw_error = RwSignal::new(None::<String>);
    let scale = fit_to_screen(canvas, 560.0, 320.0 / 560.0);
    Effect::new(move |_| {
        let (ranked, random, current) = (ranked.get(), random.get(), current.get());
        let (theme, scale) = (theme.get(), scale.get());
        let Some(canvas) = canvas.get() else { return };
        let Some(mut backend) = CanvasBackend::with_canvas_object(canvas) else { return };
        let area = Surface::area(&mut backend);
        if ranked.is_empty() {
            let _ = area.fill(&palette(theme).background);
            return;
        }
        let result = draw_drift_chart(&area, &ranked, &random, current, &axes, palette(theme), scale);
        draw_error.set(result.err().map(|e| format!("could not draw the drift curve: {e}")));
    });
    let export_svg = move |_| {
        let (ranked, random, current) =
            (ranked.get_untracked(), random.get_untracked(), current.get_untracked());
        let saved = svg::drift_chart(&ranked, &random, current, &axes, palette(theme.get_untracked()))
            .and_then(|t| files::svg(axes.file, &t));
        draw_error.set(saved.err());
    };
    view! {
        <canvas
            node_ref=canvas
            width="560"
            height="320"
            class="chart"
            data-testid=format!("{}-chart", axes.name)
            role="img"
            aria-label=axes.described
        ></canvas>
        <div class="buttons">
            <button data-testid=format!("export-{}-svg", axes.name) on:click=export_svg>"Drift chart (SVG)"</button>
        </div>
        {move || draw_error.get().map(|e| view! { <p class="error">{e}</p> })}
    }
}
