//! GPT-2-family decoders: random checkpoints made by tests/reference/decoders.py (odd sizes in
//! F32 with GPT2LMHeadModel's names and mask buffers, the original naming in F16 with a
//! tokenizer.json, a GPT-2-small-shaped one) read natively, tokenized against the `tokenizers`
//! package and run against their float64 numpy references, with and without heads pruned, on both
//! kernels. Needs scripts/make-checkpoints.sh (run by scripts/test.sh).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::path::Path;

use common::{assert_close, checkpoints_dir};
use headlab::attention::HeadSet;
use headlab::cpu::Kernel;
use headlab::model::bpe::Bpe;
use headlab::model::config::{self, Architecture};
use headlab::model::gpt2::{tensor_names, Gpt2};
use headlab::model::next_token;
use safetensors::{Dtype, SafeTensors};
use serde_json::Value;

const CASES: [&str; 3] = ["gpt2-odd", "gpt2-tokenizer-json", "gpt2-small-shaped"];

fn folder(name: &str) -> std::path::PathBuf {
    let dir = checkpoints_dir().join(name);
    assert!(
        dir.join("reference.json").exists(),
        "no {name} at {}: run scripts/make-checkpoints.sh",
        dir.display()
    );
    dir
}

fn reference(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

fn tokenizer(dir: &Path) -> Bpe {
    let text = |f: &str| std::fs::read_to_string(dir.join(f));
    match text("tokenizer.json") {
        Ok(json) => Bpe::from_tokenizer_json(&json).unwrap(),
        Err(_) => Bpe::from_files(&text("vocab.json").unwrap(), &text("merges.txt").unwrap()).unwrap(),
    }
}

/// The folder's decoder, its weights read from the safetensors file with the loader's prefixes.
fn decoder(dir: &Path) -> Gpt2 {
    let c = config::parse(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    assert_eq!(c.architecture, Architecture::Gpt2);
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let prefix =
        ["", "transformer."].into_iter().find(|p| st.tensor(&format!("{p}wte.weight")).is_ok()).unwrap();
    let names: std::collections::HashSet<String> =
        tensor_names(&c.spec).into_iter().map(|(n, _)| n).collect();
    Gpt2::from_tensors(c.spec, |name| {
        assert!(names.contains(name));
        let t = st.tensor(&format!("{prefix}{name}")).ok()?;
        let values = match t.dtype() {
            Dtype::F32 => {
                t.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
            }
            Dtype::F16 => t
                .data()
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes(b.try_into().unwrap()).to_f32())
                .collect(),
            other => panic!("{name} is {other:?}"),
        };
        Some((t.shape().to_vec(), values))
    })
    .unwrap()
}

#[test]
fn byte_level_bpe_gives_the_tokenizers_packages_ids_on_every_case() {
    for name in CASES {
        let dir = folder(name);
        let bpe = tokenizer(&dir);
        let cases = reference(&dir)["tokens"].as_array().unwrap().clone();
        assert!(cases.len() >= 10);
        for case in cases {
            let text = case["text"].as_str().unwrap();
            let want: Vec<u32> =
                case["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
            let got: Vec<u32> = bpe.encode(text).iter().map(|t| t.id).collect();
            assert_eq!(got, want, "{name}: {text:?}");
            assert_eq!(bpe.decode(&got), text, "{name}: the tokens give the text back");
        }
    }
}

/// Largest `|got - want| / max |want|`.
fn rel_error(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    got.iter().zip(want).fold(0.0f64, |m, (&g, &w)| m.max((g as f64 - w).abs())) / scale
}

#[test]
fn each_decoder_equals_its_float64_reference_with_and_without_heads_pruned() {
    for name in CASES {
        let dir = folder(name);
        let model = decoder(&dir);
        let spec = model.spec;
        let reference = reference(&dir);
        for case in reference["forward"].as_array().unwrap() {
            let ids: Vec<u32> =
                case["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
            let pruned: Vec<usize> = case["pruned"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p[0].as_u64().unwrap() as usize * spec.heads + p[1].as_u64().unwrap() as usize)
                .collect();
            let sets = [
                ("", HeadSet::all(spec.total_heads())),
                ("_pruned", HeadSet::with_pruned(spec.total_heads(), pruned)),
            ];
            // The scalar kernel on the small cases; both on GPT-2 small's shape would take minutes.
            let kernels: &[Kernel] = if spec.d_model > 100 { &[Kernel::Simd] } else { &Kernel::ALL };
            for &kernel in kernels {
                for (suffix, heads) in &sets {
                    let what = format!("{name} n={} {kernel:?}{suffix}", ids.len());
                    let out = model.forward(kernel, &ids, heads);
                    let logits = rel_error(&out.next_logits, &floats(&case[format!("next_logits{suffix}")]));
                    assert!(logits < 1e-5, "{what}: next-token logits off by {logits:.2e} (relative)");
                    let want_losses = floats(&case[format!("losses{suffix}")]);
                    let got_losses: Vec<f32> = out.losses.iter().map(|&l| l as f32).collect();
                    if !want_losses.is_empty() {
                        let losses = rel_error(&got_losses, &want_losses);
                        assert!(losses < 1e-5, "{what}: losses off by {losses:.2e} (relative)");
                    }
                    if suffix.is_empty() {
                        assert_close(
                            &format!("{what} layer 1"),
                            &out.attention[0],
                            &floats(&case["attention_first"]),
                            1e-5,
                        );
                        let last = out.attention.last().unwrap();
                        assert_close(
                            &format!("{what} last layer"),
                            last,
                            &floats(&case["attention_last"]),
                            1e-5,
                        );
                    }
                    say!("{what}: logits {logits:.1e}");
                }
            }
        }
    }
}

#[test]
fn pruning_a_head_moves_the_next_token_distribution_and_its_kl_says_how_far() {
    let model = decoder(&folder("gpt2-odd"));
    let spec = model.spec;
    let ids: Vec<u32> = (0..30u32).map(|i| (i * 37 + 5) % spec.vocab as u32).collect();
    let full = model.forward(Kernel::Simd, &ids, &HeadSet::all(spec.total_heads()));
    let same = next_token::NextDrift::between(&full.next_logits, &full.next_logits);
    assert!(same.kl < 1e-12 && !same.top_changed());
    let mut kls = Vec::new();
    for pruned in [vec![0], vec![0, 1, 2], (0..spec.total_heads()).collect()] {
        let out = model.forward(Kernel::Simd, &ids, &HeadSet::with_pruned(spec.total_heads(), pruned));
        kls.push(next_token::kl(&full.next_logits, &out.next_logits));
    }
    assert!(kls.iter().all(|&k| k > 0.0), "{kls:?}");
    assert!(kls[2] > kls[0], "every head pruned moves it further than one: {kls:?}");
}
