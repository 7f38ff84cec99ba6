//! An encoder's pieces ([`Piece::Embed`], [`Piece::Gradients`], [`Piece::Ablate`],
//! [`Piece::Patch`], [`Piece::Atlas`], [`Piece::Roles`]): what they cost, whether a model can run
//! them, how they run, and what result each gives; and how the removal of every head is dealt
//! into pieces.

use std::sync::Arc;

use super::WireError;
use super::{Done, Piece, GRADIENT_COST, JS_TERM_FLOPS};
use crate::attention::atlas::PatternSums;
use crate::attention::turns::{at_once, AtOnce, Turns};
use crate::attention::HeadSet;
use crate::cpu::Kernel;
use crate::model::encoder::bert::{Bert, BertOutput, Patch};
use crate::model::encoder::gradient::pair_gradients_in_turns;
use crate::model::encoder::pruned::{cost, PrunedBert};
use crate::model::encoder::roles::RoleCounter;
use crate::model::layers::backward::gates;
use crate::model::spec::ModelSpec;

/// Whether `traces` can start the passes of an ablation of `sentences` with `heads` on a model
/// of shape `spec`: none, or one per sentence of its length with `heads`, an embedding of the
/// model's width, and every layer's input and heads' outputs of `n x d_model`.
fn traces_fit(spec: &ModelSpec, heads: &HeadSet, sentences: &[Vec<u32>], traces: &[Arc<BertOutput>]) -> bool {
    let fits = |ids: &Vec<u32>, t: &Arc<BertOutput>| {
        let rows = ids.len() * spec.d_model;
        t.seq_len == ids.len()
            && t.heads == *heads
            && t.embedding.len() == spec.d_model
            && t.layer_inputs.len() == spec.layers
            && t.head_outputs.len() == spec.layers
            && t.layer_inputs.iter().all(|x| x.len() == rows)
            && t.head_outputs.iter().all(|x| x.len() == rows)
    };
    traces.is_empty()
        || (traces.len() == sentences.len() && sentences.iter().zip(traces).all(|(s, t)| fits(s, t)))
}

/// FLOPs of [`Piece::Ablate`] on one sentence of `n` tokens for a model of shape `spec`: one
/// unpruned pass, then for each head of `ablate` the layers after its own and, in its own layer,
/// the output projection and the feed-forward layer (its heads' outputs are the unpruned pass's:
/// [`Bert::forward_from`]). The passes run the masked model, which computes every head, so each
/// layer costs a full one.
pub fn ablation_flops(spec: &ModelSpec, n: usize, ablate: &[usize]) -> u64 {
    let (layers, all) = (spec.layers as u64, cost(spec, &HeadSet::all(spec.total_heads()), &[n]));
    let layer = all.total_flops / layers;
    // The head's own layer: all but its attention, then the output projection (`n x d x d`).
    let own = layer - all.attention_flops / layers + 2 * (n * spec.d_model * spec.d_model) as u64;
    let passes = ablate.iter().map(|&h| (layers - 1 - spec.layer_of(h) as u64) * layer + own);
    layers * layer + passes.sum::<u64>()
}

/// The heads of a model with `total` heads dealt out to `pieces` pieces: head `h` goes to piece
/// `h % pieces`, so every piece holds heads of every layer and their passes cost about the same.
pub fn ablation_deal(total: usize, pieces: usize) -> Vec<Vec<usize>> {
    let pieces = pieces.clamp(1, total.max(1));
    (0..pieces).map(|i| (i..total).step_by(pieces).collect()).collect()
}

/// Every head of `bert`'s model removed alone, on `sentences`, as `pieces` pieces of
/// [`Piece::Ablate`] dealt as [`ablation_deal`] deals them (a few per thread, or one per head
/// where the page's own thread runs them and draws between heads), each handed `traces` (the
/// sentences' unpruned passes, or none).
pub fn ablation_pieces(
    spec: &ModelSpec,
    sentences: &[Vec<u32>],
    pieces: usize,
    traces: &[Arc<BertOutput>],
) -> Vec<Piece> {
    let piece = |ablate| Piece::Ablate {
        heads: HeadSet::all(spec.total_heads()),
        sentences: sentences.to_vec(),
        ablate,
        traces: traces.to_vec(),
    };
    ablation_deal(spec.total_heads(), pieces).into_iter().map(piece).collect()
}

/// FLOPs of an encoder's `piece` on a model of shape `spec` (an ablation as [`ablation_flops`] per
/// sentence).
pub(super) fn flops(piece: &Piece, spec: &ModelSpec) -> u64 {
    let all = HeadSet::all(spec.total_heads());
    let lengths = |s: &[Vec<u32>]| s.iter().map(Vec::len).collect::<Vec<_>>();
    match piece {
        Piece::Embed { heads, ids, .. } => cost(spec, heads, &lengths(ids)).total_flops,
        Piece::Gradients { heads, pairs } => {
            let lengths: Vec<usize> = pairs.iter().flat_map(|(a, b, _)| [a.len(), b.len()]).collect();
            GRADIENT_COST * cost(spec, heads, &lengths).total_flops
        }
        Piece::Ablate { sentences, ablate, traces, .. } => {
            // A pass the page handed over is not run again.
            let handed = |n: usize| if traces.is_empty() { 0 } else { ablation_flops(spec, n, &[]) };
            sentences.iter().map(|s| ablation_flops(spec, s.len(), ablate) - handed(s.len())).sum()
        }
        Piece::Roles { sentences, .. } => cost(spec, &all, &lengths(sentences)).total_flops,
        // Removing a head and patching it cost the same: from its own layer on.
        Piece::Patch { clean, patch, .. } => 2 * ablation_flops(spec, clean.len(), patch),
        Piece::Atlas { sentences } => {
            let (total, pairs) =
                (spec.total_heads() as u64, PatternSums::sums_len(spec.total_heads()) as u64);
            let rows: u64 = sentences.iter().map(|s| (s.len() * s.len()) as u64).sum();
            cost(spec, &all, &lengths(sentences)).total_flops + rows * (pairs + total) * JS_TERM_FLOPS
        }
        // A decoder's piece: `super::decoder::flops`.
        _ => 0,
    }
}

/// Whether `done` can be an encoder's `piece`'s result on a model of shape `spec`.
pub(super) fn accepts(piece: &Piece, spec: &ModelSpec, done: &Done) -> bool {
    let embeddings =
        |e: &[Vec<f32>], count: usize| e.len() == count && e.iter().all(|v| v.len() == spec.d_model);
    match (piece, done) {
        (Piece::Embed { ids, .. }, Done::Embeddings(e)) => embeddings(e, ids.len()),
        (Piece::Ablate { sentences, ablate, .. }, Done::Embeddings(e)) => {
            embeddings(e, sentences.len() * (1 + ablate.len()))
        }
        (Piece::Patch { patch, .. }, Done::Embeddings(e)) => embeddings(e, 2 + 2 * patch.len()),
        (Piece::Gradients { .. }, Done::Sums(s)) => s.len() == spec.total_heads(),
        (Piece::Roles { .. }, Done::Sums(s)) => s.len() == RoleCounter::sums_len(spec),
        (Piece::Atlas { .. }, Done::Sums(s)) => s.len() == PatternSums::sums_len(spec.total_heads()),
        _ => false,
    }
}

impl Piece {
    /// Runs an encoder's piece on `bert` with `kernel`. The piece must fit the model
    /// ([`Piece::check_on_encoder`]).
    ///
    /// # Panics
    /// If it is a decoder's piece.
    pub fn run_on_encoder(&self, bert: &Bert, kernel: Kernel) -> Done {
        at_once(self.run_on_encoder_in_turns(bert, kernel, &AtOnce))
    }

    /// [`Piece::run_on_encoder`] with its passes in `turns`' steps: the same result.
    pub async fn run_on_encoder_in_turns(&self, bert: &Bert, kernel: Kernel, turns: &dyn Turns) -> Done {
        match self {
            Piece::Embed { heads, ids, .. } => {
                Done::Embeddings(PrunedBert::new(bert, heads).embed_batch_in_turns(kernel, ids, turns).await)
            }
            Piece::Gradients { heads, pairs } => {
                let g = gates(heads);
                let mut sums = vec![0.0; bert.spec().total_heads()];
                for (u, v, y) in pairs {
                    let (_, grads) = pair_gradients_in_turns(bert, kernel, (u, v, *y), &g, turns).await;
                    sums.iter_mut().zip(&grads).for_each(|(s, d)| *s += d.abs());
                }
                Done::Sums(sums)
            }
            Piece::Ablate { heads, sentences, ablate, traces } => {
                // Each pass reuses the layers before its head's own, as the page's sweep does.
                let mut full: Vec<Arc<BertOutput>> = traces.clone();
                if traces.is_empty() {
                    for ids in sentences {
                        full.push(Arc::new(bert.forward_in_turns(kernel, ids, heads, None, turns).await));
                    }
                }
                let mut out: Vec<Vec<f32>> = full.iter().map(|f| f.embedding.clone()).collect();
                for &h in ablate {
                    let mut without = heads.clone();
                    without.set(h, false);
                    for (ids, full) in sentences.iter().zip(&full) {
                        out.push(bert.embed_in_turns(kernel, ids, &without, Some(full), None, turns).await);
                    }
                }
                Done::Embeddings(out)
            }
            Piece::Patch { clean, corrupted, patch } => {
                let all = HeadSet::all(bert.spec().total_heads());
                let clean_run = bert.forward_in_turns(kernel, clean, &all, None, turns).await;
                let corrupted_run = bert.forward_in_turns(kernel, corrupted, &all, None, turns).await;
                let mut out = vec![clean_run.embedding.clone(), corrupted_run.embedding.clone()];
                for &h in patch {
                    let from = Patch { heads: &[h], from: &clean_run };
                    let patched =
                        bert.embed_in_turns(kernel, corrupted, &all, Some(&corrupted_run), Some(from), turns);
                    out.push(patched.await);
                    let without = HeadSet::with_pruned(all.len(), [h]);
                    out.push(
                        bert.embed_in_turns(kernel, clean, &without, Some(&clean_run), None, turns).await,
                    );
                }
                Done::Embeddings(out)
            }
            Piece::Atlas { sentences } => {
                let all = HeadSet::all(bert.spec().total_heads());
                let mut sums = PatternSums::new(all.len());
                for ids in sentences {
                    sums.add(
                        &bert.forward_in_turns(kernel, ids, &all, None, turns).await.attention,
                        ids.len(),
                    );
                }
                Done::Sums(sums.to_sums())
            }
            Piece::Roles { sentences, punctuation } => {
                let (spec, mut counter) = (bert.spec(), RoleCounter::new(bert.spec()));
                let all = HeadSet::all(spec.total_heads());
                for (ids, punctuation) in sentences.iter().zip(punctuation) {
                    counter.add(
                        &bert.forward_in_turns(kernel, ids, &all, None, turns).await.attention,
                        punctuation,
                    );
                }
                Done::Sums(counter.to_sums())
            }
            _ => panic!("a decoder's piece run on an encoder"),
        }
    }

    /// Whether `bert` can run this encoder's piece: one flag per head, heads removed among them, token ids
    /// in its vocabulary, no sentence longer than its positions or empty, and a punctuation flag
    /// per token.
    pub fn check_on_encoder(&self, bert: &Bert) -> Result<(), WireError> {
        let spec = bert.spec();
        let (heads, sentences): (Option<&HeadSet>, Vec<&Vec<u32>>) = match self {
            Piece::Embed { heads, ids, .. } => (Some(heads), ids.iter().collect()),
            Piece::Gradients { heads, pairs } => {
                (Some(heads), pairs.iter().flat_map(|(u, v, _)| [u, v]).collect())
            }
            Piece::Ablate { heads, sentences, traces, .. } => {
                if !traces_fit(spec, heads, sentences, traces) {
                    return Err(WireError::OutOfRange("a handed pass"));
                }
                (Some(heads), sentences.iter().collect())
            }
            Piece::Roles { sentences, .. } => (None, sentences.iter().collect()),
            Piece::Patch { clean, corrupted, .. } => (None, vec![clean, corrupted]),
            Piece::Atlas { sentences } => (None, sentences.iter().collect()),
            _ => return Err(WireError::OtherFamily),
        };
        if heads.is_some_and(|h| h.len() != spec.total_heads()) {
            return Err(WireError::OutOfRange("a head set"));
        }
        match self {
            Piece::Ablate { ablate: heads, .. } | Piece::Patch { patch: heads, .. }
                if heads.iter().any(|&h| h >= spec.total_heads()) =>
            {
                return Err(WireError::OutOfRange("a head"));
            }
            Piece::Patch { clean, corrupted, .. } if clean.len() != corrupted.len() => {
                return Err(WireError::OutOfRange("a patched pair's length"));
            }
            Piece::Roles { sentences, punctuation }
                if punctuation.len() != sentences.len()
                    || sentences.iter().zip(punctuation).any(|(s, p)| s.len() != p.len()) =>
            {
                return Err(WireError::OutOfRange("a punctuation flag"));
            }
            _ => {}
        }
        let vocab = bert.vocab_size();
        let fits = |s: &&Vec<u32>| {
            !s.is_empty() && s.len() <= spec.positions && s.iter().all(|&t| (t as usize) < vocab)
        };
        if !sentences.iter().all(fits) {
            return Err(WireError::OutOfRange("a token id or sentence length"));
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::attention::precision::Precision;

    const SPEC: ModelSpec = ModelSpec::MINILM_L6_V2;
    const TOTAL: usize = 72;

    /// An encoder's pieces of every kind, for the wire's tests too.
    pub(crate) fn samples() -> Vec<Piece> {
        let heads = HeadSet::with_pruned(TOTAL, [0, 13, 71]);
        vec![
            Piece::Embed {
                heads: heads.clone(),
                ids: vec![vec![101, 7592, 102], vec![101, 102]],
                precision: None,
            },
            Piece::Embed { heads: HeadSet::all(TOTAL), ids: vec![], precision: Some(Precision::Int8) },
            Piece::Gradients { heads: heads.clone(), pairs: vec![(vec![101, 2, 102], vec![101, 102], 0.25)] },
            Piece::Ablate {
                heads: heads.clone(),
                sentences: vec![vec![101, 7592, 102], vec![101, 102]],
                ablate: vec![1, 2, 70],
                // (Shapes a model would refuse: the wire carries whatever it is given.)
                traces: [3, 2].map(|n| tiny_trace(n, &heads)).to_vec(),
            },
            Piece::Roles {
                sentences: vec![vec![101, 1012, 102], vec![101, 102]],
                punctuation: vec![vec![false, true, false], vec![false, false]],
            },
            Piece::Patch {
                clean: vec![101, 7592, 102],
                corrupted: vec![101, 2088, 102],
                patch: vec![0, 71, 5],
            },
            Piece::Atlas { sentences: vec![vec![101, 7592, 102], vec![101, 102]] },
        ]
    }

    /// A pass of `n` tokens with `heads` of two layers of two values per token.
    fn tiny_trace(n: usize, heads: &HeadSet) -> Arc<BertOutput> {
        let values = |seed: f32| (0..2 * n).map(|i| seed + i as f32 / 8.0).collect::<Vec<f32>>();
        Arc::new(BertOutput {
            embedding: vec![0.5, -0.25],
            attention: Vec::new(),
            head_outputs: vec![Arc::new(values(1.0)), Arc::new(values(2.0))],
            seq_len: n,
            layer_inputs: vec![values(-1.0), values(-2.0)],
            heads: heads.clone(),
            first_computed: 0,
        })
    }

    #[test]
    fn an_ablation_counts_the_unpruned_pass_and_each_heads_layers_from_its_own() {
        // Counted here from the shapes: a layer is Q, K, V, scores, weighted sums, output
        // projection and the feed-forward layer; a head's own layer is the last two.
        let (d, f) = (384u64, 1536u64);
        let layer = |n: u64| 2 * n * d * 3 * d + 2 * 2 * n * n * d + 2 * n * d * d + 2 * 2 * n * d * f;
        let own = |n: u64| 2 * n * d * d + 2 * 2 * n * d * f;
        let every: Vec<usize> = (0..TOTAL).collect();
        for n in [1usize, 32, 512] {
            let m = n as u64;
            assert_eq!(ablation_flops(&SPEC, n, &[]), 6 * layer(m));
            // Layer 1's head 0: its own layer's end, then five whole layers; layer 6's: only its own.
            assert_eq!(ablation_flops(&SPEC, n, &[0]), 6 * layer(m) + own(m) + 5 * layer(m));
            assert_eq!(ablation_flops(&SPEC, n, &[71]), 6 * layer(m) + own(m));
            // Dealt out in pieces, each piece adds its own unpruned pass.
            let (even, odd): (Vec<usize>, Vec<usize>) = every.iter().partition(|&&h| h % 2 == 0);
            assert_eq!(
                ablation_flops(&SPEC, n, &even) + ablation_flops(&SPEC, n, &odd),
                ablation_flops(&SPEC, n, &every) + 6 * layer(m)
            );
        }
        // The sweeps of BENCHMARKS.md 6: 27 GFLOP at 32 tokens, 510 at 512.
        let sweep = |n| ablation_flops(&SPEC, n, &every) as f64 / 1e9;
        assert_eq!((sweep(32).round(), sweep(512).round()), (27.0, 510.0));
        let piece = Piece::Ablate {
            heads: HeadSet::all(TOTAL),
            sentences: vec![vec![101; 32], vec![101; 5]],
            ablate: vec![3, 40],
            traces: vec![],
        };
        assert_eq!(
            piece.flops(&SPEC),
            ablation_flops(&SPEC, 32, &[3, 40]) + ablation_flops(&SPEC, 5, &[3, 40])
        );
        // Handed the unpruned passes, a piece does not count them.
        let all = HeadSet::all(TOTAL);
        let handed = Piece::Ablate {
            heads: all.clone(),
            sentences: vec![vec![101; 32], vec![101; 5]],
            ablate: vec![3, 40],
            traces: vec![tiny_trace(32, &all), tiny_trace(5, &all)],
        };
        let unpruned = ablation_flops(&SPEC, 32, &[]) + ablation_flops(&SPEC, 5, &[]);
        assert_eq!(handed.flops(&SPEC), piece.flops(&SPEC) - unpruned);
    }

    #[test]
    fn a_sweep_is_dealt_out_with_every_head_once_and_every_layer_in_every_piece() {
        let small = ModelSpec { layers: 2, heads: 4, d_model: 16, ..SPEC };
        for spec in [SPEC, small] {
            let total = spec.total_heads();
            for pieces in [0, 1, 2, 5, 12, 72, 100] {
                let work = ablation_pieces(&spec, &[vec![101, 7592, 102]], pieces, &[]);
                assert_eq!(work.len(), pieces.clamp(1, total));
                let mut seen: Vec<usize> = work
                    .iter()
                    .flat_map(|w| match w {
                        Piece::Ablate { heads, sentences, ablate, .. } => {
                            assert!(!heads.any_pruned() && sentences == &[vec![101, 7592, 102]]);
                            if pieces <= spec.heads {
                                // Every layer in every piece, and pieces within one head of each other.
                                let layers = |l| ablate.iter().any(|&h| spec.layer_of(h) == l);
                                assert!((0..spec.layers).all(layers), "{pieces}");
                                assert!(ablate.len().abs_diff(total / work.len()) <= 1);
                            }
                            ablate.clone()
                        }
                        _ => panic!("an ablation"),
                    })
                    .collect();
                seen.sort_unstable();
                assert_eq!(seen, (0..total).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn a_result_is_accepted_only_for_its_own_kind_of_piece() {
        let [embed, _, gradients, ablate, roles, patch, atlas] = <[Piece; 7]>::try_from(samples()).unwrap();
        let embeddings = |count| Done::Embeddings(vec![vec![0.0; SPEC.d_model]; count]);
        let sums = Done::Sums(vec![0.0; TOTAL]);
        assert!(embed.accepts(&SPEC, &embeddings(2)) && gradients.accepts(&SPEC, &sums));
        assert!(!embed.accepts(&SPEC, &sums) && !gradients.accepts(&SPEC, &embeddings(2)));
        assert!(!embed.accepts(&SPEC, &Done::Embeddings(vec![vec![0.0; 3]; 2])));
        assert!(!gradients.accepts(&SPEC, &Done::Sums(vec![0.0; 3])));
        // Two sentences, unpruned and with each of three heads removed.
        assert!(ablate.accepts(&SPEC, &embeddings(8)) && !ablate.accepts(&SPEC, &embeddings(6)));
        let role_sums = Done::Sums(vec![0.0; RoleCounter::sums_len(&SPEC)]);
        assert!(roles.accepts(&SPEC, &role_sums) && !roles.accepts(&SPEC, &sums));
        // Both runs, then a patched and an ablated run per head.
        assert!(patch.accepts(&SPEC, &embeddings(8)) && !patch.accepts(&SPEC, &embeddings(5)));
        assert!(!patch.accepts(&SPEC, &sums));
        // Every two heads' sum, and the rows.
        assert!(
            atlas.accepts(&SPEC, &Done::Sums(vec![0.0; 72 * 71 / 2 + 1])) && !atlas.accepts(&SPEC, &sums)
        );
    }

    #[test]
    fn a_piece_that_does_not_fit_the_model_is_refused() {
        let spec = ModelSpec { layers: 2, heads: 4, d_model: 16, ffn: 24, vocab: 30, positions: 8, ..SPEC };
        let bert = Bert::random(spec, 1);
        let all = HeadSet::all(8);
        let ablation = |traces| Piece::Ablate {
            heads: all.clone(),
            sentences: vec![vec![2, 5, 3]],
            ablate: vec![0, 7],
            traces,
        };
        let ok = ablation(vec![]);
        assert_eq!(ok.check_on_encoder(&bert), Ok(()));
        // Handed its unpruned pass (without attention weights, as the wire carries it), the same
        // embeddings, bit for bit; a pass of another length or other heads is refused.
        let pass = |ids: &[u32], heads: &HeadSet| {
            let full = bert.forward(Kernel::Simd, ids, heads);
            Arc::new(BertOutput { attention: Vec::new(), ..full })
        };
        let handed = ablation(vec![pass(&[2, 5, 3], &all)]);
        let through = Piece::decode(&handed.encode()).unwrap();
        assert_eq!((through.check_on_encoder(&bert), &through), (Ok(()), &handed));
        assert_eq!(through.run_on_encoder(&bert, Kernel::Simd), ok.run_on_encoder(&bert, Kernel::Simd));
        for bad in [pass(&[2, 5], &all), pass(&[2, 5, 3], &HeadSet::with_pruned(8, [1])), tiny_trace(3, &all)]
        {
            let refused = ablation(vec![bad]);
            assert_eq!(refused.check_on_encoder(&bert), Err(WireError::OutOfRange("a handed pass")));
        }
        assert_eq!(
            Piece::Patch { clean: vec![2, 5, 3], corrupted: vec![2, 6, 3], patch: vec![0, 7] }
                .check_on_encoder(&bert),
            Ok(())
        );
        let refused = [
            Piece::Ablate {
                heads: all.clone(),
                sentences: vec![vec![2, 5, 3]],
                ablate: vec![8],
                traces: vec![],
            },
            Piece::Embed { heads: HeadSet::all(72), ids: vec![vec![2, 3]], precision: None },
            Piece::Embed { heads: all.clone(), ids: vec![vec![2, 30]], precision: None },
            Piece::Embed { heads: all.clone(), ids: vec![vec![2; 9]], precision: None },
            Piece::Embed { heads: all, ids: vec![vec![]], precision: None },
            Piece::Roles { sentences: vec![vec![2, 3]], punctuation: vec![vec![false]] },
            Piece::Patch { clean: vec![2, 5, 3], corrupted: vec![2, 6], patch: vec![0] },
            Piece::Patch { clean: vec![2, 5, 3], corrupted: vec![2, 6, 3], patch: vec![8] },
            Piece::Patch { clean: vec![2, 5, 3], corrupted: vec![2, 30, 3], patch: vec![1] },
            Piece::Patch { clean: vec![], corrupted: vec![], patch: vec![1] },
            Piece::Atlas { sentences: vec![vec![2, 30]] },
        ];
        for w in refused {
            assert!(w.check_on_encoder(&bert).is_err(), "{w:?}");
        }
    }

    /// A random model of odd sizes (3 layers of 3 heads of 5) and two sentences of six tokens.
    const ODD: ModelSpec = ModelSpec {
        layers: 3,
        heads: 3,
        d_model: 15,
        ffn: 23,
        vocab: 40,
        positions: 9,
        ..ModelSpec::MINILM_L6_V2
    };
    const CLEAN: [u32; 6] = [1, 7, 8, 9, 3, 2];
    const CORRUPTED: [u32; 6] = [1, 30, 31, 9, 3, 2];

    #[test]
    fn the_work_piece_gives_the_direct_passes_and_survives_any_dealing() {
        let bert = Bert::random(ODD, 7);
        let all = HeadSet::all(ODD.total_heads());
        let kernel = Kernel::Scalar;
        let work =
            |patch: Vec<usize>| Piece::Patch { clean: CLEAN.to_vec(), corrupted: CORRUPTED.to_vec(), patch };
        let Done::Embeddings(e) = work(vec![7, 2]).run_on_encoder(&bert, kernel) else {
            panic!("embeddings")
        };
        let clean = bert.forward(kernel, &CLEAN, &all);
        assert_eq!((&e[0], &e[1]), (&clean.embedding, &bert.forward(kernel, &CORRUPTED, &all).embedding));
        for (k, h) in [7usize, 2].into_iter().enumerate() {
            let patched = bert.forward_patched(
                kernel,
                &CORRUPTED,
                &all,
                None,
                Some(Patch { heads: &[h], from: &clean }),
            );
            assert_eq!(e[2 + 2 * k], patched.embedding, "head {h} patched");
            let ablated = bert.forward(kernel, &CLEAN, &HeadSet::with_pruned(all.len(), [h]));
            assert_eq!(e[3 + 2 * k], ablated.embedding, "head {h} removed");
        }
        // One piece per head or all in one: the same bits.
        let Done::Embeddings(one) = work(vec![2]).run_on_encoder(&bert, kernel) else { panic!("embeddings") };
        assert_eq!(one[2..], e[4..]);
    }
}
