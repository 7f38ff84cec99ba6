//! The page's f16 copy of the trained model against the fp32 checkpoint: the asset's bounds,
//! the digits of the pruned cosine and of the meaning check's margin the page shows, and every
//! flip of the check it names. Needs the model files (scripts/fetch-model.sh).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::minilm::*;
use common::model_dir;
use headlab::attention::HeadSet;
use headlab::cpu::Kernel;
use headlab::jobs::driver::Planned;
use headlab::jobs::encoder::sweep::MarginSweep;
use headlab::model::digits::{COSINE_ABS_ERROR, COSINE_DRIFT_ERROR, MARGIN_ERROR};
use headlab::model::encoder::bert::Bert;
use headlab::model::encoder::check::{meaning_check, Verdict};
use headlab::model::encoder::Encoder;

#[test]
fn f16_asset_stays_within_its_documented_bounds() {
    let (bert, tok, encoded) = f16_model();
    // The page accepts exactly this file: the converter is deterministic, so its hash is fixed.
    assert_eq!(
        headlab::model::load::model_file::sha256_hex(&encoded),
        headlab::model::load::model_file::ASSET_SHA256
    );
    let mut damaged = encoded.clone();
    damaged[encoded.len() / 2] ^= 1;
    assert!(headlab::model::load::model_file::verify(&damaged).unwrap_err().to_string().contains("damaged"));
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

/// MiniLM's folder through the loader a reader's folder goes through: the shape its config
/// gives is the built-in one, every weight is the checkpoint's rounded to f16 (so the page's
/// numbers are today's, exactly), the vocabulary from tokenizer.json is vocab.txt's, and the
/// pooler the page does not use is named in a note.
#[test]
fn minilms_folder_through_the_checkpoint_loader_is_the_checkpoint_in_f16() {
    use headlab::model::load::checkpoint::{load, Options, Progress};
    use headlab::model::load::files::{now, DirFiles};
    let files = DirFiles::new(&model_dir()).unwrap();
    let mut reports = Vec::new();
    let options = Options { name: None, budget: u64::MAX, room: None };
    let loaded = now(load(&files, &options, &mut |p: Progress| reports.push(p))).unwrap();
    assert_eq!(loaded.description.spec, SPEC);
    assert_eq!(loaded.description.name, "model", "the folder's own name (the wheel keeps it in model/)");
    assert!(loaded.notes[0].contains("pooler.dense.weight"), "{:?}", loaded.notes);
    let last = reports.last().unwrap();
    assert_eq!((last.done, last.total, loaded.tensor_bytes), (last.total, last.total, last.total));
    assert!(reports.windows(2).all(|w| w[0].done < w[1].done), "progress only grows");
    let model = Encoder::from_file(&loaded.file, loaded.id.clone()).unwrap();
    let fp32 = checkpoint();
    let round = |v: &[f32]| v.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect::<Vec<f32>>();
    assert_eq!(model.bert.word, round(&fp32.word));
    assert_eq!(model.bert.token_type, round(&fp32.token_type));
    for (got, want) in model.bert.layers.iter().zip(&fp32.layers) {
        assert_eq!(got.qkv[1].w[..], round(&want.qkv[1].w)[..]);
        assert_eq!(got.ffn_out.b, round(&want.ffn_out.b));
        assert_eq!(got.ln2.w, round(&want.ln2.w));
    }
    let (f16, _, _) = f16_model();
    assert_eq!(model.bert, f16, "every tensor");
    let vocab = std::fs::read_to_string(model_dir().join("vocab.txt")).unwrap();
    assert_eq!(model.tokenizer.vocab_size(), vocab.lines().count());
    // The tokenizer read from tokenizer.json against Python tokenizers' ids.
    for case in fixture("minilm-tokens.json").as_array().unwrap() {
        let want: Vec<u64> = case["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        let got: Vec<u64> =
            model.tokenizer.encode(case["text"].as_str().unwrap()).iter().map(|t| t.id as u64).collect();
        assert_eq!(got, want, "{}", case["text"]);
    }
    println!(
        "MiniLM through the checkpoint loader: {} reports, {:.1} MB of tensors read, the f32 checkpoint in f16 exactly",
        reports.len(),
        loaded.tensor_bytes as f64 / 1e6
    );
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
        let model = std::rc::Rc::new(Encoder {
            name: "m".into(),
            id: "m".into(),
            architecture: headlab::model::load::config::Architecture::Bert,
            bert,
            tokenizer: tok.clone(),
        });
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
