//! One line about a head's attention pattern: how spread out it is, and where its weight goes.

/// Mean attention on one kind of token above which a head is labelled with a role that names it
/// (the encoder's previous-token, to-[CLS], ... roles; the decoder's induction and previous-token
/// heads): most of its weight.
pub const FOCUSED: f64 = 0.5;

/// Summary of one head's `n x n` attention matrix (rows are queries, each summing to 1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeadSummary {
    /// Mean over queries of the row entropy, in bits. 0: every query looks at one key;
    /// `log2(n)`: uniform attention.
    pub entropy_bits: f64,
    /// `log2(n)`, the entropy of uniform attention, for scale.
    pub max_entropy_bits: f64,
    /// The key that receives the most weight on average over queries.
    pub top_key: usize,
    /// Its average weight.
    pub top_key_weight: f64,
    /// Average weight a query puts on itself (the diagonal).
    pub self_weight: f64,
}

/// Summarises an `n x n` attention matrix. `n` must be at least 1.
pub fn summarize(weights: &[f32], n: usize) -> HeadSummary {
    assert!(n > 0 && weights.len() == n * n, "attention matrix must be n x n with n >= 1");
    let mut entropy = 0.0;
    let mut column = vec![0.0f64; n];
    let mut diagonal = 0.0;
    for (i, row) in weights.chunks_exact(n).enumerate() {
        for (j, &p) in row.iter().enumerate() {
            let p = p as f64;
            if p > 0.0 {
                entropy -= p * p.log2();
            }
            column[j] += p;
        }
        diagonal += row[i] as f64;
    }
    let (top_key, top) =
        column.iter().enumerate().fold((0, f64::MIN), |m, (j, &c)| if c > m.1 { (j, c) } else { m });
    let n_f = n as f64;
    HeadSummary {
        entropy_bits: entropy / n_f,
        max_entropy_bits: n_f.log2(),
        top_key,
        top_key_weight: top / n_f,
        self_weight: diagonal / n_f,
    }
}

/// A head's pattern in words ("entropy 3.2 of 4.0 bits · most weight on "cat" (t7, 21 %) ·
/// self 9 %"): the text alternative of its heatmap. `words` has one entry per token.
pub fn describe<S: AsRef<str>>(weights: &[f32], words: &[S]) -> String {
    let n = words.len();
    if n == 0 || weights.len() != n * n {
        return "no pattern to describe".to_string();
    }
    let s = summarize(weights, n);
    format!(
        "entropy {:.1} of {:.1} bits · most weight on \"{}\" (t{}, {:.0} %) · self {:.0} %",
        s.entropy_bits,
        s.max_entropy_bits,
        words[s.top_key].as_ref(),
        s.top_key,
        100.0 * s.top_key_weight,
        100.0 * s.self_weight
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_identity_and_single_column_patterns() {
        let uniform = summarize(&[0.25; 16], 4);
        assert!((uniform.entropy_bits - 2.0).abs() < 1e-9 && uniform.max_entropy_bits == 2.0);
        assert!((uniform.self_weight - 0.25).abs() < 1e-9);
        let identity: Vec<f32> = (0..9).map(|i| if i % 4 == 0 { 1.0 } else { 0.0 }).collect();
        let id = summarize(&identity, 3);
        assert_eq!((id.entropy_bits, id.self_weight), (0.0, 1.0));
        // Every query looks at key 2 only.
        let first: Vec<f32> = (0..9).map(|i| if i % 3 == 2 { 1.0 } else { 0.0 }).collect();
        let s = summarize(&first, 3);
        assert_eq!((s.top_key, s.top_key_weight, s.entropy_bits), (2, 1.0, 0.0));
        let one = summarize(&[1.0], 1);
        assert_eq!((one.entropy_bits, one.max_entropy_bits, one.top_key), (0.0, 0.0, 0));
    }

    #[test]
    fn a_pattern_is_described_in_words() {
        let first: Vec<f32> = (0..9).map(|i| if i % 3 == 0 { 1.0 } else { 0.0 }).collect();
        assert_eq!(
            describe(&first, &["the", "cat", "sat"]),
            "entropy 0.0 of 1.6 bits · most weight on \"the\" (t0, 100 %) · self 33 %"
        );
        assert_eq!(describe(&first, &["one"]), "no pattern to describe");
    }
}
