//! The trained model against the synthetic presets: a few heads matter, most can go. What
//! pruning the least important half of the heads does, beside what one head does.

use crate::attention::cosine;
use crate::attention::importance::Ranking;
use crate::model::digits::cosine_text;
use crate::model::encoder::bert::BertOutput;
use crate::model::encoder::runner::Runner;

/// What pruning half the heads does to a sentence, beside what one head does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Contrast {
    /// Embedding drift of removing the most important head alone.
    pub most: f64,
    /// The median head's.
    pub median: f64,
    /// Heads pruned: the least important half.
    pub pruned: usize,
    /// Cosine of the embedding with them pruned to the full one.
    pub cosine: f64,
}

impl Contrast {
    /// Prunes the least important half of the heads of `ranking` on `ids` (unpruned pass `full`).
    pub async fn measure(
        runner: &impl Runner,
        ids: &[u32],
        full: &BertOutput,
        ranking: &Ranking,
    ) -> Contrast {
        let pruned = ranking.per_head.len() / 2;
        let half = runner.run(ids, &ranking.least(pruned), Some(full)).await;
        Contrast {
            most: ranking.max(),
            median: ranking.median().unwrap_or(0.0),
            pruned,
            cosine: cosine(&full.embedding, &half.embedding),
        }
    }

    /// What the page says about it.
    pub fn sentence(&self) -> String {
        format!(
            "For this sentence, removing the single most important head moves the embedding by {:.4} \
             (1 - cosine), the median head by {:.5}. Pruning the {} least important heads, half the \
             model, still leaves the embedding at cosine {} to the full one. In the random-weight \
             presets every head matters about equally: removing any one moves the output by roughly \
             1/sqrt(H) of its size.",
            self.most,
            self.median,
            self.pruned,
            cosine_text(self.cosine)
        )
    }
}

// Natively only: pollster drives the future.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::attention::HeadSet;
    use crate::model::encoder::bert::Bert;
    use crate::model::spec::ModelSpec;

    #[test]
    fn half_the_heads_are_pruned_least_important_first() {
        let spec = ModelSpec {
            layers: 2,
            heads: 4,
            d_model: 16,
            ffn: 24,
            vocab: 20,
            positions: 8,
            ..ModelSpec::MINILM_L6_V2
        };
        let bert = Bert::random(spec, 3);
        let ids = [2, 7, 9, 3];
        let full = bert.forward(crate::cpu::Kernel::Simd, &ids, &HeadSet::all(8));
        let ranking = Ranking::new(vec![0.5, 0.1, 0.2, 0.9, 0.3, 0.05, 0.7, 0.4]);
        let c = pollster::block_on(Contrast::measure(&bert, &ids, &full, &ranking));
        let half = bert.forward(crate::cpu::Kernel::Simd, &ids, &HeadSet::with_pruned(8, [5, 1, 2, 4]));
        assert_eq!((c.pruned, c.most, c.median), (4, 0.9, ranking.median().unwrap()));
        assert_eq!(c.cosine, cosine(&full.embedding, &half.embedding));
        assert!(c.sentence().contains("Pruning the 4 least important heads"), "{}", c.sentence());
    }
}
