//! The two charts, drawn with plotters on any backend (a canvas in the page, SVG in tests):
//!
//! - d_model against heads for the seed's models, on log axes, with lines of constant d_k and
//!   the 64..128 band shaded: models keep `d_k = d_model / heads` inside it as they grow.
//! - drift against the number of heads pruned, least important first and at random, with the
//!   pruning fractions Michel et al. (2019) report as harmless.
//!
//! Each function returns where it put things (in backend pixels) so the page can answer hovers
//! and tests can check the geometry.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::labels::{estimate_text, Anchor, Obstacles, Rect, Side};
use crate::attention::config::PRESETS;

/// Colours of one theme.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Palette {
    /// Background.
    pub background: RGBColor,
    /// Text and axes.
    pub foreground: RGBColor,
    /// Grid and secondary lines.
    pub grid: RGBColor,
    /// The seed's models.
    pub point: RGBColor,
    /// The reader's configuration, and the first series.
    pub accent: RGBColor,
    /// The second series.
    pub second: RGBColor,
    /// The shaded d_k band and reference marks.
    pub band: RGBColor,
}

impl Palette {
    /// Dark text on white.
    pub const LIGHT: Palette = Palette {
        background: RGBColor(255, 255, 255),
        foreground: RGBColor(29, 29, 31),
        grid: RGBColor(200, 200, 206),
        point: RGBColor(42, 98, 201),
        accent: RGBColor(214, 96, 0),
        second: RGBColor(120, 120, 128),
        band: RGBColor(33, 145, 140),
    };
    /// Light text on near-black.
    pub const DARK: Palette = Palette {
        background: RGBColor(32, 32, 36),
        foreground: RGBColor(236, 236, 239),
        grid: RGBColor(70, 70, 78),
        point: RGBColor(122, 167, 255),
        accent: RGBColor(255, 160, 64),
        second: RGBColor(160, 162, 168),
        band: RGBColor(68, 191, 112),
    };
}

/// A labelled point of the configuration chart, where it was drawn.
#[derive(Clone, Debug, PartialEq)]
pub struct PlacedPoint {
    /// Model names at this position (BERT-base and GPT-2 Small share one).
    pub label: String,
    /// Width of the residual stream.
    pub d_model: usize,
    /// Number of heads.
    pub heads: usize,
    /// Pixel position.
    pub at: (i32, i32),
    /// Whether this is the reader's current configuration.
    pub current: bool,
}

/// A line of constant d_k, where it was drawn.
#[derive(Clone, Debug, PartialEq)]
pub struct PlacedLine {
    /// The per-head width the line stands for.
    pub d_k: usize,
    /// Pixel positions of its ends.
    pub from: (i32, i32),
    /// Pixel positions of its ends.
    pub to: (i32, i32),
}

/// What the configuration chart drew.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConfigChartLayout {
    /// The models, grouped by position, then the reader's configuration if given.
    pub points: Vec<PlacedPoint>,
    /// The d_k lines, 32, 64, 128, 256.
    pub lines: Vec<PlacedLine>,
    /// Every text label inside the plot: the models' names, then the lines'.
    pub labels: Vec<PlacedLabel>,
}

// The x axis runs to 64 000 so that every d_k line leaves the plot through its top edge, where
// its name is written above it (inside the band the lines lie too close for a label between).
const D_MODEL_RANGE: (f64, f64) = (256.0, 64_000.0);
const HEADS_RANGE: (f64, f64) = (4.0, 200.0);
/// The d_k lines drawn; the band is 64..128.
pub const D_K_LINES: [usize; 4] = [32, 64, 128, 256];

/// The seed's models grouped by (d_model, heads), names joined in seed order.
pub fn model_groups() -> Vec<(String, usize, usize)> {
    let mut groups: Vec<(String, usize, usize)> = Vec::new();
    for p in PRESETS {
        match groups.iter_mut().find(|g| g.1 == p.d_model && g.2 == p.num_heads) {
            Some(g) => g.0 = format!("{} / {}", g.0, p.name),
            None => groups.push((p.name.to_string(), p.d_model, p.num_heads)),
        }
    }
    groups
}

/// What the ring on the reader's shape is called: their configuration, or the trained model
/// `trained` with its weights (at one of the seed's points when its shape is one of theirs).
pub fn ring_label(trained: Option<&str>, d_model: usize, heads: usize) -> String {
    match trained {
        None => "your configuration".into(),
        Some(name) => match model_groups().into_iter().find(|g| g.1 == d_model && g.2 == heads) {
            Some((row, ..)) => format!("{name}: trained weights loaded, at the point of {row}"),
            None => format!("{name} (trained)"),
        },
    }
}

/// Where a model of `d_model` and `heads` (called `name`) sits against the handbook's band of
/// per-head sizes, in a sentence; for a trained model, which of the seed's points it is.
pub fn band_note(name: &str, trained: bool, d_model: usize, heads: usize) -> String {
    if heads == 0 || !d_model.is_multiple_of(heads) {
        return format!("{name}: heads must divide d_model to have a d_k.");
    }
    let d_k = d_model / heads;
    let place = match d_k {
        64..=128 => "inside the 64..128 band",
        d if d < 64 => "below the 64..128 band",
        _ => "above the 64..128 band",
    };
    let row = model_groups().into_iter().find(|g| g.1 == d_model && g.2 == heads).map(|g| g.0);
    match (trained, row) {
        (true, Some(row)) => format!(
            "{name}: d_k = {d_model} / {heads} = {d_k}, {place}; trained weights loaded, at the point of {row} on the chart."
        ),
        (true, None) => format!("{name}: d_k = {d_model} / {heads} = {d_k}, {place} (trained weights; none of the seed's seven shapes)."),
        (false, _) => format!("{name}: d_k = {d_model} / {heads} = {d_k}, {place}."),
    }
}

/// Draws d_model against heads on `area`, highlighting `current` (d_model, heads) if given,
/// its ring called `ring` ([`ring_label`]).
/// `scale` is backend pixels per CSS pixel (the device pixel ratio, less on a narrow canvas):
/// text, marks and margins grow with it, so the chart is as sharp as the screen.
pub fn draw_config_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    current: Option<(usize, usize)>,
    ring: &str,
    palette: &Palette,
    scale: f64,
) -> Result<ConfigChartLayout, DrawingAreaErrorKind<DB::ErrorType>> {
    area.fill(&palette.background)?;
    let px = |v: f64| (v * scale).round();
    let font = |size: f64| ("sans-serif", px(size)).into_font().color(&palette.foreground);
    let mut chart = ChartBuilder::on(area)
        .margin(px(12.0) as i32)
        .margin_top(px(30.0) as i32)
        .x_label_area_size(px(46.0) as i32)
        .y_label_area_size(px(50.0) as i32)
        .build_cartesian_2d(
            (D_MODEL_RANGE.0..D_MODEL_RANGE.1).log_scale(),
            (HEADS_RANGE.0..HEADS_RANGE.1).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("d_model (log scale)")
        .y_desc("heads (log scale)")
        .axis_desc_style(font(16.0))
        .label_style(font(14.0))
        .x_labels(6)
        .y_labels(6)
        .axis_style(palette.foreground.stroke_width(px(1.0) as u32))
        .light_line_style(palette.grid.mix(0.35).stroke_width(px(1.0) as u32))
        .bold_line_style(palette.grid.mix(0.8).stroke_width(px(1.0) as u32))
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;

    // The band 64 <= d_k <= 128: between heads = d/128 and heads = d/64, clipped to the axes.
    let steps = 64;
    let xs: Vec<f64> = (0..=steps)
        .map(|i| D_MODEL_RANGE.0 * (D_MODEL_RANGE.1 / D_MODEL_RANGE.0).powf(i as f64 / steps as f64))
        .collect();
    let clip = |h: f64| h.clamp(HEADS_RANGE.0, HEADS_RANGE.1);
    let band: Vec<(f64, f64)> = xs
        .iter()
        .map(|&x| (x, clip(x / 64.0)))
        .chain(xs.iter().rev().map(|&x| (x, clip(x / 128.0))))
        .collect();
    chart.draw_series(std::iter::once(Polygon::new(band, palette.band.mix(0.18).filled())))?;

    let mut layout = ConfigChartLayout::default();
    for d_k in D_K_LINES {
        let d_k_f = d_k as f64;
        let x0 = D_MODEL_RANGE.0.max(HEADS_RANGE.0 * d_k_f);
        let x1 = D_MODEL_RANGE.1.min(HEADS_RANGE.1 * d_k_f);
        let (a, b) = ((x0, x0 / d_k_f), (x1, x1 / d_k_f));
        let in_band = d_k == 64 || d_k == 128;
        let width = px(if in_band { 2.0 } else { 1.0 }) as u32;
        let style = if in_band { palette.band.stroke_width(width) } else { palette.grid.stroke_width(width) };
        chart.draw_series(LineSeries::new([a, b], style))?;
        layout.lines.push(PlacedLine { d_k, from: chart.backend_coord(&a), to: chart.backend_coord(&b) });
    }
    for (label, d_model, heads) in model_groups() {
        let at = (d_model as f64, heads as f64);
        chart.draw_series(std::iter::once(Circle::new(at, px(POINT_R) as i32, palette.point.filled())))?;
        let at = chart.backend_coord(&at);
        layout.points.push(PlacedPoint { label, d_model, heads, at, current: false });
    }
    if let Some((d_model, heads)) = current {
        let at = (d_model as f64, heads as f64);
        let inside = (D_MODEL_RANGE.0..=D_MODEL_RANGE.1).contains(&at.0)
            && (HEADS_RANGE.0..=HEADS_RANGE.1).contains(&at.1);
        if inside {
            let stroke = palette.accent.stroke_width(px(RING_STROKE) as u32);
            chart.draw_series(std::iter::once(Circle::new(at, px(RING_R) as i32, stroke)))?;
            layout.points.push(PlacedPoint {
                label: ring.to_string(),
                d_model,
                heads,
                at: chart.backend_coord(&at),
                current: true,
            });
        }
    }
    let (xr, yr) = chart.plotting_area().get_pixel_range();
    let plot = Rect { x0: xr.start as f64, y0: yr.start as f64, x1: xr.end as f64, y1: yr.end as f64 };
    let (w, h) = area.dim_in_pixel();
    let canvas = Rect { x0: 0.0, y0: 0.0, x1: w as f64, y1: h as f64 };
    layout.labels = place_config_labels(&layout, plot, canvas, scale);
    let line_h = estimate_text(1, LABEL_PX * scale).1;
    for label in &layout.labels {
        let size = if matches!(label.names, Names::Point(_)) { NUMBER_PX } else { LABEL_PX };
        let style = font(size).pos(Pos::new(HPos::Left, VPos::Top));
        for (i, line) in label.lines.iter().enumerate() {
            let at = (label.rect.x0 as i32, (label.rect.y0 + line_h * i as f64) as i32);
            area.draw(&Text::new(line.clone(), at, style.clone()))?;
        }
    }
    area.present()?;
    Ok(layout)
}

/// A model's point's radius, the reader's ring's radius and stroke, and how far the ring
/// reaches, in CSS pixels.
const POINT_R: f64 = 6.0;
const RING_R: f64 = 9.0;
const RING_STROKE: f64 = 3.0;
const RING_OUTER: f64 = RING_R + RING_STROKE / 2.0;

impl PlacedPoint {
    /// The box its mark covers (the point, or the reader's ring) on a chart drawn at `scale`.
    pub fn mark(&self, scale: f64) -> Rect {
        let r = if self.current { RING_OUTER } else { POINT_R } * scale;
        Rect::around(self.at.0 as f64, self.at.1 as f64, r)
    }
}

/// The labels' font size in CSS pixels.
const LABEL_PX: f64 = 14.0;
/// The points' numbers' font size: a digit must fit between two d_k lines on a phone.
const NUMBER_PX: f64 = 12.0;

/// A text label of the configuration chart and the box it was given.
#[derive(Clone, Debug, PartialEq)]
pub struct PlacedLabel {
    /// The text, one entry per line.
    pub lines: Vec<String>,
    /// Its box, in backend pixels.
    pub rect: Rect,
    /// What it names.
    pub names: Names,
}

/// What a label names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Names {
    /// The model point at this index of the layout's points (its number).
    Point(usize),
    /// The line of this d_k.
    Line(usize),
    /// The key from numbers to model names (it names no mark of its own).
    Key,
    /// "d_k =", before the lines' names.
    Caption,
}

impl Names {
    /// A number unique to what is named, for the obstacle list.
    fn id(self) -> usize {
        match self {
            Names::Point(i) => 10_000 + i,
            Names::Line(d_k) => d_k,
            Names::Key => usize::MAX,
            Names::Caption => usize::MAX - 1,
        }
    }
}

/// Places the labels: each model's number beside its point and the key from numbers to names in
/// an empty corner of the plot, clear of the other labels, points and lines (the lines of
/// constant d_k lie about 75 px apart across the band, too close for a model's name written out
/// beside its point); then each line's d_k above the point where it leaves the plot's top edge,
/// after a "d_k =" caption.
fn place_config_labels(layout: &ConfigChartLayout, plot: Rect, canvas: Rect, scale: f64) -> Vec<PlacedLabel> {
    let (font, gap) = (LABEL_PX * scale, 3.0 * scale);
    let mut obstacles = Obstacles::default();
    for (i, p) in layout.points.iter().enumerate() {
        obstacles.marks.push((p.mark(scale), Names::Point(i).id()));
    }
    for l in &layout.lines {
        let (a, b) = ((l.from.0 as f64, l.from.1 as f64), (l.to.0 as f64, l.to.1 as f64));
        obstacles.lines.push((a, b, Names::Line(l.d_k).id()));
    }
    let anchor = |h, v| Anchor { h, v };
    let mut labels = Vec::new();
    let models: Vec<(usize, &PlacedPoint)> =
        layout.points.iter().enumerate().filter(|(_, p)| !p.current).collect();
    for &(i, p) in &models {
        let text = (i + 1).to_string();
        let (w, h) = estimate_text(text.chars().count(), NUMBER_PX * scale);
        // Outside the reader's ring too, when their configuration is this model's.
        let ringed = layout.points.iter().any(|q| q.current && q.at == p.at);
        let (x, y, r) =
            (p.at.0 as f64, p.at.1 as f64, if ringed { RING_OUTER } else { POINT_R } * scale + gap);
        // Beside the point, then a little further out.
        let candidates: Vec<Rect> = [r, r + 4.0 * scale, r + 8.0 * scale, r + 12.0 * scale]
            .into_iter()
            .flat_map(|r| {
                [
                    Rect::anchored(x + r, y + gap, w, h, anchor(Side::Start, Side::Start)),
                    Rect::anchored(x - r, y - gap, w, h, anchor(Side::End, Side::End)),
                    Rect::anchored(x + r, y - gap, w, h, anchor(Side::Start, Side::End)),
                    Rect::anchored(x - r, y + gap, w, h, anchor(Side::End, Side::Start)),
                    Rect::anchored(x, y + r, w, h, anchor(Side::Middle, Side::Start)),
                    Rect::anchored(x, y - r, w, h, anchor(Side::Middle, Side::End)),
                ]
            })
            .collect();
        // Little air: between two lines on a phone there is only just room for a digit.
        let rect = obstacles.place(&candidates, Names::Point(i).id(), &plot, gap / 3.0);
        labels.push(PlacedLabel { lines: vec![text], rect, names: Names::Point(i) });
    }
    // The key: one line per model, in the empty corner below the lines, else the one above.
    let key: Vec<String> = models.iter().map(|(i, p)| format!("{}  {}", i + 1, p.label)).collect();
    let widest = key.iter().map(|k| k.chars().count()).max().unwrap_or(0);
    let (w, line_h) = estimate_text(widest, font);
    let (inset, h) = (2.0 * gap, line_h * key.len() as f64);
    let candidates = [
        Rect::anchored(plot.x1 - inset, plot.y1 - inset, w, h, anchor(Side::End, Side::End)),
        Rect::anchored(plot.x0 + inset, plot.y0 + inset, w, h, anchor(Side::Start, Side::Start)),
    ];
    // On a small canvas it may fit nowhere: the page lists the same key under the chart.
    if let Some(rect) = obstacles.place_if_clear(&candidates, Names::Key.id(), &plot, gap) {
        labels.push(PlacedLabel { lines: key, rect, names: Names::Key });
    }
    let mut first_x = f64::INFINITY;
    for l in &layout.lines {
        let text = l.d_k.to_string();
        let (w, h) = estimate_text(text.chars().count(), font);
        // Centred over the line's exit, or beside the reader's ring when that is in the way.
        let (x, y) = (l.to.0 as f64, plot.y0 - gap);
        let (clear_of_ring, up) = (11.0 * scale, anchor(Side::Middle, Side::End));
        let candidates = [
            Rect::anchored(x, y, w, h, up),
            Rect::anchored(x - clear_of_ring - w / 2.0, y, w, h, up),
            Rect::anchored(x + clear_of_ring + w / 2.0, y, w, h, up),
        ];
        let rect = obstacles.place(&candidates, Names::Line(l.d_k).id(), &canvas, gap / 2.0);
        first_x = first_x.min(rect.x0);
        labels.push(PlacedLabel { lines: vec![text], rect, names: Names::Line(l.d_k) });
    }
    let caption = "d_k =".to_string();
    let (w, h) = estimate_text(caption.chars().count(), font);
    let at = Rect::anchored(first_x - 2.0 * gap, plot.y0 - gap, w, h, anchor(Side::End, Side::End));
    let rect = obstacles.place(&[at], Names::Caption.id(), &canvas, gap / 2.0);
    labels.push(PlacedLabel { lines: vec![caption], rect, names: Names::Caption });
    labels
}

/// What the drift chart drew.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DriftChartLayout {
    /// Pixel x of each k, 0..=heads.
    pub k_x: Vec<i32>,
    /// Pixel y of the least-important-first curve at each k.
    pub ranked_y: Vec<i32>,
    /// Pixel y of the random-order curve at each k.
    pub random_y: Vec<i32>,
}

/// Pruning fractions Michel et al. (2019) report as costing almost nothing: 20 % of the heads
/// of a WMT transformer, 40 % of BERT's on MNLI.
pub const MICHEL_MARKS: [(f64, &str); 2] = [(0.2, "20 %: WMT (Michel et al.)"), (0.4, "40 %: BERT/MNLI")];

/// What a drift chart plots: its y axis, how many random orders its random curve averages, and
/// how the page names it (for a screen reader, and its SVG file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriftAxes {
    /// The y axis's name.
    pub y_desc: &'static str,
    /// Random orders in the random curve's mean.
    pub random_orders: u32,
    /// The chart in a sentence.
    pub described: &'static str,
    /// The SVG export's file name.
    pub file: &'static str,
    /// The page's name for it (`{name}-chart`, `export-{name}-svg`).
    pub name: &'static str,
}

impl DriftAxes {
    /// An output's relative L2 drift (the synthetic layer's, a sentence embedding's).
    pub const OUTPUT: DriftAxes = DriftAxes {
        y_desc: "relative L2 drift",
        random_orders: 8,
        described: "Relative output drift against the number of heads pruned, least important first and in random order",
        file: "headlab-drift-chart.svg",
        name: "drift",
    };

    /// A decoder's next-token KL divergence, the random curve the mean of `random_orders`.
    pub const fn next_token(random_orders: u32) -> DriftAxes {
        DriftAxes {
            y_desc: "KL of the next token (nats)",
            random_orders,
            described: "KL divergence of the next-token distribution against the number of heads pruned, least important first and in random order",
            file: "headlab-decoder-drift-chart.svg",
            name: "decoder-drift",
        }
    }
}

/// Draws a drift (by `axes`) against heads pruned for both orders, the reader's current point
/// `(heads pruned, drift)`, and the Michel et al. fractions; `scale` as for the configuration
/// chart.
pub fn draw_drift_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    ranked: &[f64],
    random: &[f64],
    current: Option<(usize, f64)>,
    axes: &DriftAxes,
    palette: &Palette,
    scale: f64,
) -> Result<DriftChartLayout, DrawingAreaErrorKind<DB::ErrorType>> {
    area.fill(&palette.background)?;
    let heads = ranked.len().saturating_sub(1).max(1);
    let px = |v: f64| (v * scale).round();
    let stroke = |v: f64| px(v).max(1.0) as u32;
    let font = |size: f64| ("sans-serif", px(size)).into_font().color(&palette.foreground);
    let y_max = ranked.iter().chain(random).copied().filter(|v| v.is_finite()).fold(1.0f64, f64::max);
    let mut chart = ChartBuilder::on(area)
        .margin(px(12.0) as i32)
        .x_label_area_size(px(36.0) as i32)
        .y_label_area_size(px(44.0) as i32)
        .build_cartesian_2d(0f64..heads as f64, 0f64..y_max * 1.05)?;
    chart
        .configure_mesh()
        .x_desc("heads pruned")
        .x_labels((heads + 1).min(11))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_desc(axes.y_desc)
        .axis_desc_style(font(13.0))
        .label_style(font(12.0))
        .axis_style(palette.foreground.stroke_width(stroke(1.0)))
        .light_line_style(palette.grid.mix(0.3).stroke_width(stroke(1.0)))
        .bold_line_style(palette.grid.mix(0.7).stroke_width(stroke(1.0)))
        .draw()?;
    for (i, (fraction, label)) in MICHEL_MARKS.into_iter().enumerate() {
        let x = fraction * heads as f64;
        chart.draw_series(LineSeries::new(
            [(x, 0.0), (x, y_max * 1.05)],
            palette.band.stroke_width(stroke(1.0)),
        ))?;
        // Stagger the two labels vertically so they never overlap.
        let y = y_max * (1.02 - 0.09 * i as f64);
        chart.draw_series(std::iter::once(
            EmptyElement::at((x, y))
                + Text::new(label, (px(4.0) as i32, 0), font(12.0).pos(Pos::new(HPos::Left, VPos::Top))),
        ))?;
    }
    let series = |v: &[f64]| v.iter().enumerate().map(|(i, &y)| (i as f64, y)).collect::<Vec<_>>();
    chart
        .draw_series(LineSeries::new(series(random), palette.second.stroke_width(stroke(2.0))))?
        .label(format!("random order (mean of {})", axes.random_orders))
        .legend(move |(x, y)| {
            PathElement::new([(x, y), (x + px(16.0) as i32, y)], palette.second.stroke_width(stroke(2.0)))
        });
    chart
        .draw_series(LineSeries::new(series(ranked), palette.accent.stroke_width(stroke(3.0))))?
        .label("least important first")
        .legend(move |(x, y)| {
            PathElement::new([(x, y), (x + px(16.0) as i32, y)], palette.accent.stroke_width(stroke(3.0)))
        });
    if let Some((k, y)) = current {
        let at = (k as f64, y);
        chart.draw_series(std::iter::once(Circle::new(
            at,
            px(7.0) as i32,
            palette.foreground.stroke_width(stroke(2.0)),
        )))?;
        // Right of the point, or left of it in the chart's right half (never past the plot).
        let (dx, h) =
            if 2 * k > heads { (-px(9.0) as i32, HPos::Right) } else { (px(9.0) as i32, HPos::Left) };
        chart.draw_series(std::iter::once(
            EmptyElement::at(at) + Text::new("you", (dx, 0), font(12.0).pos(Pos::new(h, VPos::Center))),
        ))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font(font(12.0))
        .background_style(palette.background.mix(0.85))
        .border_style(palette.grid)
        .draw()?;
    let layout = DriftChartLayout {
        k_x: (0..ranked.len()).map(|i| chart.backend_coord(&(i as f64, 0.0)).0).collect(),
        ranked_y: ranked.iter().map(|&y| chart.backend_coord(&(0.0, y)).1).collect(),
        random_y: random.iter().map(|&y| chart.backend_coord(&(0.0, y)).1).collect(),
    };
    area.present()?;
    Ok(layout)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svg_config(current: Option<(usize, usize)>) -> (String, ConfigChartLayout) {
        let mut svg = String::new();
        let layout = {
            let area = SVGBackend::with_string(&mut svg, (640, 420)).into_drawing_area();
            draw_config_chart(&area, current, "your configuration", &Palette::LIGHT, 1.0).unwrap()
        };
        (svg, layout)
    }

    #[test]
    fn the_seven_models_are_five_labelled_points_on_their_d_k_lines() {
        let (svg, layout) = svg_config(None);
        let labels: Vec<&str> = layout.points.iter().map(|p| p.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "Transformer (orig.)",
                "BERT-base / GPT-2 Small",
                "BERT-large / GPT-2 Medium",
                "GPT-2 Large",
                "GPT-3 (175B)"
            ]
        );
        for label in &labels {
            assert!(svg.contains(label), "{label} missing from the SVG");
        }
        for d_k in D_K_LINES {
            assert!(svg.contains(&format!("\n{d_k}\n</text>")), "d_k = {d_k} is named");
        }
        // Larger models sit right of and above smaller ones (both axes increase).
        for w in layout.points.windows(2) {
            assert!(w[1].at.0 > w[0].at.0 && w[1].at.1 < w[0].at.1, "{w:?}");
        }
        // Each model lies on the line of its own d_k (within a pixel of rounding).
        for p in &layout.points {
            let line = layout.lines.iter().find(|l| l.d_k == p.d_model / p.heads).unwrap();
            let (x0, y0, x1, y1) =
                (line.from.0 as f64, line.from.1 as f64, line.to.0 as f64, line.to.1 as f64);
            let dist = ((y1 - y0) * p.at.0 as f64 - (x1 - x0) * p.at.1 as f64 + x1 * y0 - y1 * x0).abs()
                / ((y1 - y0).powi(2) + (x1 - x0).powi(2)).sqrt();
            assert!(dist <= 1.5, "{} is {dist:.2} px off the d_k = {} line", p.label, line.d_k);
        }
        // On log axes all d_k lines are parallel: equal slopes.
        let slope = |l: &PlacedLine| (l.to.1 - l.from.1) as f64 / (l.to.0 - l.from.0) as f64;
        let s64 = slope(&layout.lines[1]);
        assert!(layout.lines.iter().all(|l| (slope(l) - s64).abs() < 0.02), "{:?}", layout.lines);
    }

    #[test]
    fn the_current_configuration_is_highlighted_when_it_fits_the_axes() {
        let (_, layout) = svg_config(Some((768, 6)));
        let current = layout.points.last().unwrap();
        assert!(current.current && current.d_model == 768 && current.heads == 6);
        // 768 / 6 = d_k 128: straight below BERT-base's point (same d_model, fewer heads).
        let bert = &layout.points[1];
        assert_eq!(current.at.0, bert.at.0);
        assert!(current.at.1 > bert.at.1);
        let (_, off_axes) = svg_config(Some((64, 1)));
        assert!(off_axes.points.iter().all(|p| !p.current));
    }

    #[test]
    fn a_trained_model_of_a_seed_shape_is_named_at_its_point_and_its_d_k_placed_in_the_band() {
        assert_eq!(ring_label(None, 768, 12), "your configuration");
        assert_eq!(
            ring_label(Some("bert-base-uncased"), 768, 12),
            "bert-base-uncased: trained weights loaded, at the point of BERT-base / GPT-2 Small"
        );
        assert!(ring_label(Some("bert-large"), 1024, 16).contains("BERT-large"));
        assert_eq!(ring_label(Some("all-MiniLM-L6-v2"), 384, 12), "all-MiniLM-L6-v2 (trained)");
        let base = band_note("bert-base-uncased", true, 768, 12);
        assert_eq!(base, "bert-base-uncased: d_k = 768 / 12 = 64, inside the 64..128 band; trained weights loaded, at the point of BERT-base / GPT-2 Small on the chart.");
        assert!(band_note("all-MiniLM-L6-v2", true, 384, 12)
            .contains("= 32, below the 64..128 band (trained weights; none of"));
        assert!(band_note("x", false, 4096, 16).ends_with("= 256, above the 64..128 band."));
        assert!(band_note("x", false, 100, 7).contains("must divide"));
        assert!(band_note("x", true, 100, 0).contains("must divide"));
    }

    /// The chart's labels on a canvas of `size` at `scale`, for every reader's configuration
    /// that might be highlighted.
    fn labels_at(size: (u32, u32), scale: f64, current: Option<(usize, usize)>) -> ConfigChartLayout {
        let mut svg = String::new();
        let area = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        draw_config_chart(&area, current, "your configuration", &Palette::LIGHT, scale).unwrap()
    }

    #[test]
    fn no_label_is_clipped_or_covers_another_label_a_point_or_a_line_it_does_not_name() {
        // The page's canvas at 1x, 2x and 3x device pixels, and narrow ones (a phone's column).
        // (The page draws at the device pixel ratio times the laid-out width over 600, within
        // 0.85 to 1.3: see ui::canvas::fit_to_screen. On a 390 px phone the chart is 316 px
        // wide; on narrower screens the d_k lines lie too close for a digit between them, and
        // a number may touch a line.)
        let sizes = [
            ((600, 460), 1.0),
            ((1200, 920), 2.0),
            ((1800, 1380), 3.0),
            ((780, 598), 1.3),
            ((420, 322), 0.85),
            ((316, 242), 0.85),
            ((640, 491), 1.7),
        ];
        let currents =
            [None, Some((768, 12)), Some((768, 6)), Some((512, 8)), Some((4096, 32)), Some((20_000, 160))];
        for ((w, h), scale) in sizes {
            for current in currents {
                let layout = labels_at((w, h), scale, current);
                let what = format!("{w}x{h} at {scale}, configuration {current:?}");
                // The key is drawn wherever the canvas has room for it: always unless the text
                // is drawn larger than its share of the chart (a phone's narrow column).
                let keyed = layout.labels.iter().any(|l| l.names == Names::Key);
                assert!(keyed || f64::from(w) / scale < 500.0, "{what}: no room for the key");
                assert_eq!(layout.labels.len(), 5 + usize::from(keyed) + D_K_LINES.len() + 1, "{what}");
                let canvas = Rect { x0: 0.0, y0: 0.0, x1: w as f64, y1: h as f64 };
                for (i, a) in layout.labels.iter().enumerate() {
                    let text = a.lines.join(" / ");
                    assert!(a.rect.inside(&canvas), "{what}: {text} clipped: {:?}", a.rect);
                    for b in &layout.labels[i + 1..] {
                        assert!(!a.rect.overlaps(&b.rect), "{what}: {text} covers {:?}", b.lines);
                    }
                    for (j, p) in layout.points.iter().enumerate() {
                        let mark = p.mark(scale);
                        let named = a.names == Names::Point(j);
                        assert!(
                            named || !a.rect.overlaps(&mark),
                            "{what}: {text} covers the point of {}",
                            p.label
                        );
                    }
                    for l in &layout.lines {
                        let (p, q) = ((l.from.0 as f64, l.from.1 as f64), (l.to.0 as f64, l.to.1 as f64));
                        let named = a.names == Names::Line(l.d_k);
                        assert!(
                            named || !a.rect.crosses(p, q),
                            "{what}: {text} crosses the d_k = {} line",
                            l.d_k
                        );
                    }
                }
                // A line's name sits by the end of its own line (within a ring's width of it).
                for a in layout.labels.iter().filter(|a| matches!(a.names, Names::Line(_))) {
                    let Names::Line(d_k) = a.names else { unreachable!() };
                    let l = layout.lines.iter().find(|l| l.d_k == d_k).unwrap();
                    let (p, q) = ((l.from.0 as f64, l.from.1 as f64), (l.to.0 as f64, l.to.1 as f64));
                    assert!(
                        a.rect.grown(14.0 * scale).crosses(p, q),
                        "{what}: {:?} is away from its line",
                        a.lines
                    );
                }
            }
        }
    }

    #[test]
    fn drift_chart_places_both_curves() {
        let mut svg = String::new();
        let ranked = [0.0, 0.1, 0.3, 1.0];
        let random = [0.0, 0.3, 0.6, 1.0];
        let layout = {
            let area = SVGBackend::with_string(&mut svg, (480, 300)).into_drawing_area();
            draw_drift_chart(&area, &ranked, &random, Some((1, 0.1)), &DriftAxes::OUTPUT, &Palette::DARK, 1.0)
                .unwrap()
        };
        assert_eq!(layout.k_x.len(), 4);
        assert!(layout.k_x.windows(2).all(|w| w[1] > w[0]));
        // Screen y grows downwards: more drift is higher up.
        assert!(layout.ranked_y[1] > layout.random_y[1]);
        assert_eq!(layout.ranked_y[3], layout.random_y[3]);
        assert!(svg.contains("least important first") && svg.contains("random order (mean of 8)"));
        assert!(svg.contains("20 %: WMT (Michel et al.)"));
    }
}
