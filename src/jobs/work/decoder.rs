//! A decoder's pieces ([`Piece::NextKl`], [`Piece::Losses`], [`Piece::GateGradients`],
//! [`Piece::Induction`]): what they cost, whether a model can run them, how they run, and what
//! result each gives. Each runs the same functions the page's thread would (the next token's
//! KL from [`NextKl`], the forward pass's losses, [`passage_gradients_in_turns`],
//! [`head_scores`]), so a measurement gives the same bits wherever its pieces ran.

use super::WireError;
use super::{Done, Piece, GRADIENT_COST};
use crate::attention::turns::{at_once, AtOnce, Turns};
use crate::attention::HeadSet;
use crate::cpu::Kernel;
use crate::model::decoder::cost::{next_logits_flops, pass_flops};
use crate::model::decoder::gpt2::{Gpt2, Keep};
use crate::model::decoder::gradient::passage_gradients_in_turns;
use crate::model::decoder::induction::{head_scores, HalfLosses, Repeated};
use crate::model::decoder::next_importance::NextKl;
use crate::model::decoder::precision::{passage_drift_in_turns, PassageDrift};
use crate::model::decoder::Decoder;
use crate::model::layers::backward::gates;
use crate::model::spec::ModelSpec;

/// Numbers per head in an induction piece's result: previous-token, duplicate-token,
/// prefix-matching and copying scores.
pub const INDUCTION_SCORES: usize = 4;

/// FLOPs of the next token's KL with `heads` active after `n` tokens, from the full pass's
/// stream: the blocks from the first with a pruned head (none: no pass).
pub fn next_kl_flops(spec: &ModelSpec, n: usize, heads: &HeadSet) -> u64 {
    heads.pruned().next().map_or(0, |first| next_logits_flops(spec, n, spec.layer_of(first)))
}

/// FLOPs of a decoder's `piece` on a model of shape `spec`.
pub(super) fn flops(piece: &Piece, spec: &ModelSpec) -> u64 {
    let passes = |passages: &[Vec<u32>]| passages.iter().map(|p| pass_flops(spec, p.len())).sum::<u64>();
    match piece {
        Piece::NextKl { ids, sets } => {
            let n = ids.len();
            next_logits_flops(spec, n, 0) + sets.iter().map(|h| next_kl_flops(spec, n, h)).sum::<u64>()
        }
        Piece::Losses { passages, .. } => passes(passages),
        // Two passes, and the second precision's logits at every position.
        Piece::PrecisionDrift { passages } => {
            let head = |p: &Vec<u32>| 2 * p.len() as u64 * (spec.d_model * spec.vocab) as u64;
            passages.iter().map(|p| 2 * pass_flops(spec, p.len()) + head(p)).sum()
        }
        Piece::GateGradients { passages, .. } => GRADIENT_COST * passes(passages),
        Piece::Induction { ids, half, .. } => {
            // Each head's copying score: what it writes at each second-half position, through the
            // output projection and the unembedding of the half's tokens.
            let (d, d_k, half) = (spec.d_model as u64, spec.d_k() as u64, *half as u64);
            let copying = spec.total_heads() as u64 * half * 2 * (d * d_k + d + half * d);
            pass_flops(spec, ids.len()) + copying
        }
        // An encoder's piece: `super::encoder::flops`.
        _ => 0,
    }
}

/// Whether `done` can be a decoder's `piece`'s result on a model of shape `spec`.
pub(super) fn accepts(piece: &Piece, spec: &ModelSpec, done: &Done) -> bool {
    let Done::Sums(s) = done else { return false };
    match piece {
        Piece::NextKl { sets, .. } => s.len() == sets.len(),
        Piece::Losses { passages, .. } => s.len() == passages.len(),
        Piece::GateGradients { passages, .. } => s.len() == passages.len() * (1 + spec.total_heads()),
        Piece::Induction { .. } => s.len() == INDUCTION_SCORES * spec.total_heads() + 2,
        Piece::PrecisionDrift { passages } => s.len() == passages.len() * PassageDrift::SUMS,
        _ => false,
    }
}

impl Piece {
    /// Runs a decoder's piece on `gpt2` with `kernel`. The piece must fit the model
    /// ([`Piece::check_on_decoder`]).
    ///
    /// # Panics
    /// If it is an encoder's piece, or a [`Piece::PrecisionDrift`], which runs on two models
    /// ([`Piece::run_at_both_in_turns`]).
    pub fn run_on_decoder(&self, gpt2: &Gpt2, kernel: Kernel) -> Done {
        at_once(self.run_on_decoder_in_turns(gpt2, kernel, &AtOnce))
    }

    /// [`Piece::run_on_decoder`] with its passes in `turns`' steps: the same result.
    pub async fn run_on_decoder_in_turns(&self, gpt2: &Gpt2, kernel: Kernel, turns: &dyn Turns) -> Done {
        match self {
            Piece::NextKl { ids, sets } => {
                let base = NextKl::new_in_turns(gpt2, kernel, ids, turns).await;
                let mut kls = Vec::with_capacity(sets.len());
                for heads in sets {
                    kls.push(base.with_in_turns(gpt2, kernel, heads, turns).await);
                }
                Done::Sums(kls)
            }
            Piece::Losses { heads, passages } => {
                let mut sums = Vec::with_capacity(passages.len());
                for ids in passages {
                    let pass = gpt2.forward_in_turns(kernel, ids, heads, Keep::All, turns).await;
                    sums.push(pass.losses.iter().sum::<f64>());
                }
                Done::Sums(sums)
            }
            Piece::GateGradients { heads, passages } => {
                let g = gates(heads);
                let mut sums = Vec::with_capacity(passages.len() * (1 + gpt2.spec.total_heads()));
                for ids in passages {
                    let (loss, grads) = passage_gradients_in_turns(gpt2, kernel, ids, &g, turns).await;
                    // The passage's summed loss, as a losses piece gives it: the mean back to a sum.
                    sums.push(loss * (ids.len() - 1) as f64);
                    sums.extend(grads.into_iter().map(f64::abs));
                }
                Done::Sums(sums)
            }
            Piece::Induction { ids, half, start } => {
                let sequence = Repeated { ids: ids.clone(), half: *half, start: *start };
                let all = HeadSet::all(gpt2.spec.total_heads());
                let pass = gpt2.forward_in_turns(kernel, ids, &all, Keep::All, turns).await;
                let scores = head_scores(gpt2, &pass, &sequence);
                let halves = HalfLosses::of(&pass.losses, &sequence);
                let per_head = scores
                    .iter()
                    .flat_map(|s| [s.previous_token, s.duplicate_token, s.prefix_matching, s.copying]);
                Done::Sums(per_head.chain([halves.first, halves.repeated]).collect())
            }
            Piece::PrecisionDrift { .. } => panic!("a piece of two precisions run on one model"),
            _ => panic!("an encoder's piece run on a decoder"),
        }
    }

    /// Runs a [`Piece::PrecisionDrift`] on `model` and `other`, its copy at the other precision.
    pub fn run_at_both(&self, model: &Decoder, other: &Decoder, kernel: Kernel) -> Done {
        at_once(self.run_at_both_in_turns(model, other, kernel, &AtOnce))
    }

    /// [`Piece::run_at_both`] with its passes in `turns`' steps: the same result.
    ///
    /// # Panics
    /// If it is another piece.
    pub async fn run_at_both_in_turns(
        &self,
        model: &Decoder,
        other: &Decoder,
        kernel: Kernel,
        turns: &dyn Turns,
    ) -> Done {
        let Piece::PrecisionDrift { passages } = self else { panic!("a piece of one precision run on two") };
        let (f16, int8) = match model.precision() {
            crate::attention::precision::Precision::F16 => (&model.gpt2, &other.gpt2),
            crate::attention::precision::Precision::Int8 => (&other.gpt2, &model.gpt2),
        };
        let mut sums = Vec::with_capacity(passages.len() * PassageDrift::SUMS);
        for ids in passages {
            sums.extend(passage_drift_in_turns(f16, int8, kernel, ids, turns).await.to_sums());
        }
        Done::Sums(sums)
    }

    /// Whether `gpt2` can run this decoder's piece: one flag per head in every head set, token
    /// ids in its vocabulary, no text longer than its positions or empty, every passage of two
    /// tokens or more (the first predicts the second), and an induction sequence that is its
    /// halves.
    pub fn check_on_decoder(&self, gpt2: &Gpt2) -> Result<(), WireError> {
        let spec = &gpt2.spec;
        let fits = |ids: &[u32], least: usize| {
            (least..=spec.positions).contains(&ids.len()) && ids.iter().all(|&t| (t as usize) < spec.vocab)
        };
        let (sets, texts, least): (Vec<&HeadSet>, Vec<&Vec<u32>>, usize) = match self {
            Piece::NextKl { ids, sets } => (sets.iter().collect(), vec![ids], 1),
            Piece::Losses { heads, passages } | Piece::GateGradients { heads, passages } => {
                (vec![heads], passages.iter().collect(), 2)
            }
            // A model held at 8 bits only has no f16 form to compare with.
            Piece::PrecisionDrift { .. } if !gpt2.holds_f32() => return Err(WireError::NoOtherPrecision),
            Piece::PrecisionDrift { passages } => (Vec::new(), passages.iter().collect(), 2),
            Piece::Induction { ids, half, start } => {
                if *half < 2 || *start > 1 || ids.len() != start + 2 * half {
                    return Err(WireError::OutOfRange("an induction sequence's halves"));
                }
                (Vec::new(), vec![ids], 1)
            }
            _ => return Err(WireError::OtherFamily),
        };
        if sets.iter().any(|h| h.len() != spec.total_heads()) {
            return Err(WireError::OutOfRange("a head set"));
        }
        if !texts.iter().all(|ids| fits(ids, least)) {
            return Err(WireError::OutOfRange("a token id or text length"));
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::attention::precision::Precision;
    use crate::model::decoder::gradient::passage_gradients;
    use crate::model::decoder::next_token::kl;
    use crate::model::spec::Activation;
    use crate::model::Model;

    /// 2 blocks of 3 heads of 4, 30 pieces, 12 positions.
    const SPEC: ModelSpec = ModelSpec {
        layers: 2,
        heads: 3,
        d_model: 12,
        ffn: 20,
        vocab: 30,
        positions: 12,
        activation: Activation::GeluTanh,
        layer_norm_eps: 1e-5,
        ..ModelSpec::MINILM_L6_V2
    };

    /// A decoder's pieces of every kind, for the wire's tests too.
    pub(crate) fn samples() -> Vec<Piece> {
        let heads = HeadSet::with_pruned(6, [1, 4]);
        vec![
            Piece::NextKl {
                ids: vec![3, 7, 7, 2],
                sets: vec![HeadSet::all(6), heads.clone(), HeadSet::with_pruned(6, [5])],
            },
            Piece::Losses { heads: heads.clone(), passages: vec![vec![1, 2, 3], vec![4, 5]] },
            Piece::GateGradients { heads, passages: vec![vec![9, 8, 7, 6, 5]] },
            Piece::Induction { ids: vec![29, 3, 8, 5, 3, 8, 5], half: 3, start: 1 },
            Piece::PrecisionDrift { passages: vec![vec![4, 8, 15, 16, 23], vec![4, 2]] },
        ]
    }

    /// The decoder of `gpt2` with the tests' tiny tokenizer.
    fn decoder(gpt2: Gpt2) -> Decoder {
        Decoder {
            name: "random".into(),
            id: "random".into(),
            gpt2,
            bpe: crate::model::tokenize::bpe::tests::tiny(),
        }
    }

    #[test]
    fn a_decoders_pieces_give_what_the_model_computes_directly() {
        let gpt2 = Gpt2::random(SPEC, 3);
        let kernel = Kernel::Scalar;
        let [next, losses, gradients, induction, drift] = <[Piece; 5]>::try_from(samples()).unwrap();
        // The KL of the next token against the full model's, per set (0 with every head).
        let full = gpt2.forward(kernel, &[3, 7, 7, 2], &HeadSet::all(6)).next_logits;
        let Piece::NextKl { sets, .. } = &next else { unreachable!() };
        let want: Vec<f64> =
            sets.iter().map(|h| kl(&full, &gpt2.forward(kernel, &[3, 7, 7, 2], h).next_logits)).collect();
        let got = next.run_on_decoder(&gpt2, kernel);
        assert_eq!(got.sums()[0], 0.0);
        for (g, w) in got.sums().iter().zip(&want) {
            assert!((g - w).abs() <= 1e-9 * w.max(1.0), "{g} vs {w}");
        }
        // Each passage's summed losses; every head's |gradient| per passage.
        let heads = HeadSet::with_pruned(6, [1, 4]);
        let sums: Vec<f64> = [vec![1, 2, 3], vec![4, 5]]
            .iter()
            .map(|p| gpt2.forward(kernel, p, &heads).losses.iter().sum::<f64>())
            .collect();
        assert_eq!(losses.run_on_decoder(&gpt2, kernel), Done::Sums(sums));
        // A gradients piece: the passage's summed loss (the same as a losses piece's, to
        // rounding: the mean loss times the tokens), then every head's |gradient|.
        let ids = [9, 8, 7, 6, 5];
        let (_, grads) = passage_gradients(&gpt2, kernel, &ids, &gates(&heads));
        let graded = gradients.run_on_decoder(&gpt2, kernel).sums().to_vec();
        assert_eq!(graded[1..], grads.iter().map(|g| g.abs()).collect::<Vec<_>>());
        let summed = gpt2.forward(kernel, &ids, &heads).losses.iter().sum::<f64>();
        assert!((graded[0] - summed).abs() <= 1e-12 * summed, "{} vs {summed}", graded[0]);
        // Four scores a head, then the halves' losses: as the test's own functions give them.
        let sequence = Repeated { ids: vec![29, 3, 8, 5, 3, 8, 5], half: 3, start: 1 };
        let pass = gpt2.forward(kernel, &sequence.ids, &HeadSet::all(6));
        let scores = head_scores(&gpt2, &pass, &sequence);
        let halves = HalfLosses::of(&pass.losses, &sequence);
        let done = induction.run_on_decoder(&gpt2, kernel);
        assert_eq!(done.sums().len(), INDUCTION_SCORES * 6 + 2);
        assert_eq!(
            done.sums()[4..8],
            [
                scores[1].previous_token,
                scores[1].duplicate_token,
                scores[1].prefix_matching,
                scores[1].copying
            ]
        );
        assert_eq!(done.sums()[24..], [halves.first, halves.repeated]);
        // Each passage at both precisions, as the model's own function gives it, whichever
        // precision the model holding the piece was loaded at.
        let (f16, int8) =
            (decoder(gpt2.clone()), decoder(gpt2.clone()).at_precision(kernel, Precision::Int8));
        let drifted = drift.run(&Model::Decoder(std::rc::Rc::new(f16.clone())), kernel).unwrap();
        assert_eq!(drifted, drift.run_at_both(&int8, &f16, kernel));
        let want = at_once(crate::model::decoder::precision::passage_drift_in_turns(
            &f16.gpt2,
            &int8.gpt2,
            kernel,
            &[4, 8, 15, 16, 23],
            &AtOnce,
        ));
        assert_eq!(drifted.sums()[..PassageDrift::SUMS], want.to_sums());
        assert!(want.kl > 0.0 && want.positions == 5);
        // Each result fits its piece, and no other.
        for (piece, done) in samples().iter().zip([
            got,
            losses.run_on_decoder(&gpt2, kernel),
            gradients.run_on_decoder(&gpt2, kernel),
            done,
            drifted,
        ]) {
            assert!(piece.accepts(&SPEC, &done), "{piece:?}");
            assert!(!piece.accepts(&SPEC, &Done::Sums(vec![0.0; 1])), "{piece:?}");
            assert!(!piece.accepts(&SPEC, &Done::Embeddings(vec![])));
            assert!(piece.flops(&SPEC) > 0);
        }
    }

    #[test]
    fn a_decoders_piece_that_does_not_fit_the_model_or_its_family_is_refused() {
        let gpt2 = Gpt2::random(SPEC, 5);
        for piece in samples() {
            assert_eq!(piece.check_on_decoder(&gpt2), Ok(()), "{piece:?}");
        }
        let all = HeadSet::all(6);
        let refused = [
            (Piece::NextKl { ids: vec![], sets: vec![] }, "a token id or text length"),
            (Piece::NextKl { ids: vec![30], sets: vec![] }, "a token id or text length"),
            (Piece::NextKl { ids: vec![1; 13], sets: vec![] }, "a token id or text length"),
            (Piece::NextKl { ids: vec![1], sets: vec![HeadSet::all(7)] }, "a head set"),
            (Piece::Losses { heads: all.clone(), passages: vec![vec![4]] }, "a token id or text length"),
            (Piece::GateGradients { heads: HeadSet::all(5), passages: vec![vec![1, 2]] }, "a head set"),
            (Piece::Induction { ids: vec![1, 2, 1, 2], half: 2, start: 1 }, "an induction sequence's halves"),
            (Piece::Induction { ids: vec![1, 1], half: 1, start: 0 }, "an induction sequence's halves"),
            (Piece::Induction { ids: vec![0; 13], half: 6, start: 1 }, "a token id or text length"),
            (Piece::PrecisionDrift { passages: vec![vec![1, 2], vec![3]] }, "a token id or text length"),
        ];
        for (piece, what) in refused {
            assert_eq!(piece.check_on_decoder(&gpt2), Err(WireError::OutOfRange(what)), "{piece:?}");
        }
        // An encoder's piece sent to a decoder, and the reverse, are refused by family.
        let embed = Piece::Atlas { sentences: vec![vec![1, 2]] };
        assert_eq!(embed.check_on_decoder(&gpt2), Err(WireError::OtherFamily));
        let bert = crate::model::encoder::bert::Bert::random(ModelSpec { vocab: 30, ..SPEC }, 1);
        assert_eq!(samples()[1].check_on_encoder(&bert), Err(WireError::OtherFamily));
        let model = Model::Decoder(std::rc::Rc::new(decoder(gpt2)));
        assert_eq!(embed.run(&model, Kernel::Simd), Err(WireError::OtherFamily));
        assert!(samples()[1].run(&model, Kernel::Simd).is_ok());
    }
}
