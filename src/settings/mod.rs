//! What the reader has chosen, and its round trip through the page's URL: [`Settings`] (what
//! is computed and how it is shown), [`Link`] (the whole state a link carries: settings, the
//! trained model's sentence, layer and pruned heads, and how the page is framed), and the query
//! codec ([`query`]).
//!
//! Parsing never fails as a whole: each parameter that cannot be read falls back to its default
//! and leaves a note for the page. Numbers that parse but make no sense (`heads=7` with
//! `d_model=768`, `seq=100000`) are kept: [`ModelConfig::validate`] explains those.

mod frame;
mod link;
pub mod query;
mod source;

pub use frame::{Frame, HostOrigin, Panels};
pub use link::Link;
pub use query::{format_head_list, parse_head_list, shorten};
pub use source::{served_path, Adoption, LoadedFrom, TrainedSource};

use crate::attention::config::{preset_by_id, PRESETS};
use crate::attention::precision::Precision;
use crate::attention::{ModelConfig, Preset};

/// Which model shape is selected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelChoice {
    /// One of [`PRESETS`].
    Preset(&'static Preset),
    /// The trained model (the built-in all-MiniLM-L6-v2); its shape is the loaded model's.
    Trained,
    /// A shape typed by the reader.
    Custom {
        /// Width of the residual stream.
        d_model: usize,
        /// Number of heads.
        num_heads: usize,
    },
}

impl ModelChoice {
    /// The model a `preset=` identifier names (a preset's, or [`TRAINED_ID`]), if it names one.
    pub fn from_id(id: &str) -> Option<ModelChoice> {
        if id == TRAINED_ID {
            return Some(ModelChoice::Trained);
        }
        preset_by_id(id).map(ModelChoice::Preset)
    }

    /// Its `preset=` identifier ("custom" for a typed shape, whose numbers go in their own
    /// parameters).
    pub fn id(&self) -> &'static str {
        match self {
            ModelChoice::Preset(p) => p.id,
            ModelChoice::Trained => TRAINED_ID,
            ModelChoice::Custom { .. } => "custom",
        }
    }

    /// What the page calls it.
    pub fn name(&self) -> &'static str {
        match self {
            ModelChoice::Preset(p) => p.name,
            ModelChoice::Trained => "all-MiniLM-L6-v2",
            ModelChoice::Custom { .. } => "Your configuration",
        }
    }
}

/// Colour theme.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Theme {
    /// Follow the system (`prefers-color-scheme`).
    #[default]
    Auto,
    /// Dark text on light.
    Light,
    /// Light text on dark.
    Dark,
}

impl Theme {
    /// The URL and `data-theme` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Theme::Auto => "auto",
            Theme::Light => "light",
            Theme::Dark => "dark",
        }
    }

    /// Parses a URL value.
    pub fn parse(value: &str) -> Option<Theme> {
        [Theme::Auto, Theme::Light, Theme::Dark].into_iter().find(|t| t.as_str() == value)
    }
}

/// What makes a head of the trained model important (`?importance=`): the grid's shading, the
/// prune-k slider's order and the one-shot pruning curve follow it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Measure {
    /// How far removing the head alone moves the sentence's embedding (1 - cosine).
    #[default]
    Drift,
    /// How far removing it alone moves the meaning check's margin (which of two sentences is
    /// closer to a third, and by how much).
    Margin,
    /// How much the task's loss depends on it: the gradient of the loss on the task's pairs with
    /// respect to a gate on the head (Michel et al. 2019).
    Task,
}

impl Measure {
    /// Every measure, as the page offers them.
    pub const ALL: [Measure; 3] = [Measure::Drift, Measure::Margin, Measure::Task];

    /// The URL value.
    pub fn as_str(self) -> &'static str {
        match self {
            Measure::Drift => "drift",
            Measure::Margin => "margin",
            Measure::Task => "task",
        }
    }

    /// Parses a URL value.
    pub fn parse(value: &str) -> Option<Measure> {
        Measure::ALL.into_iter().find(|m| m.as_str() == value)
    }

    /// Its column in the importance CSV.
    pub fn csv_column(self) -> &'static str {
        match self {
            Measure::Drift => "embedding_drift_1_minus_cosine",
            Measure::Margin => "check_margin_change",
            Measure::Task => "task_loss_gate_gradient",
        }
    }

    /// What it measures, for the page's choice.
    pub fn label(self) -> &'static str {
        match self {
            Measure::Drift => "embedding drift on this sentence",
            Measure::Margin => "the meaning check's margin",
            Measure::Task => "task quality (gradient on the sentence pairs)",
        }
    }
}

/// What the reader asked for (`?backend=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Preference {
    /// WebGPU when an adapter with compute is found, else the CPU kernel.
    #[default]
    Auto,
    /// WebGPU; if it cannot be had, the CPU kernel with the reason shown.
    Gpu,
    /// The CPU kernel, without looking for a GPU.
    Cpu,
}

impl Preference {
    /// The URL value, or `None` for the default.
    pub fn as_param(self) -> Option<&'static str> {
        match self {
            Preference::Auto => None,
            Preference::Gpu => Some("gpu"),
            Preference::Cpu => Some("cpu"),
        }
    }

    /// Parses a URL value.
    pub fn from_param(value: &str) -> Option<Self> {
        match value {
            "auto" => Some(Preference::Auto),
            "gpu" | "webgpu" => Some(Preference::Gpu),
            "cpu" => Some(Preference::Cpu),
            _ => None,
        }
    }
}

/// How many threads the trained model's batch work may use (`?threads=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Threads {
    /// As many as the browser reports logical cores (capped by the page).
    #[default]
    Auto,
    /// Exactly this many, 1 to [`Threads::MAX`]; 1 keeps all work on the page's own thread.
    Exactly(u8),
}

impl Threads {
    /// Most threads a link can ask for.
    pub const MAX: u8 = 16;

    /// Parses a URL value: `auto`, or a whole number from 1 to [`Threads::MAX`].
    pub fn from_param(value: &str) -> Option<Threads> {
        match value.trim() {
            "auto" => Some(Threads::Auto),
            n => n.parse::<u8>().ok().filter(|n| (1..=Threads::MAX).contains(n)).map(Threads::Exactly),
        }
    }

    /// The number of threads: `auto` is what the browser reports (`cores`).
    pub fn count(self, cores: usize) -> usize {
        match self {
            Threads::Auto => cores.max(1),
            Threads::Exactly(n) => n as usize,
        }
    }
}

/// Everything the reader set: what is computed and how it is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The model shape.
    pub model: ModelChoice,
    /// Tokens in the sequence.
    pub seq_len: usize,
    /// Seed of the synthetic weights and inputs.
    pub seed: u32,
    /// Which backend the reader asked for.
    pub backend: Preference,
    /// Colour theme.
    pub theme: Theme,
    /// Threads for the trained model's batch work.
    pub threads: Threads,
    /// The precision the trained model runs at (`?precision=`).
    pub precision: Precision,
}

/// URL identifier of the trained model.
pub const TRAINED_ID: &str = "minilm";

/// The default preset: BERT-base.
const DEFAULT_PRESET: &Preset = &PRESETS[1];

impl Default for Settings {
    fn default() -> Self {
        Settings {
            model: ModelChoice::Preset(DEFAULT_PRESET),
            seq_len: 16,
            seed: 42,
            backend: Preference::Auto,
            theme: Theme::Auto,
            threads: Threads::Auto,
            precision: Precision::F16,
        }
    }
}

impl Settings {
    /// The synthetic layer's configuration to run (not yet validated). The trained model runs no
    /// synthetic layer; its shape is the loaded model's own, so for it this is the default
    /// preset's, which only the synthetic controls would read.
    pub fn config(&self) -> ModelConfig {
        let (d_model, num_heads) = match self.model {
            ModelChoice::Preset(p) => (p.d_model, p.num_heads),
            ModelChoice::Trained => (DEFAULT_PRESET.d_model, DEFAULT_PRESET.num_heads),
            ModelChoice::Custom { d_model, num_heads } => (d_model, num_heads),
        };
        ModelConfig { d_model, num_heads, seq_len: self.seq_len }
    }

    /// Whether the trained model is chosen.
    pub fn is_trained(&self) -> bool {
        self.model == ModelChoice::Trained
    }
}

/// Longest text the trained model's box and a link take, in characters: room for a paragraph of
/// 500 words, which the model itself cuts at its 512 tokens.
pub const MAX_TEXT_CHARS: usize = 4000;
