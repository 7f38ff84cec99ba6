//! The pure core: configurations, presets, the seeded generator, the oracle, masks and drift.
//! Natively and, unchanged, in the browser as wasm.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;
#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

use headlab::attention::config::{preset_by_id, ConfigError, MAX_SEQ_LEN};
use headlab::attention::synthetic::{hash32, w_o_at, w_qkv_at, Stream, StreamId};
use headlab::attention::{drift, oracle, HeadSet, Inputs, ModelConfig, Weights, PRESETS};

#[test]
fn presets_are_the_seeds_seven_models_with_d_k_between_64_and_128() {
    let got: Vec<(&str, usize, usize, usize)> =
        PRESETS.iter().map(|p| (p.name, p.d_model, p.num_heads, p.d_k())).collect();
    assert_eq!(
        got,
        [
            ("Transformer (orig.)", 512, 8, 64),
            ("BERT-base", 768, 12, 64),
            ("GPT-2 Small", 768, 12, 64),
            ("BERT-large", 1024, 16, 64),
            ("GPT-2 Medium", 1024, 16, 64),
            ("GPT-2 Large", 1280, 20, 64),
            ("GPT-3 (175B)", 12288, 96, 128),
        ]
    );
    for p in PRESETS {
        assert_eq!(preset_by_id(p.id), Some(&p));
        assert!((64..=128).contains(&p.d_k()), "{}", p.name);
    }
    assert_eq!(preset_by_id("nope"), None);
}

#[test]
fn every_preset_runs_and_gpt3_generates_its_weights_instead_of_storing_them() {
    for p in &PRESETS[..6] {
        assert_eq!(p.with_seq_len(512).validate(), Ok(()), "{}", p.name);
        assert!(!p.with_seq_len(512).generates_weights(), "{}", p.name);
    }
    let gpt3 = preset_by_id("gpt3").unwrap();
    // 2.25 GiB of weights would not fit the 1 GiB budget; generated, they take no memory.
    assert_eq!(gpt3.with_seq_len(16).weight_bytes(), 12288 * 12288 * 16);
    for n in [16, 64, 128] {
        let config = gpt3.with_seq_len(n);
        assert!(config.generates_weights());
        assert_eq!(config.validate(), Ok(()), "GPT-3 at n = {n}");
        assert_eq!(config.footprint().weights, 0);
    }
    // Its per-head contributions still grow with n: at 512 tokens they alone are 2.25 GiB.
    let err = gpt3.with_seq_len(512).validate().unwrap_err();
    assert!(matches!(err, ConfigError::OverMemoryBudget { weights: 0, .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("weights are generated, not stored"), "{text}");
}

#[test]
fn bad_configurations_are_typed_errors_with_readable_reasons() {
    let cfg = |d_model, num_heads, seq_len| ModelConfig { d_model, num_heads, seq_len };
    let cases: [(ModelConfig, ConfigError, &str); 7] = [
        (cfg(768, 7, 16), ConfigError::NotDivisible { d_model: 768, num_heads: 7 }, "try 6 or 8 heads"),
        (cfg(768, 12, 0), ConfigError::ZeroSeqLen, "at least one token"),
        (cfg(768, 12, 100_000), ConfigError::SeqTooLong { seq_len: 100_000 }, "limit of 1024"),
        (cfg(0, 12, 16), ConfigError::ZeroDModel, "at least 1"),
        (cfg(768, 0, 16), ConfigError::ZeroHeads, "at least one head"),
        (cfg(8, 9, 16), ConfigError::TooManyHeads { num_heads: 9, max: 8 }, "at most 8"),
        (cfg(1 << 20, 8, 16), ConfigError::DModelTooLarge { d_model: 1 << 20 }, "limit of 16384"),
    ];
    for (config, want, phrase) in cases {
        let got = config.validate().unwrap_err();
        assert_eq!(got, want, "{config:?}");
        assert!(got.to_string().contains(phrase), "{config:?}: {got}");
    }
    assert!(cfg(7, 7, 1).validate().is_ok());
    assert!(cfg(768, 12, MAX_SEQ_LEN).validate().is_ok());
    // A prime width has only 1 and itself as head counts.
    assert!(cfg(13, 5, 1).validate().unwrap_err().to_string().contains("try 1 or 13 heads"));
}

#[test]
fn footprint_and_flops_follow_the_formulas() {
    let bert = preset_by_id("bert-base").unwrap().with_seq_len(128);
    assert_eq!(bert.footprint().weights, 16 * 768 * 768);
    // 8 n d^2 + 4 n^2 d: the seed's QKV, scores, weighted sum and output projection.
    assert_eq!(bert.forward_flops(), 8 * 128 * 768 * 768 + 4 * 128 * 128 * 768);
}

#[test]
fn generator_is_deterministic_addressable_and_seed_dependent() {
    let a = Weights::generate(48, 9);
    assert_eq!(a, Weights::generate(48, 9));
    assert_ne!(a.w_qkv, Weights::generate(48, 10).w_qkv);
    for (i, j) in [(0, 0), (5, 17), (47, 143), (20, 100)] {
        assert_eq!(a.w_qkv[i * 144 + j], w_qkv_at(9, 48, i, j));
    }
    for (i, j) in [(0, 0), (47, 47), (13, 2)] {
        assert_eq!(a.w_o[i * 48 + j], w_o_at(9, 48, i, j));
    }
    // Streams are not shifted copies of each other.
    let (s1, s2) = (Stream::new(9, StreamId::Wqkv), Stream::new(9, StreamId::Wo));
    let v1: Vec<u32> = (0..256).map(|i| s1.bits(i)).collect();
    let v2: std::collections::HashSet<u32> = (0..1 << 16).map(|i| s2.bits(i)).collect();
    assert!(v1.iter().filter(|v| v2.contains(v)).count() <= 1);
}

#[test]
fn generator_is_uniform_and_the_init_has_the_right_variance() {
    // hash32 is a bijection: no collisions on a large sample.
    let sample: std::collections::HashSet<u32> = (0..1u32 << 20).map(hash32).collect();
    assert_eq!(sample.len(), 1 << 20);
    // 16 equal buckets of symmetric(): chi-square with 15 degrees of freedom (p = 0.001 at 37.7).
    let s = Stream::new(1, StreamId::Embedding);
    let n = 160_000;
    let mut buckets = [0usize; 16];
    for i in 0..n {
        let u = s.symmetric(i);
        assert!(u > -1.0 && u < 1.0);
        buckets[((u + 1.0) * 8.0) as usize] += 1;
    }
    let expect = n as f64 / 16.0;
    let chi2: f64 = buckets.iter().map(|&b| (b as f64 - expect).powi(2) / expect).sum();
    assert!(chi2 < 37.7, "chi-square {chi2}, buckets {buckets:?}");
    // Xavier-uniform variance for the in-projection: a^2 / 3 with a = sqrt(6 / 4d).
    let d = 256;
    let w = Weights::generate(d, 5);
    let var = w.w_qkv.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / w.w_qkv.len() as f64;
    let want = 6.0 / (4.0 * d as f64) / 3.0;
    assert!((var / want - 1.0).abs() < 0.02, "variance {var}, want {want}");
}

#[test]
fn inputs_are_embeddings_plus_sinusoidal_positions() {
    let config = ModelConfig { d_model: 16, num_heads: 2, seq_len: 40 };
    let inputs = Inputs::generate(&config, 2);
    assert_eq!(inputs.x.len(), 40 * 16);
    assert_eq!(inputs.words().count(), 40);
    // Two positions holding the same word differ exactly by their position encodings.
    let (t1, t2) = (0..40)
        .flat_map(|a| (a + 1..40).map(move |b| (a, b)))
        .find(|&(a, b)| inputs.tokens[a] == inputs.tokens[b])
        .expect("a 32-word vocabulary repeats within 40 tokens");
    use headlab::attention::synthetic::positional;
    for j in 0..16 {
        let got = inputs.x[t1 * 16 + j] - inputs.x[t2 * 16 + j];
        let want = positional(t1, j, 16) - positional(t2, j, 16);
        assert!((got - want).abs() < 1e-5, "component {j}: {got} vs {want}");
    }
    assert_eq!(positional(0, 0, 16), 0.0);
    assert_eq!(positional(0, 1, 16), 1.0);
}

#[test]
fn oracle_gives_a_known_answer_and_rows_that_sum_to_one() {
    // Q = K = 0 makes attention uniform; V = x and W_o = I make the output the mean of x's rows.
    let config = ModelConfig { d_model: 2, num_heads: 1, seq_len: 3 };
    let x = [1.0, 2.0, 3.0, 4.0, 5.0, 9.0];
    let w_qkv = [0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0];
    let w_o = [1.0, 0.0, 0.0, 1.0];
    let out = oracle::multihead_attention(&config, &x, &w_qkv, &w_o, &HeadSet::all(1));
    assert!(out.attention.iter().all(|&p| (p - 1.0 / 3.0).abs() < 1e-15));
    for row in out.output.chunks(2) {
        assert!((row[0] - 3.0).abs() < 1e-12 && (row[1] - 5.0).abs() < 1e-12, "{row:?}");
    }
    // With the head pruned, nothing reaches the output.
    let pruned = oracle::multihead_attention(&config, &x, &w_qkv, &w_o, &HeadSet::with_pruned(1, [0]));
    assert!(pruned.output.iter().all(|&v| v == 0.0));

    let config = ModelConfig { d_model: 12, num_heads: 3, seq_len: 5 };
    let w = Weights::generate(12, 1);
    let out = oracle::multihead_attention(
        &config,
        &Inputs::generate(&config, 1).x,
        &w.w_qkv,
        &w.w_o,
        &HeadSet::all(3),
    );
    for row in out.attention.chunks(5) {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }
}

#[test]
fn head_masks_count_toggle_and_ignore_out_of_range_indices() {
    let mut m = HeadSet::with_pruned(4, [1, 3, 9]);
    assert_eq!((m.len(), m.active_count()), (4, 2));
    assert!(m.is_active(0) && !m.is_active(1));
    m.toggle(1);
    m.set(0, false);
    assert_eq!(m, HeadSet::with_pruned(4, [0, 3]));
    assert!(HeadSet::all(0).is_empty());
}

#[test]
fn drift_measures_distance_and_angle_per_token_and_overall() {
    let full = [3.0, 4.0, 1.0, 0.0];
    // token 0 unchanged, token 1 rotated by 90 degrees
    let d = drift(&full, &[3.0, 4.0, 0.0, 1.0], 2);
    assert_eq!(d.per_token[0].rel_l2, 0.0);
    assert!((d.per_token[0].cosine - 1.0).abs() < 1e-12);
    assert!((d.per_token[1].rel_l2 - 2f64.sqrt()).abs() < 1e-12);
    assert!(d.per_token[1].cosine.abs() < 1e-12);
    assert!((d.overall.rel_l2 - (2.0f64 / 26.0).sqrt()).abs() < 1e-12);
    assert!((d.overall.cosine - 25.0 / 26.0).abs() < 1e-12);
    // Every head pruned: relative L2 of 1, cosine 0. Scaling keeps cosine 1.
    let zero = drift(&full, &[0.0; 4], 2);
    assert_eq!((zero.overall.rel_l2, zero.overall.cosine), (1.0, 0.0));
    let scaled = drift(&full, &[6.0, 8.0, 2.0, 0.0], 2);
    assert!((scaled.overall.cosine - 1.0).abs() < 1e-12 && (scaled.overall.rel_l2 - 1.0).abs() < 1e-12);
    // Both zero: nothing moved.
    let nothing = drift(&[0.0; 2], &[0.0; 2], 2);
    assert_eq!((nothing.overall.rel_l2, nothing.overall.cosine), (0.0, 1.0));
}

/// GPT-3's layer runs without its 2.25 GiB of weights: generated where used, they agree with
/// the generator's own values at sampled positions, and the output is finite and non-zero.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn gpt3_runs_with_generated_weights() {
    use headlab::attention::{GeneratedWeights, LayerWeights};
    use headlab::cpu::stepped::SteppedPass;
    let config = preset_by_id("gpt3").unwrap().with_seq_len(2);
    let layer = LayerWeights::for_config(&config, 5);
    let LayerWeights::Generated(weights) = layer else {
        panic!("GPT-3's weights must not be stored");
    };
    assert_eq!(weights, GeneratedWeights { d_model: 12288, seed: 5 });
    for (i, j) in [(0, 0), (12287, 36863), (4096, 777)] {
        assert_eq!(weights.w_qkv().at(i, j), w_qkv_at(5, 12288, i, j));
    }
    assert_eq!(weights.w_o().shifted(128, 0).at(3, 9), w_o_at(5, 12288, 131, 9));
    let inputs = Inputs::generate(&config, 5);
    let out = SteppedPass::new(&config, &inputs.x, &layer).finish();
    assert!(out.output.iter().all(|v| v.is_finite()));
    let norm: f64 = out.output.iter().map(|&v| (v as f64).powi(2)).sum::<f64>().sqrt();
    // x has unit-variance entries and both projections roughly preserve scale.
    assert!(norm > 1.0 && norm < 1e4, "output norm {norm}");
}

/// The drift curve of a real forward pass: from none to all, equal to pruning directly.
#[test]
fn curve_starts_at_zero_ends_at_one_and_matches_direct_pruning() {
    use headlab::attention::importance::{drift_curve, head_importance, least_important_first, random_order};
    let config = ModelConfig { d_model: 48, num_heads: 12, seq_len: 9 };
    let w = Weights::generate(48, 4);
    let fwd =
        headlab::cpu::forward(headlab::cpu::Kernel::Scalar, &config, &Inputs::generate(&config, 4).x, &w);
    let order = least_important_first(&head_importance(&fwd.contributions, &fwd.output));
    let curve = drift_curve(&fwd.contributions, &fwd.output, &order);
    assert_eq!(curve.len(), 13);
    assert_eq!((curve[0].rel_l2, curve[0].cosine), (0.0, 1.0));
    assert!((curve[12].rel_l2 - 1.0).abs() < 1e-6);
    for k in [1, 5, 11] {
        let pruned = fwd.contributions.recompose(&HeadSet::with_pruned(12, order[..k].iter().copied()));
        let direct = drift(&fwd.output, &pruned, 48).overall;
        assert!((curve[k].rel_l2 - direct.rel_l2).abs() < 1e-5, "k = {k}");
    }
    // Heads' contributions are not orthogonal, so later steps of either order can beat the
    // other (with untrained weights heads are nearly interchangeable); the first step of the
    // least-important order is by construction the smallest single-head drift.
    let random = drift_curve(&fwd.contributions, &fwd.output, &random_order(12, 4));
    assert!(curve[1].rel_l2 <= random[1].rel_l2 + 1e-12);
}
