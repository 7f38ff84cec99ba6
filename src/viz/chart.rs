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
}

const D_MODEL_RANGE: (f64, f64) = (256.0, 20_000.0);
const HEADS_RANGE: (f64, f64) = (4.0, 160.0);
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

/// Draws d_model against heads on `area`, highlighting `current` (d_model, heads) if given.
pub fn draw_config_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    current: Option<(usize, usize)>,
    palette: &Palette,
) -> Result<ConfigChartLayout, DrawingAreaErrorKind<DB::ErrorType>> {
    area.fill(&palette.background)?;
    let font = |size: f64| ("sans-serif", size).into_font().color(&palette.foreground);
    let mut chart =
        ChartBuilder::on(area).margin(12).x_label_area_size(40).y_label_area_size(44).build_cartesian_2d(
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
        .axis_style(palette.foreground)
        .light_line_style(palette.grid.mix(0.35))
        .bold_line_style(palette.grid.mix(0.8))
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
        let style = if in_band { palette.band.stroke_width(2) } else { palette.grid.stroke_width(1) };
        chart.draw_series(LineSeries::new([a, b], style))?;
        chart.draw_series(std::iter::once(Text::new(
            format!("d_k = {d_k}"),
            b,
            font(14.0).pos(Pos::new(HPos::Right, VPos::Bottom)),
        )))?;
        layout.lines.push(PlacedLine { d_k, from: chart.backend_coord(&a), to: chart.backend_coord(&b) });
    }

    for (label, d_model, heads) in model_groups() {
        let at = (d_model as f64, heads as f64);
        chart.draw_series(std::iter::once(Circle::new(at, 6, palette.point.filled())))?;
        // Labels sit right of their point, nudged down so neighbours on the d_k = 64 line do not
        // collide; GPT-3's is drawn to the left of its point, which sits at the right edge.
        let (anchor, dx) = if d_model > 8000 { (HPos::Right, -9) } else { (HPos::Left, 9) };
        chart.draw_series(std::iter::once(
            EmptyElement::at(at)
                + Text::new(label.clone(), (dx, 2), font(14.0).pos(Pos::new(anchor, VPos::Top))),
        ))?;
        layout.points.push(PlacedPoint {
            label,
            d_model,
            heads,
            at: chart.backend_coord(&at),
            current: false,
        });
    }
    if let Some((d_model, heads)) = current {
        let at = (d_model as f64, heads as f64);
        let inside = (D_MODEL_RANGE.0..=D_MODEL_RANGE.1).contains(&at.0)
            && (HEADS_RANGE.0..=HEADS_RANGE.1).contains(&at.1);
        if inside {
            chart.draw_series(std::iter::once(Circle::new(at, 9, palette.accent.stroke_width(3))))?;
            layout.points.push(PlacedPoint {
                label: "your configuration".into(),
                d_model,
                heads,
                at: chart.backend_coord(&at),
                current: true,
            });
        }
    }
    area.present()?;
    Ok(layout)
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

/// Draws relative L2 drift against heads pruned for both orders, the reader's current point
/// `(heads pruned, drift)`, and the Michel et al. fractions.
pub fn draw_drift_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    ranked: &[f64],
    random: &[f64],
    current: Option<(usize, f64)>,
    palette: &Palette,
) -> Result<DriftChartLayout, DrawingAreaErrorKind<DB::ErrorType>> {
    area.fill(&palette.background)?;
    let heads = ranked.len().saturating_sub(1).max(1);
    let font = |size: f64| ("sans-serif", size).into_font().color(&palette.foreground);
    let y_max = ranked.iter().chain(random).copied().filter(|v| v.is_finite()).fold(1.0f64, f64::max);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(44)
        .build_cartesian_2d(0f64..heads as f64, 0f64..y_max * 1.05)?;
    chart
        .configure_mesh()
        .x_desc("heads pruned")
        .y_desc("relative L2 drift")
        .axis_desc_style(font(13.0))
        .label_style(font(12.0))
        .axis_style(palette.foreground)
        .light_line_style(palette.grid.mix(0.3))
        .bold_line_style(palette.grid.mix(0.7))
        .draw()?;
    for (i, (fraction, label)) in MICHEL_MARKS.into_iter().enumerate() {
        let x = fraction * heads as f64;
        chart.draw_series(LineSeries::new([(x, 0.0), (x, y_max * 1.05)], palette.band.stroke_width(1)))?;
        // Stagger the two labels vertically so they never overlap.
        let y = y_max * (1.02 - 0.09 * i as f64);
        chart.draw_series(std::iter::once(
            EmptyElement::at((x, y))
                + Text::new(label, (4, 0), font(12.0).pos(Pos::new(HPos::Left, VPos::Top))),
        ))?;
    }
    let series = |v: &[f64]| v.iter().enumerate().map(|(i, &y)| (i as f64, y)).collect::<Vec<_>>();
    chart
        .draw_series(LineSeries::new(series(random), palette.second.stroke_width(2)))?
        .label("random order (mean of 8)")
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], palette.second.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(series(ranked), palette.accent.stroke_width(3)))?
        .label("least important first")
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], palette.accent.stroke_width(3)));
    if let Some((k, y)) = current {
        let at = (k as f64, y);
        chart.draw_series(std::iter::once(Circle::new(at, 7, palette.foreground.stroke_width(2))))?;
        chart.draw_series(std::iter::once(Text::new("you", at, font(12.0))))?;
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
            draw_config_chart(&area, current, &Palette::LIGHT).unwrap()
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
            assert!(svg.contains(&format!("d_k = {d_k}")));
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
    fn drift_chart_places_both_curves() {
        let mut svg = String::new();
        let ranked = [0.0, 0.1, 0.3, 1.0];
        let random = [0.0, 0.3, 0.6, 1.0];
        let layout = {
            let area = SVGBackend::with_string(&mut svg, (480, 300)).into_drawing_area();
            draw_drift_chart(&area, &ranked, &random, Some((1, 0.1)), &Palette::DARK).unwrap()
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
