//! The attention-flow picture: a token-by-layer grid of what the sentence's pooled output draws
//! on (attention rollout's shares, [`crate::attention::rollout`]): its geometry, which the page
//! draws as SVG elements (never markup from text), and the same as an SVG document to download.
//! The output is the top row, the input the bottom one.

use std::ops::Range;

use super::colormap::viridis;
use super::in_view::ScrollView;
use super::svg::escape;
use crate::attention::rollout::{largest_change, FlowChange, Rollout};
use crate::attention::HeadSet;

/// Width of a token's column, in SVG pixels.
const COLUMN: usize = 46;
/// Height of a layer's row.
const ROW: usize = 22;
/// Width of the rows' labels on the left.
const LABELS: usize = 150;
/// Room under the grid for the tokens, written at a slant.
const TOKENS: usize = 56;

/// One row of the picture: its label and each token's share (summing to 1).
#[derive(Clone, Debug, PartialEq)]
pub struct FlowRow {
    /// "after layer 3", "input".
    pub label: String,
    /// Each token's share of what the pooled output draws on.
    pub shares: Vec<f64>,
}

/// A piece of text in the picture, at `(x, y)`.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowText {
    /// Anchor point, SVG pixels.
    pub x: usize,
    /// See `x`.
    pub y: usize,
    /// The text.
    pub text: String,
}

/// One token's cell in one row.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowCell {
    /// Top-left corner and size, SVG pixels.
    pub x: usize,
    /// See `x`.
    pub y: usize,
    /// See `x`.
    pub width: usize,
    /// See `x`.
    pub height: usize,
    /// Its colour, `#rrggbb`.
    pub fill: String,
    /// The share in percent, written in the cell, and where.
    pub label: FlowText,
    /// The label's colour: dark on the bright end of the map, white elsewhere.
    pub ink: &'static str,
    /// Its tooltip: "after layer 3, bank: 14.2 %".
    pub tip: String,
}

/// The picture's geometry, drawn by the page as SVG elements and written out by [`flow_svg`]:
/// a cell per token and row, coloured by its share (viridis, 0 to the largest share of the
/// picture) and labelled with it in percent; the rows' names on the left, the tokens under their
/// columns at a slant (rotated -35 degrees about their anchor).
#[derive(Clone, Debug, PartialEq)]
pub struct FlowLayout {
    /// Size, SVG pixels.
    pub width: usize,
    /// See `width`.
    pub height: usize,
    /// The document's title.
    pub title: String,
    /// Each row's name.
    pub rows: Vec<FlowText>,
    /// Every cell, row by row.
    pub cells: Vec<FlowCell>,
    /// Each token, under its column.
    pub tokens: Vec<FlowText>,
}

impl FlowLayout {
    /// The token columns to build for a scroll box at `view` across the picture
    /// ([`super::in_view`]): the rows' labels are always built, the cells and tokens only there.
    pub fn columns_in(&self, view: ScrollView) -> Range<usize> {
        view.items(LABELS as f64, COLUMN as f64, self.tokens.len())
    }

    /// Every row's cells in `columns`, row by row.
    pub fn cells_in(&self, columns: Range<usize>) -> impl Iterator<Item = &FlowCell> + '_ {
        let n = self.tokens.len();
        let columns = columns.start.min(n)..columns.end.min(n);
        self.cells.chunks(n.max(1)).flat_map(move |row| &row[columns.clone()])
    }
}

/// The layout of `rows` over `tokens`.
pub fn layout(tokens: &[impl AsRef<str>], rows: &[FlowRow], title: &str) -> FlowLayout {
    let n = tokens.len();
    assert!(rows.iter().all(|r| r.shares.len() == n), "one share per token in every row");
    let largest = rows.iter().flat_map(|r| r.shares.iter().copied()).fold(f64::MIN_POSITIVE, f64::max);
    let mut cells = Vec::with_capacity(rows.len() * n);
    for (r, row) in rows.iter().enumerate() {
        let y = r * ROW;
        for (t, &share) in row.shares.iter().enumerate() {
            let level = (share / largest).clamp(0.0, 1.0) as f32;
            let [red, green, blue] = viridis(level);
            let x = LABELS + t * COLUMN;
            cells.push(FlowCell {
                x,
                y,
                width: COLUMN - 2,
                height: ROW - 2,
                fill: format!("#{red:02x}{green:02x}{blue:02x}"),
                label: FlowText {
                    x: x + COLUMN / 2 - 1,
                    y: y + ROW / 2 + 3,
                    text: format!("{:.0}", share * 100.0),
                },
                ink: if level > 0.6 { "#000" } else { "#fff" },
                tip: format!("{}, {}: {:.1} %", row.label, tokens[t].as_ref(), share * 100.0),
            });
        }
    }
    let base = rows.len() * ROW + 6;
    FlowLayout {
        width: LABELS + n * COLUMN,
        height: rows.len() * ROW + TOKENS,
        title: title.to_string(),
        rows: rows
            .iter()
            .enumerate()
            .map(|(r, row)| FlowText { x: LABELS - 8, y: r * ROW + ROW / 2 + 4, text: row.label.clone() })
            .collect(),
        cells,
        tokens: tokens
            .iter()
            .enumerate()
            .map(|(t, token)| FlowText {
                x: LABELS + t * COLUMN + COLUMN / 2,
                y: base,
                text: shorten(token.as_ref()),
            })
            .collect(),
    }
}

/// `layout` as an SVG document (for download), its names and tokens in `text` colour.
pub fn flow_svg(layout: &FlowLayout, text: &str) -> String {
    let (width, height) = (layout.width, layout.height);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" \
         font-family=\"system-ui, sans-serif\" font-size=\"11\">\n<title>{}</title>\n",
        escape(&layout.title)
    );
    for row in &layout.rows {
        svg.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"{text}\">{}</text>\n",
            row.x,
            row.y,
            escape(&row.text)
        ));
    }
    for c in &layout.cells {
        svg.push_str(&format!(
            "<g><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text><title>{}</title></g>\n",
            c.x,
            c.y,
            c.width,
            c.height,
            c.fill,
            c.label.x,
            c.label.y,
            c.ink,
            escape(&c.label.text),
            escape(&c.tip)
        ));
    }
    for t in &layout.tokens {
        let (x, y) = (t.x, t.y);
        svg.push_str(&format!(
            "<text x=\"{x}\" y=\"{y}\" transform=\"rotate(-35 {x} {y})\" text-anchor=\"end\" dominant-baseline=\"hanging\" fill=\"{text}\">{}</text>\n",
            escape(&t.text)
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

/// A token cut to 12 characters, so that a long piece does not run under its neighbours.
fn shorten(token: &str) -> String {
    match token.char_indices().nth(12) {
        Some((cut, _)) => format!("{}…", &token[..cut]),
        None => token.to_string(),
    }
}

/// The picture's text alternative: for the top row, the tokens with the largest shares.
pub fn describe(tokens: &[impl AsRef<str>], top: &FlowRow, count: usize) -> String {
    let mut order: Vec<usize> = (0..tokens.len()).collect();
    order.sort_by(|&a, &b| top.shares[b].total_cmp(&top.shares[a]).then(a.cmp(&b)));
    let named: Vec<String> = order
        .iter()
        .take(count)
        .map(|&t| format!("\"{}\" {:.0} %", tokens[t].as_ref(), top.shares[t] * 100.0))
        .collect();
    format!("{}, the tokens it draws on most: {}.", top.label, named.join(", "))
}

/// The picture's rows for `rollout`: the last layer's on top ("sentence (after layer 6)"), each
/// layer below it, the input at the bottom. `layer_name(l)` names layer `l` (0-based).
pub fn flow_rows(rollout: &Rollout, layer_name: impl Fn(usize) -> String) -> Vec<FlowRow> {
    let layers = rollout.layers.len();
    let mut rows: Vec<FlowRow> = (0..layers)
        .rev()
        .map(|l| FlowRow { label: format!("after {}", layer_name(l)), shares: rollout.shares(l) })
        .collect();
    rows.push(FlowRow { label: "input".into(), shares: rollout.input_shares() });
    rows
}

/// What pruning `pruned` (of layers of `per_layer` heads) removed, for a sentence: "without
/// layer 1's heads" when whole layers are pruned and nothing else, else "with 7 heads pruned".
pub fn what_was_pruned(pruned: &HeadSet, per_layer: usize) -> String {
    let layers = pruned.len() / per_layer.max(1);
    let whole: Vec<usize> =
        (0..layers).filter(|&l| pruned.pruned_in_layer(l, per_layer).count() == per_layer).collect();
    if layers > 1 && !whole.is_empty() && whole.len() * per_layer == pruned.pruned_count() {
        let names: Vec<String> = whole.iter().map(|l| (l + 1).to_string()).collect();
        let list = match names.as_slice() {
            [one] => one.clone(),
            [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
            [] => unreachable!("whole is not empty"),
        };
        format!("without layer{} {list}'s heads", if whole.len() > 1 { "s" } else { "" })
    } else {
        let k = pruned.pruned_count();
        format!("with {k} head{} pruned", if k == 1 { "" } else { "s" })
    }
}

/// The sentence under the picture: how the largest change of the flow between two content
/// tokens reads ("Without layer 1's heads, "bank" draws on "river" less: 18 % -> 11 %.").
pub fn change_sentence(
    change: Option<FlowChange>,
    tokens: &[impl AsRef<str>],
    pruned: &HeadSet,
    per_layer: usize,
) -> String {
    if !pruned.any_pruned() {
        return "Prune heads to see how the flow changes: the sentence here will name the largest change."
            .into();
    }
    let what = what_was_pruned(pruned, per_layer);
    let mut what_cap = what.clone();
    if let Some(first) = what_cap.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    match change {
        None => format!("{what_cap}, no token draws on another differently."),
        Some(c) => format!(
            "{what_cap}, \"{}\" draws on \"{}\" {}: {:.1} % → {:.1} % of its representation after the last layer.",
            tokens[c.token].as_ref(),
            tokens[c.from].as_ref(),
            if c.after < c.before { "less" } else { "more" },
            c.before * 100.0,
            c.after * 100.0
        ),
    }
}

/// Everything the page shows of the flow: the picture, its text alternative, and what changed.
#[derive(Clone, Debug, PartialEq)]
pub struct Picture {
    /// The picture's geometry.
    pub layout: FlowLayout,
    /// Its text alternative.
    pub description: String,
    /// How pruning changed it.
    pub sentence: String,
}

/// The flow picture of `pruned` (the rollout with the reader's heads), and how it differs from
/// `full` (every head), for `tokens`; `content[t]` marks the tokens a change may name.
pub fn picture(
    tokens: &[impl AsRef<str>],
    content: &[bool],
    (full, pruned): (&Rollout, &Rollout),
    heads: &HeadSet,
    per_layer: usize,
    layer_name: impl Fn(usize) -> String,
) -> Picture {
    let rows = flow_rows(pruned, layer_name);
    let title = format!(
        "Attention flow to the output, {}",
        if heads.any_pruned() { what_was_pruned(heads, per_layer) } else { "every head active".into() }
    );
    let change = largest_change(full, pruned, content);
    Picture {
        layout: layout(tokens, &rows, &title),
        description: format!("{title}. {}", describe(tokens, &rows[0], 3)),
        sentence: change_sentence(change, tokens, heads, per_layer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<FlowRow> {
        vec![
            FlowRow { label: "after layer 1".into(), shares: vec![0.5, 0.3, 0.2] },
            FlowRow { label: "input".into(), shares: vec![1.0 / 3.0; 3] },
        ]
    }

    #[test]
    fn a_scroll_box_builds_the_columns_it_shows_in_every_row() {
        let tokens: Vec<String> = (0..512).map(|t| format!("t{t}")).collect();
        let rows: Vec<FlowRow> = (0..3)
            .map(|r| FlowRow {
                label: format!("row {r}"),
                shares: (0..512).map(|t| (t + r) as f64).collect(),
            })
            .collect();
        let picture = layout(&tokens, &rows, "wide");
        // Scrolled to token 200's column, a box 1 100 px wide: columns 200 to 223 are shown.
        let view = ScrollView { offset: (LABELS + 200 * COLUMN) as f64, extent: 1100.0 };
        let columns = picture.columns_in(view);
        assert!(columns.start <= 200 && 224 <= columns.end && columns.len() < 100, "{columns:?}");
        let cells: Vec<&FlowCell> = picture.cells_in(columns.clone()).collect();
        assert_eq!(cells.len(), 3 * columns.len());
        for (i, cell) in cells.iter().enumerate() {
            let (r, t) = (i / columns.len(), columns.start + i % columns.len());
            assert_eq!(**cell, picture.cells[r * 512 + t]);
            assert!(cell.tip.starts_with(&format!("row {r}, t{t}:")), "{}", cell.tip);
        }
        // A range past the end is cut to the picture; no tokens, no cells.
        assert_eq!(picture.cells_in(500..900).count(), 3 * 12);
        let empty = layout(&[] as &[&str], &[FlowRow { label: "input".into(), shares: vec![] }], "none");
        assert_eq!(empty.cells_in(0..8).count(), 0);
        assert_eq!(empty.columns_in(ScrollView::at_start(800.0)), 0..0);
    }

    #[test]
    fn the_picture_is_one_cell_per_token_and_row_with_its_share() {
        let tokens = ["[CLS]", "<bank>", "a-very-long-wordpiece-token"];
        let svg = flow_svg(&layout(&tokens, &rows(), "flow & co"), "#111");
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<rect ").count(), 6);
        assert!(svg.contains("<title>after layer 1, &lt;bank&gt;: 30.0 %</title>"), "{svg}");
        assert!(svg.contains("<title>flow &amp; co</title>"));
        assert!(!svg.contains("<bank>"), "text is escaped");
        // The largest share is viridis' bright end, with dark ink on it.
        assert!(
            svg.contains(
                "fill=\"#fde725\"/><text x=\"172\" y=\"14\" text-anchor=\"middle\" fill=\"#000\">50</text>"
            ),
            "{svg}"
        );
        assert!(svg.contains("a-very-long-…"), "long tokens are cut");
        let width = LABELS + 3 * COLUMN;
        assert!(svg.contains(&format!("width=\"{width}\"")));
    }

    #[test]
    fn rows_run_from_the_last_layer_down_to_the_input_and_the_sentence_names_the_change() {
        let weights = [0.9f32, 0.1, 0.2, 0.8];
        let r = crate::attention::rollout::rollout(&[&weights, &weights], 1, 2, &HeadSet::all(2));
        let rows = flow_rows(&r, |l| format!("layer {}", l + 1));
        let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["after layer 2", "after layer 1", "input"]);
        assert_eq!(rows[2].shares, vec![0.5, 0.5]);
        let per_layer = 12;
        assert_eq!(what_was_pruned(&HeadSet::with_pruned(72, 0..12), per_layer), "without layer 1's heads");
        assert_eq!(
            what_was_pruned(&HeadSet::with_pruned(72, (0..12).chain(36..48)), per_layer),
            "without layers 1 and 4's heads"
        );
        assert_eq!(what_was_pruned(&HeadSet::with_pruned(72, 0..13), per_layer), "with 13 heads pruned");
        assert_eq!(what_was_pruned(&HeadSet::with_pruned(12, 0..12), per_layer), "with 12 heads pruned");
        let change = FlowChange { token: 1, from: 2, before: 0.18, after: 0.11 };
        let tokens = ["[CLS]", "bank", "river"];
        assert_eq!(
            change_sentence(Some(change), &tokens, &HeadSet::with_pruned(72, 0..12), per_layer),
            "Without layer 1's heads, \"bank\" draws on \"river\" less: 18.0 % → 11.0 % of its representation after the last layer."
        );
        assert!(change_sentence(None, &tokens, &HeadSet::all(72), per_layer).starts_with("Prune heads"));
        assert!(change_sentence(None, &tokens, &HeadSet::with_pruned(72, [3]), per_layer)
            .starts_with("With 1 head pruned, no token"));
    }

    #[test]
    fn the_text_alternative_names_the_largest_shares_first() {
        let text = describe(&["[CLS]", "bank", "river"], &rows()[0], 2);
        assert_eq!(text, "after layer 1, the tokens it draws on most: \"[CLS]\" 50 %, \"bank\" 30 %.");
    }
}
