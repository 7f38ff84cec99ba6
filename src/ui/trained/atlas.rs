//! Which heads are alike: the head atlas ([`crate::attention::atlas`]) computed on the workers on
//! request, its matrix in the clustering's order, the clusters coloured on the heads' grid, a
//! chosen head enlarged beside its three nearest, the grid's filter, and the exports.

use std::rc::Rc;

use leptos::html;
use leptos::prelude::*;

use super::task_view::TaskView;
use super::view::{engine_is, EncoderView};
use crate::attention::atlas::Atlas;
use crate::export::atlas_csv;
use crate::jobs::driver::{drive_plan, Status};
use crate::jobs::encoder::task::{HeadAtlas, ROLE_SENTENCES};
use crate::jobs::ticket::Ticket;
use crate::model::encoder::filter::{cluster_lines, HeadFilter, Known};
use crate::ui::canvas::draw_heatmap;
use crate::ui::files;
use crate::ui::state::AppState;
use crate::viz::colormap::category_css;
use crate::viz::svg;

/// The most clusters the reader can cut the atlas into (one colour each).
const MOST_CLUSTERS: usize = 8;

/// The atlas's state, shared with the heads' grid (its clusters' colours and filter).
#[derive(Clone, Copy)]
pub struct AtlasView {
    /// Whether the reader asked for the atlas.
    wanted: RwSignal<bool>,
    /// The atlas, once computed.
    pub atlas: LocalResource<Option<Rc<Atlas>>>,
    /// How far its job has come.
    status: RwSignal<Option<Status>>,
    /// How many clusters the tree is cut into.
    pub clusters: RwSignal<usize>,
    /// Which heads the grid shows.
    pub filter: RwSignal<HeadFilter>,
    /// The head enlarged beside its nearest.
    head: RwSignal<usize>,
    /// The task panel's state (the roles and importance the filter reads).
    task: TaskView,
}

impl AtlasView {
    /// The atlas's state under `task`'s panel.
    pub fn new(task: TaskView) -> AtlasView {
        let view = task.view;
        let (wanted, status) = (RwSignal::new(false), RwSignal::new(None::<Status>));
        let atlas = LocalResource::new(move || {
            let (engine, data, go) = (view.engine.get().flatten(), task.data.get().flatten(), wanted.get());
            async move {
                let (engine, data) = (engine.filter(|_| go)?, data?.ok()?);
                let of = engine.clone();
                let ticket = Ticket::while_wanted(move || engine_is(view.engine, &of));
                let job = HeadAtlas::new(&engine, &data);
                let atlas = drive_plan(&engine, job, &ticket, &mut |s| status.set(Some(s))).await;
                status.set(None);
                atlas.map(Rc::new)
            }
        });
        AtlasView {
            wanted,
            atlas,
            status,
            clusters: RwSignal::new(6),
            filter: RwSignal::new(HeadFilter::All),
            head: RwSignal::new(0),
            task,
        }
    }

    /// Shares this view with the panel's parts.
    pub fn provide(self) {
        provide_context(self);
    }

    /// The atlas's view, from any of the panel's parts.
    pub fn get() -> AtlasView {
        expect_context::<AtlasView>()
    }

    /// Every head's cluster, once the atlas is in.
    pub fn cluster_of(&self) -> Option<Vec<usize>> {
        let atlas = self.atlas.get().flatten()?;
        Some(atlas.tree.clusters(self.clusters.get()))
    }

    /// Whether the grid shows head `h` under the reader's filter (`None` while what the filter
    /// needs is measured).
    pub fn shows(&self, h: usize) -> Option<bool> {
        let task = self.task;
        let (roles, ranking, clusters) =
            (task.roles.get().flatten(), task.importance_now(), self.cluster_of());
        let known = Known {
            roles: roles.as_deref().map(Vec::as_slice),
            ranking: ranking.as_ref().map(|r| &r.ranking),
            clusters: clusters.as_deref(),
        };
        self.filter.get().shows(h, known)
    }
}

/// The filter of the heads' grid: every head, a role, the most important, or a cluster.
#[component]
pub fn GridFilter() -> impl IntoView {
    let atlas = AtlasView::get();
    let total = EncoderView::get().spec().total_heads();
    let choices = move || {
        HeadFilter::choices(if atlas.atlas.get().flatten().is_some() { atlas.clusters.get() } else { 0 })
    };
    view! {
        <label class="measure">
            "Show: "
            <select
                data-testid="head-filter"
                prop:value=move || atlas.filter.get().as_value()
                on:change=move |ev| {
                    if let Some(f) = HeadFilter::parse(&event_target_value(&ev)) {
                        atlas.filter.set(f);
                    }
                }
            >
                {move || choices().into_iter().map(|f| view! { <option value=f.as_value()>{f.label()}</option> }).collect_view()}
            </select>
        </label>
        <span class="muted" data-testid="head-filter-count">{move || filter_count(atlas, total)}</span>
    }
}

fn filter_count(atlas: AtlasView, total: usize) -> String {
    if atlas.filter.get() == HeadFilter::All {
        return String::new();
    }
    let shown: Option<Vec<bool>> = (0..total).map(|h| atlas.shows(h)).collect();
    match shown {
        Some(s) => format!(" {} of {total} heads shown.", s.iter().filter(|&&v| v).count()),
        None => " Measuring what this filter needs…".into(),
    }
}

/// The atlas section of the trained-model panel.
#[component]
pub fn AtlasPanel() -> impl IntoView {
    let atlas = AtlasView::get();
    let task = TaskView::get();
    let trained = EncoderView::get();
    let spec = move || trained.spec();
    let ready = move || matches!(task.data.get().flatten(), Some(Ok(_)));
    let status = move || match (atlas.status.get(), atlas.wanted.get()) {
        (Some(s), _) => format!(
            "Comparing: {} of {} sentences{}…",
            s.done,
            s.total,
            s.estimate.map(|e| format!(", {e}")).unwrap_or_default()
        ),
        (None, true) if atlas.atlas.get().flatten().is_none() => "Comparing…".into(),
        _ => String::new(),
    };
    view! {
        <section class="atlas" aria-labelledby="atlas-title" data-testid="atlas">
            <h3 id="atlas-title">"Which heads are alike: the head atlas"</h3>
            <p class="muted">
                {move || format!(
                    "Every two heads compared on the same {ROLE_SENTENCES} sentences of the task, query token by \
                     query token: the mean Jensen-Shannon divergence of their attention rows (0 = the same \
                     pattern, 1 bit = nothing in common). The heads are ordered by an average-linkage \
                     clustering, so alike heads sit side by side; the clusters colour the grid of all {} heads above.",
                    spec().total_heads()
                )}
            </p>
            <button data-testid="atlas-run" disabled=move || !ready() || atlas.wanted.get() on:click=move |_| atlas.wanted.set(true)>
                {move || format!("Compare every head's pattern ({} pairs of heads)", spec().total_heads() * (spec().total_heads() - 1) / 2)}
            </button>
            <p class="muted" data-testid="atlas-status" aria-live="polite">{status}</p>
            {move || atlas.atlas.get().flatten().map(|a| view! { <AtlasResult atlas=a /> })}
        </section>
    }
}

/// The computed atlas: its clusters, matrix, nearest heads and exports.
#[component]
fn AtlasResult(atlas: Rc<Atlas>) -> impl IntoView {
    let state = AtlasView::get();
    let (view, task) = (EncoderView::get(), TaskView::get());
    let spec = view.spec();
    let clusters = move || state.cluster_of().unwrap_or_default();
    let lines =
        move || cluster_lines(&clusters(), task.roles.get().flatten().as_deref().map(Vec::as_slice), &spec);
    let stored = StoredValue::new_local(atlas.clone());
    let export_error = RwSignal::new(None::<String>);
    let settings = AppState::get().settings;
    let stem = move || files::stem(&settings.get_untracked());
    let export_csv = move |_| {
        let csv = stored.with_value(|a| atlas_csv(a, &untrack(clusters), spec.heads));
        export_error.set(files::csv(&format!("{}-atlas.csv", stem()), &csv).err());
    };
    let export_svg = move |_| {
        let text = stored.with_value(|a| {
            let (values, n) = similarity(a);
            let names: Vec<String> = a.tree.order.iter().map(|&h| spec.head_name(h)).collect();
            svg::matrix(
                &values,
                n,
                &names,
                &format!(
                    "{}: how alike the heads attend (1 - mean JS divergence / the largest)",
                    view.name()
                ),
            )
        });
        export_error.set(files::svg(&format!("{}-atlas.svg", stem()), &text).err());
    };
    view! {
        <label class="measure">
            "Clusters: "
            <select
                data-testid="atlas-clusters"
                prop:value=move || state.clusters.get().to_string()
                on:change=move |ev| state.clusters.set(event_target_value(&ev).parse().unwrap_or(6))
            >
                {(2..=MOST_CLUSTERS.min(spec.total_heads())).map(|k| view! { <option value=k.to_string()>{k}</option> }).collect_view()}
            </select>
        </label>
        <ul class="atlas-clusters" data-testid="atlas-summary">
            {move || lines().into_iter().enumerate().map(|(c, line)| view! {
                <li><span class="swatch" style=format!("background: {}", category_css(c))></span>{line}</li>
            }).collect_view()}
        </ul>
        <div class="atlas-body">
            <AtlasMatrix atlas=atlas.clone() />
            <NearestHeads atlas=atlas />
        </div>
        <div class="buttons">
            <span class="muted">"Download:"</span>
            <button data-testid="export-atlas-csv" on:click=export_csv>"The atlas (CSV)"</button>
            <button data-testid="export-atlas-svg" on:click=export_svg>"The matrix (SVG)"</button>
        </div>
        {move || export_error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
    }
}

/// `1 - divergence / largest divergence` of every two heads in the atlas's order (alike is
/// bright, the two farthest heads dark), and the count.
fn similarity(atlas: &Atlas) -> (Vec<f32>, usize) {
    let (order, d) = (&atlas.tree.order, &atlas.distances);
    let n = order.len();
    let far =
        order.iter().flat_map(|&a| order.iter().map(move |&b| d.get(a, b))).fold(0.0f64, f64::max).max(1e-12);
    let values = order.iter().flat_map(|&a| order.iter().map(move |&b| (1.0 - d.get(a, b) / far) as f32));
    (values.collect(), n)
}

/// The matrix, heads in the atlas's order, with each one's cluster colour along the top.
#[component]
fn AtlasMatrix(atlas: Rc<Atlas>) -> impl IntoView {
    let state = AtlasView::get();
    let canvas = NodeRef::<html::Canvas>::new();
    let (values, n) = similarity(&atlas);
    let draw_error = RwSignal::new(None::<String>);
    Effect::new(move |_| {
        let Some(canvas) = canvas.get() else { return };
        draw_error.set(draw_heatmap(&canvas, &values, n).err().map(|e| format!("could not draw: {e:?}")));
    });
    let order = atlas.tree.order.clone();
    let strip = move || {
        let clusters = state.cluster_of().unwrap_or_default();
        let cells = order.iter().map(|&h| {
            let c = clusters.get(h).copied().unwrap_or(0);
            view! { <span style=format!("background: {}", category_css(c))></span> }
        });
        cells.collect_view()
    };
    view! {
        <figure class="atlas-matrix">
            <div class="cluster-strip" style=format!("--n: {n}") aria-hidden="true">{strip}</div>
            <canvas
                node_ref=canvas
                class="heatmap"
                data-testid="atlas-matrix"
                role="img"
                aria-label="How alike every two heads attend, heads in the clustering's order: bright is alike."
            ></canvas>
            <figcaption class="muted">"Rows and columns: the heads in the clustering's order; bright = alike, dark = the two farthest apart."</figcaption>
            {move || draw_error.get().map(|e| view! { <p class="error">{e}</p> })}
        </figure>
    }
}

/// A chosen head's pattern on the sentence, enlarged, beside its three nearest heads'.
#[component]
fn NearestHeads(atlas: Rc<Atlas>) -> impl IntoView {
    let state = AtlasView::get();
    let view = EncoderView::get();
    let spec = view.spec();
    let head = state.head;
    let stored = StoredValue::new_local(atlas);
    let nearest = move || stored.with_value(|a| a.distances.nearest(head.get(), 3));
    let distance = move |b: usize| stored.with_value(|a| a.distances.get(untrack(|| head.get()), b));
    view! {
        <div class="atlas-near" data-testid="atlas-near">
            <label class="measure">
                "Heads like "
                <select
                    data-testid="atlas-head"
                    prop:value=move || head.get().to_string()
                    on:change=move |ev| head.set(event_target_value(&ev).parse().unwrap_or(0))
                >
                    {(0..spec.total_heads()).map(|h| view! { <option value=h.to_string()>{spec.head_name(h)}</option> }).collect_view()}
                </select>
            </label>
            <div class="atlas-heads">
                {move || {
                    let chosen = head.get();
                    let mut shown = vec![(chosen, String::from("this head, on the sentence above"))];
                    shown.extend(nearest().into_iter().map(|b| (b, format!("{} bits apart", divergence_text(distance(b))))));
                    shown
                        .into_iter()
                        .enumerate()
                        .map(|(i, (h, caption))| view! { <HeadPattern h=h caption=caption large=i == 0 /> })
                        .collect_view()
                }}
            </div>
        </div>
    }
}

/// A mean divergence to three decimals (it averages hundreds of rows of f16 weights' attention).
fn divergence_text(d: f64) -> String {
    format!("{d:.3}")
}

/// Head `h`'s attention on the sentence's current pass, with a caption.
#[component]
fn HeadPattern(h: usize, caption: String, large: bool) -> impl IntoView {
    let view = EncoderView::get();
    let spec = view.spec();
    let canvas = NodeRef::<html::Canvas>::new();
    Effect::new(move |_| {
        let (Some(canvas), Some(pass)) = (canvas.get(), view.pass_now()) else { return };
        let n = pass.out.seq_len;
        let (l, i) = (spec.layer_of(h), spec.head_in_layer(h));
        let weights = &pass.out.attention[l][i * n * n..(i + 1) * n * n];
        let _ = draw_heatmap(&canvas, weights, n);
    });
    view! {
        <figure class=if large { "head atlas-head large" } else { "head atlas-head" } data-testid=format!("atlas-pattern-{h}")>
            <canvas node_ref=canvas class="heatmap" role="img" aria-label=format!("Attention of {} on the sentence", spec.head_name(h))></canvas>
            <figcaption><strong>{spec.head_name(h)}</strong>" · "{caption}</figcaption>
        </figure>
    }
}
