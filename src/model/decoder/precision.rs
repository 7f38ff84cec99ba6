//! What 8 bits change in a decoder's predictions: on each passage of a text set, the model at
//! f16 and its 8-bit copy ([`super::gpt2::Gpt2::at_precision`]) read the same tokens, and at
//! every position the next token's distributions are compared (KL from f16's to 8 bits', and
//! whether their most likely tokens agree) and each loses its own loss on the token that came.
//! Summed per passage in f64, so that the set's figures have intervals over its passages.

use super::gpt2::{Gpt2, Keep, READ_OUT_ROWS};
use super::next_token::{kl, top};
use crate::attention::precision::Precision;
use crate::attention::turns::Turns;
use crate::attention::HeadSet;
use crate::cpu::Kernel;
use crate::model::intervals::{resampled, Estimate};

/// One passage at both precisions, every head active.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PassageDrift {
    /// Positions compared: every token's (the last one's next token included).
    pub positions: usize,
    /// Sum over the positions of KL(f16 || 8-bit), nats.
    pub kl: f64,
    /// Positions whose most likely next token is the same at both precisions.
    pub agree: usize,
    /// Sum of the losses of the passage's tokens after its first, at f16 and at 8 bits.
    pub loss: [f64; 2],
}

impl PassageDrift {
    /// Numbers of the wire's result: `[positions, kl, agree, loss f16, loss 8-bit]`.
    pub const SUMS: usize = 5;

    /// As the wire's sums.
    pub fn to_sums(self) -> [f64; 5] {
        [self.positions as f64, self.kl, self.agree as f64, self.loss[0], self.loss[1]]
    }

    /// Its positions, as a count to divide by.
    fn positions(&self) -> f64 {
        self.positions as f64
    }

    /// Its tokens with a loss (all but the first), as a count to divide by.
    fn predicted(&self) -> f64 {
        (self.positions - 1) as f64
    }

    /// From the wire's sums (`None` unless there are [`Self::SUMS`] of them, whole counts).
    pub fn from_sums(s: &[f64]) -> Option<PassageDrift> {
        let &[positions, kl, agree, f16, int8] = s else { return None };
        let count = |v: f64| (v >= 0.0 && v.fract() == 0.0).then_some(v as usize);
        Some(PassageDrift { positions: count(positions)?, kl, agree: count(agree)?, loss: [f16, int8] })
    }
}

/// `ids` (two tokens or more) through `f16` and `int8` with every head, the logits made
/// [`READ_OUT_ROWS`] rows at a time, in `turns`' steps.
pub async fn passage_drift_in_turns(
    f16: &Gpt2,
    int8: &Gpt2,
    kernel: Kernel,
    ids: &[u32],
    turns: &dyn Turns,
) -> PassageDrift {
    let all = HeadSet::all(f16.spec.total_heads());
    let none = Keep::Layer(f16.spec.layers);
    let a = f16.forward_in_turns(kernel, ids, &all, none, turns).await;
    let b = int8.forward_in_turns(kernel, ids, &all, none, turns).await;
    let (d, vocab) = (f16.spec.d_model, f16.spec.vocab);
    let (mut drift, mut agree) = (0.0, 0);
    for (ra, rb) in a.hidden.chunks(READ_OUT_ROWS * d).zip(b.hidden.chunks(READ_OUT_ROWS * d)) {
        let (la, lb) =
            (f16.logits_in_turns(kernel, ra, turns).await, int8.logits_in_turns(kernel, rb, turns).await);
        for (p, q) in la.chunks_exact(vocab).zip(lb.chunks_exact(vocab)) {
            drift += kl(p, q);
            agree += usize::from(top(p, 1).first().map(|t| t.0) == top(q, 1).first().map(|t| t.0));
        }
    }
    let sum = |l: &[f64]| l.iter().sum::<f64>();
    PassageDrift { positions: ids.len(), kl: drift, agree, loss: [sum(&a.losses), sum(&b.losses)] }
}

/// A text set at both precisions, from its passages' [`PassageDrift`]s.
#[derive(Clone, Debug, PartialEq)]
pub struct PrecisionDrift {
    /// Each passage's, in the set's order.
    pub passages: Vec<PassageDrift>,
}

impl PrecisionDrift {
    /// Mean KL(f16 || 8-bit) per position over the set, with its interval over the passages.
    pub fn kl(&self) -> Option<Estimate> {
        self.ratio(&|p| p.kl, PassageDrift::positions)
    }

    /// The share of positions whose most likely token is the same, with its interval.
    pub fn agreement(&self) -> Option<Estimate> {
        self.ratio(&|p| p.agree as f64, PassageDrift::positions)
    }

    /// The set's perplexity at `precision`, with its interval over the passages.
    pub fn perplexity(&self, precision: Precision) -> Option<Estimate> {
        let at = usize::from(precision == Precision::Int8);
        self.ratio(&|p| p.loss[at], PassageDrift::predicted).map(|e| Estimate {
            value: e.value.exp(),
            lo: e.lo.exp(),
            hi: e.hi.exp(),
        })
    }

    /// 8 bits' perplexity over f16's, minus one (paired over the passages), with its interval.
    pub fn perplexity_change(&self) -> Option<Estimate> {
        let stat = |items: &mut dyn Iterator<Item = usize>| {
            let (mut diff, mut count) = (0.0, 0.0);
            for i in items {
                let p = &self.passages[i];
                diff += p.loss[1] - p.loss[0];
                count += p.predicted();
            }
            (count > 0.0).then(|| (diff / count).exp() - 1.0)
        };
        resampled(self.passages.len(), &stat)
    }

    /// `sum top / sum bottom` over the passages, with its interval (a trait object and a
    /// function, not generic closures: one copy of this for every ratio).
    fn ratio(
        &self,
        top: &dyn Fn(&PassageDrift) -> f64,
        bottom: fn(&PassageDrift) -> f64,
    ) -> Option<Estimate> {
        let stat = |items: &mut dyn Iterator<Item = usize>| {
            let (mut t, mut b) = (0.0, 0.0);
            for i in items {
                t += top(&self.passages[i]);
                b += bottom(&self.passages[i]);
            }
            (b > 0.0).then(|| t / b)
        };
        resampled(self.passages.len(), &stat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::turns::{at_once, AtOnce};
    use crate::model::decoder::next_token::loss;
    use crate::model::spec::{Activation, ModelSpec};

    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn spec() -> ModelSpec {
        ModelSpec {
            layers: 2,
            heads: 4,
            d_model: 32,
            ffn: 64,
            vocab: 45,
            positions: 80,
            activation: Activation::GeluTanh,
            layer_norm_eps: 1e-5,
            ..ModelSpec::MINILM_L6_V2
        }
    }

    #[test]
    fn a_passages_drift_is_its_positions_kl_agreement_and_losses_at_both_precisions() {
        let f16 = Gpt2::random(spec(), 3);
        let hash = crate::attention::synthetic::hash32;
        let calibration: Vec<Vec<u32>> =
            (0..3).map(|t| (0..20).map(|i| hash(t * 77 + i) % 45).collect()).collect();
        let int8 = f16.at_precision(Kernel::Simd, Precision::Int8, &calibration);
        // Longer than READ_OUT_ROWS, so the read-out is cut.
        let ids: Vec<u32> = (0..41).map(|i| hash(900 + i) % 45).collect();
        let got = at_once(passage_drift_in_turns(&f16, &int8, Kernel::Simd, &ids, &AtOnce));
        // The same sums from whole passes, position by position.
        let all = HeadSet::all(8);
        let (a, b) = (f16.forward(Kernel::Simd, &ids, &all), int8.forward(Kernel::Simd, &ids, &all));
        let (la, lb) = (f16.logits(Kernel::Simd, &a.hidden), int8.logits(Kernel::Simd, &b.hidden));
        let (mut want_kl, mut agree, mut losses) = (0.0, 0, [0.0, 0.0]);
        for t in 0..ids.len() {
            let (p, q) = (&la[t * 45..(t + 1) * 45], &lb[t * 45..(t + 1) * 45]);
            want_kl += kl(p, q);
            agree += usize::from(top(p, 1)[0].0 == top(q, 1)[0].0);
            if let Some(&next) = ids.get(t + 1) {
                losses[0] += loss(Kernel::Simd, p, next as usize);
                losses[1] += loss(Kernel::Simd, q, next as usize);
            }
        }
        assert_eq!(got.positions, 41);
        assert!((got.kl - want_kl).abs() <= 1e-9 * want_kl && got.kl > 0.0, "{} against {want_kl}", got.kl);
        assert_eq!(got.agree, agree);
        for i in 0..2 {
            assert!((got.loss[i] - losses[i]).abs() < 1e-6 * losses[i], "{:?} against {losses:?}", got.loss);
        }
        assert_eq!(PassageDrift::from_sums(&got.to_sums()), Some(got));
        assert_eq!(PassageDrift::from_sums(&[1.5, 0.0, 1.0, 0.0, 0.0]), None);
        // The same model at both "precisions" drifts nowhere.
        let none = at_once(passage_drift_in_turns(&f16, &f16, Kernel::Simd, &ids, &AtOnce));
        assert_eq!((none.kl, none.agree, none.loss[0]), (0.0, 41, none.loss[1]));
    }

    #[test]
    fn the_sets_figures_are_ratios_of_sums_with_intervals_around_them() {
        let p = |positions, kl, agree, f16: f64, int8: f64| PassageDrift {
            positions,
            kl,
            agree,
            loss: [f16, int8],
        };
        let set = PrecisionDrift {
            passages: vec![
                p(11, 0.02, 10, 30.0, 31.0),
                p(21, 0.01, 21, 50.0, 50.5),
                p(5, 0.03, 4, 10.0, 10.2),
            ],
        };
        let kl = set.kl().unwrap();
        assert!((kl.value - 0.06 / 37.0).abs() < 1e-15 && kl.lo <= kl.value && kl.value <= kl.hi, "{kl:?}");
        assert!((set.agreement().unwrap().value - 35.0 / 37.0).abs() < 1e-15);
        let (a, b) = (set.perplexity(Precision::F16).unwrap(), set.perplexity(Precision::Int8).unwrap());
        assert!((a.value - (90.0f64 / 34.0).exp()).abs() < 1e-12 && a.lo <= a.value && a.value <= a.hi);
        let change = set.perplexity_change().unwrap();
        assert!((change.value - (b.value / a.value - 1.0)).abs() < 1e-12, "{change:?}");
        assert!(change.lo > 0.0, "every passage lost: the change's interval leaves out zero: {change:?}");
        assert_eq!(PrecisionDrift { passages: vec![] }.kl(), None);
    }
}
