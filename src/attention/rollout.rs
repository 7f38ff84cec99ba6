//! Attention rollout (Abnar & Zuidema 2020, "Quantifying attention flow in transformers"): how
//! much each token's representation after a layer draws on each input token, following the
//! attention through every layer below it.
//!
//! ```text
//! A_l  = mean over layer l's active heads of their attention     (rows: queries, sum to 1)
//! A'_l = rownorm(0.5 A_l + 0.5 I)      the residual stream carries half of each token along
//!      = I                             when every head of layer l is pruned
//! R_0  = A'_0,   R_l = A'_l R_{l-1}
//! ```
//!
//! Row `i` of `R_l` is token `i`'s representation after layer `l`, column `j` the input token it
//! draws on; every row sums to 1. The mean of the rows is what the mean-pooled sentence
//! embedding draws on. Computed in f64.

use super::heads::HeadSet;

/// The cumulative rollout after every layer.
#[derive(Clone, Debug, PartialEq)]
pub struct Rollout {
    /// Number of tokens, `n`.
    pub seq_len: usize,
    /// `layers[l]` is `R_l`, `n x n` row-major: row `i` is token `i` after layer `l`, column `j`
    /// the input token it draws on. Each row sums to 1.
    pub layers: Vec<Vec<f64>>,
}

/// The rollout of a model of `attention.len()` layers of `heads_per_layer` heads on `seq_len`
/// tokens: `attention[l]` is layer `l`'s weights, `heads_per_layer x n x n` (rows are queries and
/// sum to 1), and only the heads of `active` (head `h` of layer `l` is
/// `l * heads_per_layer + h`) take part.
pub fn rollout(attention: &[&[f32]], heads_per_layer: usize, seq_len: usize, active: &HeadSet) -> Rollout {
    let n = seq_len;
    assert_eq!(active.len(), attention.len() * heads_per_layer, "one entry per head of every layer");
    let mut layers: Vec<Vec<f64>> = Vec::with_capacity(attention.len());
    for (l, weights) in attention.iter().enumerate() {
        assert_eq!(weights.len(), heads_per_layer * n * n, "layer {l}: heads x n x n weights");
        let step = layer_step(
            weights,
            n,
            (0..heads_per_layer).filter(|&h| active.is_active(l * heads_per_layer + h)),
        );
        let cumulative = match layers.last() {
            None => step,
            Some(below) => product(&step, below, n),
        };
        layers.push(cumulative);
    }
    Rollout { seq_len, layers }
}

/// The sum of every head's map of one layer (`weights`: `heads x n x n`), in f64: what
/// [`one_layer_rollout`] starts from, kept with a pass and made a head at a time.
pub fn add_head(sum: &mut [f64], weights: &[f32], n: usize, h: usize) {
    sum.iter_mut().zip(&weights[h * n * n..(h + 1) * n * n]).for_each(|(m, &w)| *m += w as f64);
}

/// The rollout of one layer (`weights`: `heads x n x n`) with the heads of `active`, from `all`,
/// the sum of every head's map ([`add_head`]): the pruned heads' maps taken from it, or the
/// active ones added up afresh, whichever are fewer, so that a toggle costs at most half the
/// heads' maps whatever the head count (BENCHMARKS.md section 20).
pub fn one_layer_rollout(weights: &[f32], n: usize, all: &[f64], active: &HeadSet) -> Rollout {
    let heads = active.len();
    assert_eq!(weights.len(), heads * n * n, "heads x n x n weights");
    let count = active.active_count();
    let sum = if 2 * count >= heads {
        let mut sum = all.to_vec();
        for h in (0..heads).filter(|&h| !active.is_active(h)) {
            sum.iter_mut().zip(&weights[h * n * n..(h + 1) * n * n]).for_each(|(m, &w)| *m -= w as f64);
        }
        sum
    } else {
        let mut sum = vec![0.0; n * n];
        active.active().for_each(|h| add_head(&mut sum, weights, n, h));
        sum
    };
    let step = if count == 0 { identity(n) } else { mix_with_identity(sum, n, count) };
    Rollout { seq_len: n, layers: vec![step] }
}

/// `A'` of one layer: the mean of the listed heads' maps mixed half and half with the identity,
/// rows renormalised; the identity when no head is listed.
fn layer_step(weights: &[f32], n: usize, heads: impl Iterator<Item = usize>) -> Vec<f64> {
    let mut mean = vec![0.0f64; n * n];
    let mut count = 0usize;
    for h in heads {
        add_head(&mut mean, weights, n, h);
        count += 1;
    }
    if count == 0 {
        return identity(n);
    }
    mix_with_identity(mean, n, count)
}

/// `sum` (of `count` heads' maps) as their mean mixed half and half with the identity, rows
/// renormalised.
fn mix_with_identity(mut mean: Vec<f64>, n: usize, count: usize) -> Vec<f64> {
    for (i, row) in mean.chunks_exact_mut(n).enumerate() {
        row.iter_mut().for_each(|m| *m *= 0.5 / count as f64);
        row[i] += 0.5;
        // Stored f32 rows sum to 1 only to rounding; renormalising keeps errors from compounding.
        let sum: f64 = row.iter().sum();
        row.iter_mut().for_each(|m| *m /= sum);
    }
    mean
}

fn identity(n: usize) -> Vec<f64> {
    let mut m = vec![0.0; n * n];
    (0..n).for_each(|i| m[i * n + i] = 1.0);
    m
}

/// `a b` for `n x n` row-major matrices.
fn product(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    let mut c = vec![0.0; n * n];
    for i in 0..n {
        for k in 0..n {
            let aik = a[i * n + k];
            for j in 0..n {
                c[i * n + j] += aik * b[k * n + j];
            }
        }
    }
    c
}

impl Rollout {
    /// What the mean-pooled sentence embedding after layer `layer` draws on: each input token's
    /// share, the mean over rows of `R_layer`'s column. The shares sum to 1.
    pub fn shares(&self, layer: usize) -> Vec<f64> {
        let n = self.seq_len;
        let mut shares = vec![0.0; n];
        for row in self.layers[layer].chunks_exact(n) {
            shares.iter_mut().zip(row).for_each(|(s, &r)| *s += r / n as f64);
        }
        shares
    }

    /// The shares before any layer: each token is only itself, so every share is `1 / n`.
    pub fn input_shares(&self) -> Vec<f64> {
        vec![1.0 / self.seq_len as f64; self.seq_len]
    }

    /// How much token `token`'s representation after layer `layer` draws on input token `from`.
    pub fn draws_on(&self, layer: usize, token: usize, from: usize) -> f64 {
        self.layers[layer][token * self.seq_len + from]
    }
}

/// How much one token draws on another after the last layer, with all heads and with some pruned.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowChange {
    /// The token whose representation changed.
    pub token: usize,
    /// The input token it draws on more or less.
    pub from: usize,
    /// `R[token][from]` of the full model.
    pub before: f64,
    /// `R[token][from]` with the heads pruned.
    pub after: f64,
}

/// The pair of distinct content tokens (`content[t]` true; the caller marks `[CLS]`, `[SEP]` and
/// punctuation false) whose last-layer flow changed most between `full` and `pruned`. `None`
/// when no pair changed by more than 1e-6, or the rollouts are of different sentences.
pub fn largest_change(full: &Rollout, pruned: &Rollout, content: &[bool]) -> Option<FlowChange> {
    let n = full.seq_len;
    if pruned.seq_len != n {
        return None;
    }
    let (before, after) = (full.layers.last()?, pruned.layers.last()?);
    let is_content = |t: usize| content.get(t).copied().unwrap_or(false);
    let mut best: Option<(f64, FlowChange)> = None;
    for token in (0..n).filter(|&t| is_content(t)) {
        for from in (0..n).filter(|&f| f != token && is_content(f)) {
            let (b, a) = (before[token * n + from], after[token * n + from]);
            let change = (a - b).abs();
            if change > 1e-6 && best.is_none_or(|(largest, _)| change > largest) {
                best = Some((change, FlowChange { token, from, before: b, after: a }));
            }
        }
    }
    best.map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_all_close(what: &str, got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len(), "{what}: length differs");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!((g - w).abs() < 1e-12, "{what}: element {i}: got {g}, want {w}");
        }
    }

    /// Layer maps of `heads x n x n` for `layers` layers: each row the softmax of sin-based
    /// scores, different for every layer, head and row.
    fn maps(layers: usize, heads: usize, n: usize) -> Vec<Vec<f32>> {
        (0..layers)
            .map(|l| {
                let mut w = Vec::with_capacity(heads * n * n);
                for h in 0..heads {
                    for i in 0..n {
                        let scores: Vec<f64> = (0..n)
                            .map(|j| {
                                3.0 * (1.3 * l as f64
                                    + 0.7 * h as f64
                                    + 0.37 * (i * j) as f64
                                    + 0.11 * j as f64)
                                    .sin()
                            })
                            .collect();
                        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                        let sum: f64 = scores.iter().map(|s| (s - max).exp()).sum();
                        w.extend(scores.iter().map(|s| ((s - max).exp() / sum) as f32));
                    }
                }
                w
            })
            .collect()
    }

    fn slices(maps: &[Vec<f32>]) -> Vec<&[f32]> {
        maps.iter().map(Vec::as_slice).collect()
    }

    // Two heads on two tokens:
    //   head 0 = [[1, 0], [1, 0]]   head 1 = [[0.5, 0.5], [0, 1]]
    //   A  = [[0.75, 0.25], [0.5, 0.5]]
    //   A' = 0.5 A + 0.5 I = [[0.875, 0.125], [0.25, 0.75]]   (rows already sum to 1)
    //   shares = column means = [(0.875 + 0.25) / 2, (0.125 + 0.75) / 2] = [0.5625, 0.4375]
    // With head 1 pruned, A = head 0, A' = [[1, 0], [0.5, 0.5]], shares [0.75, 0.25].
    const LAYER_0: [f32; 8] = [1.0, 0.0, 1.0, 0.0, 0.5, 0.5, 0.0, 1.0];

    #[test]
    fn one_layer_of_two_heads_matches_the_hand_computation() {
        let r = rollout(&[&LAYER_0], 2, 2, &HeadSet::all(2));
        assert_all_close("R_0", &r.layers[0], &[0.875, 0.125, 0.25, 0.75]);
        assert_all_close("shares", &r.shares(0), &[0.5625, 0.4375]);
        assert_all_close("input shares", &r.input_shares(), &[0.5, 0.5]);
        assert_eq!((r.draws_on(0, 0, 1), r.draws_on(0, 1, 0)), (0.125, 0.25));

        let pruned = rollout(&[&LAYER_0], 2, 2, &HeadSet::with_pruned(2, [1]));
        assert_all_close("R_0, head 1 pruned", &pruned.layers[0], &[1.0, 0.0, 0.5, 0.5]);
        assert_all_close("shares, head 1 pruned", &pruned.shares(0), &[0.75, 0.25]);
    }

    /// From the sum of every head's map, by taking the pruned ones away or adding the active
    /// ones up, whichever are fewer: the rollout of the heads kept, for every set of 7 heads.
    #[test]
    fn one_layer_from_the_sum_of_all_heads_equals_the_rollout_of_the_heads_kept() {
        let (heads, n) = (7, 5);
        let weights: Vec<f32> = (0..heads * n * n).map(|i| ((i * 37 % 101) as f32 + 1.0) / 101.0).collect();
        let mut all = vec![0.0; n * n];
        (0..heads).for_each(|h| add_head(&mut all, &weights, n, h));
        for mask in 0u32..1 << heads {
            let active = HeadSet::with_pruned(heads, (0..heads).filter(|h| mask >> h & 1 == 1));
            let want = rollout(&[&weights], heads, n, &active);
            let got = one_layer_rollout(&weights, n, &all, &active);
            assert_all_close(&format!("pruned mask {mask:07b}"), &got.layers[0], &want.layers[0]);
        }
    }

    #[test]
    fn a_second_layer_multiplies_on_the_left() {
        // Both heads of layer 1 = [[0, 1], [0, 1]], so A'_1 = [[0.5, 0.5], [0, 1]] and
        //   R_1 = A'_1 A'_0 = [[0.5 * 0.875 + 0.5 * 0.25, 0.5 * 0.125 + 0.5 * 0.75], [0.25, 0.75]]
        //       = [[0.5625, 0.4375], [0.25, 0.75]]
        // (A'_0 A'_1 would be [[0.4375, 0.5625], [0.125, 0.875]]); shares [0.40625, 0.59375].
        let layer_1 = [0.0f32, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0];
        let r = rollout(&[&LAYER_0, &layer_1], 2, 2, &HeadSet::all(4));
        assert_all_close("R_0", &r.layers[0], &[0.875, 0.125, 0.25, 0.75]);
        assert_all_close("R_1", &r.layers[1], &[0.5625, 0.4375, 0.25, 0.75]);
        assert_all_close("shares after layer 1", &r.shares(1), &[0.40625, 0.59375]);
    }

    #[test]
    fn with_every_head_pruned_only_the_residual_remains() {
        let (layers, heads, n) = (3, 4, 5);
        let m = maps(layers, heads, n);
        let r = rollout(&slices(&m), heads, n, &HeadSet::with_pruned(layers * heads, 0..layers * heads));
        for l in 0..layers {
            assert_all_close(&format!("R_{l}"), &r.layers[l], &identity(n));
            assert_all_close(&format!("shares after layer {l}"), &r.shares(l), &r.input_shares());
        }
    }

    #[test]
    fn rows_and_shares_sum_to_one_on_every_shape() {
        for n in [1, 2, 7, 33] {
            for layers in [1, 6] {
                for heads in [1, 12] {
                    let m = maps(layers, heads, n);
                    let total = layers * heads;
                    for active in [HeadSet::all(total), HeadSet::with_pruned(total, (1..total).step_by(3))] {
                        let r = rollout(&slices(&m), heads, n, &active);
                        let shape = format!(
                            "n {n}, {layers} layers of {heads} heads, {} pruned",
                            active.pruned_count()
                        );
                        assert_eq!((r.seq_len, r.layers.len()), (n, layers), "{shape}");
                        for (l, matrix) in r.layers.iter().enumerate() {
                            assert!(matrix.iter().all(|v| v.is_finite() && *v >= 0.0), "{shape}: layer {l}");
                            for (i, row) in matrix.chunks_exact(n).enumerate() {
                                let sum: f64 = row.iter().sum();
                                assert!(
                                    (sum - 1.0).abs() < 1e-12,
                                    "{shape}: layer {l}, row {i} sums to {sum}"
                                );
                            }
                            let sum: f64 = r.shares(l).iter().sum();
                            assert!((sum - 1.0).abs() < 1e-12, "{shape}: layer {l}'s shares sum to {sum}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn pruning_a_head_changes_only_its_layer_and_those_above() {
        let (layers, heads, n) = (6, 12, 7);
        let m = maps(layers, heads, n);
        let full = rollout(&slices(&m), heads, n, &HeadSet::all(layers * heads));
        let pruned = rollout(&slices(&m), heads, n, &HeadSet::with_pruned(layers * heads, [3 * heads + 5]));
        for l in 0..layers {
            let changed =
                full.layers[l].iter().zip(&pruned.layers[l]).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
            if l < 3 {
                assert_eq!(changed, 0.0, "layer {l} is below the pruned head");
            } else {
                assert!(changed > 1e-6, "layer {l} changed by only {changed}");
            }
        }
    }

    #[test]
    fn the_largest_change_is_between_content_tokens() {
        let n = 4;
        let full = Rollout { seq_len: n, layers: vec![vec![0.0; n * n], identity(n)] };
        let mut pruned = full.clone();
        let last = &mut pruned.layers[1];
        last[n + 2] = 0.3; // token 1 now draws on token 2: the change to find
        last[1] = 0.5; // larger, but token 0 is [CLS]
        last[2 * n + 2] = 0.4; // larger, but a token and itself
        last[3 * n + 1] = 0.2; // smaller
        pruned.layers[0][n + 3] = 0.9; // not the last layer
        let content = [false, true, true, true];
        let change = largest_change(&full, &pruned, &content);
        assert_eq!(change, Some(FlowChange { token: 1, from: 2, before: 0.0, after: 0.3 }));

        assert_eq!(largest_change(&full, &full, &content), None);
        let mut tiny = full.clone();
        tiny.layers[1][n + 2] = 1e-7;
        assert_eq!(largest_change(&full, &tiny, &content), None, "below 1e-6");
        let other = Rollout { seq_len: 3, layers: vec![identity(3)] };
        assert_eq!(largest_change(&full, &other, &content), None, "another sentence");
    }
}
