//! A Hugging Face model folder's `config.json`, read into the page's [`ModelSpec`]: which
//! architecture it is (BERT or DistilBERT: the same post-LayerNorm encoder, named differently) and
//! its shape. Untrusted input: every field is checked against the limits below, and each refusal
//! names the field and what is wrong with it.

use serde_json::{Map, Value};

use super::spec::{Activation, ModelSpec, Pooling};

/// The encoder families the page reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Architecture {
    /// BERT (`model_type: "bert"`): bert-base, bert-large, MiniLM, sentence-transformers models.
    Bert,
    /// DistilBERT (`model_type: "distilbert"`): no token types, its own tensor names.
    DistilBert,
}

impl Architecture {
    /// Its `model_type`.
    pub fn model_type(self) -> &'static str {
        match self {
            Architecture::Bert => "bert",
            Architecture::DistilBert => "distilbert",
        }
    }
}

/// The most of each size a config may claim: more than any BERT-family checkpoint has (BERT-large
/// is 24 layers of 16 heads, 1024 wide), far below what would overflow a count.
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
    /// BERT or DistilBERT.
    pub architecture: Architecture,
    /// The shape (its pooling is the default, mean and normalised, until the folder says more).
    pub spec: ModelSpec,
    /// `_name_or_path`, when the config has one.
    pub name: Option<String>,
}

/// The config in `text`.
pub fn parse(text: &str) -> Result<CheckpointConfig, ConfigError> {
    let value: Value = serde_json::from_str(text).map_err(|e| ConfigError(format!("not JSON ({e})")))?;
    let fields = value.as_object().ok_or_else(|| ConfigError("not a JSON object".into()))?;
    let architecture = architecture(fields)?;
    // The two families name the same sizes differently.
    let names: [&str; 7] = match architecture {
        Architecture::Bert => [
            "num_hidden_layers",
            "num_attention_heads",
            "hidden_size",
            "intermediate_size",
            "vocab_size",
            "max_position_embeddings",
            "hidden_act",
        ],
        Architecture::DistilBert => [
            "n_layers",
            "n_heads",
            "dim",
            "hidden_dim",
            "vocab_size",
            "max_position_embeddings",
            "activation",
        ],
    };
    let size = |i: usize| whole(fields, names[i], LIMITS[i].0, LIMITS[i].1);
    let layer_norm_eps = match (architecture, fields.get("layer_norm_eps")) {
        (_, Some(v)) => v.as_f64().ok_or_else(|| ConfigError("layer_norm_eps is not a number".into()))?,
        // DistilBERT's LayerNorms use PyTorch's 1e-12 without saying so.
        (Architecture::DistilBert, None) | (Architecture::Bert, None) => 1e-12,
    };
    let spec = ModelSpec {
        layers: size(0)?,
        heads: size(1)?,
        d_model: size(2)?,
        ffn: size(3)?,
        vocab: size(4)?,
        positions: size(5)?,
        activation: activation(fields, names[6])?,
        pooling: Pooling::Mean { normalize: true },
        layer_norm_eps,
    };
    spec.validate().map_err(|e| ConfigError(e.0))?;
    if let Some(kind) = fields.get("position_embedding_type").and_then(Value::as_str) {
        if kind != "absolute" {
            return Err(ConfigError(format!(
                "position_embedding_type {kind:?}: headlab runs absolute positions only"
            )));
        }
    }
    if fields.get("sinusoidal_pos_embds").and_then(Value::as_bool) == Some(true) {
        return Err(ConfigError("sinusoidal_pos_embds: headlab runs learned positions only".into()));
    }
    let name = fields.get("_name_or_path").and_then(Value::as_str).filter(|n| !n.is_empty()).map(|n| {
        // A path's last part, at most 80 characters.
        let last = n.trim_end_matches('/').rsplit('/').next().unwrap_or(n);
        last.chars().take(80).collect()
    });
    Ok(CheckpointConfig { architecture, spec, name })
}

/// BERT or DistilBERT, from `model_type` (or, without one, the first of `architectures`).
fn architecture(fields: &Map<String, Value>) -> Result<Architecture, ConfigError> {
    let named = fields.get("model_type").and_then(Value::as_str).map(str::to_string).or_else(|| {
        let first = fields.get("architectures")?.as_array()?.first()?.as_str()?;
        Some(first.to_lowercase())
    });
    match named.as_deref() {
        Some(t) if t == "bert" || t.starts_with("bertfor") || t == "bertmodel" => Ok(Architecture::Bert),
        Some(t) if t == "distilbert" || t.starts_with("distilbert") => Ok(Architecture::DistilBert),
        Some(t) => Err(ConfigError(format!(
            "model_type {:?} is not an architecture headlab runs (bert or distilbert)",
            t.chars().take(40).collect::<String>()
        ))),
        None => Err(ConfigError("it names no model_type".into())),
    }
}

/// The whole number `field`, from 1 to `max` (what it is, for the message: `what`).
fn whole(fields: &Map<String, Value>, field: &str, what: &str, max: usize) -> Result<usize, ConfigError> {
    let value = fields.get(field).ok_or_else(|| ConfigError(format!("{field} is missing")))?;
    let n = value.as_u64().ok_or_else(|| ConfigError(format!("{field} is not a whole number ({value})")))?;
    if n == 0 || n > max as u64 {
        return Err(ConfigError(format!("{field} claims {n} {what}; headlab reads 1 to {max}")));
    }
    Ok(n as usize)
}

/// The feed-forward activation `field` names (GELU if the field is absent, as the models default).
fn activation(fields: &Map<String, Value>, field: &str) -> Result<Activation, ConfigError> {
    match fields.get(field).map(|v| v.as_str()) {
        None | Some(Some("gelu")) => Ok(Activation::Gelu),
        Some(Some("gelu_new" | "gelu_pytorch_tanh" | "gelu_fast")) => Ok(Activation::GeluTanh),
        Some(other) => Err(ConfigError(format!(
            "{field} {} is not an activation headlab runs (gelu, gelu_new)",
            other.map_or_else(
                || "(not a string)".to_string(),
                |s| format!("{:?}", s.chars().take(40).collect::<String>())
            )
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
    fn every_bad_config_is_refused_by_name() {
        let cases = [
            ("{", "not JSON"),
            ("[1]", "not a JSON object"),
            (r#"{"model_type": "gpt2"}"#, "model_type \"gpt2\" is not an architecture"),
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
