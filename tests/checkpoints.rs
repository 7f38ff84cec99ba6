//! The checkpoint loader: random BERT-family folders made by tests/reference/checkpoints.py
//! (BERT with odd sizes and an MLM head, a cased BERT in bf16 shards pooled from [CLS], DistilBERT
//! in f16, a BERT-base-shaped model) read as the page reads a dropped folder and run against
//! their float64 numpy references; and every kind of bad folder refused with a message that names
//! the file and the problem. Needs scripts/make-checkpoints.sh (run by scripts/test.sh).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::cell::Cell;

use common::folder::{safetensors, tensors_of, tiny_config, tiny_folder, TINY, TINY_VOCAB};
use common::{assert_close, checkpoints_dir};
use headlab::attention::HeadSet;
use headlab::cpu::Kernel;
use headlab::gpu::{GpuBert, GpuContext};
use headlab::model::encoder::bert::BertOutput;
use headlab::model::encoder::Encoder;
use headlab::model::load::checkpoint::{
    load, referenced_files, CheckpointError, Loaded, Options, SERVED_NAMES,
};
use headlab::model::load::config::Architecture;
use headlab::model::load::files::{last_part, now, DirFiles, Entry, Files, MemoryFiles, Read};
use headlab::model::spec::{Activation, Pooling};
use headlab::model::tokenize::wordpiece::Casing;
use serde_json::Value;

const UNLIMITED: Options = Options { name: None, budget: u64::MAX, room: None };

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

fn read(files: &impl Files) -> Result<Loaded, CheckpointError> {
    now(load(files, &UNLIMITED, &mut |_| {}))
}

/// Each generated folder: what the loader makes of its config and modules.
#[test]
fn each_generated_folder_is_read_as_its_config_and_modules_say() {
    let dir = checkpoints_dir();
    let expect = [
        (
            "bert-odd",
            Architecture::Bert,
            Casing::Uncased,
            Activation::Gelu,
            Pooling::Mean { normalize: false },
            (2, 4, 36, 37),
        ),
        (
            "bert-cased-bf16-sharded",
            Architecture::Bert,
            Casing::Cased,
            Activation::GeluTanh,
            Pooling::Cls { normalize: true },
            (3, 3, 24, 40),
        ),
        (
            "distilbert",
            Architecture::DistilBert,
            Casing::Uncased,
            Activation::Gelu,
            Pooling::Mean { normalize: true },
            (2, 2, 20, 30),
        ),
        (
            "bert-base-shaped",
            Architecture::Bert,
            Casing::Uncased,
            Activation::Gelu,
            Pooling::Mean { normalize: false },
            (12, 12, 768, 3072),
        ),
    ];
    for (name, arch, casing, activation, pooling, (layers, heads, d, ffn)) in expect {
        let loaded = read(&DirFiles::new(&dir.join(name)).unwrap()).unwrap();
        let desc = &loaded.description;
        assert_eq!((desc.name.as_str(), desc.architecture, desc.casing), (name, arch, casing));
        let s = desc.spec;
        assert_eq!(
            (s.layers, s.heads, s.d_model, s.ffn, s.activation, s.pooling),
            (layers, heads, d, ffn, activation, pooling),
            "{name}"
        );
        let extra = loaded.notes.iter().any(|n| n.contains("the page does not use"));
        assert_eq!(extra, name == "bert-odd" || name == "distilbert", "{name}: {:?}", loaded.notes);
        say!("{name}: {} MB file, id {}, notes {:?}", loaded.file.len() / 1_000_000, loaded.id, loaded.notes);
    }
}

const GENERATED: [&str; 4] = ["bert-odd", "bert-cased-bf16-sharded", "distilbert", "bert-base-shaped"];

/// The generated folder `name`, read by the loader, and its reference.
fn generated(name: &str) -> (Encoder, Value) {
    let dir = checkpoints_dir().join(name);
    let loaded = read(&DirFiles::new(&dir).unwrap()).unwrap();
    let model = Encoder::from_file(&loaded.file, loaded.id).unwrap();
    let reference =
        serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap()).unwrap();
    (model, reference)
}

/// `forward` (a pass of `model` on ids with some heads active) against the reference's forward
/// cases: the pooled embedding with all heads and with some pruned, the first and the last
/// layer's attention, to 1e-5 relative. The worst error.
fn check_forward(
    what: &str,
    model: &Encoder,
    reference: &Value,
    forward: impl Fn(&[u32], &HeadSet) -> BertOutput,
) -> f64 {
    let spec = *model.spec();
    let mut worst = 0.0f64;
    for case in reference["forward"].as_array().unwrap() {
        let ids: Vec<u32> =
            case["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
        let pruned = case["pruned"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[0].as_u64().unwrap() as usize * spec.heads + p[1].as_u64().unwrap() as usize);
        let pruned = HeadSet::with_pruned(spec.total_heads(), pruned);
        let label = |k: &str| format!("{what}, {} tokens: {k}", ids.len());
        let full = forward(&ids, &HeadSet::all(spec.total_heads()));
        let last = full.attention.last().unwrap();
        let cut = forward(&ids, &pruned);
        for (k, got, want) in [
            ("embedding", &full.embedding[..], "embedding"),
            ("first layer's attention", &full.attention[0][..], "attention_first"),
            ("last layer's attention", &last[..], "attention_last"),
            ("pruned embedding", &cut.embedding[..], "embedding_pruned"),
        ] {
            worst = worst.max(assert_close(&label(k), got, &floats(&case[want]), 1e-5));
        }
    }
    worst
}

/// The page's forward pass on each generated folder, through the loader, against the float64
/// reference, on both CPU kernels; and the tokenizer (vocab.txt or tokenizer.json, cased or
/// not) against Python tokenizers' ids.
#[test]
fn each_generated_folder_matches_its_float64_reference() {
    for name in GENERATED {
        let (model, reference) = generated(name);
        for case in reference["tokens"].as_array().unwrap() {
            let want: Vec<u32> =
                case["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
            assert_eq!(model.ids(case["text"].as_str().unwrap()), want, "{name}: {}", case["text"]);
        }
        // Both kernels on the small models; the scalar one on BERT-base's shape only adds time.
        let kernels: &[Kernel] = if model.spec().d_model >= 768 { &[Kernel::Simd] } else { &Kernel::ALL };
        for &kernel in kernels {
            let worst = check_forward(&format!("{name}, {kernel:?}"), &model, &reference, |ids, heads| {
                model.bert.forward(kernel, ids, heads)
            });
            say!("{name}, {kernel:?}: the page's forward within {worst:.1e} (relative) of the float64 reference");
        }
    }
}

/// The same on the GPU (Mesa's lavapipe natively): the tanh GELU and [CLS] pooling included.
#[test]
fn each_generated_folder_on_the_gpu_matches_its_float64_reference() {
    let ctx =
        std::rc::Rc::new(pollster::block_on(GpuContext::acquire()).expect("a GPU adapter (lavapipe in CI)"));
    for name in GENERATED {
        let (model, reference) = generated(name);
        let gpu = pollster::block_on(GpuBert::new(ctx.clone(), &model.bert)).unwrap();
        let worst = check_forward(&format!("{name}, GPU"), &model, &reference, |ids, heads| {
            pollster::block_on(gpu.forward(&model.bert, ids, heads)).unwrap()
        });
        say!("{name}, GPU ({}): within {worst:.1e} (relative) of the float64 reference", ctx.adapter_label());
    }
}

/// Reads counted, to show a refusal came from the header alone.
struct Counting<'a> {
    inner: &'a MemoryFiles,
    bytes: Cell<u64>,
}

impl Files for Counting<'_> {
    fn entries(&self) -> &[Entry] {
        self.inner.entries()
    }
    fn read(&self, index: usize, start: u64, len: u64) -> Read<'_> {
        self.bytes.set(self.bytes.get() + len);
        self.inner.read(index, start, len)
    }
}

/// A model the page cannot hold is refused from its header, with what it would need, having
/// read none of its tensors; within the budget it loads.
#[test]
fn a_model_too_big_for_the_page_is_refused_from_its_header() {
    let (files, _) = tiny_folder(1);
    let counting = Counting { inner: &files, bytes: Cell::new(0) };
    let options = Options { name: None, budget: 10_000, room: None };
    let err = now(load(&counting, &options, &mut |_| {})).unwrap_err();
    assert_eq!(err.file, "tiny/model.safetensors");
    assert!(
        err.problem.contains("would need about 19 KB") && err.problem.contains("can give it 10 KB"),
        "{err}"
    );
    let weights = files.get("tiny/model.safetensors").unwrap();
    let n = u64::from_le_bytes(weights[..8].try_into().unwrap());
    let data = weights.len() as u64 - 8 - n;
    let all: u64 = files.entries().iter().map(|e| e.size).sum();
    assert!(
        counting.bytes.get() <= all - data,
        "read {} bytes, tensors included, before refusing",
        counting.bytes.get()
    );
    // Within the budget, but the engine would not give the page the room: refused the same way.
    let counting = Counting { inner: &files, bytes: Cell::new(0) };
    let options = Options { name: None, budget: 1 << 20, room: Some(|bytes| bytes < 1000) };
    let err = now(load(&counting, &options, &mut |_| {})).unwrap_err();
    assert!(
        err.problem.starts_with("the model needs about 19 KB of the page's wasm memory (its f16 file and f32 weights), and this browser would not give the page that much more"),
        "{err}"
    );
    assert!(counting.bytes.get() <= all - data, "read {} bytes, tensors included", counting.bytes.get());
    let enough = Options { name: Some("mine".into()), budget: 1 << 20, room: Some(|bytes| bytes < 1 << 20) };
    let loaded = now(load(&files, &enough, &mut |_| {})).unwrap();
    assert_eq!(loaded.description.name, "mine");
}

/// The tiny folder's model, read back, is the random BERT it was made from (in f16).
#[test]
fn a_folder_made_here_round_trips_through_the_page_file() {
    let (files, bert) = tiny_folder(7);
    let loaded = read(&files).unwrap();
    assert_eq!((loaded.description.name.as_str(), loaded.notes.len()), ("tiny", 0));
    let model = Encoder::from_file(&loaded.file, loaded.id.clone()).unwrap();
    let round = |v: &[f32]| v.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect::<Vec<_>>();
    assert_eq!(model.bert.word, round(&bert.word));
    assert_eq!(model.bert.layers[1].ffn_in.w[..], round(&bert.layers[1].ffn_in.w)[..]);
    assert_eq!(model.tokenizer.vocab_size(), 16);
    // The same folder gives the same file, so the same id; other weights another.
    assert_eq!(read(&files).unwrap().id, loaded.id);
    assert_ne!(read(&tiny_folder(8).0).unwrap().id, loaded.id);
}

/// A model is named by its folder, else its config's `_name_or_path`, else its family: never a
/// bare "model" (loose files whose config names nothing).
#[test]
fn a_model_is_named_by_its_folder_its_config_or_its_family() {
    let (folder, _) = tiny_folder(7);
    let loose = |config: String| {
        let mut files = MemoryFiles::new();
        files.put("config.json", config.into_bytes());
        for name in ["vocab.txt", "model.safetensors"] {
            files.put(name, folder.get(&format!("tiny/{name}")).unwrap().to_vec());
        }
        read(&files).unwrap().description.name
    };
    assert_eq!(read(&folder).unwrap().description.name, "tiny");
    assert_eq!(loose(tiny_config()), "tiny", "the config's tests/tiny, its last part");
    let nameless = tiny_config().replace(r#", "_name_or_path": "tests/tiny""#, "");
    assert_eq!(loose(nameless.clone()), "bert from your files");
    assert_eq!(loose(nameless.replace('}', r#", "_name_or_path": "./"}"#)), "bert from your files");
    for (path, name) in
        [("models/bert-tiny/", Some("bert-tiny")), ("/a/b", Some("b")), (".", None), ("", None)]
    {
        assert_eq!(last_part(path).as_deref(), name, "{path:?}");
    }
    assert_eq!(last_part(&"x".repeat(200)).unwrap().len(), 80);
}

/// A folder on a server, which lists nothing: the page asks for the names a folder may hold, then
/// for those its index and modules.json name; what it finds loads as the whole folder does (the
/// generated folders have shards, a Pooling module and files the page does not need).
#[test]
fn a_served_folder_is_found_by_the_names_the_page_asks_for() {
    for name in GENERATED.iter().filter(|n| **n != "bert-base-shaped") {
        let dir = checkpoints_dir().join(name);
        let all = DirFiles::new(&dir).unwrap();
        let prefix = format!("{name}/");
        let on_server = |path: &str| all.entries().iter().position(|e| e.path == format!("{prefix}{path}"));
        let (mut wanted, mut found) =
            (SERVED_NAMES.iter().map(|n| n.to_string()).collect::<Vec<_>>(), MemoryFiles::new());
        while let Some(path) = wanted.pop() {
            let Some(index) = on_server(&path).filter(|_| found.get(&path).is_none()) else { continue };
            let bytes = now(all.read(index, 0, all.entries()[index].size)).unwrap();
            wanted.extend(referenced_files(&path, &String::from_utf8_lossy(&bytes)));
            found.put(&path, bytes);
        }
        let (served, whole) = (read(&found).unwrap(), read(&all).unwrap());
        assert_eq!(served.id, whole.id, "{name}");
        assert_eq!(served.notes, whole.notes, "{name}");
    }
    // Nothing outside the folder is ever asked for.
    let index = r#"{"weight_map": {"a": "../secret.safetensors", "b": "/etc/x", "c": "ok.safetensors", "d": "https://x/y"}}"#;
    assert_eq!(referenced_files("model.safetensors.index.json", index), ["ok.safetensors"]);
    let modules = r#"[{"path": "", "type": "sentence_transformers.models.Transformer"},
        {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]"#;
    assert_eq!(referenced_files("modules.json", modules), ["1_Pooling/config.json"]);
    assert!(referenced_files("config.json", modules).is_empty());
    assert!(referenced_files("modules.json", "not json").is_empty());
}

/// `tiny_folder` with `change` applied to it.
fn broken(change: impl FnOnce(&mut MemoryFiles)) -> CheckpointError {
    let (mut files, _) = tiny_folder(3);
    change(&mut files);
    read(&files).expect_err("a broken folder")
}

/// The tiny model's tensors with `change` applied, as its model.safetensors.
fn weights(
    change: impl FnOnce(&mut Vec<(String, String, Vec<usize>, Vec<u8>)>),
) -> impl FnOnce(&mut MemoryFiles) {
    move |files| {
        let mut tensors = tensors_of(&headlab::model::encoder::bert::Bert::random(TINY, 3));
        change(&mut tensors);
        files.put("tiny/model.safetensors", safetensors(&tensors));
    }
}

/// model.safetensors with its header's text edited by `edit` (its length updated).
fn header(edit: impl Fn(&str) -> String) -> impl FnOnce(&mut MemoryFiles) {
    move |files| {
        let bytes = files.get("tiny/model.safetensors").unwrap().to_vec();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let text = edit(std::str::from_utf8(&bytes[8..8 + n]).unwrap());
        let mut out = (text.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(&bytes[8 + n..]);
        files.put("tiny/model.safetensors", out);
    }
}

/// model.safetensors with tensor `name`'s entry in the header edited by `edit`.
fn entry(name: &'static str, edit: impl Fn(&mut Value)) -> impl FnOnce(&mut MemoryFiles) {
    header(move |text| {
        let mut value: Value = serde_json::from_str(text).unwrap();
        edit(&mut value[name]);
        value.to_string()
    })
}

/// The tensor `name` among `tensors`.
fn tensor<'a>(
    tensors: &'a mut [(String, String, Vec<usize>, Vec<u8>)],
    name: &str,
) -> &'a mut (String, String, Vec<usize>, Vec<u8>) {
    tensors.iter_mut().find(|t| t.0 == name).unwrap()
}

/// A change that breaks the tiny folder.
type Change = Box<dyn FnOnce(&mut MemoryFiles)>;

#[test]
fn every_bad_folder_is_refused_with_the_file_and_the_problem() {
    let st = "tiny/model.safetensors";
    let config = |from: &'static str, to: &'static str| {
        move |f: &mut MemoryFiles| f.put("tiny/config.json", tiny_config().replace(from, to).into_bytes())
    };
    // Cut to `at` bytes, or (negative) that many short of the whole.
    let cut = |at: isize| {
        move |f: &mut MemoryFiles| {
            let b = f.get("tiny/model.safetensors").unwrap().to_vec();
            let keep = if at < 0 { b.len() - at.unsigned_abs() } else { at as usize };
            f.put("tiny/model.safetensors", b[..keep].to_vec());
        }
    };
    let key = "encoder.layer.0.attention.self.key.weight";
    let query = "encoder.layer.0.attention.self.query.weight";
    let ln = "embeddings.LayerNorm.weight";
    let cases: Vec<(&str, Change, &str, &str)> = vec![
        ("no config", Box::new(|f: &mut MemoryFiles| f.remove("tiny/config.json")), "config.json", "missing"),
        ("no weights", Box::new(|f: &mut MemoryFiles| f.remove(st)), st, "missing"),
        (
            "pickle only",
            Box::new(|f: &mut MemoryFiles| {
                f.remove(st);
                f.put("tiny/pytorch_model.bin", vec![1])
            }),
            st,
            "pytorch_model.bin",
        ),
        (
            "no tokenizer",
            Box::new(|f: &mut MemoryFiles| f.remove("tiny/vocab.txt")),
            "tiny/tokenizer.json",
            "vocab.txt",
        ),
        ("truncated in the length", Box::new(cut(5)), st, "truncated: 5 bytes"),
        ("truncated in the header", Box::new(cut(40)), st, "header length"),
        ("truncated in the data", Box::new(cut(-100)), st, "truncated: its header places"),
        (
            "header length beyond the file",
            Box::new(|f: &mut MemoryFiles| {
                let mut b = f.get(st).unwrap().to_vec();
                b[..8].copy_from_slice(&(1u64 << 40).to_le_bytes());
                f.put(st, b)
            }),
            st,
            "header length 1099511627776 goes beyond the file",
        ),
        (
            "header not JSON",
            Box::new(header(|h| h.replacen('{', "[", 1))),
            st,
            "not a valid safetensors header",
        ),
        (
            "offsets that do not fit the shape",
            Box::new(entry(key, |e| {
                e["data_offsets"][1] = (e["data_offsets"][1].as_u64().unwrap() + 4).into()
            })),
            st,
            "the tensor \"encoder.layer.0.attention.self.key.weight\"'s offsets",
        ),
        (
            "a name given twice",
            Box::new(header(|h| {
                h.replacen("\"embeddings.LayerNorm.bias\"", "\"embeddings.LayerNorm.weight\"", 1)
            })),
            st,
            "its header names the tensor \"embeddings.LayerNorm.weight\" twice",
        ),
        (
            "overlapping offsets",
            Box::new(entry(key, |e| {
                let (a, b) = (e["data_offsets"][0].as_u64().unwrap(), e["data_offsets"][1].as_u64().unwrap());
                e["data_offsets"] = serde_json::json!([a - 8, b - 8]);
            })),
            st,
            "tensor \"encoder.layer.0.attention.self.key.weight\" starts at byte",
        ),
        (
            "unknown dtype",
            Box::new(header(|h| h.replacen("\"F32\"", "\"F99\"", 1))),
            st,
            "the unknown dtype \"F99\"",
        ),
        (
            "a dtype headlab does not read",
            Box::new(weights(|t| tensor(t, ln).1 = "I32".into())),
            st,
            "is I32; headlab reads F32, F16 and BF16",
        ),
        (
            "a shape the config does not give",
            Box::new(weights(|t| tensor(t, query).2 = vec![TINY.d_model * TINY.d_model])),
            st,
            "encoder.layer.0.attention.self.query.weight has shape [225]; config.json makes it [15, 15]",
        ),
        (
            "a missing tensor",
            Box::new(weights(|t| {
                t.retain(|x| !x.0.contains("layer.1.output.LayerNorm.bias"));
            })),
            st,
            "encoder.layer.1.output.LayerNorm.bias is missing",
        ),
        (
            "config with a missing field",
            Box::new(config("\"hidden_size\": 15,", "")),
            "tiny/config.json",
            "hidden_size is missing",
        ),
        (
            "a million layers",
            Box::new(config("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1000000")),
            "tiny/config.json",
            "claims 1000000 layers",
        ),
        (
            "an unknown architecture",
            Box::new(config("\"bert\"", "\"t5\"")),
            "tiny/config.json",
            "\"t5\" is not an architecture",
        ),
        (
            "a vocabulary larger than the embeddings",
            Box::new(config("\"vocab_size\": 16", "\"vocab_size\": 12")),
            "tiny/vocab.txt",
            "16 pieces do not fit the model's 12 embedding rows",
        ),
        (
            "a vocabulary without [CLS]",
            Box::new(|f: &mut MemoryFiles| {
                f.put("tiny/vocab.txt", TINY_VOCAB.replace("[CLS]", "cls").into_bytes())
            }),
            "tiny/vocab.txt",
            "no [CLS]",
        ),
        (
            "a NaN weight",
            Box::new(weights(|t| tensor(t, key).3[4..8].copy_from_slice(&f32::NAN.to_le_bytes()))),
            st,
            "encoder.layer.0.attention.self.key.weight: value 1 is NaN",
        ),
        (
            "an infinite weight",
            Box::new(weights(|t| tensor(t, ln).3[..4].copy_from_slice(&f32::INFINITY.to_le_bytes()))),
            st,
            "embeddings.LayerNorm.weight: value 0 is inf",
        ),
        (
            "a weight beyond f16",
            Box::new(weights(|t| tensor(t, ln).3[..4].copy_from_slice(&1e6f32.to_le_bytes()))),
            st,
            "beyond f16's range",
        ),
        (
            "a 2^40-byte shape in a small slot",
            Box::new(entry(query, |e| e["shape"] = serde_json::json!([1 << 20, 1 << 18]))),
            st,
            "the tensor \"encoder.layer.0.attention.self.query.weight\"'s offsets 1740..2640 hold 900 bytes, where its shape [1048576, 262144] of F32 needs 1099511627776",
        ),
        (
            "a shape whose size overflows",
            Box::new(entry(query, |e| e["shape"] = serde_json::json!([1u64 << 40, 1u64 << 40]))),
            st,
            "the tensor \"encoder.layer.0.attention.self.query.weight\"'s shape [1099511627776, 1099511627776] of F32 is too large for any file",
        ),
    ];
    for (what, change, file, problem) in cases {
        let err = broken(change);
        assert!(
            err.file == file && err.problem.contains(problem),
            "{what}: got {err:?}, want {file}: …{problem}…"
        );
        say!("{what}: {err}");
    }
}

/// A tensor the header claims at 2^40 bytes, offsets consistent: refused as beyond the file
/// before anything is allocated for it.
#[test]
fn a_header_claiming_a_terabyte_is_refused_as_beyond_the_file() {
    let mut tensors = tensors_of(&headlab::model::encoder::bert::Bert::random(TINY, 3));
    let huge = ("extra.huge".to_string(), "F32".to_string(), vec![1 << 20, 1 << 18], Vec::new());
    tensors.push(huge);
    let mut bytes = safetensors(&tensors[..tensors.len() - 1]);
    // Re-made by hand: the writer above would need the terabyte in memory.
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let text = std::str::from_utf8(&bytes[8..8 + n]).unwrap().to_string();
    let end: usize = tensors[..tensors.len() - 1].iter().map(|t| t.3.len()).sum();
    let text = format!(
        "{},\"extra.huge\":{{\"dtype\":\"F32\",\"shape\":[1048576,262144],\"data_offsets\":[{end},{}]}}}}",
        &text[..text.len() - 1],
        end + (1usize << 40)
    );
    let data = bytes.split_off(8 + n);
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&data);
    let (mut files, _) = tiny_folder(3);
    files.put("tiny/model.safetensors", out);
    let err = read(&files).unwrap_err();
    assert!(
        err.problem.contains("truncated: its header places 1099511") && err.problem.contains("the file has"),
        "{err}"
    );
}
