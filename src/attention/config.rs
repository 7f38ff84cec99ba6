//! Model configurations: the seed's seven real models, custom shapes, and the checks that decide
//! whether a shape can run here before anything is allocated.

use std::fmt;

/// The shape of one multi-head attention layer run on one sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ModelConfig {
    /// Width of the residual stream (embedding size).
    pub d_model: usize,
    /// Number of attention heads; must divide `d_model`.
    pub num_heads: usize,
    /// Number of tokens in the sequence.
    pub seq_len: usize,
}

/// A real model's attention shape, as listed in the seed text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preset {
    /// Display name, exactly as in the seed.
    pub name: &'static str,
    /// Stable identifier used in URLs.
    pub id: &'static str,
    /// Width of the residual stream.
    pub d_model: usize,
    /// Number of heads.
    pub num_heads: usize,
}

impl Preset {
    /// Per-head width, `d_model / num_heads`.
    pub const fn d_k(&self) -> usize {
        self.d_model / self.num_heads
    }

    /// This preset's attention layer on a sequence of `seq_len` tokens.
    pub const fn with_seq_len(&self, seq_len: usize) -> ModelConfig {
        ModelConfig { d_model: self.d_model, num_heads: self.num_heads, seq_len }
    }
}

/// The seed's `model_configs`, in its order.
pub const PRESETS: [Preset; 7] = [
    Preset { name: "Transformer (orig.)", id: "transformer", d_model: 512, num_heads: 8 },
    Preset { name: "BERT-base", id: "bert-base", d_model: 768, num_heads: 12 },
    Preset { name: "GPT-2 Small", id: "gpt2-small", d_model: 768, num_heads: 12 },
    Preset { name: "BERT-large", id: "bert-large", d_model: 1024, num_heads: 16 },
    Preset { name: "GPT-2 Medium", id: "gpt2-medium", d_model: 1024, num_heads: 16 },
    Preset { name: "GPT-2 Large", id: "gpt2-large", d_model: 1280, num_heads: 20 },
    Preset { name: "GPT-3 (175B)", id: "gpt3", d_model: 12288, num_heads: 96 },
];

/// Looks a preset up by its URL identifier.
pub fn preset_by_id(id: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.id == id)
}

/// A column of the seed's model table, to sort it by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PresetColumn {
    /// The seed's order (roughly by release).
    Seed,
    /// The model's name.
    Name,
    /// `d_model`.
    DModel,
    /// Number of heads.
    Heads,
    /// `d_k = d_model / heads`.
    DK,
}

impl PresetColumn {
    /// The sortable columns, as the table shows them.
    pub const ALL: [PresetColumn; 5] =
        [PresetColumn::Seed, PresetColumn::Name, PresetColumn::DModel, PresetColumn::Heads, PresetColumn::DK];

    /// The column's heading.
    pub fn heading(self) -> &'static str {
        match self {
            PresetColumn::Seed => "#",
            PresetColumn::Name => "Model",
            PresetColumn::DModel => "d_model",
            PresetColumn::Heads => "heads",
            PresetColumn::DK => "d_k",
        }
    }
}

/// The presets sorted by `column` (ties keep the seed's order), descending if not `ascending`.
pub fn presets_sorted(column: PresetColumn, ascending: bool) -> Vec<(usize, &'static Preset)> {
    let mut rows: Vec<(usize, &'static Preset)> = PRESETS.iter().enumerate().collect();
    rows.sort_by(|(i, a), (j, b)| {
        let order = match column {
            PresetColumn::Seed => i.cmp(j),
            PresetColumn::Name => a.name.to_lowercase().cmp(&b.name.to_lowercase()),
            PresetColumn::DModel => a.d_model.cmp(&b.d_model),
            PresetColumn::Heads => a.num_heads.cmp(&b.num_heads),
            PresetColumn::DK => a.d_k().cmp(&b.d_k()),
        };
        let order = if ascending { order } else { order.reverse() };
        order.then(i.cmp(j))
    });
    rows
}

/// Longest sequence accepted (GPT-2's context; the heatmaps stop being readable far earlier).
pub const MAX_SEQ_LEN: usize = 1024;
/// Widest residual stream accepted (GPT-3's 12288 rounded up to a power of two).
pub const MAX_D_MODEL: usize = 16384;
/// Most heads accepted.
pub const MAX_HEADS: usize = 256;
/// Memory the CPU path may use for one configuration. wasm32 addresses at most 4 GiB and
/// browsers often grant less; a failed allocation aborts the module, so shapes are refused
/// before anything is allocated.
pub const MEMORY_BUDGET_BYTES: u64 = 1 << 30;

/// Largest `W_qkv` + `W_o` stored in memory (GPT-2 Large's are 25 MiB); above it the weights
/// are generated from the seed where the kernels use them.
pub const STORED_WEIGHTS_MAX_BYTES: u64 = 256 << 20;

/// Why a configuration cannot run. Every variant's `Display` is a sentence for the page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// `d_model` is zero.
    ZeroDModel,
    /// `num_heads` is zero.
    ZeroHeads,
    /// `seq_len` is zero.
    ZeroSeqLen,
    /// `num_heads` does not divide `d_model`.
    NotDivisible {
        /// The requested width.
        d_model: usize,
        /// The requested head count.
        num_heads: usize,
    },
    /// More heads than dimensions or than [`MAX_HEADS`].
    TooManyHeads {
        /// The requested head count.
        num_heads: usize,
        /// The largest accepted for this width.
        max: usize,
    },
    /// `d_model` over [`MAX_D_MODEL`].
    DModelTooLarge {
        /// The requested width.
        d_model: usize,
    },
    /// `seq_len` over [`MAX_SEQ_LEN`].
    SeqTooLong {
        /// The requested length.
        seq_len: usize,
    },
    /// Weights and activations together exceed [`MEMORY_BUDGET_BYTES`].
    OverMemoryBudget {
        /// Bytes this configuration needs.
        needed: u64,
        /// Of which the weights alone.
        weights: u64,
    },
}

fn mib(bytes: u64) -> String {
    let m = bytes as f64 / (1u64 << 20) as f64;
    if m >= 1024.0 {
        format!("{:.2} GiB", m / 1024.0)
    } else {
        format!("{m:.0} MiB")
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ConfigError::ZeroDModel => write!(f, "d_model must be at least 1."),
            ConfigError::ZeroHeads => write!(f, "There must be at least one head."),
            ConfigError::ZeroSeqLen => write!(f, "The sequence needs at least one token."),
            ConfigError::NotDivisible { d_model, num_heads } => {
                write!(
                    f,
                    "{d_model} is not divisible by {num_heads} heads: each head gets d_model / heads \
                     dimensions, so the head count must divide d_model"
                )?;
                match nearby_divisors(d_model, num_heads) {
                    (Some(a), Some(b)) => write!(f, " (try {a} or {b} heads)."),
                    (Some(one), None) | (None, Some(one)) => write!(f, " (try {one} heads)."),
                    (None, None) => write!(f, "."),
                }
            }
            ConfigError::TooManyHeads { num_heads, max } => {
                write!(f, "{num_heads} heads is too many here; at most {max}.")
            }
            ConfigError::DModelTooLarge { d_model } => {
                write!(f, "d_model {d_model} is over this page's limit of {MAX_D_MODEL}.")
            }
            ConfigError::SeqTooLong { seq_len } => write!(
                f,
                "A sequence of {seq_len} tokens is over this page's limit of {MAX_SEQ_LEN} \
                 (each head's attention matrix grows with its square)."
            ),
            ConfigError::OverMemoryBudget { needed, weights: 0 } => write!(
                f,
                "This configuration needs {} (its weights are generated, not stored: this is \
                 activations, mostly each head's contribution to the output), over the {} this \
                 page allows itself in the browser; use fewer tokens.",
                mib(needed),
                mib(MEMORY_BUDGET_BYTES)
            ),
            ConfigError::OverMemoryBudget { needed, weights } => write!(
                f,
                "This configuration needs {} ({} of it weights), over the {} this page allows \
                 itself in the browser.",
                mib(needed),
                mib(weights),
                mib(MEMORY_BUDGET_BYTES)
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The divisors of `d_model` closest to `heads` from below and from above.
fn nearby_divisors(d_model: usize, heads: usize) -> (Option<usize>, Option<usize>) {
    let below = (1..heads).rev().find(|&h| d_model.is_multiple_of(h));
    let above = (heads + 1..=d_model.min(MAX_HEADS)).find(|&h| d_model.is_multiple_of(h));
    (below, above)
}

impl ModelConfig {
    /// Per-head width, `d_model / num_heads`.
    pub const fn d_k(&self) -> usize {
        self.d_model / self.num_heads
    }

    /// Checks the shape, cheapest reasons first, and that it fits the memory budget.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let ModelConfig { d_model, num_heads, seq_len } = *self;
        if d_model == 0 {
            return Err(ConfigError::ZeroDModel);
        }
        if num_heads == 0 {
            return Err(ConfigError::ZeroHeads);
        }
        if seq_len == 0 {
            return Err(ConfigError::ZeroSeqLen);
        }
        if d_model > MAX_D_MODEL {
            return Err(ConfigError::DModelTooLarge { d_model });
        }
        let max_heads = d_model.min(MAX_HEADS);
        if num_heads > max_heads {
            return Err(ConfigError::TooManyHeads { num_heads, max: max_heads });
        }
        if d_model % num_heads != 0 {
            return Err(ConfigError::NotDivisible { d_model, num_heads });
        }
        if seq_len > MAX_SEQ_LEN {
            return Err(ConfigError::SeqTooLong { seq_len });
        }
        let footprint = self.footprint();
        if footprint.total() > MEMORY_BUDGET_BYTES {
            return Err(ConfigError::OverMemoryBudget {
                needed: footprint.total(),
                weights: footprint.weights,
            });
        }
        Ok(())
    }

    /// Floating-point operations of one forward pass (multiply and add counted separately):
    /// the QKV projection, scores and weighted sums of every head, and the output projection.
    pub fn forward_flops(&self) -> u64 {
        let (n, d) = (self.seq_len as u64, self.d_model as u64);
        2 * n * d * 3 * d + 2 * (2 * n * n * d) + 2 * n * d * d
    }

    /// Bytes of `W_qkv` and `W_o` if they were stored.
    pub fn weight_bytes(&self) -> u64 {
        let d = self.d_model as u64;
        4u64.saturating_mul(4).saturating_mul(d).saturating_mul(d)
    }

    /// Whether this configuration's weights are too large to store ([`STORED_WEIGHTS_MAX_BYTES`])
    /// and are generated from the seed inside the kernels instead (GPT-3's 2.25 GiB).
    pub fn generates_weights(&self) -> bool {
        self.weight_bytes() > STORED_WEIGHTS_MAX_BYTES
    }

    /// Bytes the CPU path holds for this configuration, computed without allocating. Generated
    /// weights hold nothing.
    pub fn footprint(&self) -> Footprint {
        let (n, d, h) = (self.seq_len as u64, self.d_model as u64, self.num_heads as u64);
        let f32s = 4;
        Footprint {
            weights: if self.generates_weights() { 0 } else { self.weight_bytes() },
            activations: f32s
                * (n * d // input
                    + 3 * n * d // qkv
                    + h * n * n // attention weights
                    + n * d // concatenated head outputs
                    + h * n * d // per-head contributions to the output
                    + 2 * n * d), // full and pruned outputs
        }
    }
}

/// Memory a configuration needs on the CPU path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footprint {
    /// W_qkv and W_o.
    pub weights: u64,
    /// Inputs, intermediates and outputs.
    pub activations: u64,
}

impl Footprint {
    /// Weights plus activations.
    pub const fn total(&self) -> u64 {
        self.weights + self.activations
    }
}

#[cfg(test)]
mod tests {
    use super::{presets_sorted, PresetColumn, PRESETS};

    #[test]
    fn the_model_table_sorts_by_every_column_with_ties_in_the_seeds_order() {
        let ids = |c, up| presets_sorted(c, up).iter().map(|(_, p)| p.id).collect::<Vec<_>>();
        assert_eq!(ids(PresetColumn::Seed, true), PRESETS.iter().map(|p| p.id).collect::<Vec<_>>());
        assert_eq!(ids(PresetColumn::Seed, false).first(), Some(&"gpt3"));
        let by_dk = ids(PresetColumn::DK, true);
        assert_eq!(by_dk[..2], ["transformer", "bert-base"], "d_k 64, in the seed's order");
        assert_eq!(by_dk.last(), Some(&"gpt3"), "d_k 128");
        assert_eq!(ids(PresetColumn::Heads, false)[..2], ["gpt3", "gpt2-large"]);
        assert_eq!(ids(PresetColumn::Name, true)[0], "bert-base");
        for c in PresetColumn::ALL {
            assert_eq!(presets_sorted(c, true).len(), PRESETS.len());
        }
    }
}
