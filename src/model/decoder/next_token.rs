//! What a decoder's output is: a distribution over the next token. Its log-probabilities, its
//! most likely tokens, the loss of the token that came, and how far a pruned model's distribution
//! has moved from the full model's (KL divergence, and whether the top token changed). All sums
//! in f64.

use crate::cpu::softmax::log_sum_exp;
use crate::cpu::Kernel;

/// `log p_j = l_j - log sum_k exp(l_k)` for the logits `logits`, max-subtracted.
pub fn log_softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits.iter().fold(f64::NEG_INFINITY, |m, &l| m.max(l as f64));
    let sum: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum();
    let log_z = max + sum.ln();
    logits.iter().map(|&l| l as f64 - log_z).collect()
}

/// The loss of token `target` under `logits`: `-log p_target` (natural log), its normaliser
/// on `kernel` ([`log_sum_exp`]: in f64 on the scalar twin, within 1e-5 of it on the vector one).
pub fn loss(kernel: Kernel, logits: &[f32], target: usize) -> f64 {
    log_sum_exp(kernel, logits) - logits[target] as f64
}

/// The `k` most likely tokens, most likely first (ties: the lower id first), with their
/// probabilities.
pub fn top(logits: &[f32], k: usize) -> Vec<(u32, f64)> {
    let logp = log_softmax(logits);
    let mut ids: Vec<u32> = (0..logits.len() as u32).collect();
    let k = k.min(ids.len());
    let order = |a: &u32, b: &u32| logp[*b as usize].total_cmp(&logp[*a as usize]).then(a.cmp(b));
    if k < ids.len() && k > 0 {
        ids.select_nth_unstable_by(k - 1, order);
    }
    ids.truncate(k);
    ids.sort_by(order);
    ids.into_iter().map(|id| (id, logp[id as usize].exp())).collect()
}

/// `KL(p || q) = sum_j p_j (log p_j - log q_j)` of the distributions of the logits `p` (the full
/// model's) and `q` (the pruned model's), in nats: 0 when they agree.
pub fn kl(p: &[f32], q: &[f32]) -> f64 {
    assert_eq!(p.len(), q.len(), "two distributions over one vocabulary");
    let (lp, lq) = (log_softmax(p), log_softmax(q));
    lp.iter().zip(&lq).map(|(a, b)| a.exp() * (a - b)).sum::<f64>().max(0.0)
}

/// How the next token changed between the full model's logits and a pruned model's.
#[derive(Clone, Debug, PartialEq)]
pub struct NextDrift {
    /// KL(full || pruned), nats.
    pub kl: f64,
    /// The full model's most likely token.
    pub full_top: u32,
    /// The pruned model's.
    pub pruned_top: u32,
}

impl NextDrift {
    /// The drift from `full` to `pruned` (logits over one vocabulary).
    pub fn between(full: &[f32], pruned: &[f32]) -> NextDrift {
        let first = |l: &[f32]| top(l, 1).first().map_or(0, |t| t.0);
        NextDrift { kl: kl(full, pruned), full_top: first(full), pruned_top: first(pruned) }
    }

    /// Whether the most likely token is another one.
    pub fn top_changed(&self) -> bool {
        self.full_top != self.pruned_top
    }
}

/// The mean of `losses` (the text's cross-entropy, nats per token) and its perplexity `exp` of it;
/// `None` for no losses.
pub fn perplexity(losses: &[f64]) -> Option<(f64, f64)> {
    (!losses.is_empty()).then(|| {
        let mean = losses.iter().sum::<f64>() / losses.len() as f64;
        (mean, mean.exp())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probabilities_sum_to_one_and_survive_huge_logits() {
        let logits = [1000.0f32, 999.0, -1000.0, 0.0];
        let p: Vec<f64> = log_softmax(&logits).iter().map(|l| l.exp()).collect();
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        let e = 1f64.exp();
        assert!((p[0] - e / (e + 1.0)).abs() < 1e-12, "{p:?}");
        assert!((loss(Kernel::Scalar, &logits, 1) - (1.0 + (1.0 + 1.0 / e).ln())).abs() < 1e-9);
        assert!((loss(Kernel::Simd, &logits, 1) - (1.0 + (1.0 + 1.0 / e).ln())).abs() < 1e-6);
    }

    #[test]
    fn the_top_tokens_come_most_likely_first_with_ties_by_id() {
        let logits = [0.5f32, 2.0, 2.0, -1.0, 3.0];
        let t = top(&logits, 3);
        assert_eq!(t.iter().map(|x| x.0).collect::<Vec<_>>(), [4, 1, 2]);
        assert!(t[0].1 > t[1].1 && t[1].1 == t[2].1);
        assert_eq!(top(&logits, 9).len(), 5);
        assert!(top(&logits, 0).is_empty());
    }

    #[test]
    fn kl_is_zero_for_the_same_distribution_and_grows_as_it_moves() {
        let p = [1.0f32, 2.0, 3.0];
        assert!(kl(&p, &[11.0, 12.0, 13.0]) < 1e-12, "a shift of every logit is the same distribution");
        let (near, far) = (kl(&p, &[1.0, 2.0, 2.5]), kl(&p, &[3.0, 2.0, 1.0]));
        assert!(0.0 < near && near < far, "{near} {far}");
        let d = NextDrift::between(&p, &[3.0, 2.0, 1.0]);
        assert!(d.top_changed() && (d.full_top, d.pruned_top) == (2, 0));
        let (mean, ppl) = perplexity(&[1.0, 3.0]).unwrap();
        assert_eq!((mean, ppl), (2.0, 2f64.exp()));
        assert_eq!(perplexity(&[]), None);
    }
}
