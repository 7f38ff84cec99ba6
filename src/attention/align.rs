//! Two sentences side by side: which token of one stands for which of the other, and how each
//! head's attention and each layer's hidden states differ on the tokens that align.
//!
//! The rule: two sentences of as many tokens are compared position by position (token `t` with
//! token `t`, as activation patching pairs them); otherwise the tokens are paired where both
//! sentences have the same piece, in order: a longest common subsequence of the two lists of
//! pieces (the earliest such pairing where there are several). On the aligned tokens, each
//! query's row of weights is rescaled to sum to 1 over the aligned keys (so that a shorter
//! sentence, whose rows spread over fewer tokens, does not look as if it attended more), and
//! head `h`'s difference is `A'[i][j] - B'[i'][j']` for every two aligned pairs `(i, i')` and
//! `(j, j')`. Sentences of as many tokens are compared as they are (every key is aligned).

use super::cosine;

/// How two sentences' tokens were paired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlignRule {
    /// As many tokens: position by position.
    Positions,
    /// Different counts: where the pieces are the same, in order (a longest common subsequence).
    SharedPieces,
}

/// Which tokens of the first sentence stand for which of the second.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alignment {
    /// The rule that paired them.
    pub rule: AlignRule,
    /// `(i, j)`: token `i` of the first sentence with token `j` of the second, both increasing.
    pub pairs: Vec<(usize, usize)>,
    /// The sentences' token counts.
    pub lengths: (usize, usize),
}

/// The alignment of two sentences' pieces by [`AlignRule`]'s rule.
pub fn align<S: AsRef<str>>(a: &[S], b: &[S]) -> Alignment {
    let lengths = (a.len(), b.len());
    if a.len() == b.len() {
        return Alignment {
            rule: AlignRule::Positions,
            pairs: (0..a.len()).map(|i| (i, i)).collect(),
            lengths,
        };
    }
    // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
    let (n, m) = lengths;
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i].as_ref() == b[j].as_ref() {
                1 + lcs[i + 1][j + 1]
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut pairs) = (0, 0, Vec::new());
    while i < n && j < m {
        if a[i].as_ref() == b[j].as_ref() && lcs[i][j] == 1 + lcs[i + 1][j + 1] {
            pairs.push((i, j));
            (i, j) = (i + 1, j + 1);
        } else if lcs[i + 1][j] >= lcs[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    Alignment { rule: AlignRule::SharedPieces, pairs, lengths }
}

impl Alignment {
    /// Head `head`'s weights on the aligned tokens, each row rescaled to sum to 1 over them,
    /// first sentence minus second: `m x m` row-major for `m` aligned pairs. `a` and `b` are one layer's `heads x n x n` maps of the
    /// sentences aligned (of [`Alignment::lengths`] tokens).
    pub fn difference_map(&self, a: &[f32], b: &[f32], head: usize) -> Vec<f32> {
        let (na, nb) = self.lengths;
        assert!(
            a.len().is_multiple_of((na * na).max(1)) && b.len().is_multiple_of((nb * nb).max(1)),
            "maps of the aligned sentences"
        );
        let (a, b) = (&a[head * na * na..(head + 1) * na * na], &b[head * nb * nb..(head + 1) * nb * nb]);
        let mut out = Vec::with_capacity(self.pairs.len() * self.pairs.len());
        // A row's weight on the aligned keys, or 1 when it has none there (nothing to rescale).
        let mass = |m: &[f32], n: usize, q: usize, key: fn(&(usize, usize)) -> usize| {
            let s: f32 = self.pairs.iter().map(|p| m[q * n + key(p)]).sum();
            if s > 0.0 {
                s
            } else {
                1.0
            }
        };
        for &(qa, qb) in &self.pairs {
            let (sa, sb) = (mass(a, na, qa, |p| p.0), mass(b, nb, qb, |p| p.1));
            out.extend(self.pairs.iter().map(|&(ka, kb)| a[qa * na + ka] / sa - b[qb * nb + kb] / sb));
        }
        out
    }

    /// Every head's mean absolute difference on the aligned tokens (`layers[l]` one layer's
    /// `heads_per_layer x n x n` maps of each sentence), heads numbered `l * heads_per_layer + h`;
    /// zeros when nothing aligns.
    pub fn head_differences<L: AsRef<Vec<f32>>>(&self, a: &[L], b: &[L], heads_per_layer: usize) -> Vec<f64> {
        let cells = (self.pairs.len() * self.pairs.len()).max(1) as f64;
        let mut out = Vec::with_capacity(a.len() * heads_per_layer);
        for (la, lb) in a.iter().zip(b) {
            for h in 0..heads_per_layer {
                let d = self.difference_map(la.as_ref(), lb.as_ref(), h);
                out.push(d.iter().map(|v| v.abs() as f64).sum::<f64>() / cells);
            }
        }
        out
    }

    /// Per layer, the mean cosine of the aligned tokens' hidden states (`a[l]` is layer `l`'s
    /// input, `n x d` row-major, for each sentence); `None` for a layer when nothing aligns.
    pub fn hidden_cosines(&self, a: &[Vec<f32>], b: &[Vec<f32>], d: usize) -> Vec<Option<f64>> {
        a.iter()
            .zip(b)
            .map(|(xa, xb)| {
                let each =
                    self.pairs.iter().map(|&(i, j)| cosine(&xa[i * d..(i + 1) * d], &xb[j * d..(j + 1) * d]));
                let n = self.pairs.len();
                (n > 0).then(|| each.sum::<f64>() / n as f64)
            })
            .collect()
    }
}

impl Alignment {
    /// The rule in a sentence, naming the aligned pieces (`pieces` are the first sentence's)
    /// when the counts differ.
    pub fn rule_text<S: AsRef<str>>(&self, pieces: &[S]) -> String {
        let (na, nb) = self.lengths;
        match self.rule {
            AlignRule::Positions => format!("Both have {na} tokens: compared position by position."),
            AlignRule::SharedPieces if self.pairs.is_empty() => {
                format!("They have {na} and {nb} tokens and no piece in common: nothing to compare token by token.")
            }
            AlignRule::SharedPieces => {
                let shared: Vec<&str> = self.pairs.iter().map(|&(i, _)| pieces[i].as_ref()).collect();
                format!(
                    "They have {na} and {nb} tokens: compared where both have the same piece, in order (a longest \
                     common subsequence), {} tokens: {}.",
                    shared.len(),
                    shared.join(" ")
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_is_said_with_the_aligned_pieces() {
        let (a, b) = (["[CLS]", "a", "bank", "[SEP]"], ["[CLS]", "bank", "[SEP]"]);
        assert_eq!(
            align(&a, &b).rule_text(&a),
            "They have 4 and 3 tokens: compared where both have the same piece, in order (a longest common \
             subsequence), 3 tokens: [CLS] bank [SEP]."
        );
        assert_eq!(align(&a, &a).rule_text(&a), "Both have 4 tokens: compared position by position.");
        assert!(align(&["x"], &["y", "z"]).rule_text(&["x"]).ends_with("nothing to compare token by token."));
    }

    #[test]
    fn sentences_of_as_many_tokens_pair_position_by_position() {
        let a = ["[CLS]", "i", "deposited", "[SEP]"];
        let b = ["[CLS]", "i", "sat", "[SEP]"];
        let al = align(&a, &b);
        assert_eq!(al.rule, AlignRule::Positions);
        assert_eq!(al.pairs, vec![(0, 0), (1, 1), (2, 2), (3, 3)]);
    }

    #[test]
    fn other_counts_pair_the_shared_pieces_in_order() {
        let a = ["[CLS]", "we", "sat", "on", "the", "bank", "by", "the", "river", ".", "[SEP]"];
        let b = ["[CLS]", "the", "bank", "approved", "my", "loan", ".", "[SEP]"];
        let al = align(&a, &b);
        assert_eq!(al.rule, AlignRule::SharedPieces);
        // [CLS], the, bank, ., [SEP]: the earliest "the" is taken.
        assert_eq!(al.pairs, vec![(0, 0), (4, 1), (5, 2), (9, 6), (10, 7)]);
        // Nothing shared: nothing aligned, and the differences say zero, not NaN.
        let none = align(&["x", "y"], &["z"]);
        assert!(none.pairs.is_empty());
        assert_eq!(none.head_differences(&[vec![0.5f32; 4]], &[vec![1.0f32; 1]], 1), vec![0.0]);
        assert_eq!(none.hidden_cosines(&[vec![1.0; 4]], &[vec![1.0; 2]], 2), vec![None]);
    }

    #[test]
    fn the_difference_is_taken_cell_by_aligned_cell() {
        // Two heads; sentence a has 3 tokens, b has 2; tokens 0 and 2 of a align with 0 and 1 of b.
        let al = Alignment { rule: AlignRule::SharedPieces, pairs: vec![(0, 0), (2, 1)], lengths: (3, 2) };
        let a: Vec<f32> = (0..18).map(|v| v as f32).collect();
        let b: Vec<f32> = (0..8).map(|v| 10.0 * v as f32).collect();
        // Head 1 of a: cells (0,0)=9, (0,2)=11, (2,0)=15, (2,2)=17; of b: 40, 50, 60, 70; each
        // row rescaled to sum to 1 over the aligned keys.
        let want = [
            9.0 / 20.0 - 4.0 / 9.0,
            11.0 / 20.0 - 5.0 / 9.0,
            15.0 / 32.0 - 6.0 / 13.0,
            17.0 / 32.0 - 7.0 / 13.0,
        ];
        let got = al.difference_map(&a, &b, 1);
        assert!(got.iter().zip(want).all(|(g, w)| (g - w as f32).abs() < 1e-6), "{got:?} vs {want:?}");
        let mean = |d: &[f32]| d.iter().map(|v| v.abs() as f64).sum::<f64>() / 4.0;
        let want = vec![mean(&al.difference_map(&a, &b, 0)), mean(&al.difference_map(&a, &b, 1))];
        assert_eq!(al.head_differences(std::slice::from_ref(&a), std::slice::from_ref(&b), 2), want);
        // The same maps on as many tokens differ by nothing.
        let same = align(&["p", "q", "r"], &["s", "t", "u"]);
        assert_eq!(
            same.head_differences(std::slice::from_ref(&a), std::slice::from_ref(&a), 2),
            vec![0.0, 0.0]
        );
    }

    #[test]
    fn a_longer_sentence_spreading_the_same_pattern_over_more_tokens_differs_by_nothing() {
        let (a, b) = (["[CLS]", "x", "bank", "[SEP]"], ["[CLS]", "bank", "[SEP]"]);
        let al = align(&a, &b);
        // a's rows put half their weight on "x"; on the aligned tokens they are b's, halved.
        let b_map = [0.2f32, 0.5, 0.3, 0.6, 0.2, 0.2, 0.1, 0.1, 0.8];
        let mut a_map = vec![0.0f32; 16];
        for (qa, qb) in [(0, 0), (2, 1), (3, 2)] {
            a_map[qa * 4 + 1] = 0.5;
            for (ka, kb) in [(0, 0), (2, 1), (3, 2)] {
                a_map[qa * 4 + ka] = 0.5 * b_map[qb * 3 + kb];
            }
        }
        let d = al.difference_map(&a_map, &b_map, 0);
        assert!(d.iter().all(|v| v.abs() < 1e-6), "{d:?}");
    }

    #[test]
    fn hidden_states_compare_aligned_token_with_aligned_token() {
        let al = Alignment { rule: AlignRule::SharedPieces, pairs: vec![(0, 1), (1, 0)], lengths: (2, 3) };
        // Width 2: a's tokens (1,0), (0,1); b's (0,1), (1,0), (5,5).
        let c = al.hidden_cosines(&[vec![1.0, 0.0, 0.0, 1.0]], &[vec![0.0, 1.0, 1.0, 0.0, 5.0, 5.0]], 2);
        assert_eq!(c, vec![Some(1.0)]);
    }
}
