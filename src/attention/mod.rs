//! The pure core: configurations and presets, seeded synthetic weights and inputs, the naive f64
//! oracle, sets of heads, output drift, importance and what the page shows of them. No web or
//! GPU dependency; compiled and tested natively.

pub mod align;
pub mod analysis;
pub mod atlas;
pub mod clock;
pub mod config;
pub mod heads;
pub mod importance;
pub mod oracle;
pub mod precision;
pub mod prune;
pub mod rollout;
pub mod stats;
pub mod summary;
pub mod synthetic;
pub mod turns;
pub mod walk;

pub use config::{ConfigError, ModelConfig, Preset, PRESETS};
pub use heads::HeadSet;
pub use prune::{cosine, drift, Contributions, Drift, TokenDrift};
pub use synthetic::{GeneratedWeights, Inputs, LayerWeights, Weights};

/// Which keys a query may attend to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mask {
    /// Every key (an encoder: BERT).
    None,
    /// Keys at or before the query's position (a decoder: GPT-2). Row `i`'s softmax runs over
    /// keys `0..=i` alone and the weights of later keys are exactly 0, as if they were absent.
    Causal,
}
