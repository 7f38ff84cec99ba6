//! The page's f16 copy of the trained model against the fp32 checkpoint: the asset's bounds,
//! the digits of the pruned cosine and of the meaning check's margin the page shows, and every
//! flip of the check it names. Needs the model files (scripts/fetch-model.sh).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::minilm::*;
use headlab::attention::HeadSet;
use headlab::cpu::Kernel;
use headlab::jobs::driver::Planned;
use headlab::jobs::sweep::MarginSweep;
use headlab::model::bert::Bert;
use headlab::model::check::{meaning_check, Verdict};
use headlab::model::digits::{COSINE_ABS_ERROR, COSINE_DRIFT_ERROR, MARGIN_ERROR};
use headlab::model::Model;

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
        let out = bert.forward(Kernel::Simd, &ids, &HeadSet::all(SPEC.total_heads()));
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

/// How many digits of the page's "cosine of the pruned sentence embedding to the full one" (and
/// of the meaning check's margin) its f16 weights support: the same numbers from the fp32
/// checkpoint, over the fixture's sentences and masks from one head to 66 pruned.
#[test]
fn the_pruned_cosine_of_the_f16_model_is_the_fp32_models_to_the_digits_the_page_shows() {
    let (f16, tok, _) = f16_model();
    let fp32 = checkpoint();
    let (mut worst_abs, mut worst_rel) = (0.0f64, 0.0f64);
    let own = |bert: &Bert, ids: &[u32], heads: &HeadSet| {
        let full = bert.forward(Kernel::Simd, ids, &HeadSet::all(SPEC.total_heads())).embedding;
        let pruned = bert.forward(Kernel::Simd, ids, heads).embedding;
        headlab::attention::prune::cosine(&pruned, &full)
    };
    let mut sets = pruned_sets();
    sets.push(("one head", HeadSet::with_pruned(SPEC.total_heads(), [40])));
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
        let check = |bert: &Bert| pollster::block_on(meaning_check(bert, &tok, heads)).margin_toward(1);
        let (a, b) = (check(&f16), check(&fp32));
        println!("{name:>20}: margin fp32 {b:.6} f16 {a:.6} |diff| {:.1e}", (a - b).abs());
        worst_margin = worst_margin.max((a - b).abs());
    }
    println!("worst margin |diff| {worst_margin:.1e}");
    assert!(worst_margin < MARGIN_ERROR, "{worst_margin:e}");
    // The bounds the page's digits are chosen from (`model::digits::cosine_text`).
    assert!(worst_abs < COSINE_ABS_ERROR, "{worst_abs:e}");
    assert!(worst_rel < COSINE_DRIFT_ERROR, "{worst_rel:e}");
}

/// The page calls a head's removal a flip of the meaning check only where its f16 weights'
/// margin is beyond their error of zero (`Verdict`): over the whole 72-head sweep, every
/// flip is a flip in the fp32 checkpoint and every head that holds holds there too.
#[test]
fn every_flip_and_hold_the_page_names_is_the_fp32_models_too() {
    let (f16, tok, _) = f16_model();
    let fp32 = checkpoint();
    let sweep = |bert: Bert| {
        let model =
            std::rc::Rc::new(Model { name: "m".into(), id: "m".into(), bert, tokenizer: tok.clone() });
        let engine = engine(model, 2);
        run(&engine, Planned::new(MarginSweep::new(&engine)))
    };
    let (page, reference) = (sweep(f16), sweep(fp32));
    assert_eq!(page.full.closer, reference.full.closer);
    let mut worst = 0.0f64;
    for (h, (&a, &b)) in page.margins.iter().zip(&reference.margins).enumerate() {
        worst = worst.max((a - b).abs());
        match Verdict::of_margin(a) {
            Verdict::Flips => assert!(b < 0.0, "head {h}: f16 {a} flips, fp32 {b} does not"),
            Verdict::Holds => assert!(b > 0.0, "head {h}: f16 {a} holds, fp32 {b} flips"),
            Verdict::TooClose => println!("head {h}: too close to call: f16 {a:.6}, fp32 {b:.6}"),
        }
    }
    let flips = page.heads_with(Verdict::Flips);
    println!("flips {flips:?}, worst margin |diff| {worst:.1e}");
    assert!(!flips.is_empty(), "some single heads flip the check");
    assert!(worst < MARGIN_ERROR, "{worst:e}");
}
