//! Every chart and heatmap as SVG, for papers and slides: the charts by the same drawing code as
//! the page's canvases, on plotters' SVG backend at their design size; a heatmap as one square
//! per weight, in the page's colours, with its tokens as tooltips.

use plotters::prelude::SVGBackend;

use super::chart::{draw_config_chart, draw_drift_chart, DriftAxes, Palette};
use super::heatmap::{rasterize, Scale};
use super::surface::{Failed, Surface};
use super::task_chart::{draw_task_chart, TaskChart};

/// The configuration chart (see [`draw_config_chart`]) as an SVG document.
pub fn config_chart(
    current: Option<(usize, usize)>,
    ring: &str,
    palette: &Palette,
) -> Result<String, String> {
    render((600, 460), |area| draw_config_chart(area, current, ring, palette, 1.0).map(drop))
}

/// The drift chart (see [`draw_drift_chart`]) as an SVG document.
pub fn drift_chart(
    ranked: &[f64],
    random: &[f64],
    current: Option<(usize, f64)>,
    axes: &DriftAxes,
    palette: &Palette,
) -> Result<String, String> {
    render((560, 320), |area| draw_drift_chart(area, ranked, random, current, axes, palette, 1.0).map(drop))
}

/// The task chart (see [`draw_task_chart`]) as an SVG document.
pub fn task_chart(chart: &TaskChart, palette: &Palette) -> Result<String, String> {
    render((640, 380), |area| draw_task_chart(area, chart, palette, 1.0).map(drop))
}

type SvgArea<'a> = plotters::drawing::DrawingArea<Surface<'a>, plotters::coord::Shift>;

/// Runs `draw` on an SVG canvas of `size` (through a [`Surface`], as the page's canvases draw)
/// and returns the document.
fn render(
    size: (u32, u32),
    draw: impl FnOnce(&SvgArea) -> Result<(), plotters::drawing::DrawingAreaErrorKind<Failed>>,
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let mut backend = SVGBackend::with_string(&mut svg, size);
        let area = Surface::area(&mut backend);
        draw(&area).map_err(|e| format!("could not draw the SVG: {e}"))?;
        area.present().map_err(|e| format!("could not draw the SVG: {e}"))?;
    }
    Ok(svg)
}

/// Side of one weight's square, in SVG pixels.
const CELL: usize = 16;

/// An `n x n` attention matrix as an SVG document: one square per weight (row = query, column =
/// key), coloured as the page colours it (0 to the matrix's largest weight), each with a tooltip
/// naming its query, key and weight. `tokens` names the positions when there are `n` of them.
pub fn heatmap(weights: &[f32], n: usize, tokens: &[impl AsRef<str>], title: &str) -> String {
    let name = |i: usize| {
        tokens
            .get(i)
            .filter(|_| tokens.len() == n)
            .map_or(format!("t{i}"), |t| format!("t{i} {}", t.as_ref()))
    };
    matrix(weights, n, &(0..n).map(name).collect::<Vec<_>>(), title)
}

/// An `n x n` matrix of values in `[0, largest]` as an SVG document, coloured as the page
/// colours a heatmap, each square's tooltip naming its row and column (`names`) and its value.
pub fn matrix(weights: &[f32], n: usize, names: &[String], title: &str) -> String {
    assert_eq!(weights.len(), n * n, "an n x n matrix");
    assert_eq!(names.len(), n, "a name per row");
    let pixels = rasterize(weights, n, Scale::fit(weights));
    let name = |i: usize| &names[i];
    let side = n * CELL;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{side}\" height=\"{side}\" viewBox=\"0 0 {side} {side}\" \
         shape-rendering=\"crispEdges\">\n<title>{}</title>\n",
        escape(title)
    );
    for q in 0..n {
        for k in 0..n {
            let p = &pixels[(q * n + k) * 4..][..3];
            svg.push_str(&format!(
                "<rect x=\"{}\" y=\"{}\" width=\"{CELL}\" height=\"{CELL}\" fill=\"#{:02x}{:02x}{:02x}\"><title>{} → {}: {:.4}</title></rect>\n",
                k * CELL,
                q * CELL,
                p[0],
                p[1],
                p[2],
                escape(name(q)),
                escape(name(k)),
                weights[q * n + k],
            ));
        }
    }
    svg.push_str("</svg>\n");
    svg
}

/// Text made safe inside an SVG element or attribute.
pub(crate) fn escape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '&' => "&amp;".into(),
            '<' => "&lt;".into(),
            '>' => "&gt;".into(),
            '"' => "&quot;".into(),
            '\'' => "&apos;".into(),
            c if c.is_control() => " ".into(),
            c => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heatmap_is_one_coloured_square_per_weight_with_its_tokens() {
        let weights = [0.5, 0.5, 0.0, 1.0, 0.25, 0.75, 0.1, 0.2, 0.7];
        let tokens = ["<b>".to_string(), "café & co".to_string(), "\"x\"".to_string()];
        let svg = heatmap(&weights, 3, &tokens, "head 4 <layer 1>");
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"48\" height=\"48\""));
        assert_eq!(svg.matches("<rect ").count(), 9);
        // The largest weight is viridis' yellow end, zero its purple end.
        assert!(
            svg.contains("fill=\"#fde725\"><title>t1 café &amp; co → t0 &lt;b&gt;: 1.0000</title>"),
            "{svg}"
        );
        assert!(
            svg.contains("fill=\"#440154\"><title>t0 &lt;b&gt; → t2 &quot;x&quot;: 0.0000</title>"),
            "{svg}"
        );
        assert!(svg.contains("<title>head 4 &lt;layer 1&gt;</title>"));
        assert!(!svg.contains("<b>"), "text is escaped");
        // Without one token per position, positions are numbered.
        assert!(heatmap(&weights, 3, &[] as &[&str], "x").contains("<title>t2 → t0: 0.1000</title>"));
    }

    #[test]
    fn the_charts_are_whole_svg_documents() {
        let config = config_chart(Some((768, 12)), "your configuration", &Palette::LIGHT).unwrap();
        let drift = drift_chart(&[0.0, 0.2, 1.0], &[0.0, 0.5, 1.0], None, &DriftAxes::OUTPUT, &Palette::DARK)
            .unwrap();
        let task = TaskChart { heads: 72, y_desc: "quality (Spearman)", ..TaskChart::default() };
        let task = task_chart(&task, &Palette::LIGHT).unwrap();
        for svg in [&config, &drift, &task] {
            assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{}", &svg[..80]);
        }
        assert!(config.contains("BERT-base / GPT-2 Small") && config.contains("d_model (log scale)"));
        assert!(drift.contains("least important first"));
        assert!(task.contains("quality (Spearman)"));
    }
}
