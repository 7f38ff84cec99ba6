//! The trained model against its float64 reference (tests/reference/minilm.py): the model's own
//! tokenizer's ids, the forward pass on both CPU kernels, the head-gate gradients and the task's
//! quality. Needs the model files and the sentence pairs: scripts/fetch-model.sh and
//! scripts/fetch-pairs.sh (run by scripts/test.sh).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::minilm::*;
use headlab::attention::HeadSet;
use headlab::cpu::Kernel;

#[test]
fn tokenizer_matches_the_reference_ids_on_every_case() {
    let tok = tokenizer();
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

#[test]
fn fp32_forward_matches_the_reference_on_both_kernels() {
    let bert = checkpoint();
    let tok = tokenizer();
    for kernel in Kernel::ALL {
        let mut worst = 0.0f64;
        for case in fixture("minilm-forward.json").as_array().unwrap() {
            let text = case["text"].as_str().unwrap();
            let ids: Vec<u32> = tok.encode(text).iter().map(|t| t.id).collect();
            let want_ids: Vec<u32> =
                case["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
            assert_eq!(ids, want_ids, "{text}");

            let out = bert.forward(kernel, &ids, &HeadSet::all(SPEC.total_heads()));
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

#[test]
fn gate_gradients_match_finite_differences_and_the_loss_matches_the_forward_pass() {
    use headlab::model::encoder::gradient::pair_gradients;
    use headlab::model::layers::backward::gates;
    let (bert, tok) = (checkpoint(), tokenizer());
    let ids = |s: &str| tok.encode(s).iter().map(|t| t.id).collect::<Vec<u32>>();
    let (u, v, y) = (ids("A man is playing a guitar."), ids("A person plays an instrument."), 0.7);
    let heads = HeadSet::with_pruned(SPEC.total_heads(), [4, 30, 70]);
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
fn quality_on_the_sentence_pairs_matches_the_float64_reference() {
    use headlab::model::encoder::pruned::PrunedBert;
    let reference = fixture("sts-quality.json");
    assert_eq!(reference["pairs_sha256"].as_str(), Some(headlab::model::encoder::task::PAIRS_SHA256));
    let (bert, tok, pairs) = (checkpoint(), tokenizer(), sts_pairs());
    assert_eq!(
        (pairs.pairs.len(), pairs.sentences.len()),
        (230, reference["sentences"].as_u64().unwrap() as usize)
    );
    let ids = pairs.ids(&tok);
    let t0 = std::time::Instant::now();
    let full = PrunedBert::new(&bert, &HeadSet::all(SPEC.total_heads())).embed_batch(Kernel::Simd, &ids);
    let seconds = t0.elapsed().as_secs_f64();
    let (quality, want) = (pairs.quality(&full), reference["quality"].as_f64().unwrap());
    let lengths: Vec<usize> = ids.iter().map(Vec::len).collect();
    let gflop = headlab::model::encoder::pruned::cost(&SPEC, &HeadSet::all(SPEC.total_heads()), &lengths)
        .total_flops as f64
        / 1e9;
    println!(
        "STS-B (230 pairs, {} sentences, {} tokens): quality {quality:.6} (float64 reference {want:.6}); {gflop:.0} GFLOP in {seconds:.2} s",
        ids.len(),
        lengths.iter().sum::<usize>()
    );
    assert!((quality - want).abs() < 1e-4, "{quality} vs {want}");
}

#[test]
fn activation_patching_matches_the_reference_head_by_head_on_both_kernels() {
    use headlab::jobs::work::{Done, Piece};
    use headlab::model::encoder::check::CANDIDATES;
    use headlab::model::encoder::patching::{Patching, CLEAN, CORRUPTED};
    let (bert, tok) = (checkpoint(), tokenizer());
    let case = fixture("minilm-patching.json");
    let ids = |s: &str| tok.encode(s).iter().map(|t| t.id).collect::<Vec<u32>>();
    let (clean, corrupted) = (ids(CLEAN), ids(CORRUPTED));
    let want_ids =
        |k: &str| case[k].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect::<Vec<_>>();
    assert_eq!((&clean, &corrupted), (&want_ids("clean_ids"), &want_ids("corrupted_ids")));
    let total = SPEC.total_heads();
    let all = HeadSet::all(total);
    for kernel in Kernel::ALL {
        let work =
            Piece::Patch { clean: clean.clone(), corrupted: corrupted.clone(), patch: (0..total).collect() };
        let Done::Embeddings(e) = work.run_on_encoder(&bert, kernel) else { panic!("embeddings") };
        let candidates = CANDIDATES.map(|c| bert.forward(kernel, &ids(c), &all).embedding);
        let p = Patching {
            clean: e[0].clone(),
            corrupted: e[1].clone(),
            candidates,
            patched: e[2..].iter().step_by(2).cloned().collect(),
            ablated: e[3..].iter().step_by(2).cloned().collect(),
        };
        let effects = p.effects(headlab::model::encoder::patching::PatchMetric::Margin);
        let close = |got: f64, want: &serde_json::Value, what: String| {
            let want = want.as_f64().unwrap();
            assert!((got - want).abs() < 2e-5, "{kernel:?} {what}: {got} vs the reference's {want}");
        };
        close(effects.clean, &case["clean_margin"], "clean margin".into());
        close(effects.corrupted, &case["corrupted_margin"], "corrupted margin".into());
        let gap = effects.gap();
        for h in 0..total {
            let patched = effects.corrupted + effects.restored[h] * gap;
            close(patched, &case["patched_margins"][h], format!("head {h} patched"));
            let ablated = effects.clean - effects.lost[h] * gap;
            close(ablated, &case["ablated_margins"][h], format!("head {h} removed"));
        }
        let best = effects.top_restoring(3);
        println!(
            "{kernel:?}: margins clean {:.4}, corrupted {:.4}; restores most: {:?} ({:?}); Spearman to ablation {:?}",
            effects.clean,
            effects.corrupted,
            best.iter().map(|&h| SPEC.head_name(h)).collect::<Vec<_>>(),
            best.iter().map(|&h| format!("{:.2}", effects.restored[h])).collect::<Vec<_>>(),
            effects.correlation()
        );
    }
}

#[test]
fn the_8_bit_model_stays_within_0_999_cosine_of_the_reference_and_its_quality_within_0_003() {
    use headlab::attention::precision::Precision;
    use headlab::model::encoder::pruned::PrunedBert;
    use headlab::model::encoder::CALIBRATION;
    let (mut bert, tok) = (checkpoint(), tokenizer());
    let all = HeadSet::all(SPEC.total_heads());
    let f16 = bert.clone();
    let calibration: Vec<Vec<u32>> =
        CALIBRATION.iter().map(|s| tok.encode(s).iter().map(|t| t.id).collect()).collect();
    bert.set_precision(Kernel::Simd, Precision::Int8, &calibration);
    assert_eq!((bert.precision(), f16.precision()), (Precision::Int8, Precision::F16));
    // The weights a pass reads: the dense layers at a byte a weight (W_2 two), the embeddings
    // (half of MiniLM's weights) still f16.
    let (b16, b8) = (f16.stored_bytes(), bert.stored_bytes());
    println!("weights: {b16} bytes in f16, {b8} at 8 bits ({:.2}x)", b8 as f64 / b16 as f64);
    assert!((0.80..0.90).contains(&(b8 as f64 / b16 as f64)), "{b8} against {b16}");
    let (mut worst, mut attention) = (1.0f64, 0.0f64);
    for kernel in Kernel::ALL {
        for case in fixture("minilm-forward.json").as_array().unwrap() {
            let ids: Vec<u32> = tok.encode(case["text"].as_str().unwrap()).iter().map(|t| t.id).collect();
            let out = bert.forward(kernel, &ids, &all);
            let c = cosine(&out.embedding, &floats(&case["embedding"]));
            assert!(c >= 0.999, "{kernel:?} {:?}: cosine {c} to the float64 reference", case["text"]);
            worst = worst.min(c);
            // The attention weights the heatmaps draw, against the reference's first and last layer.
            for (layer, key) in [(0, "attention_layer0"), (5, "attention_layer5")] {
                let want = floats(&case[key]);
                let err = out.attention[layer]
                    .iter()
                    .zip(&want)
                    .map(|(a, b)| (*a as f64 - b).abs())
                    .fold(0.0, f64::max);
                attention = attention.max(err);
            }
        }
    }
    println!(
        "8-bit: largest error of an attention weight (layers 1 and 6, reference sentences) {attention:.4}"
    );
    assert!(attention < 0.05, "an attention weight off by {attention}");
    // Longer sentences, against the f32 pass (itself within 1e-6 of the reference's cosine).
    let words = "the river bank was steep and she sat on it to watch the water run past the old mill ";
    for n in [8, 32, 128, 512] {
        let mut ids: Vec<u32> = tok.encode(&words.repeat(40)).iter().map(|t| t.id).collect();
        let sep = *ids.last().unwrap();
        ids.truncate(n - 1);
        ids.push(sep);
        let (a, b) = (
            bert.forward(Kernel::Simd, &ids, &all).embedding,
            f16.forward(Kernel::Simd, &ids, &all).embedding,
        );
        let c = headlab::attention::cosine(&a, &b);
        println!("8-bit at {n} tokens: cosine {c:.6} to the f16 model's embedding");
        assert!(c >= 0.999, "{n} tokens: cosine {c}");
        worst = worst.min(c);
    }
    let pairs = sts_pairs();
    let ids = pairs.ids(&tok);
    let quality = |b: &headlab::model::encoder::bert::Bert| {
        pairs.quality(&PrunedBert::new(b, &all).embed_batch(Kernel::Simd, &ids))
    };
    let (q8, q16) = (quality(&bert), quality(&f16));
    println!("8-bit: worst cosine {worst:.6}; STS quality {q8:.5} against {q16:.5} in f16");
    assert!((q8 - q16).abs() <= 0.003, "quality {q8} against {q16}");
}

#[test]
fn a_model_at_another_precision_is_a_copy_with_its_own_cache_id_and_the_original_is_untouched() {
    use headlab::attention::precision::Precision;
    use headlab::model::encoder::Encoder;
    let model = fp32_model();
    let (same, note) = Encoder::for_precision(&model, Precision::F16);
    assert!(std::rc::Rc::ptr_eq(&same, &model) && note.is_none(), "the same precision: the same model");
    let (int8, note) = Encoder::for_precision(&model, Precision::Int8);
    assert!(note.is_none());
    assert_eq!((int8.precision(), model.precision()), (Precision::Int8, Precision::F16));
    assert_eq!(model.cache_id(), model.id);
    assert_eq!(int8.cache_id(), format!("{}-int8", model.id));
    assert!(
        int8.bert.weight_bytes() > model.bert.weight_bytes(),
        "the 8-bit copies come on top of the f32 weights"
    );
    // A model too large to copy keeps its weights and says why.
    let mut big = (*model).clone();
    big.bert.word = vec![0.0; headlab::model::encoder::MAX_COPY_BYTES / 4];
    let big = std::rc::Rc::new(big);
    let (kept, note) = Encoder::for_precision(&big, Precision::Int8);
    assert!(std::rc::Rc::ptr_eq(&kept, &big), "refused: the model as it was");
    let note = note.expect("a reason");
    assert!(note.contains("leave no room") && note.contains("f16 weights"), "{note}");
}
