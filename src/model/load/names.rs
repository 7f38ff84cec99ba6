//! Each family's tensors as data, one table per family (as burn-store keeps its renames): the
//! names and shapes the page's model file holds for a model of a given shape ([`tensor_names`],
//! BERT's naming for both encoders, GPT-2's own for the decoder), the prefixes a checkpoint may
//! put before them, and how a checkpoint of the family names each one ([`Table::source_names`]).
//! The loader ([`super::checkpoint`]) reads the tables; the families build from the names
//! ([`super::tensors::checked`]).

use crate::model::load::config::Architecture;
use crate::model::spec::ModelSpec;

/// Token types a BERT checkpoint's table holds (the page uses the first).
pub const TOKEN_TYPES: usize = 2;

/// How one family's checkpoints name the model file's tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Table {
    /// What a checkpoint may put before every name (`GPT2LMHeadModel` adds `transformer.`).
    pub prefixes: &'static [&'static str],
    /// A tensor every checkpoint of the family has: the prefix is the one it is found under.
    pub probe: &'static str,
    /// The layers' common prefix in the model file and in the checkpoint.
    pub layers: (&'static str, &'static str),
    /// A layer's tensor named otherwise in the checkpoint: the first pair whose model-file part
    /// the name contains is replaced by its checkpoint part.
    pub renames: &'static [(&'static str, &'static str)],
    /// Tensors of the model file the family has no table for (read as zeros).
    pub absent: &'static [&'static str],
}

/// BERT's checkpoints (bert-base, MiniLM, sentence-transformers): the model file's own names,
/// under `bert.` in a `BertFor…` head's checkpoint or `model.` in some exports.
pub const BERT: Table = Table {
    prefixes: &["", "bert.", "model."],
    probe: "embeddings.word_embeddings.weight",
    layers: ("encoder.layer.", "encoder.layer."),
    renames: &[],
    absent: &[],
};

/// DistilBERT's: its own layer names, no token types.
pub const DISTILBERT: Table = Table {
    prefixes: &["", "distilbert."],
    probe: "embeddings.word_embeddings.weight",
    layers: ("encoder.layer.", "transformer.layer."),
    renames: &[
        ("attention.self.query", "attention.q_lin"),
        ("attention.self.key", "attention.k_lin"),
        ("attention.self.value", "attention.v_lin"),
        ("attention.output.dense", "attention.out_lin"),
        ("attention.output.LayerNorm", "sa_layer_norm"),
        ("intermediate.dense", "ffn.lin1"),
        ("output.dense", "ffn.lin2"),
        ("output.LayerNorm", "output_layer_norm"),
    ],
    absent: &["embeddings.token_type_embeddings.weight"],
};

/// GPT-2's: the model file's own names, under `transformer.` in `GPT2LMHeadModel`'s checkpoint.
pub const GPT2: Table = Table {
    prefixes: &["", "transformer."],
    probe: "wte.weight",
    layers: ("h.", "h."),
    renames: &[],
    absent: &[],
};

/// The original BERT checkpoints name LayerNorm's scale and shift gamma and beta: tried after the
/// usual names.
const OLD_LAYER_NORM: [(&str, &str); 2] =
    [("LayerNorm.weight", "LayerNorm.gamma"), ("LayerNorm.bias", "LayerNorm.beta")];

impl Table {
    /// The table of `architecture`'s checkpoints.
    pub fn of(architecture: Architecture) -> &'static Table {
        match architecture {
            Architecture::Bert => &BERT,
            Architecture::DistilBert => &DISTILBERT,
            Architecture::Gpt2 => &GPT2,
        }
    }

    /// The checkpoint's names for the model file's tensor `page` (without a prefix), most usual
    /// first; none for a table the family does not have (DistilBERT's token types: zeros).
    pub fn source_names(&self, page: &str) -> Vec<String> {
        if self.absent.contains(&page) {
            return Vec::new();
        }
        let mut name = page.replacen(self.layers.0, self.layers.1, 1);
        if let Some((ours, theirs)) = self.renames.iter().find(|(ours, _)| name.contains(ours)) {
            name = name.replacen(ours, theirs, 1);
        }
        let old = name
            .contains("LayerNorm.")
            .then(|| OLD_LAYER_NORM.iter().fold(name.clone(), |n, (usual, old)| n.replace(usual, old)));
        std::iter::once(name).chain(old).collect()
    }
}

/// The tensors a model file of `architecture` and shape `spec` holds, in order: an encoder's
/// ([`encoder_names`]) or GPT-2's ([`decoder_names`]).
pub fn tensor_names(architecture: Architecture, spec: &ModelSpec) -> Vec<(String, Vec<usize>)> {
    match architecture {
        Architecture::Bert | Architecture::DistilBert => encoder_names(spec),
        Architecture::Gpt2 => decoder_names(spec),
    }
}

/// The names and shapes an encoder of shape `spec` needs, in BERT's naming (PyTorch's `[out, in]`
/// for the dense layers).
pub fn encoder_names(spec: &ModelSpec) -> Vec<(String, Vec<usize>)> {
    let (d, ffn) = (spec.d_model, spec.ffn);
    let mut names = vec![
        ("embeddings.word_embeddings.weight".to_string(), vec![spec.vocab, d]),
        ("embeddings.position_embeddings.weight".into(), vec![spec.positions, d]),
        ("embeddings.token_type_embeddings.weight".into(), vec![TOKEN_TYPES, d]),
        ("embeddings.LayerNorm.weight".into(), vec![d]),
        ("embeddings.LayerNorm.bias".into(), vec![d]),
    ];
    for l in 0..spec.layers {
        let p = format!("encoder.layer.{l}.");
        for (name, out, inp) in [
            ("attention.self.query", d, d),
            ("attention.self.key", d, d),
            ("attention.self.value", d, d),
            ("attention.output.dense", d, d),
            ("intermediate.dense", ffn, d),
            ("output.dense", d, ffn),
        ] {
            names.push((format!("{p}{name}.weight"), vec![out, inp]));
            names.push((format!("{p}{name}.bias"), vec![out]));
        }
        for name in ["attention.output.LayerNorm", "output.LayerNorm"] {
            names.push((format!("{p}{name}.weight"), vec![d]));
            names.push((format!("{p}{name}.bias"), vec![d]));
        }
    }
    names
}

/// The names and shapes a decoder of shape `spec` needs, as GPT-2's checkpoints name them (less
/// the `transformer.` prefix that `GPT2LMHeadModel` adds) and shape them (`Conv1D`: `[in, out]`).
pub fn decoder_names(spec: &ModelSpec) -> Vec<(String, Vec<usize>)> {
    let (d, ffn) = (spec.d_model, spec.ffn);
    let mut names =
        vec![("wte.weight".to_string(), vec![spec.vocab, d]), ("wpe.weight".into(), vec![spec.positions, d])];
    for l in 0..spec.layers {
        let p = format!("h.{l}.");
        for (name, inp, out) in
            [("attn.c_attn", d, 3 * d), ("attn.c_proj", d, d), ("mlp.c_fc", d, ffn), ("mlp.c_proj", ffn, d)]
        {
            names.push((format!("{p}{name}.weight"), vec![inp, out]));
            names.push((format!("{p}{name}.bias"), vec![out]));
        }
        for name in ["ln_1", "ln_2"] {
            names.push((format!("{p}{name}.weight"), vec![d]));
            names.push((format!("{p}{name}.bias"), vec![d]));
        }
    }
    names.push(("ln_f.weight".into(), vec![d]));
    names.push(("ln_f.bias".into(), vec![d]));
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_family_names_its_tensors_as_its_checkpoints_do() {
        let bert = |n: &str| BERT.source_names(n);
        assert_eq!(
            bert("encoder.layer.3.attention.self.query.weight"),
            ["encoder.layer.3.attention.self.query.weight"]
        );
        assert_eq!(
            bert("encoder.layer.0.output.LayerNorm.bias"),
            ["encoder.layer.0.output.LayerNorm.bias", "encoder.layer.0.output.LayerNorm.beta"]
        );
        let distil = |n: &str| DISTILBERT.source_names(n);
        assert_eq!(
            distil("encoder.layer.5.attention.self.key.bias"),
            ["transformer.layer.5.attention.k_lin.bias"]
        );
        // `attention.output.LayerNorm` is matched before `output.LayerNorm` and `output.dense`.
        assert_eq!(
            distil("encoder.layer.1.attention.output.LayerNorm.weight"),
            ["transformer.layer.1.sa_layer_norm.weight"]
        );
        assert_eq!(
            distil("encoder.layer.1.output.LayerNorm.weight"),
            ["transformer.layer.1.output_layer_norm.weight"]
        );
        assert_eq!(distil("encoder.layer.1.output.dense.weight"), ["transformer.layer.1.ffn.lin2.weight"]);
        assert_eq!(distil("embeddings.token_type_embeddings.weight"), Vec::<String>::new());
        assert_eq!(
            distil("embeddings.LayerNorm.weight"),
            ["embeddings.LayerNorm.weight", "embeddings.LayerNorm.gamma"]
        );
        assert_eq!(GPT2.source_names("h.11.attn.c_attn.weight"), ["h.11.attn.c_attn.weight"]);
        // Every name of a model file has a source in its family's checkpoints, or is absent.
        let spec = ModelSpec { layers: 2, ..ModelSpec::MINILM_L6_V2 };
        for a in [Architecture::Bert, Architecture::DistilBert, Architecture::Gpt2] {
            let table = Table::of(a);
            assert!(tensor_names(a, &spec).iter().any(|(n, _)| n == table.probe), "{a:?}");
            for (name, _) in tensor_names(a, &spec) {
                assert!(!table.source_names(&name).is_empty() || table.absent.contains(&name.as_str()));
            }
        }
    }
}
