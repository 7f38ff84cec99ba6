//! Model folders made here, for the loader's bad-input tests and its fuzz: a safetensors writer
//! that also writes what no library would (bad offsets, unknown dtypes), and a small random BERT
//! folder in memory.

use headlab::model::encoder::bert::Bert;
use headlab::model::load::files::MemoryFiles;
use headlab::model::load::names::encoder_names;
use headlab::model::spec::ModelSpec;

/// A safetensors file of `(name, dtype, shape, data)` tensors laid out one after another.
pub fn safetensors(tensors: &[(String, String, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut at = 0usize;
    for (name, dtype, shape, data) in tensors {
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [at, at + data.len()]}),
        );
        at += data.len();
    }
    let text = serde_json::Value::Object(header).to_string();
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    for (_, _, _, data) in tensors {
        out.extend_from_slice(data);
    }
    out
}

/// The tensors of `bert` in its checkpoint naming, F32.
pub fn tensors_of(bert: &Bert) -> Vec<(String, String, Vec<usize>, Vec<u8>)> {
    let spec = bert.spec;
    let mut values: Vec<Vec<f32>> = vec![bert.word.clone(), bert.position.clone()];
    let mut token_types = bert.token_type.clone();
    token_types.extend(vec![0.0; spec.d_model]);
    values.push(token_types);
    values.push(bert.ln_embed.w.clone());
    values.push(bert.ln_embed.b.clone());
    for layer in &bert.layers {
        for lin in layer.qkv.iter().chain([&layer.out, &layer.ffn_in, &layer.ffn_out]) {
            values.push(lin.w.to_vec());
            values.push(lin.b.clone());
        }
        for norm in [&layer.ln1, &layer.ln2] {
            values.push(norm.w.clone());
            values.push(norm.b.clone());
        }
    }
    // encoder_names lists each layer's linears, then its norms, as pushed above.
    encoder_names(&spec)
        .into_iter()
        .zip(values)
        .map(|((name, shape), v)| {
            assert_eq!(shape.iter().product::<usize>(), v.len(), "{name}");
            (name, "F32".to_string(), shape, v.iter().flat_map(|x| x.to_le_bytes()).collect())
        })
        .collect()
}

/// A small model's shape: 2 layers of 3 heads of 5, FFN 11, 16 pieces, 9 positions.
pub const TINY: ModelSpec = ModelSpec {
    layers: 2,
    heads: 3,
    d_model: 15,
    ffn: 11,
    vocab: 16,
    positions: 9,
    ..ModelSpec::MINILM_L6_V2
};

/// The vocabulary of [`TINY`]'s folder.
pub const TINY_VOCAB: &str =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nbank\nriver\n,\n.\nhead\n##s\nprune\n##d\na\nb\n";

/// config.json of [`TINY`].
pub fn tiny_config() -> String {
    format!(
        r#"{{"model_type": "bert", "num_hidden_layers": {}, "num_attention_heads": {}, "hidden_size": {}, "intermediate_size": {}, "vocab_size": {}, "max_position_embeddings": {}, "hidden_act": "gelu", "layer_norm_eps": 1e-12, "_name_or_path": "tests/tiny"}}"#,
        TINY.layers, TINY.heads, TINY.d_model, TINY.ffn, TINY.vocab, TINY.positions
    )
}

/// A folder `tiny/` holding a random [`TINY`] BERT (F32, weights `seed`), its config and
/// vocab.txt; and the model.
pub fn tiny_folder(seed: u32) -> (MemoryFiles, Bert) {
    let bert = Bert::random(TINY, seed);
    let mut files = MemoryFiles::new();
    files.put("tiny/config.json", tiny_config().into_bytes());
    files.put("tiny/vocab.txt", TINY_VOCAB.as_bytes().to_vec());
    files.put("tiny/model.safetensors", safetensors(&tensors_of(&bert)));
    (files, bert)
}
