//! A Hugging Face model folder's `config.json`, read into the page's [`ModelSpec`]: which
//! architecture it is (BERT or DistilBERT: the same post-LayerNorm encoder, named differently;
//! GPT-2: a pre-LayerNorm decoder) and its shape. Each family is a table of its fields' names,
//! read by name from the JSON and mapped onto [`ModelSpec`]. Untrusted input: every field is
//! checked against the limits below, and each refusal names the field and what is wrong with it.

use serde_json::Value;

use crate::model::load::fields::Field;
use crate::model::load::files::last_part;

use crate::model::spec::{Activation, ModelSpec, Pooling};

/// The model families headlab reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Architecture {
    /// BERT (`model_type: "bert"`): bert-base, bert-large, MiniLM, sentence-transformers models.
    Bert,
    /// DistilBERT (`model_type: "distilbert"`): no token types, its own tensor names.
    DistilBert,
    /// GPT-2 (`model_type: "gpt2"`): gpt2, distilgpt2, gpt2-medium; a causal decoder
    /// (the decoder family's `gpt2` module).
    Gpt2,
}

impl Architecture {
    /// Its `model_type`.
    pub fn model_type(self) -> &'static str {
        match self {
            Architecture::Bert => "bert",
            Architecture::DistilBert => "distilbert",
            Architecture::Gpt2 => "gpt2",
        }
    }

    /// Whether its attention is causal (a decoder: each token reads only the tokens before it).
    pub fn is_decoder(self) -> bool {
        self == Architecture::Gpt2
    }
}

/// The most of each size a config may claim: more than any checkpoint of these families has
/// (BERT-large is 24 layers of 16 heads, 1024 wide; gpt2-xl 48 of 25, 1600 wide, 1024
/// positions), far below what would overflow a count.
pub const LIMITS: [(&str, usize); 6] = [
    ("layers", 128),
    ("heads", 256),
    ("width", 16384),
    ("feed-forward width", 65536),
    ("vocabulary", 1 << 20),
    ("positions", 8192),
];

/// Why a `config.json` cannot be read. Each is a sentence for the page, naming the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "config.json: {}", self.0)
    }
}

impl std::error::Error for ConfigError {}

/// What `config.json` says: the architecture, the shape, and the name it gives itself
/// (`_name_or_path`, when it has one).
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointConfig {
    /// BERT, DistilBERT or GPT-2.
    pub architecture: Architecture,
    /// The shape (its pooling is the default, mean and normalised, until the folder says more).
    pub spec: ModelSpec,
    /// `_name_or_path`, when the config has one.
    pub name: Option<String>,
}

/// A family's config fields as the family names them: the six sizes in [`LIMITS`]' order, the
/// activation and the LayerNorm epsilon, with the defaults the family takes when either is
/// absent. Each family is a table of names; the fields are read by name from the JSON object,
/// not through a derived deserializer per family (BENCHMARKS.md section 19: the derives cost
/// the page's wasm several kilobytes for the same result).
struct Names {
    sizes: [&'static str; 6],
    activation: (&'static str, Activation),
    eps: (&'static str, f64),
}

/// BERT's (BertConfig).
const BERT: Names = Names {
    sizes: [
        "num_hidden_layers",
        "num_attention_heads",
        "hidden_size",
        "intermediate_size",
        "vocab_size",
        "max_position_embeddings",
    ],
    activation: ("hidden_act", Activation::Gelu),
    eps: ("layer_norm_eps", 1e-12),
};

/// DistilBERT's (DistilBertConfig): its LayerNorms use PyTorch's 1e-12 without saying so.
const DISTILBERT: Names = Names {
    sizes: ["n_layers", "n_heads", "dim", "hidden_dim", "vocab_size", "max_position_embeddings"],
    activation: ("activation", Activation::Gelu),
    eps: ("layer_norm_eps", 1e-12),
};

/// GPT-2's (GPT2Config): `n_inner` null is 4 × `n_embd`.
const GPT2: Names = Names {
    sizes: ["n_layer", "n_head", "n_embd", "n_inner", "vocab_size", "n_positions"],
    activation: ("activation_function", Activation::GeluTanh),
    eps: ("layer_norm_epsilon", 1e-5),
};

/// A family's config as the page reads it: each field by its name, as it is in the file.
struct Raw {
    sizes: [(&'static str, Field<u64>); 6],
    activation: (&'static str, Field<String>, Activation),
    eps: (&'static str, Field<f64>, f64),
}

impl Names {
    /// The family's fields in the JSON object `config`.
    fn read(&self, config: &Value) -> Raw {
        let (activation, default_activation) = self.activation;
        let (eps, default_eps) = self.eps;
        Raw {
            sizes: self.sizes.map(|name| (name, Field::of(config, name))),
            activation: (activation, Field::of(config, activation), default_activation),
            eps: (eps, Field::of(config, eps), default_eps),
        }
    }
}

/// The config in `text`.
pub fn parse(text: &str) -> Result<CheckpointConfig, ConfigError> {
    let value: Value = serde_json::from_str(text).map_err(|e| ConfigError(format!("not JSON ({e})")))?;
    if !value.is_object() {
        return Err(ConfigError("not a JSON object".into()));
    }
    // Fields of the wrong type are kept as they are (`Field::Invalid`): reading never fails here.
    let architecture = architecture(&Field::of(&value, "model_type"), &Field::of(&value, "architectures"))?;
    let names = match architecture {
        Architecture::Bert => &BERT,
        Architecture::DistilBert => &DISTILBERT,
        Architecture::Gpt2 => &GPT2,
    };
    let spec = spec(architecture, names.read(&value))?;
    if let Some(kind) = Field::<String>::of(&value, "position_embedding_type").valid() {
        if kind != "absolute" {
            return Err(ConfigError(format!(
                "position_embedding_type {kind:?}: headlab runs absolute positions only"
            )));
        }
    }
    if Field::<bool>::of(&value, "sinusoidal_pos_embds").valid() == Some(true) {
        return Err(ConfigError("sinusoidal_pos_embds: headlab runs learned positions only".into()));
    }
    let name = Field::<String>::of(&value, "_name_or_path").valid().and_then(|n| last_part(&n));
    Ok(CheckpointConfig { architecture, spec, name })
}

/// A family's shape from its raw config, every size within [`LIMITS`] and the whole validated.
fn spec(architecture: Architecture, raw: Raw) -> Result<ModelSpec, ConfigError> {
    let size = |i: usize| {
        let (name, field) = &raw.sizes[i];
        field.size(name, LIMITS[i].0, LIMITS[i].1).map_err(ConfigError)
    };
    let (eps_field, eps, default_eps) = &raw.eps;
    let layer_norm_eps = match eps {
        Field::Valid(v) => *v,
        Field::Invalid(_) => return Err(ConfigError(format!("{eps_field} is not a number"))),
        Field::Missing => *default_eps,
    };
    let d_model = size(2)?;
    // GPT-2's n_inner is null for "4 x n_embd".
    let ffn = match (architecture, &raw.sizes[3].1) {
        (Architecture::Gpt2, Field::Missing | Field::Invalid(Value::Null)) => 4 * d_model,
        _ => size(3)?,
    };
    let spec = ModelSpec {
        layers: size(0)?,
        heads: size(1)?,
        d_model,
        ffn,
        vocab: size(4)?,
        positions: size(5)?,
        activation: activation(&raw.activation)?,
        pooling: Pooling::Mean { normalize: true },
        layer_norm_eps,
    };
    spec.validate().map_err(|e| ConfigError(e.0))?;
    Ok(spec)
}

/// BERT, DistilBERT or GPT-2, from `model_type` (or, without one, the first of `architectures`).
fn architecture(
    model_type: &Field<String>,
    architectures: &Field<Vec<Value>>,
) -> Result<Architecture, ConfigError> {
    let named = model_type.valid().or_else(|| {
        let Field::Valid(list) = architectures else { return None };
        Some(list.first()?.as_str()?.to_lowercase())
    });
    match named.as_deref() {
        Some(t) if t == "bert" || t.starts_with("bertfor") || t == "bertmodel" => Ok(Architecture::Bert),
        Some(t) if t == "distilbert" || t.starts_with("distilbert") => Ok(Architecture::DistilBert),
        Some(t) if t == "gpt2" || t.starts_with("gpt2") => Ok(Architecture::Gpt2),
        Some(t) => Err(ConfigError(format!(
            "model_type {:?} is not an architecture headlab runs (bert, distilbert or gpt2)",
            t.chars().take(40).collect::<String>()
        ))),
        None => Err(ConfigError("it names no model_type".into())),
    }
}

/// The feed-forward activation a field names (absent: the family's default, GELU for the
/// encoders, its tanh approximation for GPT-2).
fn activation(
    (field, value, default): &(&str, Field<String>, Activation),
) -> Result<Activation, ConfigError> {
    match value {
        Field::Missing => Ok(*default),
        Field::Valid(name) => match name.as_str() {
            "gelu" => Ok(Activation::Gelu),
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Ok(Activation::GeluTanh),
            other => Err(ConfigError(format!(
                "{field} {:?} is not an activation headlab runs (gelu, gelu_new)",
                other.chars().take(40).collect::<String>()
            ))),
        },
        Field::Invalid(_) => Err(ConfigError(format!(
            "{field} (not a string) is not an activation headlab runs (gelu, gelu_new)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINILM: &str = r#"{"_name_or_path": "nreimers/MiniLM-L6-H384-uncased", "architectures": ["BertModel"],
        "attention_probs_dropout_prob": 0.1, "gradient_checkpointing": false, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1, "hidden_size": 384, "initializer_range": 0.02, "intermediate_size": 1536,
        "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "bert", "num_attention_heads": 12,
        "num_hidden_layers": 6, "pad_token_id": 0, "position_embedding_type": "absolute",
        "transformers_version": "4.8.2", "type_vocab_size": 2, "use_cache": true, "vocab_size": 30522}"#;

    #[test]
    fn minilms_config_is_the_built_in_spec() {
        let c = parse(MINILM).unwrap();
        assert_eq!(
            (c.architecture, c.spec, c.name.as_deref()),
            (Architecture::Bert, ModelSpec::MINILM_L6_V2, Some("MiniLM-L6-H384-uncased"))
        );
    }

    #[test]
    fn distilberts_config_names_its_sizes_its_own_way() {
        let text = r#"{"activation": "gelu", "architectures": ["DistilBertForMaskedLM"], "dim": 768, "hidden_dim": 3072,
            "max_position_embeddings": 512, "model_type": "distilbert", "n_heads": 12, "n_layers": 6,
            "sinusoidal_pos_embds": false, "vocab_size": 30522}"#;
        let c = parse(text).unwrap();
        assert_eq!(c.architecture, Architecture::DistilBert);
        assert_eq!(
            (c.spec.layers, c.spec.heads, c.spec.d_model, c.spec.ffn, c.spec.layer_norm_eps),
            (6, 12, 768, 3072, 1e-12)
        );
        let gelu_new = MINILM.replace(r#""hidden_act": "gelu""#, r#""hidden_act": "gelu_new""#);
        assert_eq!(parse(&gelu_new).unwrap().spec.activation, Activation::GeluTanh);
    }

    #[test]
    fn gpt2s_config_is_a_decoder_of_its_own_sizes() {
        let text = r#"{"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
            "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_inner": null, "n_layer": 12, "n_positions": 1024,
            "layer_norm_epsilon": 1e-05, "vocab_size": 50257, "_name_or_path": "openai-community/gpt2"}"#;
        let c = parse(text).unwrap();
        assert!(c.architecture.is_decoder() && !Architecture::Bert.is_decoder());
        let s = c.spec;
        assert_eq!(
            (s.layers, s.heads, s.d_model, s.ffn, s.vocab, s.positions, s.activation, s.layer_norm_eps),
            (12, 12, 768, 3072, 50257, 1024, Activation::GeluTanh, 1e-5)
        );
        assert_eq!(c.name.as_deref(), Some("gpt2"));
        let medium = text.replace(r#""n_embd": 768, "n_head": 12"#, r#""n_embd": 1024, "n_head": 16"#);
        assert_eq!((parse(&medium).unwrap().spec.d_k(), parse(&medium).unwrap().spec.ffn), (64, 4096));
        let inner = text
            .replace(r#""n_inner": null"#, r#""n_inner": 100"#)
            .replace(r#""activation_function": "gelu_new", "#, "");
        assert_eq!(
            (parse(&inner).unwrap().spec.ffn, parse(&inner).unwrap().spec.activation),
            (100, Activation::GeluTanh)
        );
        let relu = text.replace("gelu_new", "relu");
        assert!(parse(&relu).unwrap_err().to_string().contains("activation_function \"relu\""));
        let bad = text.replace(r#""n_positions": 1024"#, r#""n_positions": 100000"#);
        assert!(parse(&bad).unwrap_err().to_string().contains("n_positions claims 100000 positions"));
    }

    #[test]
    fn every_bad_config_is_refused_by_name() {
        let cases = [
            ("{", "not JSON"),
            ("[1]", "not a JSON object"),
            (r#"{"model_type": "t5"}"#, "model_type \"t5\" is not an architecture"),
            ("{}", "names no model_type"),
            (
                &MINILM.replace(r#""num_hidden_layers": 6"#, r#""num_hidden_layers": 1000000"#),
                "num_hidden_layers claims 1000000 layers; headlab reads 1 to 128",
            ),
            (&MINILM.replace(r#""hidden_size": 384,"#, ""), "hidden_size is missing"),
            (
                &MINILM.replace(r#""hidden_size": 384"#, r#""hidden_size": "big""#),
                "hidden_size is not a whole number",
            ),
            (
                &MINILM.replace(r#""num_attention_heads": 12"#, r#""num_attention_heads": 7"#),
                "not a multiple of 7 heads",
            ),
            (
                &MINILM.replace(r#""hidden_act": "gelu""#, r#""hidden_act": "swish""#),
                "hidden_act \"swish\" is not an activation",
            ),
            (
                &MINILM.replace(r#""layer_norm_eps": 1e-12"#, r#""layer_norm_eps": 2"#),
                "epsilon 2 is not in (0, 1)",
            ),
            (&MINILM.replace(r#""absolute""#, r#""relative_key""#), "absolute positions only"),
            (&MINILM.replace(r#""vocab_size": 30522"#, r#""vocab_size": 0"#), "vocab_size claims 0"),
        ];
        for (text, why) in cases {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.starts_with("config.json: ") && e.contains(why), "{e:?} should say {why:?}");
        }
    }
}
