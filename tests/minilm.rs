//! The trained model against its reference (tests/reference/minilm.py): token ids from the
//! model's own tokenizer, and the forward pass. Needs the model files: scripts/fetch-model.sh
//! (run by scripts/test.sh) puts them where `model_dir()` looks.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::path::PathBuf;

use common::model_dir;
use headlab::attention::HeadSet;
use headlab::model::tokenizer::Tokenizer;
use serde_json::Value;

fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn tokenizer_matches_the_reference_ids_on_every_case() {
    let vocab = std::fs::read_to_string(model_dir().join("vocab.txt")).unwrap();
    let tok = Tokenizer::from_vocab(&vocab).unwrap();
    assert_eq!(tok.vocab_size(), 30522);
    let cases = fixture("minilm-tokens.json");
    for case in cases.as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let want: Vec<u32> =
            case["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
        let got: Vec<u32> = tok.encode(text).iter().map(|t| t.id).collect();
        assert_eq!(got, want, "{text:?}");
    }
    println!("{} tokenizer cases match the reference", cases.as_array().unwrap().len());
}

use headlab::cpu::Kernel;
use headlab::model::bert::{Bert, BertOutput, HEADS, LAYERS, TOTAL_HEADS};

/// The fp32 checkpoint, read with the safetensors crate.
fn checkpoint() -> Bert {
    let bytes = std::fs::read(model_dir().join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    Bert::from_tensors(|name| {
        let t = st.tensor(name).ok()?;
        let data = t.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        Some((t.shape().to_vec(), data))
    })
    .unwrap()
}

/// The heads a fixture case prunes, listed as `[layer, head]` pairs.
fn fixture_pruned(case: &Value) -> HeadSet {
    let pairs = case["pruned"].as_array().unwrap();
    HeadSet::with_pruned(
        TOTAL_HEADS,
        pairs.iter().map(|p| p[0].as_u64().unwrap() as usize * HEADS + p[1].as_u64().unwrap() as usize),
    )
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

/// max |got - want| / max |want|.
fn rel_error(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    got.iter().zip(want).fold(0.0f64, |m, (&g, &w)| m.max((g as f64 - w).abs())) / scale
}

fn cosine(a: &[f32], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y).sum();
    let na: f64 = a.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
    dot / (na * nb)
}

#[test]
fn fp32_forward_matches_the_reference_on_both_kernels() {
    let bert = checkpoint();
    let tok =
        Tokenizer::from_vocab(&std::fs::read_to_string(model_dir().join("vocab.txt")).unwrap()).unwrap();
    for kernel in Kernel::ALL {
        let mut worst = 0.0f64;
        for case in fixture("minilm-forward.json").as_array().unwrap() {
            let text = case["text"].as_str().unwrap();
            let ids: Vec<u32> = tok.encode(text).iter().map(|t| t.id).collect();
            let want_ids: Vec<u32> =
                case["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
            assert_eq!(ids, want_ids, "{text}");

            let out = bert.forward(kernel, &ids, &HeadSet::all(TOTAL_HEADS));
            let errors = [
                rel_error(&out.embedding, &floats(&case["embedding"])),
                rel_error(&out.attention[0], &floats(&case["attention_layer0"])),
                rel_error(&out.attention[5], &floats(&case["attention_layer5"])),
            ];
            let pruned = fixture_pruned(case);
            let masked = bert.forward(kernel, &ids, &pruned);
            let masked_error = rel_error(&masked.embedding, &floats(&case["embedding_pruned"]));
            for (what, e) in ["embedding", "layer 0 attention", "layer 5 attention", "pruned embedding"]
                .iter()
                .zip(errors.iter().chain([&masked_error]))
            {
                assert!(*e < 1e-4, "{kernel:?} {text:?}: {what} relative error {e:e}");
                worst = worst.max(*e);
            }
            // Pruning 8 of 72 heads moves the embedding, but not far: the seed's claim, measured.
            let c = cosine(&masked.embedding, &floats(&case["embedding"]));
            assert!(c < 0.9999 && c > 0.5, "{text:?}: cosine {c}");
        }
        println!("{kernel:?}: worst relative error vs the float64 reference {worst:.2e}");
    }
}

/// The model the page runs: the checkpoint encoded as convert-model does (f16 weights), decoded
/// as the page does, with its tokenizer and the encoded bytes.
fn f16_model() -> (Bert, Tokenizer, Vec<u8>) {
    let bytes = std::fs::read(model_dir().join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let tensors: Vec<_> = headlab::model::bert::tensor_names()
        .into_iter()
        .map(|(name, shape)| {
            let t = st.tensor(&name).unwrap();
            let v = t.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            (name, shape, v)
        })
        .collect();
    let vocab = std::fs::read_to_string(model_dir().join("vocab.txt")).unwrap();
    let encoded = headlab::model::asset::encode(&tensors, &vocab);
    let mut asset = headlab::model::asset::decode(&encoded).unwrap();
    let bert = Bert::from_tensors(|name| asset.tensors.remove(name)).unwrap();
    let tok = Tokenizer::from_vocab(&asset.vocab).unwrap();
    (bert, tok, encoded)
}

#[test]
fn f16_asset_stays_within_its_documented_bounds() {
    let (bert, tok, encoded) = f16_model();
    // The page accepts exactly this file: the converter is deterministic, so its hash is fixed.
    assert_eq!(headlab::model::asset::sha256_hex(&encoded), headlab::model::asset::ASSET_SHA256);
    let mut damaged = encoded.clone();
    damaged[encoded.len() / 2] ^= 1;
    assert!(headlab::model::asset::verify(&damaged).unwrap_err().to_string().contains("damaged"));
    let (mut worst_attention, mut worst_cosine) = (0.0f64, 1.0f64);
    for case in fixture("minilm-forward.json").as_array().unwrap() {
        let ids: Vec<u32> = tok.encode(case["text"].as_str().unwrap()).iter().map(|t| t.id).collect();
        let out = bert.forward(Kernel::Simd, &ids, &HeadSet::all(TOTAL_HEADS));
        for (layer, key) in [(0, "attention_layer0"), (5, "attention_layer5")] {
            let want = floats(&case[key]);
            let abs = out.attention[layer]
                .iter()
                .zip(&want)
                .fold(0.0f64, |m, (&g, &w)| m.max((g as f64 - w).abs()));
            worst_attention = worst_attention.max(abs);
        }
        worst_cosine = worst_cosine.min(cosine(&out.embedding, &floats(&case["embedding"])));
    }
    println!(
        "f16 asset: {:.1} MiB; attention weights within {worst_attention:.1e} (absolute) of fp32; embedding cosine to fp32 >= 1 - {:.1e}",
        encoded.len() as f64 / 1048576.0,
        1.0 - worst_cosine
    );
    // The bounds README states for the asset.
    assert!(worst_attention < 2e-3, "attention error {worst_attention:e}");
    assert!(worst_cosine > 0.9999, "embedding cosine {worst_cosine}");
}

#[test]
fn gpu_forward_matches_the_reference_on_lavapipe() {
    let ctx = std::rc::Rc::new(
        pollster::block_on(headlab::gpu::GpuContext::acquire()).expect("a GPU adapter (lavapipe in CI)"),
    );
    println!("GPU adapter under test: {}", ctx.adapter_label());
    let bert = checkpoint();
    let gpu = pollster::block_on(headlab::gpu::GpuBert::new(ctx, &bert)).unwrap();
    let tok =
        Tokenizer::from_vocab(&std::fs::read_to_string(model_dir().join("vocab.txt")).unwrap()).unwrap();
    let mut worst = 0.0f64;
    for case in fixture("minilm-forward.json").as_array().unwrap() {
        let ids: Vec<u32> = tok.encode(case["text"].as_str().unwrap()).iter().map(|t| t.id).collect();
        let out = pollster::block_on(gpu.forward(&bert, &ids, &HeadSet::all(TOTAL_HEADS))).unwrap();
        let pruned = fixture_pruned(case);
        let masked = pollster::block_on(gpu.forward(&bert, &ids, &pruned)).unwrap();
        for (what, e) in [
            ("embedding", rel_error(&out.embedding, &floats(&case["embedding"]))),
            ("layer 0 attention", rel_error(&out.attention[0], &floats(&case["attention_layer0"]))),
            ("layer 5 attention", rel_error(&out.attention[5], &floats(&case["attention_layer5"]))),
            ("pruned embedding", rel_error(&masked.embedding, &floats(&case["embedding_pruned"]))),
        ] {
            assert!(e < 1e-4, "gpu: {what} relative error {e:e}");
            worst = worst.max(e);
        }
    }
    println!("GPU: worst relative error vs the float64 reference {worst:.2e}");
}

/// Masks that prune heads from a given layer on (and none before), with the first layer each
/// should recompute.
fn staged_masks() -> Vec<(HeadSet, usize)> {
    let mut cases = vec![(HeadSet::all(TOTAL_HEADS), LAYERS)];
    for (first, heads) in [(0, vec![3]), (2, vec![2 * HEADS + 7, 4 * HEADS]), (5, vec![5 * HEADS + 11])] {
        cases.push((HeadSet::with_pruned(TOTAL_HEADS, heads), first));
    }
    cases
}

#[test]
fn a_pruned_pass_recomputes_only_the_layers_from_the_first_pruned_one() {
    let bert = checkpoint();
    let tok =
        Tokenizer::from_vocab(&std::fs::read_to_string(model_dir().join("vocab.txt")).unwrap()).unwrap();
    let ids: Vec<u32> = tok.encode("The bank by the river was steep.").iter().map(|t| t.id).collect();
    let full = bert.forward(Kernel::Simd, &ids, &HeadSet::all(TOTAL_HEADS));
    assert_eq!((full.first_computed, full.layer_inputs.len()), (0, LAYERS));
    for (mask, first) in staged_masks() {
        let scratch = bert.forward(Kernel::Simd, &ids, &mask);
        let reused = bert.forward_from(Kernel::Simd, &ids, &mask, Some(&full));
        assert_eq!(reused.first_computed, first, "{mask:?}");
        // The same operations in the same order: bit-identical, not merely close.
        assert_eq!(reused.embedding, scratch.embedding, "first layer {first}");
        assert_eq!(reused.attention, scratch.attention, "first layer {first}");
        assert_eq!(reused.layer_inputs, scratch.layer_inputs, "first layer {first}");
        assert_eq!(reused.head_outputs, scratch.head_outputs, "first layer {first}");
        assert_eq!(reused.head_outputs.len(), LAYERS);
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
        assert_eq!(reused.head_outputs.len(), if first == 0 { LAYERS } else { 0 }, "kept only without a gap");
    }
    // Another sentence cannot reuse the trace: everything is computed.
    let other: Vec<u32> = tok.encode("Something else entirely.").iter().map(|t| t.id).collect();
    let (mask, _) = staged_masks().swap_remove(2);
    assert_eq!(bert.forward_from(Kernel::Simd, &other, &mask, Some(&full)).first_computed, 0);
}

#[test]
fn the_gpu_reuses_layers_the_same_way() {
    let ctx = std::rc::Rc::new(
        pollster::block_on(headlab::gpu::GpuContext::acquire()).expect("a GPU adapter (lavapipe in CI)"),
    );
    let bert = checkpoint();
    let gpu = pollster::block_on(headlab::gpu::GpuBert::new(ctx, &bert)).unwrap();
    let tok =
        Tokenizer::from_vocab(&std::fs::read_to_string(model_dir().join("vocab.txt")).unwrap()).unwrap();
    let ids: Vec<u32> = tok.encode("The bank by the river was steep.").iter().map(|t| t.id).collect();
    let full = pollster::block_on(gpu.forward(&bert, &ids, &HeadSet::all(TOTAL_HEADS))).unwrap();
    assert_eq!(full.layer_inputs.len(), LAYERS);
    let cpu_full = bert.forward(Kernel::Simd, &ids, &HeadSet::all(TOTAL_HEADS));
    for (l, (g, c)) in full.layer_inputs.iter().zip(&cpu_full.layer_inputs).enumerate() {
        assert!(rel_error(g, &c.iter().map(|&v| v as f64).collect::<Vec<_>>()) < 1e-4, "layer {l} input");
    }
    for (mask, first) in staged_masks() {
        let scratch = pollster::block_on(gpu.forward(&bert, &ids, &mask)).unwrap();
        let reused = pollster::block_on(gpu.forward_from(&bert, &ids, &mask, Some(&full))).unwrap();
        assert_eq!(reused.first_computed, first);
        let e =
            rel_error(&reused.embedding, &scratch.embedding.iter().map(|&v| v as f64).collect::<Vec<_>>());
        assert!(e < 1e-6, "first layer {first}: embedding differs by {e:e}");
        assert_eq!(reused.attention.len(), LAYERS);
    }
}

use headlab::model::analysis::{self, ImportanceSweep, Runner};

fn tokenizer() -> Tokenizer {
    Tokenizer::from_vocab(&std::fs::read_to_string(model_dir().join("vocab.txt")).unwrap()).unwrap()
}

#[test]
fn importance_is_each_heads_own_drift_ranked_and_stepping_changes_nothing() {
    let (bert, tok) = (checkpoint(), tokenizer());
    let ids: Vec<u32> =
        tok.encode("He sat on the bank of the river and watched the water.").iter().map(|t| t.id).collect();
    let full = std::sync::Arc::new(bert.forward(Kernel::Simd, &ids, &HeadSet::all(TOTAL_HEADS)));
    let mut sweep = ImportanceSweep::new(ids.clone(), full.clone());
    assert!(sweep.ranking().is_none());
    let mut steps = 0;
    while pollster::block_on(sweep.step(&bert)) {
        steps += 1;
    }
    assert_eq!((steps + 1, sweep.done()), (TOTAL_HEADS, TOTAL_HEADS));
    let ranking = sweep.ranking().unwrap();
    let all_at_once = pollster::block_on(ImportanceSweep::new(ids.clone(), full.clone()).finish(&bert));
    assert_eq!(ranking, all_at_once);
    // As the page's workers measure it: heads dealt out in four pieces, each through the wire.
    {
        use headlab::model::work::{Done, Work};
        let mut values = vec![f64::NAN; TOTAL_HEADS];
        for i in 0..4 {
            let ablate: Vec<usize> = (i..TOTAL_HEADS).step_by(4).collect();
            let w =
                Work::Ablate { heads: HeadSet::all(TOTAL_HEADS), ids: ids.clone(), ablate: ablate.clone() };
            let w = Work::decode(&w.encode()).unwrap();
            w.check(&bert).unwrap();
            let Done::Drifts(d) = Done::decode(&w.run(&bert, Kernel::Simd).encode()).unwrap() else {
                panic!()
            };
            ablate.iter().zip(d).for_each(|(&h, v)| values[h] = v);
        }
        assert_eq!(headlab::attention::importance::Ranking::new(values), ranking, "pieces vs the sweep");
    }
    // Each value is the drift of a pass from scratch with that head alone pruned.
    for h in [0, 13, 40, 71] {
        let alone = bert.forward(Kernel::Simd, &ids, &HeadSet::with_pruned(TOTAL_HEADS, [h]));
        let direct = analysis::embedding_drift(&full, &alone);
        assert!(
            (ranking.per_head[h] - direct).abs() < 1e-12,
            "head {h}: {} vs {direct}",
            ranking.per_head[h]
        );
    }
    // Least important first, every head once; a few heads matter far more than the median one.
    let values: Vec<f64> = ranking.ranked.iter().map(|&h| ranking.per_head[h]).collect();
    assert!(values.windows(2).all(|w| w[0] <= w[1]), "{values:?}");
    let median = ranking.median().unwrap();
    println!("importance: most {:.4}, median {median:.5}, least {:.6}", ranking.max(), values[0]);
    assert!(ranking.max() > 10.0 * median, "most {} vs median {median}", ranking.max());
    // Half the heads, least important first, leave the embedding close (README: cosine 0.89).
    let half = pollster::block_on(analysis::contrast(&bert, &ids, &full, &ranking));
    assert_eq!(half.pruned, TOTAL_HEADS / 2);
    assert!(half.cosine > 0.8 && half.cosine < 0.99, "cosine with half pruned: {}", half.cosine);
}

#[test]
fn the_meaning_check_flips_when_layer_1_is_pruned() {
    let (bert, tok) = (checkpoint(), tokenizer());
    let full = pollster::block_on(analysis::meaning_check(&bert, &tok, &HeadSet::all(TOTAL_HEADS)));
    assert_eq!(full.closer, 1, "the full model reads \"bank\" as money: {:?}", full.cosines);
    let pruned = pollster::block_on(analysis::meaning_check(&bert, &tok, &analysis::layer_pruned(0)));
    println!("check: full {:?}, layer 1 pruned {:?}", full.cosines, pruned.cosines);
    assert_eq!(pruned.closer, 0, "without layer 1 the shared word wins: {:?}", pruned.cosines);
    assert_ne!(pruned.closer, full.closer);
    // By far more than the f16 weights' error: the page says "flipped", not "too close to call".
    assert_eq!(pruned.verdict_from(&full), analysis::Verdict::Flips, "{:?}", pruned.cosines);
    assert_eq!(full.verdict_from(&full), analysis::Verdict::Holds, "{:?}", full.cosines);
    // Layer 6's heads alone do not flip it.
    let late = pollster::block_on(analysis::meaning_check(&bert, &tok, &analysis::layer_pruned(5)));
    assert_eq!(late.closer, full.closer, "{:?}", late.cosines);
    assert_eq!(late.verdict_from(&full), analysis::Verdict::Holds, "{:?}", late.cosines);
}

#[test]
fn a_gpu_pass_of_a_known_length_makes_no_buffer_or_bind_group() {
    let ctx = std::rc::Rc::new(
        pollster::block_on(headlab::gpu::GpuContext::acquire()).expect("a GPU adapter (lavapipe in CI)"),
    );
    let (bert, tok) = (checkpoint(), tokenizer());
    let gpu = pollster::block_on(headlab::gpu::GpuBert::new(ctx, &bert)).unwrap();
    let ids: Vec<u32> = tok.encode("The bank by the river was steep.").iter().map(|t| t.id).collect();
    let full = pollster::block_on(gpu.forward(&bert, &ids, &HeadSet::all(TOTAL_HEADS))).unwrap();
    let before = headlab::gpu::resources::made();
    let mut outputs = Vec::new();
    for (heads, _) in staged_masks() {
        outputs.push(pollster::block_on(gpu.forward(&bert, &ids, &heads)).unwrap());
        outputs.push(pollster::block_on(gpu.forward_from(&bert, &ids, &heads, Some(&full))).unwrap());
    }
    let after = headlab::gpu::resources::made();
    assert_eq!(after, before, "passes of a known length made buffers or bind groups");
    // A new length makes its plan once: ten dispatches a layer, each with its bind group.
    let other: Vec<u32> = tok.encode("Something else entirely.").iter().map(|t| t.id).collect();
    pollster::block_on(gpu.forward(&bert, &other, &HeadSet::all(TOTAL_HEADS))).unwrap();
    let made = headlab::gpu::resources::made();
    assert_eq!(made.bind_groups - after.bind_groups, 10 * LAYERS as u64);
    pollster::block_on(gpu.forward(&bert, &other, &analysis::layer_pruned(2))).unwrap();
    assert_eq!(headlab::gpu::resources::made(), made);
    // And the reused plan gives what the CPU kernel gives.
    let cpu = bert.forward(Kernel::Simd, &ids, &staged_masks()[1].0);
    let e = rel_error(&outputs[2].embedding, &cpu.embedding.iter().map(|&v| v as f64).collect::<Vec<_>>());
    assert!(e < 1e-4, "embedding differs by {e:e}");
    // The runner trait drives the GPU too (as the page's fallback runner does).
    assert_eq!(
        pollster::block_on(bert.run(&ids, &HeadSet::all(TOTAL_HEADS), None)).embedding,
        bert.forward(Kernel::Simd, &ids, &HeadSet::all(TOTAL_HEADS)).embedding
    );
}

/// Head sets from none to 66 pruned, whole layers included.
fn pruned_sets() -> Vec<(&'static str, HeadSet)> {
    let scattered = HeadSet::with_pruned(TOTAL_HEADS, [3, 17, 30, 45, 59, 70]);
    // Every other head of the model, and all but each layer's head 0 (one head per layer).
    let half = HeadSet::with_pruned(TOTAL_HEADS, (0..TOTAL_HEADS).step_by(2));
    let one_per_layer = HeadSet::with_pruned(TOTAL_HEADS, (0..TOTAL_HEADS).filter(|h| h % HEADS != 0));
    let layers_2_and_5 = HeadSet::with_pruned(TOTAL_HEADS, (HEADS..2 * HEADS).chain(4 * HEADS..5 * HEADS));
    vec![
        ("none", HeadSet::all(TOTAL_HEADS)),
        ("6 scattered", scattered),
        ("layer 1", analysis::layer_pruned(0)),
        ("layers 2 and 5", layers_2_and_5),
        ("36, every other", half),
        ("66, one per layer", one_per_layer),
    ]
}

/// The pass cut across threads (`model::split`: shards of heads and feed-forward units, run here
/// one after the other) against the single-thread pass, for every cut from 1 to 12 shards.
#[test]
fn a_sentence_split_into_shards_gives_the_single_thread_embedding() {
    use headlab::model::split::{BertShard, SplitPass};
    let (bert, tok) = (checkpoint(), tokenizer());
    let long =
        "The bank by the river was steep, and the heads of the herons rose above the reeds. ".repeat(6);
    let all = HeadSet::all(TOTAL_HEADS);
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

#[test]
fn the_really_pruned_model_gives_the_masked_models_embeddings() {
    use headlab::model::pruned::PrunedBert;
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

#[test]
fn gate_gradients_match_finite_differences_and_the_loss_matches_the_forward_pass() {
    use headlab::model::gradient::{gates, pair_gradients};
    let (bert, tok) = (checkpoint(), tokenizer());
    let ids = |s: &str| tok.encode(s).iter().map(|t| t.id).collect::<Vec<u32>>();
    let (u, v, y) = (ids("A man is playing a guitar."), ids("A person plays an instrument."), 0.7);
    let heads = HeadSet::with_pruned(TOTAL_HEADS, [4, 30, 70]);
    let g = gates(&heads);
    let (loss, grads) = pair_gradients(&bert, Kernel::Simd, &u, &v, y, &g);
    // The loss is the forward pass's: (cos(u, v) - y)^2 with those heads masked.
    let (eu, ev) =
        (bert.forward(Kernel::Simd, &u, &heads).embedding, bert.forward(Kernel::Simd, &v, &heads).embedding);
    let cos = headlab::attention::cosine(&eu, &ev);
    assert!((loss - (cos - y).powi(2)).abs() < 1e-6, "{loss} vs {}", (cos - y).powi(2));
    // Central differences on gates of every layer, kept and pruned alike.
    let eps = 1e-2f32;
    let mut worst = 0.0f64;
    for h in [0, 4, 13, 29, 30, 47, 58, 70, 71] {
        let at = |delta: f32| {
            let mut shifted = g.clone();
            shifted[h] += delta;
            pair_gradients(&bert, Kernel::Simd, &u, &v, y, &shifted).0
        };
        let numeric = (at(eps) - at(-eps)) / (2.0 * eps as f64);
        let err = (numeric - grads[h]).abs() / grads.iter().fold(1e-6f64, |m, g| m.max(g.abs()));
        println!("head {h}: backward {:+.6e}, finite difference {numeric:+.6e}", grads[h]);
        assert!(err < 2e-2, "head {h}: {} vs {numeric} (error {err:.1e} of the largest gradient)", grads[h]);
        worst = worst.max(err);
    }
    println!("gate gradients vs central differences: worst error {worst:.1e} of the largest");
}

#[test]
fn task_importance_in_pieces_equals_the_gradient_importance_in_place() {
    use headlab::model::curves::{gradient_pieces, importance_from_sums, subset};
    use headlab::model::gradient::head_importance;
    let (bert, tok) = (checkpoint(), tokenizer());
    let pairs = sts_pairs();
    let ids = pairs.ids(&tok);
    let few: Vec<_> = subset(&pairs, &ids).into_iter().take(5).collect();
    for heads in [HeadSet::all(TOTAL_HEADS), HeadSet::with_pruned(TOTAL_HEADS, [0, 5, 40, 71])] {
        let done: Vec<_> = gradient_pieces(&few, &heads).iter().map(|w| w.run(&bert, Kernel::Simd)).collect();
        assert_eq!(done.len(), 2, "5 pairs in pieces of 4");
        let pieces = importance_from_sums(&done, few.len(), &heads);
        let in_place = head_importance(&bert, Kernel::Simd, &few, &heads);
        for (h, (a, b)) in pieces.iter().zip(&in_place).enumerate() {
            assert!((a - b).abs() <= 1e-12 * b.abs().max(1e-9), "head {h}: {a} vs {b}");
        }
        assert!(heads.pruned().all(|h| pieces[h] == 0.0), "pruned heads have no importance");
        assert!(pieces.iter().filter(|&&v| v > 0.0).count() == heads.active_count());
    }
}

/// The page's sentence pairs, made from the benchmark as scripts/build-model-asset.sh makes them
/// (and checked against the hash the page expects).
fn sts_pairs() -> headlab::model::task::Pairs {
    use headlab::model::task::{select, Pairs};
    Pairs::from_file(select(&std::fs::read_to_string(common::pairs_csv()).unwrap()).as_bytes()).unwrap()
}

#[test]
fn quality_on_the_sentence_pairs_matches_the_float64_reference() {
    use headlab::model::pruned::PrunedBert;
    let reference = fixture("sts-quality.json");
    assert_eq!(reference["pairs_sha256"].as_str(), Some(headlab::model::task::PAIRS_SHA256));
    let (bert, tok, pairs) = (checkpoint(), tokenizer(), sts_pairs());
    assert_eq!(
        (pairs.pairs.len(), pairs.sentences.len()),
        (230, reference["sentences"].as_u64().unwrap() as usize)
    );
    let ids = pairs.ids(&tok);
    let t0 = std::time::Instant::now();
    let full = PrunedBert::new(&bert, &HeadSet::all(TOTAL_HEADS)).embed_batch(Kernel::Simd, &ids);
    let seconds = t0.elapsed().as_secs_f64();
    let (quality, want) = (pairs.quality(&full), reference["quality"].as_f64().unwrap());
    let lengths: Vec<usize> = ids.iter().map(Vec::len).collect();
    let gflop = headlab::model::pruned::cost(&HeadSet::all(TOTAL_HEADS), &lengths).total_flops as f64 / 1e9;
    println!(
        "STS-B (230 pairs, {} sentences, {} tokens): quality {quality:.6} (float64 reference {want:.6}); {gflop:.0} GFLOP in {seconds:.2} s",
        ids.len(),
        lengths.iter().sum::<usize>()
    );
    assert!((quality - want).abs() < 1e-4, "{quality} vs {want}");
}

#[test]
fn the_really_pruned_model_on_the_gpu_gives_the_masked_models_embeddings() {
    use headlab::gpu::{GpuBert, GpuContext};
    use headlab::model::pruned::PrunedBert;
    let ctx =
        std::rc::Rc::new(pollster::block_on(GpuContext::acquire()).expect("a GPU adapter (lavapipe in CI)"));
    let (bert, tok) = (checkpoint(), tokenizer());
    let ids: Vec<u32> = tok.encode("The bank by the river was steep.").iter().map(|t| t.id).collect();
    let full = pollster::block_on(GpuBert::new(ctx.clone(), &bert)).unwrap();
    let (mut worst_gpu, mut worst_cpu) = (0.0f64, 0.0f64);
    for (what, heads) in pruned_sets() {
        let pruned =
            pollster::block_on(GpuBert::pruned(ctx.clone(), &PrunedBert::new(&bert, &heads))).unwrap();
        let out = pollster::block_on(pruned.forward(&bert, &ids, &heads)).unwrap();
        let masked = pollster::block_on(full.forward(&bert, &ids, &heads)).unwrap();
        let cpu = bert.forward(Kernel::Simd, &ids, &heads).embedding;
        let as_f64 = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
        let (e_gpu, e_cpu) =
            (rel_error(&out.embedding, &as_f64(&masked.embedding)), rel_error(&out.embedding, &as_f64(&cpu)));
        assert!(e_gpu < 1e-6, "{what}: pruned vs masked on the GPU, relative error {e_gpu:e}");
        assert!(e_cpu < 1e-4, "{what}: GPU pruned vs CPU masked, relative error {e_cpu:e}");
        // Its attention maps are its kept heads'.
        for (l, maps) in out.attention.iter().enumerate() {
            let kept = (0..HEADS).filter(|&h| heads.is_active(l * HEADS + h)).count();
            assert_eq!(maps.len(), kept * ids.len() * ids.len(), "{what}, layer {l}");
        }
        (worst_gpu, worst_cpu) = (worst_gpu.max(e_gpu), worst_cpu.max(e_cpu));
    }
    println!("GPU, really pruned vs masked: worst {worst_gpu:.1e}; vs the CPU kernel's masked pass {worst_cpu:.1e}");
}

#[test]
fn pruning_curves_run_coarse_first_and_never_redo_what_is_known() {
    use headlab::model::curves::{michel_marks, CurveRun, Curves, Order, RANDOM_SEEDS};
    let (bert, tok) = (checkpoint(), tokenizer());
    // A small set keeps the test quick: the first 24 pairs.
    let pairs = sts_pairs().first(24);
    let ids = pairs.ids(&tok);
    let one_shot: Vec<usize> = (0..TOTAL_HEADS).rev().collect();
    let mut run = CurveRun::new(&bert, &pairs, ids.clone(), Some(one_shot.clone()), Curves::default());
    // The work left is counted before anything runs; each job's pieces count their own FLOPs.
    let predicted = run.work_left();
    assert!(predicted.first_curve > 0 && predicted.all > predicted.first_curve);
    let (mut steps, mut done_flops) = (0, 0u64);
    while !run.coarse_complete() {
        let pieces = run.next_job().expect("finished before the first complete curve");
        done_flops += pieces.iter().map(|w| w.flops().expect("evaluations and gradients count")).sum::<u64>();
        run.complete(pieces.iter().map(|w| w.run(&bert, Kernel::Simd)).collect());
        steps += 1;
        // What was done and what is left add up to the prediction (the iterative order's
        // importance measurements included, whichever heads they turned out to be).
        assert_eq!(done_flops + run.work_left().first_curve, predicted.first_curve, "after {steps} jobs");
    }
    assert_eq!(run.work_left().first_curve, 0);
    let mut pace = headlab::model::curves::Pace::default();
    pace.record(done_flops, 1000.0);
    assert!(run.standing().time_left(&pace).unwrap().starts_with("About "));
    let c = run.curves().clone();
    println!("first complete curve after {steps} steps, {:?} evaluations", run.progress());
    // Both ends are shared by every order; the random band holds the other orders there.
    let (full, none) = (c.at(Order::Iterative, 0).unwrap(), c.at(Order::Iterative, TOTAL_HEADS).unwrap());
    for o in [Order::OneShot, Order::Random(RANDOM_SEEDS - 1)] {
        assert_eq!((c.at(o, 0), c.at(o, TOTAL_HEADS)), (Some(full), Some(none)));
    }
    let band = c.random_band();
    assert_eq!(band.iter().map(|b| b.0).collect::<Vec<_>>(), vec![0, 14, 18, 29, 36, 54, 72]);
    assert!(c.one_per_layer.is_some() && c.iterative_order.len() >= 54);
    assert!(band.iter().all(|&(_, mean, lo, hi)| lo <= mean && mean <= hi));
    // Full quality is the one-shot pass's own: the same as a plain evaluation.
    let plain = pairs.quality(
        &headlab::model::pruned::PrunedBert::new(&bert, &HeadSet::all(TOTAL_HEADS))
            .embed_batch(Kernel::Simd, &ids),
    );
    assert_eq!(full, plain);
    // A run that knows these points starts where this one stopped; the cache round-trips.
    let known = Curves::from_json(&c.to_json()).unwrap();
    assert_eq!(known, c);
    let again = CurveRun::new(&bert, &pairs, ids, Some(one_shot), known);
    let (_, planned) = again.progress();
    let (_, first_planned) = run.progress();
    assert!(planned < first_planned, "{planned} vs {first_planned}");
    assert!(again.coarse_complete());
    // The other orders stay when the one-shot order changes.
    let kept = c.without(Order::OneShot);
    assert_eq!(
        (kept.at(Order::OneShot, 36), kept.at(Order::Iterative, 36)),
        (None, c.at(Order::Iterative, 36))
    );
    assert_eq!(kept.merged(&c.only(Order::OneShot)), c);
    assert_eq!(michel_marks(), [14, 29]);
    assert_eq!(Curves::from_json("{\"version\": 2}"), None);
}

#[test]
fn curves_computed_in_pieces_through_the_wire_equal_curves_computed_in_place() {
    use headlab::model::curves::{CurveRun, Curves};
    use headlab::model::work::{Done, Work};
    let (bert, tok) = (checkpoint(), tokenizer());
    // 120 sentences: three pieces an evaluation; importance in four pieces of pairs.
    let pairs = sts_pairs().first(60);
    let ids = pairs.ids(&tok);
    let mut here = CurveRun::new(&bert, &pairs, ids.clone(), None, Curves::default());
    let mut there = CurveRun::new(&bert, &pairs, ids, None, Curves::default());
    for job in 0..8 {
        assert!(here.step(Kernel::Simd));
        let before = there.work_left().all;
        let pieces = there.next_job().expect("as many jobs as in place");
        let flops: Option<u64> = pieces.iter().map(Work::flops).sum();
        // As a worker would: every piece as bytes, checked, run, and its result as bytes; the
        // pieces done in reverse order and put back in theirs.
        let mut done: Vec<(usize, Done)> = pieces
            .iter()
            .enumerate()
            .rev()
            .map(|(i, w)| {
                let w = Work::decode(&w.encode()).unwrap();
                w.check(&bert).unwrap();
                (i, Done::decode(&w.run(&bert, Kernel::Simd).encode()).unwrap())
            })
            .collect();
        done.sort_by_key(|d| d.0);
        there.complete(done.into_iter().map(|d| d.1).collect());
        assert_eq!(there.curves(), here.curves(), "after job {job}");
        // The pieces' own FLOP counts add up to what the run counted for the job.
        assert_eq!(Some(before - there.work_left().all), flops, "job {job}");
    }
    assert!(here.curves().points.values().map(|p| p.len()).sum::<usize>() >= 3);
    assert!(here.curves().iterative_order.len() >= 12, "importance was measured in pieces too");
    // A piece this model cannot run is refused before it runs.
    let bad = Work::Embed { heads: HeadSet::all(TOTAL_HEADS), ids: vec![vec![101, 40_000, 102]] };
    assert!(bad.check(&bert).is_err());
    let wrong = Work::Embed { heads: HeadSet::all(12), ids: vec![vec![101, 102]] };
    assert!(wrong.check(&bert).is_err());
}

#[test]
fn the_trained_model_runs_where_it_was_measured_faster_with_the_same_numbers() {
    use headlab::backend::{Place, Preference, Session, TrainedRunner};
    use headlab::model::MiniLm;
    let start = std::time::Instant::now();
    let clock = move || start.elapsed().as_secs_f64() * 1e3;
    let model = std::rc::Rc::new(MiniLm { bert: checkpoint(), tokenizer: tokenizer() });
    let session = pollster::block_on(Session::start(Preference::Auto, false));
    let runner = pollster::block_on(TrainedRunner::new(model.clone(), &session, &clock));
    let all = HeadSet::all(TOTAL_HEADS);
    for text in ["A river.", &"The bank by the river was steep. ".repeat(12)] {
        let ids = model.ids(text);
        let choice = runner.choice(ids.len()).expect("measured on the adapter");
        println!("{} tokens: {}", ids.len(), runner.ran_on(ids.len()));
        assert_eq!(runner.on_gpu(ids.len()), choice.place == Place::Gpu);
        assert!(runner.ran_on(ids.len()).contains(", faster here than on the"));
        let got = pollster::block_on(runner.run(&ids, &all, None));
        let want = model.bert.forward(Kernel::Simd, &ids, &all);
        let e = rel_error(&got.embedding, &want.embedding.iter().map(|&v| v as f64).collect::<Vec<_>>());
        assert!(e < 1e-4, "{} tokens: {e:e} from the CPU kernel", ids.len());
    }
    // Forced onto the GPU: no measurement, every pass there.
    let forced = pollster::block_on(Session::start(Preference::Gpu, false));
    let runner = pollster::block_on(TrainedRunner::new(model, &forced, &clock));
    assert!(runner.choice(10).is_none() && runner.on_gpu(10) && runner.on_gpu(500));
}

/// How many digits of the page's "cosine of the pruned sentence embedding to the full one" (and
/// of the meaning check's margin) its f16 weights support: the same numbers from the fp32
/// checkpoint, over the fixture's sentences and masks from one head to 66 pruned.
#[test]
fn the_pruned_cosine_of_the_f16_model_is_the_fp32_models_to_the_digits_the_page_shows() {
    let (f16, tok, _) = f16_model();
    let fp32 = checkpoint();
    let (mut worst_abs, mut worst_rel) = (0.0f64, 0.0f64);
    let own = |bert: &Bert, ids: &[u32], heads: &HeadSet| {
        let full = bert.forward(Kernel::Simd, ids, &HeadSet::all(TOTAL_HEADS)).embedding;
        let pruned = bert.forward(Kernel::Simd, ids, heads).embedding;
        headlab::attention::prune::cosine(&pruned, &full)
    };
    let mut sets = pruned_sets();
    sets.push(("one head", HeadSet::with_pruned(TOTAL_HEADS, [40])));
    for case in fixture("minilm-forward.json").as_array().unwrap() {
        let ids: Vec<u32> = tok.encode(case["text"].as_str().unwrap()).iter().map(|t| t.id).collect();
        for (name, heads) in sets.iter().skip(1) {
            let (a, b) = (own(&f16, &ids, heads), own(&fp32, &ids, heads));
            let rel = (a - b).abs() / (1.0 - b);
            println!(
                "{name:>20}: fp32 {b:.7} f16 {a:.7} |diff| {:.1e} relative to 1 - cosine {rel:.1e}",
                (a - b).abs()
            );
            worst_abs = worst_abs.max((a - b).abs());
            worst_rel = worst_rel.max(rel);
        }
    }
    println!("worst |diff| {worst_abs:.1e}, relative to 1 - cosine {worst_rel:.1e}");
    // The meaning check's margin (a difference of two cosines between different sentences).
    let mut worst_margin = 0.0f64;
    for (name, heads) in &sets {
        let check =
            |bert: &Bert| pollster::block_on(analysis::meaning_check(bert, &tok, heads)).margin_toward(1);
        let (a, b) = (check(&f16), check(&fp32));
        println!("{name:>20}: margin fp32 {b:.6} f16 {a:.6} |diff| {:.1e}", (a - b).abs());
        worst_margin = worst_margin.max((a - b).abs());
    }
    println!("worst margin |diff| {worst_margin:.1e}");
    assert!(worst_margin < analysis::MARGIN_ERROR, "{worst_margin:e}");
    // The bounds the page's digits are chosen from (`analysis::cosine_text`).
    assert!(worst_abs < analysis::COSINE_ABS_ERROR, "{worst_abs:e}");
    assert!(worst_rel < analysis::COSINE_DRIFT_ERROR, "{worst_rel:e}");
}

/// The page calls a head's removal a flip of the meaning check only where its f16 weights'
/// margin is beyond their error of zero (`analysis::Verdict`): over the whole 72-head sweep, every
/// flip is a flip in the fp32 checkpoint and every head that holds holds there too.
#[test]
fn every_flip_and_hold_the_page_names_is_the_fp32_models_too() {
    let (f16, tok, _) = f16_model();
    let fp32 = checkpoint();
    let sweep = |bert: &Bert| {
        pollster::block_on(async {
            let start = analysis::MarginSweep::start(bert, &tok).await;
            start.finish(bert).await
        })
    };
    let (page, reference) = (sweep(&f16), sweep(&fp32));
    assert_eq!(page.full.closer, reference.full.closer);
    let mut worst = 0.0f64;
    for (h, (&a, &b)) in page.margins.iter().zip(&reference.margins).enumerate() {
        worst = worst.max((a - b).abs());
        match analysis::Verdict::of_margin(a) {
            analysis::Verdict::Flips => assert!(b < 0.0, "head {h}: f16 {a} flips, fp32 {b} does not"),
            analysis::Verdict::Holds => assert!(b > 0.0, "head {h}: f16 {a} holds, fp32 {b} flips"),
            analysis::Verdict::TooClose => println!("head {h}: too close to call: f16 {a:.6}, fp32 {b:.6}"),
        }
    }
    let flips = page.heads_with(analysis::Verdict::Flips);
    println!("flips {flips:?}, worst margin |diff| {worst:.1e}");
    assert!(!flips.is_empty(), "some single heads flip the check");
    assert!(worst < analysis::MARGIN_ERROR, "{worst:e}");
}
