//! The trained model's passes against each other on the CPU kernel: a pruned pass that reuses
//! the unpruned one's layers, the really pruned model against the masked one, and one sentence
//! cut across threads. Needs the model files (scripts/fetch-model.sh).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::minilm::*;
use headlab::attention::turns::{at_once, InSteps};
use headlab::attention::HeadSet;
use headlab::cpu::Kernel;
use headlab::model::encoder::bert::BertOutput;

#[test]
fn a_pruned_pass_recomputes_only_the_layers_from_the_first_pruned_one() {
    let bert = checkpoint();
    let tok = tokenizer();
    let ids: Vec<u32> = tok.encode("The bank by the river was steep.").iter().map(|t| t.id).collect();
    let full = bert.forward(Kernel::Simd, &ids, &HeadSet::all(SPEC.total_heads()));
    assert_eq!((full.first_computed, full.layer_inputs.len()), (0, SPEC.layers));
    for (mask, first) in staged_masks() {
        let scratch = bert.forward(Kernel::Simd, &ids, &mask);
        let reused = bert.forward_from(Kernel::Simd, &ids, &mask, Some(&full));
        assert_eq!(reused.first_computed, first, "{mask:?}");
        // The same operations in the same order: bit-identical, not merely close.
        assert_eq!(reused.embedding, scratch.embedding, "first layer {first}");
        assert_eq!(reused.attention, scratch.attention, "first layer {first}");
        assert_eq!(reused.layer_inputs, scratch.layer_inputs, "first layer {first}");
        assert_eq!(reused.head_outputs, scratch.head_outputs, "first layer {first}");
        assert_eq!(reused.head_outputs.len(), SPEC.layers);
        // The embedding alone (what the sweeps compare), from the trace or from scratch, keeping
        // nothing else: the same bits.
        for base in [Some(&full), None] {
            assert_eq!(bert.embed_patched(Kernel::Simd, &ids, &mask, base, None), scratch.embedding);
        }
    }
    // A trace without the heads' outputs (as the GPU gives it) is reused up to the layer's input,
    // and the heads of that layer are computed again: the same bits.
    let gpu_like = BertOutput { head_outputs: Vec::new(), ..full.clone() };
    for (mask, first) in staged_masks() {
        let reused = bert.forward_from(Kernel::Simd, &ids, &mask, Some(&gpu_like));
        assert_eq!(reused.first_computed, first, "{mask:?}");
        assert_eq!(
            reused.embedding,
            bert.forward(Kernel::Simd, &ids, &mask).embedding,
            "first layer {first}"
        );
        assert_eq!(
            reused.head_outputs.len(),
            if first == 0 { SPEC.layers } else { 0 },
            "kept only without a gap"
        );
        assert_eq!(bert.embed_patched(Kernel::Simd, &ids, &mask, Some(&gpu_like), None), reused.embedding);
    }
    // Another sentence cannot reuse the trace: everything is computed.
    let other: Vec<u32> = tok.encode("Something else entirely.").iter().map(|t| t.id).collect();
    let (mask, _) = staged_masks().swap_remove(2);
    assert_eq!(bert.forward_from(Kernel::Simd, &other, &mask, Some(&full)).first_computed, 0);
}

#[test]
fn a_pass_in_steps_gives_the_bits_of_a_pass_at_once() {
    // The page's steps (each product and head of a layer, the products cut into blocks) on a
    // sentence of 200 tokens, from scratch and from the unpruned pass.
    let bert = checkpoint();
    let tok = tokenizer();
    let ids = ids(&tok, &"The bank by the river was steep, and the water was cold. ".repeat(14));
    assert!(ids.len() > 150, "{} tokens", ids.len());
    let all = HeadSet::all(SPEC.total_heads());
    let full = bert.forward(Kernel::Simd, &ids, &all);
    for (mask, _) in staged_masks() {
        for base in [None, Some(&full)] {
            let turns = InSteps::of(8 << 20);
            let cut = at_once(bert.forward_in_turns(Kernel::Simd, &ids, &mask, base, &turns));
            let whole = bert.forward_from(Kernel::Simd, &ids, &mask, base);
            assert_eq!(
                (&cut.embedding, &cut.attention, &cut.head_outputs, &cut.layer_inputs),
                (&whole.embedding, &whole.attention, &whole.head_outputs, &whole.layer_inputs)
            );
            assert!(
                turns.taken() >= (SPEC.layers - whole.first_computed) * (6 + SPEC.heads),
                "{}",
                turns.taken()
            );
            let embedded =
                at_once(bert.embed_in_turns(Kernel::Simd, &ids, &mask, base, None, &InSteps::of(8 << 20)));
            assert_eq!(embedded, whole.embedding);
        }
    }
}

#[test]
fn the_really_pruned_model_gives_the_masked_models_embeddings() {
    use headlab::model::encoder::pruned::PrunedBert;
    let (bert, tok) = (checkpoint(), tokenizer());
    let sentences: Vec<Vec<u32>> =
        ["The bank by the river was steep.", "She paid off her loan at the bank.", "Heads."]
            .iter()
            .map(|s| tok.encode(s).iter().map(|t| t.id).collect())
            .collect();
    for kernel in Kernel::ALL {
        let mut worst = 0.0f64;
        for (what, heads) in pruned_sets() {
            let pruned = PrunedBert::new(&bert, &heads);
            let batch = pruned.embed_batch(kernel, &sentences);
            for (ids, together) in sentences.iter().zip(&batch) {
                let masked = bert.forward(kernel, ids, &heads).embedding;
                let alone = pruned.embed(kernel, ids);
                let want: Vec<f64> = masked.iter().map(|&v| v as f64).collect();
                for (how, got) in [("alone", &alone), ("in a batch", together)] {
                    let e = rel_error(got, &want);
                    assert!(e < 1e-6, "{kernel:?}, {what} pruned, {how}: relative error {e:e}");
                    worst = worst.max(e);
                }
            }
        }
        println!("{kernel:?}: really pruned vs masked, worst relative error {worst:.1e}");
    }
}

/// The pass cut across threads (`model::sharded`: shards of heads and feed-forward units, run here
/// one after the other) against the single-thread pass, for every cut from 1 to 12 shards.
#[test]
fn a_sentence_split_into_shards_gives_the_single_thread_embedding() {
    use headlab::model::encoder::sharded::{BertShard, SplitPass};
    let (bert, tok) = (checkpoint(), tokenizer());
    let long =
        "The bank by the river was steep, and the heads of the herons rose above the reeds. ".repeat(6);
    let all = HeadSet::all(SPEC.total_heads());
    for text in ["Heads.", "She paid off her loan at the bank.", long.as_str()] {
        let ids: Vec<u32> = tok.encode(text).iter().map(|t| t.id).collect();
        for kernel in Kernel::ALL {
            let whole = bert.forward(kernel, &ids, &all).embedding;
            let want: Vec<f64> = whole.iter().map(|&v| v as f64).collect();
            for count in [1, 2, 3, 12] {
                let shards: Vec<BertShard> = (0..count).map(|s| BertShard::new(&bert, s, count)).collect();
                let mut pass = SplitPass::new(&bert, &ids);
                assert_eq!(pass.embedding(), None, "not done before its steps");
                while let Some(step) = pass.step() {
                    // NaN until written: a partial branch with a gap would poison the embedding.
                    let mut parts: Vec<Vec<f32>> = vec![vec![f32::NAN; pass.input().len()]; count];
                    for (part, shard) in parts.iter_mut().zip(&shards) {
                        shard.run_into(kernel, step, pass.input(), part);
                    }
                    pass.absorb(&parts.iter().map(Vec::as_slice).collect::<Vec<_>>());
                }
                let e = rel_error(&pass.embedding().expect("every step absorbed"), &want);
                // Each shard sums its own heads and units, the driver adds the shards' sums: the
                // same terms grouped differently, rounding only (measured at most 1.0e-6, against
                // 4e-7 between the fp32 pass and float64); one shard groups them as one thread.
                assert!(count > 1 || e == 0.0, "{kernel:?}, one shard: not the same bits ({e:e})");
                assert!(e < 2e-6, "{kernel:?}, {} tokens in {count} shards: relative error {e:e}", ids.len());
            }
        }
    }
}
