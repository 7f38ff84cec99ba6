//! What a reader can take away: CSV tables of attention weights, head importance and drift.
//!
//! Pure text building, tested natively; the page turns the text into a download. Token text
//! comes from the reader, so every text cell is quoted, and a cell that a spreadsheet would run as
//! a formula (leading `=`, `+`, `-`, `@`, tab or carriage return) is prefixed with `'`.

use std::fmt::{self, Write};

use crate::attention::atlas::Atlas;
use crate::attention::importance::Ranking;
use crate::attention::{Drift, HeadSet};

/// Most attention weights one CSV holds (about 40 MB of text); larger runs are refused.
pub const MAX_CSV_WEIGHTS: usize = 1 << 20;

/// Why a table cannot be exported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExportError {
    /// More weights than [`MAX_CSV_WEIGHTS`].
    TooLarge {
        /// Weights in the run.
        weights: usize,
    },
    /// The weights do not have the shape the tokens imply.
    Shape {
        /// Values given.
        len: usize,
        /// Heads times tokens squared.
        expected: usize,
    },
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExportError::TooLarge { weights } => write!(
                f,
                "{weights} attention weights are too many for one CSV (at most {MAX_CSV_WEIGHTS}); \
                 use fewer tokens or heads"
            ),
            ExportError::Shape { len, expected } => {
                write!(f, "{len} attention weights given where the tokens imply {expected}")
            }
        }
    }
}

impl std::error::Error for ExportError {}

/// One quoted text cell, safe to open in a spreadsheet.
fn text_cell(s: &str) -> String {
    let guard = if s.starts_with(['=', '+', '-', '@', '\t', '\r']) { "'" } else { "" };
    format!("\"{guard}{}\"", s.replace('"', "\"\""))
}

/// `head,query,query_token,key,key_token,weight`: one row per weight of `num_heads` matrices of
/// `tokens.len()` squared, stored head-major then row-major (as [`crate::cpu::Forward`] keeps them).
pub fn attention_csv<S: AsRef<str>>(
    tokens: &[S],
    num_heads: usize,
    attention: &[f32],
) -> Result<String, ExportError> {
    let n = tokens.len();
    let expected = num_heads.saturating_mul(n).saturating_mul(n);
    if expected > MAX_CSV_WEIGHTS {
        return Err(ExportError::TooLarge { weights: expected });
    }
    if attention.len() != expected {
        return Err(ExportError::Shape { len: attention.len(), expected });
    }
    let cells: Vec<String> = tokens.iter().map(|t| text_cell(t.as_ref())).collect();
    let mut out = String::from("head,query,query_token,key,key_token,weight\n");
    for (i, w) in attention.iter().enumerate() {
        let (h, q, k) = (i / (n * n), i / n % n, i % n);
        // `{}` prints the shortest text that reads back as the same f32.
        let _ = writeln!(out, "{h},{q},{},{k},{},{w}", cells[q], cells[k]);
    }
    Ok(out)
}

/// `head,<measure>,rank,pruned`: each head's importance by the measure named `measure` (for the
/// synthetic layer `importance_rel_l2`, how far removing it alone moves the output), its rank
/// (1 = most important) and whether it is pruned now in `heads` (heads it does not have are not
/// pruned).
pub fn importance_csv(ranking: &Ranking, heads: &HeadSet, measure: &str) -> String {
    let mut out = format!("head,{measure},rank,pruned\n");
    for (h, value) in ranking.per_head.iter().enumerate() {
        let rank = ranking.rank(h).unwrap_or(0);
        let _ = writeln!(out, "{h},{value},{rank},{}", h < heads.len() && heads.is_pruned(h));
    }
    out
}

/// `head,layer,head_in_layer,<measure>,rank,pruned`: [`importance_csv`] for a model of several
/// layers of `per_layer` heads, each head also named by its layer (from 1, as the page labels
/// layers) and its index in the layer (from 0).
pub fn layered_importance_csv(ranking: &Ranking, heads: &HeadSet, measure: &str, per_layer: usize) -> String {
    let per_layer = per_layer.max(1);
    let mut out = format!("head,layer,head_in_layer,{measure},rank,pruned\n");
    for (h, value) in ranking.per_head.iter().enumerate() {
        let rank = ranking.rank(h).unwrap_or(0);
        let pruned = h < heads.len() && heads.is_pruned(h);
        let _ = writeln!(out, "{h},{},{},{value},{rank},{pruned}", h / per_layer + 1, h % per_layer);
    }
    out
}

/// `head,layer,head_in_layer,metric,restored,lost`: every head's activation-patching effect (the
/// share of the clean-minus-corrupted gap of `metric` its clean output restores in the corrupted
/// run) and its ablation effect (the share lost when it is removed from the clean run); the two
/// runs' values (`runs`: clean, corrupted) on the first two lines, as comments.
pub fn patching_csv(
    metric: &str,
    runs: (f64, f64),
    restored: &[f64],
    lost: &[f64],
    per_layer: usize,
) -> String {
    let per_layer = per_layer.max(1);
    let mut out = format!(
        "# clean {metric} {}\n# corrupted {metric} {}\nhead,layer,head_in_layer,metric,restored,lost\n",
        runs.0, runs.1
    );
    for (h, (restored, lost)) in restored.iter().zip(lost).enumerate() {
        let _ = writeln!(out, "{h},{},{},{metric},{restored},{lost}", h / per_layer + 1, h % per_layer);
    }
    out
}

/// `head,layer,head_in_layer,cluster,L1H0,...`: the head atlas, a row and a column per head in
/// the atlas's order (alike heads side by side), each row with its cluster (from 1, as cut into
/// `clusters`) and its mean Jensen-Shannon divergence (bits) to every head.
pub fn atlas_csv(atlas: &Atlas, clusters: &[usize], per_layer: usize) -> String {
    let per_layer = per_layer.max(1);
    let name = |h: usize| format!("L{}H{}", h / per_layer + 1, h % per_layer);
    let order = &atlas.tree.order;
    let mut out = String::from("head,layer,head_in_layer,cluster");
    order.iter().for_each(|&h| out.push_str(&format!(",{}", name(h))));
    out.push('\n');
    for &a in order {
        let cluster = clusters.get(a).map_or(0, |c| c + 1);
        let _ = write!(out, "{a},{},{},{cluster}", a / per_layer + 1, a % per_layer);
        order.iter().for_each(|&b| out.push_str(&format!(",{}", atlas.distances.get(a, b))));
        out.push('\n');
    }
    out
}

/// `heads_pruned,least_important_first_rel_l2,random_mean_rel_l2`: the drift curve, k = 0..=heads.
pub fn drift_curve_csv(ranked: &[f64], random: &[f64]) -> String {
    let mut out = String::from("heads_pruned,least_important_first_rel_l2,random_mean_rel_l2\n");
    for k in 0..ranked.len().max(random.len()) {
        let cell = |v: Option<&f64>| v.map(ToString::to_string).unwrap_or_default();
        let _ = writeln!(out, "{k},{},{}", cell(ranked.get(k)), cell(random.get(k)));
    }
    out
}

/// `heads_pruned,iterative,one_shot,random_mean,random_min,random_max,iterative_lo,iterative_hi,
/// one_shot_lo,one_shot_hi`: the task-quality curves and the iterative and one-shot orders' 95 %
/// intervals (`bands`, as `(k, lo, hi)`), a row for every number of heads pruned any of them
/// measured (empty where one did not).
pub fn curves_csv(
    iterative: &[(usize, f64)],
    one_shot: &[(usize, f64)],
    random: &[(usize, f64, f64, f64)],
    bands: &[Vec<(usize, f64, f64)>; 2],
) -> String {
    let mut ks: Vec<usize> =
        iterative.iter().chain(one_shot).map(|p| p.0).chain(random.iter().map(|r| r.0)).collect();
    ks.sort_unstable();
    ks.dedup();
    let find =
        |v: &[(usize, f64)], k| v.iter().find(|p| p.0 == k).map(|p| p.1.to_string()).unwrap_or_default();
    let interval = |b: &[(usize, f64, f64)], k| {
        b.iter().find(|b| b.0 == k).map(|b| format!("{},{}", b.1, b.2)).unwrap_or_else(|| ",".into())
    };
    let mut out = String::from(
        "heads_pruned,iterative,one_shot,random_mean,random_min,random_max,iterative_lo,iterative_hi,one_shot_lo,one_shot_hi\n",
    );
    for k in ks {
        let r = random.iter().find(|r| r.0 == k);
        let band = r.map(|r| format!("{},{},{}", r.1, r.2, r.3)).unwrap_or_else(|| ",,".into());
        let (it, os) = (interval(&bands[0], k), interval(&bands[1], k));
        let _ = writeln!(out, "{k},{},{},{band},{it},{os}", find(iterative, k), find(one_shot, k));
    }
    out
}

/// `token,position,cosine,rel_l2`: the drift of each token under the current pruning, then the
/// whole sequence as the row `all`.
pub fn token_drift_csv<S: AsRef<str>>(tokens: &[S], drift: &Drift) -> String {
    let mut out = String::from("token,position,cosine,rel_l2\n");
    for (i, d) in drift.per_token.iter().enumerate() {
        let word = tokens.get(i).map_or("", |t| t.as_ref());
        let _ = writeln!(out, "{},{i},{},{}", text_cell(word), d.cosine, d.rel_l2);
    }
    let _ = writeln!(out, "\"all\",,{},{}", drift.overall.cosine, drift.overall.rel_l2);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::prune::TokenDrift;

    /// Splits CSV text into rows of cells, honouring quotes.
    fn parse(csv: &str) -> Vec<Vec<String>> {
        let mut rows = vec![];
        let (mut row, mut cell, mut quoted) = (vec![], String::new(), false);
        let mut chars = csv.chars().peekable();
        while let Some(c) = chars.next() {
            match (c, quoted) {
                ('"', true) if chars.peek() == Some(&'"') => {
                    cell.push('"');
                    chars.next();
                }
                ('"', _) => quoted = !quoted,
                (',', false) => row.push(std::mem::take(&mut cell)),
                ('\n', false) => {
                    row.push(std::mem::take(&mut cell));
                    rows.push(std::mem::take(&mut row));
                }
                (c, _) => cell.push(c),
            }
        }
        rows
    }

    #[test]
    fn the_atlas_reads_back_square_in_its_order_with_clusters() {
        use crate::attention::atlas::Distances;
        let d = Distances::from_rows(3, vec![0.0, 0.5, 0.1, 0.5, 0.0, 0.4, 0.1, 0.4, 0.0]);
        let tree = d.cluster();
        let atlas = Atlas { distances: d, tree, rows: 9 };
        let clusters = atlas.tree.clusters(2);
        let rows = parse(&atlas_csv(&atlas, &clusters, 2));
        // Heads 0 and 2 are alike, so side by side.
        assert_eq!(atlas.tree.order, vec![0, 2, 1]);
        assert_eq!(rows[0], ["head", "layer", "head_in_layer", "cluster", "L1H0", "L2H0", "L1H1"]);
        assert_eq!(rows[1], ["0", "1", "0", "1", "0", "0.1", "0.5"]);
        assert_eq!(rows[3], ["1", "1", "1", "2", "0.5", "0.4", "0"]);
        assert_eq!(rows.len(), 4);
    }

    #[test]
    fn patching_rows_read_back_with_their_heads_and_exact_shares() {
        let (restored, lost) = ([0.25, -0.125, 1.0 / 3.0, 0.0, 0.5], [0.5, 0.0, -0.75, 1.0, 0.1]);
        let csv = patching_csv("margin", (0.023, -0.4), &restored, &lost, 2);
        assert!(csv.starts_with("# clean margin 0.023\n# corrupted margin -0.4\n"), "{csv}");
        let rows = parse(csv.lines().skip(2).map(|l| format!("{l}\n")).collect::<String>().as_str());
        assert_eq!(rows[0], ["head", "layer", "head_in_layer", "metric", "restored", "lost"]);
        assert_eq!(rows.len(), 1 + 5);
        for (h, row) in rows[1..].iter().enumerate() {
            assert_eq!(
                row[..4],
                [h.to_string(), (h / 2 + 1).to_string(), (h % 2).to_string(), "margin".into()]
            );
            assert_eq!(
                (row[4].parse::<f64>().unwrap(), row[5].parse::<f64>().unwrap()),
                (restored[h], lost[h])
            );
        }
    }

    #[test]
    fn attention_rows_read_back_with_their_tokens_and_exact_weights() {
        let tokens = ["the", "a,b", "say \"hi\"", "=SUM(A1)"];
        let attention: Vec<f32> = (0..2 * 16).map(|i| i as f32 / 7.0).collect();
        let rows = parse(&attention_csv(&tokens, 2, &attention).unwrap());
        assert_eq!(rows.len(), 1 + 32);
        assert_eq!(rows[0], ["head", "query", "query_token", "key", "key_token", "weight"]);
        for (i, row) in rows[1..].iter().enumerate() {
            let (h, q, k) = (i / 16, i / 4 % 4, i % 4);
            assert_eq!(row[..2], [h.to_string(), q.to_string()]);
            assert_eq!(row[3], k.to_string());
            assert_eq!(row[5].parse::<f32>().unwrap(), attention[i], "row {i}");
        }
        assert_eq!(rows[1 + 6][2], "a,b");
        assert_eq!(rows[1 + 6][4], "say \"hi\"");
        assert_eq!(rows[1 + 15][4], "'=SUM(A1)", "formula-like text is defused");
    }

    #[test]
    fn attention_export_refuses_wrong_shapes_and_huge_runs() {
        assert_eq!(
            attention_csv(&["x"; 3], 2, &[0.0; 17]),
            Err(ExportError::Shape { len: 17, expected: 18 })
        );
        let big = attention_csv(&["x"; 1024], 256, &[]).unwrap_err();
        assert!(big.to_string().contains("too many"), "{big}");
        assert_eq!(
            attention_csv::<&str>(&[], 12, &[]).unwrap(),
            "head,query,query_token,key,key_token,weight\n"
        );
    }

    #[test]
    fn importance_drift_and_token_tables_hold_every_value() {
        let ranking = Ranking::new(vec![0.3, 0.1, 0.2]);
        let csv = importance_csv(&ranking, &HeadSet::with_pruned(3, [1]), "importance_rel_l2");
        assert!(csv.starts_with("head,importance_rel_l2,rank,pruned\n"));
        let rows = parse(&csv);
        assert_eq!(
            rows[1..],
            [["0", "0.3", "1", "false"], ["1", "0.1", "3", "true"], ["2", "0.2", "2", "false"]]
        );
        // Two layers of two heads: each head named by its layer too.
        let layered = Ranking::new(vec![0.3, 0.1, 0.2, 0.4]);
        let csv = layered_importance_csv(&layered, &HeadSet::with_pruned(4, [2]), "m", 2);
        assert_eq!(
            parse(&csv),
            [
                ["head", "layer", "head_in_layer", "m", "rank", "pruned"],
                ["0", "1", "0", "0.3", "2", "false"],
                ["1", "1", "1", "0.1", "4", "false"],
                ["2", "2", "0", "0.2", "3", "true"],
                ["3", "2", "1", "0.4", "1", "false"]
            ]
        );
        let rows = parse(&drift_curve_csv(&[0.0, 0.5], &[0.0, 0.6, 1.0]));
        assert_eq!(rows[1..], [["0", "0", "0"], ["1", "0.5", "0.6"], ["2", "", "1"]]);
        let rows = parse(&curves_csv(
            &[(0, 0.8), (6, 0.81)],
            &[(0, 0.8)],
            &[(0, 0.8, 0.8, 0.8), (3, 0.7, 0.6, 0.75)],
            &[vec![(0, 0.75, 0.85), (6, 0.76, 0.86)], vec![]],
        ));
        assert_eq!(
            rows[0],
            [
                "heads_pruned",
                "iterative",
                "one_shot",
                "random_mean",
                "random_min",
                "random_max",
                "iterative_lo",
                "iterative_hi",
                "one_shot_lo",
                "one_shot_hi"
            ]
        );
        assert_eq!(
            rows[1..],
            [
                ["0", "0.8", "0.8", "0.8", "0.8", "0.8", "0.75", "0.85", "", ""],
                ["3", "", "", "0.7", "0.6", "0.75", "", "", "", ""],
                ["6", "0.81", "", "", "", "", "0.76", "0.86", "", ""]
            ]
        );
        let d = TokenDrift { cosine: 0.9, rel_l2: 0.25 };
        let drift = Drift { per_token: vec![d, d], overall: d };
        let rows = parse(&token_drift_csv(&["-x", "y"], &drift));
        assert_eq!(
            rows[1..],
            [["'-x", "0", "0.9", "0.25"], ["y", "1", "0.9", "0.25"], ["all", "", "0.9", "0.25"]]
        );
    }
}
