//! Task quality against heads pruned: the iterative and one-shot orders as lines, the random
//! orders as their mean and a min/max band, Michel et al.'s 20 % and 40 % marks, the "one head
//! per layer" point and the reader's own set. Drawn with plotters on any backend.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::chart::Palette;

/// What the task chart shows; every curve as `(heads pruned, quality)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskChart {
    /// Heads in the model (the x axis ends there).
    pub heads: usize,
    /// The iterative order.
    pub iterative: Vec<(usize, f64)>,
    /// The one-shot order.
    pub one_shot: Vec<(usize, f64)>,
    /// The random orders: `(k, mean, min, max)`.
    pub random: Vec<(usize, f64, f64, f64)>,
    /// The iterative and one-shot curves' 95 % bands (pairs resampled): `(k, lo, hi)`.
    pub bands: [Vec<(usize, f64, f64)>; 2],
    /// Heads the iterative order prunes between two measurements of importance.
    pub iterative_step: usize,
    /// Michel et al.'s fractions, as heads pruned.
    pub marks: Vec<(usize, &'static str)>,
    /// The "one head per layer" point: heads pruned and quality.
    pub one_per_layer: Option<(usize, f64)>,
    /// The reader's set: heads pruned and its quality.
    pub current: Option<(usize, f64)>,
    /// The y axis's name.
    pub y_desc: &'static str,
    /// What ordered the one-shot curve, for its legend.
    pub one_shot_label: &'static str,
    /// Random orders behind the random band (a single one: a line, no band).
    pub random_seeds: usize,
}

/// Where the task chart put things, in backend pixels.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskChartLayout {
    /// The iterative curve's points.
    pub iterative: Vec<(i32, i32)>,
    /// The random mean's points.
    pub random: Vec<(i32, i32)>,
    /// The plotting area: left, top, right, bottom.
    pub plot: (i32, i32, i32, i32),
}

/// Draws `chart` on `area`; `scale` is backend pixels per CSS pixel, as for the other charts.
pub fn draw_task_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chart: &TaskChart,
    palette: &Palette,
    scale: f64,
) -> Result<TaskChartLayout, DrawingAreaErrorKind<DB::ErrorType>> {
    area.fill(&palette.background)?;
    let sc = |v: f64| (v * scale).round();
    let stroke = |v: f64| sc(v).max(1.0) as u32;
    let font = |size: f64| ("sans-serif", sc(size)).into_font().color(&palette.foreground);
    let values = chart.iterative.iter().chain(&chart.one_shot).map(|p| p.1);
    let values =
        values.chain(chart.random.iter().flat_map(|r| [r.2, r.3])).chain(chart.one_per_layer.map(|p| p.1));
    let values = values.chain(chart.bands.iter().flatten().flat_map(|b| [b.1, b.2]));
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    let (lo, hi) = if lo.is_finite() { (lo - 0.02, hi + 0.06) } else { (0.0, 1.0) };
    let heads = chart.heads.max(1) as f64;
    let mut c = ChartBuilder::on(area)
        .margin(sc(12.0) as i32)
        .x_label_area_size(sc(36.0) as i32)
        .y_label_area_size(sc(48.0) as i32)
        .build_cartesian_2d(0f64..heads, lo..hi)?;
    c.configure_mesh()
        .x_desc("heads pruned")
        .x_labels((chart.heads + 1).min(11))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_desc(chart.y_desc)
        .axis_desc_style(font(13.0))
        .label_style(font(12.0))
        .axis_style(palette.foreground.stroke_width(stroke(1.0)))
        .light_line_style(palette.grid.mix(0.3).stroke_width(stroke(1.0)))
        .bold_line_style(palette.grid.mix(0.7).stroke_width(stroke(1.0)))
        .draw()?;
    for (i, (k, label)) in chart.marks.iter().enumerate() {
        let x = *k as f64;
        c.draw_series(LineSeries::new([(x, lo), (x, hi)], palette.band.stroke_width(stroke(1.0))))?;
        let y = hi - (hi - lo) * (0.01 + 0.07 * i as f64);
        c.draw_series(std::iter::once(
            EmptyElement::at((x, y))
                + Text::new(*label, (sc(4.0) as i32, 0), font(12.0).pos(Pos::new(HPos::Left, VPos::Top))),
        ))?;
    }
    // The 95 % intervals of the iterative curve, shaded under everything, and of the one-shot
    // curve, as dashed edges: where an interval covers the full model's quality, the pairs alone
    // cannot tell the two apart.
    let [iterative_band, one_shot_band] = &chart.bands;
    if iterative_band.len() > 1 {
        let upper = iterative_band.iter().map(|b| (b.0 as f64, b.2));
        let lower = iterative_band.iter().rev().map(|b| (b.0 as f64, b.1));
        let area = upper.chain(lower).collect::<Vec<_>>();
        c.draw_series(std::iter::once(Polygon::new(area, palette.accent.mix(0.12))))?;
    }
    if one_shot_band.len() > 1 {
        for edge in [|b: &(usize, f64, f64)| b.1, |b: &(usize, f64, f64)| b.2] {
            let line = one_shot_band.iter().map(|b| (b.0 as f64, edge(b)));
            let style = palette.point.mix(0.8).stroke_width(stroke(1.0));
            c.draw_series(DashedLineSeries::new(line, sc(4.0) as u32, sc(4.0) as u32, style))?;
        }
    }
    if !chart.random.is_empty() && chart.random_seeds > 1 {
        let upper = chart.random.iter().map(|r| (r.0 as f64, r.3));
        let lower = chart.random.iter().rev().map(|r| (r.0 as f64, r.2));
        c.draw_series(std::iter::once(Polygon::new(
            upper.chain(lower).collect::<Vec<_>>(),
            palette.second.mix(0.2),
        )))?
        .label(format!("random orders: min to max ({} seeds)", chart.random_seeds))
        .legend(move |(x, y)| {
            Rectangle::new(
                [(x, y - sc(5.0) as i32), (x + sc(16.0) as i32, y + sc(5.0) as i32)],
                palette.second.mix(0.2).filled(),
            )
        });
    }
    if !chart.random.is_empty() {
        let mean = chart.random.iter().map(|r| (r.0 as f64, r.1));
        c.draw_series(LineSeries::new(mean, palette.second.stroke_width(stroke(2.0))))?
            .label(if chart.random_seeds > 1 { "random orders: mean" } else { "a random order" })
            .legend(move |(x, y)| {
                PathElement::new([(x, y), (x + sc(16.0) as i32, y)], palette.second.stroke_width(stroke(2.0)))
            });
    }
    let points = |v: &[(usize, f64)]| v.iter().map(|&(k, q)| (k as f64, q)).collect::<Vec<_>>();
    c.draw_series(LineSeries::new(points(&chart.one_shot), palette.point.stroke_width(stroke(2.0))))?
        .label(if one_shot_band.len() > 1 {
            format!("one-shot ({}); dashed: its 95 % interval", chart.one_shot_label)
        } else {
            format!("one-shot ({})", chart.one_shot_label)
        })
        .legend(move |(x, y)| {
            PathElement::new([(x, y), (x + sc(16.0) as i32, y)], palette.point.stroke_width(stroke(2.0)))
        });
    c.draw_series(LineSeries::new(points(&chart.iterative), palette.accent.stroke_width(stroke(3.0))))?
        .label({
            let every = match chart.iterative_step {
                1 => "every head".to_string(),
                n => format!("every {n} heads"),
            };
            let shaded = if iterative_band.len() > 1 { "; shaded: its 95 % interval" } else { "" };
            format!("iterative (gradient importance, {every}){shaded}")
        })
        .legend(move |(x, y)| {
            PathElement::new([(x, y), (x + sc(16.0) as i32, y)], palette.accent.stroke_width(stroke(3.0)))
        });
    if let Some((k, q)) = chart.one_per_layer {
        let at = (k as f64, q);
        c.draw_series(std::iter::once(TriangleMarker::new(at, sc(7.0) as i32, palette.band.filled())))?;
        c.draw_series(std::iter::once(
            EmptyElement::at(at)
                + Text::new(
                    "one head per layer",
                    (-sc(8.0) as i32, -sc(8.0) as i32),
                    font(12.0).pos(Pos::new(HPos::Right, VPos::Bottom)),
                ),
        ))?;
    }
    if let Some((k, q)) = chart.current {
        let at = (k as f64, q);
        c.draw_series(std::iter::once(Circle::new(
            at,
            sc(7.0) as i32,
            palette.foreground.stroke_width(stroke(2.0)),
        )))?;
        c.draw_series(std::iter::once(Text::new("your set", at, font(12.0))))?;
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .label_font(font(12.0))
        .background_style(palette.background.mix(0.85))
        .border_style(palette.grid)
        .draw()?;
    let px = |v: &[(usize, f64)]| v.iter().map(|&(k, q)| c.backend_coord(&(k as f64, q))).collect::<Vec<_>>();
    let (tl, br) = (c.backend_coord(&(0.0, hi)), c.backend_coord(&(heads, lo)));
    let random: Vec<(usize, f64)> = chart.random.iter().map(|r| (r.0, r.1)).collect();
    let layout = TaskChartLayout {
        iterative: px(&chart.iterative),
        random: px(&random),
        plot: (tl.0, tl.1, br.0, br.1),
    };
    area.present()?;
    Ok(layout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curves_band_and_marks_are_drawn_inside_the_plot() {
        let chart = TaskChart {
            heads: 72,
            iterative: vec![(0, 0.81), (36, 0.80), (72, 0.69)],
            one_shot: vec![(0, 0.81), (36, 0.79), (72, 0.69)],
            random: vec![(0, 0.81, 0.81, 0.81), (36, 0.78, 0.76, 0.80), (72, 0.69, 0.69, 0.69)],
            marks: vec![(14, "20 %"), (29, "40 %")],
            one_per_layer: Some((66, 0.66)),
            current: Some((10, 0.8)),
            bands: [vec![(0, 0.79, 0.83), (36, 0.78, 0.82), (72, 0.66, 0.72)], vec![]],
            iterative_step: 6,
            y_desc: "quality (Spearman)",
            one_shot_label: "the grid's order",
            random_seeds: 5,
        };
        let mut svg = String::new();
        let layout = {
            let area = SVGBackend::with_string(&mut svg, (640, 360)).into_drawing_area();
            draw_task_chart(&area, &chart, &Palette::LIGHT, 1.0).unwrap()
        };
        let (left, top, right, bottom) = layout.plot;
        for &(x, y) in layout.iterative.iter().chain(&layout.random) {
            assert!(
                (left..=right).contains(&x) && (top..=bottom).contains(&y),
                "({x}, {y}) outside {:?}",
                layout.plot
            );
        }
        // Higher quality is higher on the page; the ends of both curves meet.
        assert!(layout.iterative[0].1 < layout.iterative[2].1);
        assert_eq!(layout.iterative[0], layout.random[0]);
        for text in [
            "one head per layer",
            "your set",
            "20 %",
            "40 %",
            "random orders: mean",
            "every 6 heads); shaded: its 95 %",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        // Nothing measured yet: an empty chart, no panic.
        let mut empty = String::new();
        let area = SVGBackend::with_string(&mut empty, (320, 200)).into_drawing_area();
        draw_task_chart(&area, &TaskChart { heads: 72, ..TaskChart::default() }, &Palette::DARK, 1.0)
            .unwrap();
    }
}
