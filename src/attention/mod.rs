//! The pure core: configurations and presets, seeded synthetic weights and inputs, the naive f64
//! oracle, head masks and output drift. No web or GPU dependency; compiled and tested natively.

pub mod config;
pub mod importance;
pub mod oracle;
pub mod prune;
pub mod summary;
pub mod synthetic;

pub use config::{ConfigError, ModelConfig, Preset, PRESETS};
pub use prune::{drift, Contributions, Drift, HeadMask, TokenDrift};
pub use synthetic::{GeneratedWeights, Inputs, LayerWeights, Weights};
