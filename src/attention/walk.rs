//! The seed's `efficient_multihead_attention`, line by line, on a configuration's own tensors: for
//! each line, the shape of what it makes (with the configuration's numbers) and a small slice of
//! its values for one head and one token, as the page's code walk shows them.
//!
//! Only what is shown is computed, in f64, from the inputs and the weights (stored or generated):
//! the focused head's Q, K and V for every token (`3 n d d_k` products, 75 M for GPT-3 at 16
//! tokens), its scores and weights for the focused token, its output. The last line needs every
//! head's output for the token; it takes them from the backend's pass (`concat`), so the walk
//! also tells how far that pass agrees with the walk's own head.

use super::config::ModelConfig;
use super::synthetic::LayerWeights;

/// Values shown per line: the first ones of the slice.
pub const SLICE: usize = 6;

/// A line of the seed's function that makes a tensor (the signature and docstring are skipped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    /// `batch, seq_len, d_model = x.shape`
    Input,
    /// `d_k = d_model // num_heads`
    HeadWidth,
    /// `qkv = x @ W_qkv`
    Project,
    /// `qkv = qkv.reshape(batch, seq_len, 3, num_heads, d_k)`
    Reshape,
    /// `qkv = qkv.transpose(2, 0, 3, 1, 4)`
    Transpose,
    /// `Q, K, V = qkv[0], qkv[1], qkv[2]`
    Unpack,
    /// `scores = (Q @ K.transpose(0, 1, 3, 2)) / np.sqrt(d_k)`
    Scores,
    /// `weights = softmax(scores)`
    Softmax,
    /// `attn_output = weights @ V`
    Weighted,
    /// `output = attn_output.transpose(0, 2, 1, 3).reshape(batch, seq_len, d_model)`
    Merge,
    /// `return output @ W_o`
    Output,
}

impl Line {
    /// Every line, in the function's order.
    pub const ALL: [Line; 11] = [
        Line::Input,
        Line::HeadWidth,
        Line::Project,
        Line::Reshape,
        Line::Transpose,
        Line::Unpack,
        Line::Scores,
        Line::Softmax,
        Line::Weighted,
        Line::Merge,
        Line::Output,
    ];

    /// The line as the seed writes it.
    pub fn code(self) -> &'static str {
        match self {
            Line::Input => "batch, seq_len, d_model = x.shape",
            Line::HeadWidth => "d_k = d_model // num_heads",
            Line::Project => "qkv = x @ W_qkv",
            Line::Reshape => "qkv = qkv.reshape(batch, seq_len, 3, num_heads, d_k)",
            Line::Transpose => "qkv = qkv.transpose(2, 0, 3, 1, 4)",
            Line::Unpack => "Q, K, V = qkv[0], qkv[1], qkv[2]",
            Line::Scores => "scores = (Q @ K.transpose(0, 1, 3, 2)) / np.sqrt(d_k)",
            Line::Softmax => "weights = softmax(scores)",
            Line::Weighted => "attn_output = weights @ V",
            Line::Merge => "output = attn_output.transpose(0, 2, 1, 3).reshape(batch, seq_len, d_model)",
            Line::Output => "return output @ W_o",
        }
    }

    /// The names of the dimensions of the tensor the line makes (empty for a number).
    pub fn dims(self) -> &'static [&'static str] {
        match self {
            Line::Input | Line::Merge | Line::Output => &["batch", "seq_len", "d_model"],
            Line::HeadWidth => &[],
            Line::Project => &["batch", "seq_len", "3*d_model"],
            Line::Reshape => &["batch", "seq_len", "3", "num_heads", "d_k"],
            Line::Transpose => &["3", "batch", "num_heads", "seq_len", "d_k"],
            Line::Unpack | Line::Weighted => &["batch", "num_heads", "seq_len", "d_k"],
            Line::Scores | Line::Softmax => &["batch", "num_heads", "seq_len", "seq_len"],
        }
    }

    /// What the line does, in a sentence for the page.
    pub fn explains(self) -> &'static str {
        match self {
            Line::Input => "The input: one sequence of token vectors.",
            Line::HeadWidth => "Each head gets an equal slice of the width.",
            Line::Project => "One matrix product makes Q, K and V for every head at once: the batching.",
            Line::Reshape => "No arithmetic: the same numbers, now indexed by Q/K/V, head and column.",
            Line::Transpose => {
                "Still no arithmetic: heads move in front of tokens, so each head is a batch entry."
            }
            Line::Unpack => "Three views of the same buffer; the head's query row is the same numbers again.",
            Line::Scores => "Every head's query-key products in one batched product, scaled by 1/sqrt(d_k).",
            Line::Softmax => {
                "Each row becomes weights that sum to 1: how much this token reads from each of the others."
            }
            Line::Weighted => "Each head mixes the value vectors with its weights.",
            Line::Merge => "The heads side by side again: head h fills columns h*d_k to (h+1)*d_k.",
            Line::Output => "One product takes the concatenated heads back to d_model.",
        }
    }
}

/// Which head and token the slices follow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Focus {
    /// The head, `< num_heads`.
    pub head: usize,
    /// The token (query position), `< seq_len`.
    pub token: usize,
}

impl Focus {
    /// This focus moved inside `config` (a head or token past the end becomes the last one).
    pub fn clamped(self, config: &ModelConfig) -> Focus {
        Focus {
            head: self.head.min(config.num_heads.saturating_sub(1)),
            token: self.token.min(config.seq_len.saturating_sub(1)),
        }
    }
}

/// One line on live tensors.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The line.
    pub line: Line,
    /// The shape of the tensor it makes, with this configuration's numbers (empty for a number).
    pub shape: Vec<usize>,
    /// Where the slice comes from, in numpy notation: `qkv[0, 3, 0, 2, :6]`.
    pub slice: String,
    /// The slice's first values.
    pub values: Vec<f64>,
}

impl Step {
    /// The shape as numpy prints it: `(1, 16, 3, 12, 64)`, or the number for `d_k`.
    pub fn shape_text(&self) -> String {
        match self.shape.as_slice() {
            [] => String::new(),
            [one] => format!("({one},)"),
            dims => format!("({})", dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
        }
    }
}

/// The whole walk, and how it compares with the backend's pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Walk {
    /// The configuration walked.
    pub config: ModelConfig,
    /// The head and token followed.
    pub focus: Focus,
    /// One step per [`Line`], in order.
    pub steps: Vec<Step>,
    /// Largest difference between the walk's f64 output of the focused head for the token and
    /// the backend's (f32), relative to the largest value.
    pub backend_difference: f64,
}

/// Element `(i, j)` of `W_qkv` (`which` = 0, 1, 2 for Q, K, V; `j` within it) and of `W_o`.
fn w_qkv(weights: &LayerWeights, d: usize, i: usize, j: usize) -> f64 {
    match weights {
        LayerWeights::Stored(w) => w.w_qkv[i * 3 * d + j] as f64,
        LayerWeights::Generated(g) => g.w_qkv().at(i, j) as f64,
    }
}

fn w_o(weights: &LayerWeights, d: usize, i: usize, j: usize) -> f64 {
    match weights {
        LayerWeights::Stored(w) => w.w_o[i * d + j] as f64,
        LayerWeights::Generated(g) => g.w_o().at(i, j) as f64,
    }
}

/// The focused head's scores, weights and output for the focused token.
struct HeadRow {
    q: Vec<f64>,
    scores: Vec<f64>,
    weights: Vec<f64>,
    output: Vec<f64>,
}

/// Multiply-adds of one walk: the focused token's query, `W_k q` and the weighted values'
/// projection (`d x d_k` each), every key's score and the weighted mean of the inputs (`n x d`
/// each), and the output slice.
pub fn walk_cost(config: &ModelConfig) -> u64 {
    let (n, d, d_k) = (config.seq_len as u64, config.d_model as u64, config.d_k() as u64);
    3 * d * d_k + 2 * n * d + SLICE as u64 * d
}

/// The most a walk does at once on the page's thread ([`walk_cost`]): about 100 ms in wasm
/// with weights generated from the seed. A wider head is not walked: the page says why.
pub const WALK_MAX_COST: u64 = 24 << 20;

/// Head `focus.head`'s row for `focus.token`, in f64, without the `n x d_k` keys and values:
/// a key's score `x_j W_k . q` is `x_j . (W_k q)`, and the weighted sum of values
/// `sum_j w_j x_j W_v` is `(sum_j w_j x_j) W_v`, so the walk costs `O(d d_k + n d)`.
fn head_row(config: &ModelConfig, x: &[f32], weights: &LayerWeights, focus: Focus) -> HeadRow {
    let (n, d, d_k) = (config.seq_len, config.d_model, config.d_k());
    let col = |which: usize, c: usize| which * d + focus.head * d_k + c;
    let x_t = &x[focus.token * d..(focus.token + 1) * d];
    let q: Vec<f64> =
        (0..d_k).map(|c| (0..d).map(|k| x_t[k] as f64 * w_qkv(weights, d, k, col(0, c))).sum()).collect();
    let w_k_q: Vec<f64> =
        (0..d).map(|k| (0..d_k).map(|c| w_qkv(weights, d, k, col(1, c)) * q[c]).sum()).collect();
    let scale = 1.0 / (d_k as f64).sqrt();
    let scores: Vec<f64> = x
        .chunks_exact(d)
        .map(|x_j| x_j.iter().zip(&w_k_q).map(|(&a, b)| a as f64 * b).sum::<f64>() * scale)
        .collect();
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
    let sum: f64 = exps.iter().sum();
    let weights_row: Vec<f64> = exps.iter().map(|e| e / sum).collect();
    let mut mean = vec![0.0f64; d];
    for (x_j, &w) in x.chunks_exact(d).zip(&weights_row).take(n) {
        mean.iter_mut().zip(x_j).for_each(|(m, &v)| *m += w * v as f64);
    }
    let output = (0..d_k).map(|c| (0..d).map(|k| mean[k] * w_qkv(weights, d, k, col(2, c))).sum()).collect();
    HeadRow { q, scores, weights: weights_row, output }
}

/// The walk of `config` on `x` with `weights`, following `focus` (clamped into the shape).
/// `concat` is the backend's `n x d` concatenation of every head's output, which the last line
/// multiplies by `W_o`. The configuration must be valid.
pub fn walk(config: &ModelConfig, x: &[f32], weights: &LayerWeights, focus: Focus, concat: &[f32]) -> Walk {
    let (n, d, h, d_k) = (config.seq_len, config.d_model, config.num_heads, config.d_k());
    assert_eq!(x.len(), n * d, "x must be seq_len x d_model");
    assert_eq!(concat.len(), n * d, "concat must be seq_len x d_model");
    let focus = focus.clamped(config);
    let (t, hd) = (focus.token, focus.head);
    let row = head_row(config, x, weights, focus);
    let first = |v: &[f64]| v[..v.len().min(SLICE)].to_vec();
    let cols = format!(":{}", SLICE.min(d_k));
    let keys = format!(":{}", SLICE.min(n));
    let start = hd * d_k;
    let concat_row = &concat[t * d..(t + 1) * d];
    let output: Vec<f64> = (0..SLICE.min(d))
        .map(|j| concat_row.iter().enumerate().map(|(c, &v)| v as f64 * w_o(weights, d, c, j)).sum())
        .collect();
    let backend_head = &concat_row[start..start + d_k];
    let scale = row.output.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(f64::MIN_POSITIVE);
    let backend_difference =
        row.output.iter().zip(backend_head).map(|(a, &b)| (a - b as f64).abs()).fold(0.0, f64::max) / scale;
    let x_row: Vec<f64> = x[t * d..t * d + SLICE.min(d)].iter().map(|&v| v as f64).collect();
    let step = |line, shape: Vec<usize>, slice: String, values: Vec<f64>| Step { line, shape, slice, values };
    let steps = vec![
        step(Line::Input, vec![1, n, d], format!("x[0, {t}, :{}]", SLICE.min(d)), x_row),
        step(Line::HeadWidth, vec![], format!("{d} // {h}"), vec![d_k as f64]),
        step(
            Line::Project,
            vec![1, n, 3 * d],
            format!("qkv[0, {t}, {start}:{}]", start + SLICE.min(d_k)),
            first(&row.q),
        ),
        step(Line::Reshape, vec![1, n, 3, h, d_k], format!("qkv[0, {t}, 0, {hd}, {cols}]"), first(&row.q)),
        step(Line::Transpose, vec![3, 1, h, n, d_k], format!("qkv[0, 0, {hd}, {t}, {cols}]"), first(&row.q)),
        step(Line::Unpack, vec![1, h, n, d_k], format!("Q[0, {hd}, {t}, {cols}]"), first(&row.q)),
        step(Line::Scores, vec![1, h, n, n], format!("scores[0, {hd}, {t}, {keys}]"), first(&row.scores)),
        step(Line::Softmax, vec![1, h, n, n], format!("weights[0, {hd}, {t}, {keys}]"), first(&row.weights)),
        step(
            Line::Weighted,
            vec![1, h, n, d_k],
            format!("attn_output[0, {hd}, {t}, {cols}]"),
            first(&row.output),
        ),
        step(
            Line::Merge,
            vec![1, n, d],
            format!("output[0, {t}, {start}:{}]", start + SLICE.min(d_k)),
            first(&row.output),
        ),
        step(Line::Output, vec![1, n, d], format!("(output @ W_o)[0, {t}, :{}]", SLICE.min(d)), output),
    ];
    Walk { config: *config, focus, steps, backend_difference }
}

/// A walk's weights row for the focused token sums to 1 over all `n` keys; the page says so
/// beside the slice, which shows only the first few. Returned for the softmax line.
pub fn weights_row(config: &ModelConfig, x: &[f32], weights: &LayerWeights, focus: Focus) -> Vec<f64> {
    head_row(config, x, weights, focus.clamped(config)).weights
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::oracle::multihead_attention;
    use crate::attention::synthetic::{GeneratedWeights, Inputs, Weights};
    use crate::attention::HeadSet;

    /// `x @ W_qkv` in f64, and the concatenation of head outputs the oracle does not return,
    /// rebuilt from its weights: what a backend's pass hands the last line.
    fn qkv_and_concat(
        config: &ModelConfig,
        x: &[f32],
        w: &Weights,
        attention: &[f64],
    ) -> (Vec<f64>, Vec<f32>) {
        let (n, d, d_k) = (config.seq_len, config.d_model, config.d_k());
        let mut qkv = vec![0.0f64; n * 3 * d];
        for i in 0..n {
            for j in 0..3 * d {
                qkv[i * 3 * d + j] =
                    (0..d).map(|c| x[i * d + c] as f64 * w.w_qkv[c * 3 * d + j] as f64).sum();
            }
        }
        let mut concat = vec![f32::NAN; n * d];
        for h in 0..config.num_heads {
            for i in 0..n {
                for c in 0..d_k {
                    let v: f64 = (0..n)
                        .map(|j| attention[(h * n + i) * n + j] * qkv[j * 3 * d + 2 * d + h * d_k + c])
                        .sum();
                    concat[i * d + h * d_k + c] = v as f32;
                }
            }
        }
        (qkv, concat)
    }

    fn close(a: f64, b: f64, tol: f64, what: &str) {
        assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{what}: {a} vs {b}");
    }

    #[test]
    fn every_line_matches_the_oracle_on_a_table_of_shapes() {
        for (d, h, n) in [(8, 2, 1), (12, 3, 5), (64, 4, 9), (96, 12, 17), (40, 8, 3), (1, 1, 2)] {
            let config = ModelConfig { d_model: d, num_heads: h, seq_len: n };
            let (inputs, w) = (Inputs::generate(&config, 7), Weights::generate(d, 7));
            let oracle = multihead_attention(&config, &inputs.x, &w.w_qkv, &w.w_o, &HeadSet::all(h));
            let (qkv, concat) = qkv_and_concat(&config, &inputs.x, &w, &oracle.attention);
            let focuses = [
                Focus { head: 0, token: 0 },
                Focus { head: h - 1, token: n - 1 },
                Focus { head: h / 2, token: n / 2 },
            ];
            for focus in focuses {
                let walk = walk(&config, &inputs.x, &LayerWeights::Stored(w.clone()), focus, &concat);
                let (t, hd, d_k) = (focus.token, focus.head, config.d_k());
                assert_eq!(walk.steps.iter().map(|s| s.line).collect::<Vec<_>>(), Line::ALL);
                assert_eq!(walk.steps[3].shape, vec![1, n, 3, h, d_k]);
                assert_eq!(walk.steps[6].shape, vec![1, h, n, n]);
                assert_eq!(walk.steps[5].values.len(), d_k.min(SLICE));
                for (c, &v) in walk.steps[5].values.iter().enumerate() {
                    close(v, qkv[t * 3 * d + hd * d_k + c], 1e-12, "Q");
                }
                for (j, &v) in walk.steps[7].values.iter().enumerate() {
                    close(v, oracle.attention[(hd * n + t) * n + j], 1e-12, "weights");
                }
                for (c, &v) in walk.steps[9].values.iter().enumerate() {
                    close(v, concat[t * d + hd * d_k + c] as f64, 1e-6, "merged head");
                }
                for (j, &v) in walk.steps[10].values.iter().enumerate() {
                    close(v, oracle.output[t * d + j], 1e-6, "output");
                }
                assert!(walk.backend_difference < 1e-6, "{:?}: {}", config, walk.backend_difference);
                let row = weights_row(&config, &inputs.x, &LayerWeights::Stored(w.clone()), focus);
                close(row.iter().sum(), 1.0, 1e-12, "weights sum");
            }
        }
    }

    #[test]
    fn the_slices_name_the_shapes_and_the_same_numbers_move_through_the_reshapes() {
        let config = ModelConfig { d_model: 768, num_heads: 12, seq_len: 16 };
        let (inputs, w) = (Inputs::generate(&config, 1), Weights::generate(768, 1));
        let concat = vec![0.5f32; 16 * 768];
        let walk = walk(&config, &inputs.x, &LayerWeights::Stored(w), Focus { head: 2, token: 3 }, &concat);
        let shapes: Vec<String> = walk.steps.iter().map(Step::shape_text).collect();
        assert_eq!(shapes[3], "(1, 16, 3, 12, 64)");
        assert_eq!(shapes[4], "(3, 1, 12, 16, 64)");
        assert_eq!(shapes[1], "");
        for s in &walk.steps {
            assert_eq!(s.line.dims().len(), s.shape.len(), "{:?} names every dimension", s.line);
        }
        assert_eq!(walk.steps[1].values, vec![64.0]);
        assert_eq!(walk.steps[3].slice, "qkv[0, 3, 0, 2, :6]");
        assert_eq!(walk.steps[2].slice, "qkv[0, 3, 128:134]");
        for line in 3..=5 {
            assert_eq!(walk.steps[line].values, walk.steps[2].values, "reshape and transpose move no number");
        }
        assert_eq!(walk.steps[9].values, walk.steps[8].values);
        assert!(walk.backend_difference > 0.1, "a wrong concat is seen: {}", walk.backend_difference);
    }

    #[test]
    fn generated_weights_give_the_stored_weights_walk() {
        let config = ModelConfig { d_model: 48, num_heads: 4, seq_len: 5 };
        let inputs = Inputs::generate(&config, 3);
        let concat = vec![0.25f32; 5 * 48];
        let focus = Focus { head: 9, token: 9 };
        let a = walk(&config, &inputs.x, &LayerWeights::Stored(Weights::generate(48, 3)), focus, &concat);
        let generated = LayerWeights::Generated(GeneratedWeights { d_model: 48, seed: 3 });
        assert_eq!(a, walk(&config, &inputs.x, &generated, focus, &concat));
        assert_eq!(a.focus, Focus { head: 3, token: 4 }, "a focus past the end is clamped");
    }
}
