//! Pieces of the trained models' batch work that can run on another thread, for both families:
//! the page hands them to its web workers (each has its own wasm instance and its own copy of the
//! model, and shares no memory with the page, so it works in an iframe that is not cross-origin
//! isolated) or runs them itself, one at a time, with `?threads=1`.
//!
//! A piece is self-contained (the heads kept and every token id it needs), and its result does
//! not depend on where it ran: the same wasm code on the same inputs gives the same bits, so
//! the page's numbers are equal with one thread or several. An encoder's pieces are run by
//! [`encoder`], a decoder's by [`decoder`]; the bytes they travel as are `super::wire`'s.
//! A piece sent to a model of the other family is refused ([`WireError::OtherFamily`]).

pub mod decoder;
pub mod encoder;

use std::sync::Arc;

use crate::attention::precision::Precision;
use crate::attention::HeadSet;
use crate::cpu::Kernel;
use crate::model::encoder::bert::BertOutput;
use crate::model::spec::ModelSpec;
use crate::model::Model;
pub use encoder::{ablation_deal, ablation_flops, ablation_pieces};

/// A head-gate gradient pass (a forward and a backward pass) counted as this many forward
/// passes of the same sentences, for timing estimates: the backward pass is about twice a forward.
pub const GRADIENT_COST: u64 = 3;

/// FLOPs counted for one term of a Jensen-Shannon divergence (a logarithm and a few products).
pub const JS_TERM_FLOPS: u64 = 20;

/// Two sentences' token ids and their similarity score in `[0, 1]`.
pub type Pair = (Vec<u32>, Vec<u32>, f64);

/// Why a message between the page and a worker could not be read, or run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    /// It does not start as a message of this kind does.
    NotAMessage,
    /// It ends before what it announces.
    Truncated,
    /// An unknown kind of work or result.
    UnknownTag(u8),
    /// A count over the limits, or a token id or head set this model cannot run.
    OutOfRange(&'static str),
    /// Bytes after the end of the message.
    TrailingBytes,
    /// Work for the other family of model than the one the worker holds (an encoder's piece
    /// sent to a decoder, or the reverse).
    OtherFamily,
    /// A comparison of two precisions for a model held at one only (a decoder held at 8 bits
    /// only, [`crate::model::spec::Holding`]).
    NoOtherPrecision,
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::NotAMessage => write!(f, "a worker message is not one headlab sends"),
            WireError::Truncated => write!(f, "a worker message ends early"),
            WireError::UnknownTag(t) => write!(f, "a worker message has an unknown kind ({t})"),
            WireError::OutOfRange(what) => write!(f, "a worker message has {what} out of range"),
            WireError::TrailingBytes => write!(f, "a worker message has bytes after its end"),
            WireError::OtherFamily => write!(f, "a worker message holds work for the other kind of model"),
            WireError::NoOtherPrecision => {
                write!(f, "a worker message compares two precisions of a model held at 8 bits only")
            }
        }
    }
}

impl std::error::Error for WireError {}

/// Which family of model runs a piece.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// A BERT-family encoder.
    Encoder,
    /// A GPT-2 decoder.
    Decoder,
}

/// A piece of work.
#[derive(Clone, Debug, PartialEq)]
pub enum Piece {
    /// An encoder's sentence embeddings of `ids` with only `heads` kept, really pruned, at
    /// `precision` (`None`: the precision the model was loaded at, the page's).
    Embed {
        /// The heads kept.
        heads: HeadSet,
        /// Each sentence's token ids.
        ids: Vec<Vec<u32>>,
        /// The precision of the model that embeds them, when it is not the loaded model's (a
        /// worker makes a copy at that precision: [`crate::jobs::copies::Copies`]).
        precision: Option<Precision>,
    },
    /// Over `pairs`, the sum of each of an encoder's heads' `|dL/d gate|` with only `heads` kept
    /// ([`crate::model::encoder::gradient::pair_gradients`]).
    Gradients {
        /// The heads kept.
        heads: HeadSet,
        /// The pairs.
        pairs: Vec<Pair>,
    },
    /// An encoder's embeddings of `sentences` with `heads`, then with each head of `ablate`
    /// removed alone from `heads` ([`Done::Embeddings`]: every sentence's unpruned embedding,
    /// then, head by head in `ablate`'s order, every sentence's).
    Ablate {
        /// The heads kept before each removal.
        heads: HeadSet,
        /// The sentences' token ids.
        sentences: Vec<Vec<u32>>,
        /// The heads removed, one at a time.
        ablate: Vec<usize>,
        /// The passes of `sentences` with `heads` that the page ran already, one per sentence,
        /// with every layer's input and heads' outputs (what a pass without one head starts
        /// from; no attention weights), or none: the piece runs them itself.
        traces: Vec<Arc<BertOutput>>,
    },
    /// An encoder's activation patching ([`crate::model::encoder::patching`]): the unpruned
    /// model's embeddings of `clean` and `corrupted` (the same number of tokens), then for each
    /// head of `patch` in order, the corrupted run with that head's output taken from the clean
    /// run, and the clean run with that head removed ([`Done::Embeddings`]: clean, corrupted,
    /// then two per head).
    Patch {
        /// The clean sentence's token ids.
        clean: Vec<u32>,
        /// The corrupted sentence's, as many.
        corrupted: Vec<u32>,
        /// The heads patched (and removed), one at a time.
        patch: Vec<usize>,
    },
    /// How alike every two heads of the full encoder attend over `sentences`, summed for the
    /// head atlas ([`Done::Sums`], [`crate::attention::atlas::PatternSums::to_sums`]).
    Atlas {
        /// The sentences' token ids.
        sentences: Vec<Vec<u32>>,
    },
    /// Where every head of the full encoder attends over `sentences`, summed for
    /// [`crate::model::encoder::roles::RoleCounter`] ([`Done::Sums`]).
    Roles {
        /// The sentences' token ids.
        sentences: Vec<Vec<u32>>,
        /// Per sentence, per token: whether it is punctuation.
        punctuation: Vec<Vec<bool>>,
    },
    /// How far a decoder's next token after `ids` moves with each set of heads of `sets` active:
    /// KL(full || pruned) in nats, one per set ([`Done::Sums`]; each pass starts at the first
    /// layer with a pruned head, from the full model's pass).
    NextKl {
        /// The text's token ids.
        ids: Vec<u32>,
        /// The sets of heads kept.
        sets: Vec<HeadSet>,
    },
    /// A decoder's losses on `passages` (2 tokens or more each) with `heads` active: per
    /// passage, the sum of its tokens' losses after the first ([`Done::Sums`], one per passage).
    Losses {
        /// The heads kept.
        heads: HeadSet,
        /// The passages' token ids.
        passages: Vec<Vec<u32>>,
    },
    /// A decoder's head-gate gradients of each passage's mean loss with `heads` kept (Michel et
    /// al.): per passage, the sum of its tokens' losses (as [`Piece::Losses`] gives it, from the
    /// same forward pass), then every head's `|∂L/∂ξ_h|` ([`Done::Sums`], passages × (1 + heads)).
    GateGradients {
        /// The heads kept.
        heads: HeadSet,
        /// The passages' token ids (2 tokens or more each).
        passages: Vec<Vec<u32>>,
    },
    /// The induction test on a decoder ([`crate::model::decoder::induction`]): one pass with
    /// every head over a random sequence repeated once (`half` tokens from `start`), and each
    /// head's scores ([`Done::Sums`]: per head its previous-token, duplicate-token,
    /// prefix-matching and copying scores, then the two halves' mean losses).
    Induction {
        /// The sequence: `[bos] first first`.
        ids: Vec<u32>,
        /// Tokens in one half.
        half: usize,
        /// Where the first half starts (1 after a beginning-of-text token, else 0).
        start: usize,
    },
    /// A decoder's `passages` (2 tokens or more each) at f16 and at 8 bits, every head active
    /// ([`crate::model::decoder::precision`]): per passage its positions, summed next-token KL,
    /// positions whose top token agrees, and losses at both precisions ([`Done::Sums`],
    /// [`PassageDrift::SUMS`](crate::model::decoder::precision::PassageDrift::SUMS) a passage).
    /// It runs on the model and its copy at the other precision ([`crate::jobs::copies::Copies`]).
    PrecisionDrift {
        /// The passages' token ids.
        passages: Vec<Vec<u32>>,
    },
}

/// What a piece of work gave.
#[derive(Clone, Debug, PartialEq)]
pub enum Done {
    /// Embeddings, in the order the piece says.
    Embeddings(Vec<Vec<f32>>),
    /// Numbers laid out as the piece says (per head, per passage, per set).
    Sums(Vec<f64>),
}

impl Piece {
    /// The family of model that runs it.
    pub fn family(&self) -> Family {
        match self {
            Piece::Embed { .. }
            | Piece::Gradients { .. }
            | Piece::Ablate { .. }
            | Piece::Patch { .. }
            | Piece::Atlas { .. }
            | Piece::Roles { .. } => Family::Encoder,
            Piece::NextKl { .. }
            | Piece::Losses { .. }
            | Piece::GateGradients { .. }
            | Piece::Induction { .. }
            | Piece::PrecisionDrift { .. } => Family::Decoder,
        }
    }

    /// Floating-point operations this piece takes on a model of shape `spec`, counted from its
    /// shapes (gradients as [`GRADIENT_COST`] forward passes).
    pub fn flops(&self, spec: &ModelSpec) -> u64 {
        match self.family() {
            Family::Encoder => encoder::flops(self, spec),
            Family::Decoder => decoder::flops(self, spec),
        }
    }

    /// The precision the piece asks the model to run at, if it names one.
    pub fn precision(&self) -> Option<Precision> {
        match self {
            Piece::Embed { precision, .. } => *precision,
            _ => None,
        }
    }

    /// Whether `model` can run this piece: one of its family's, every head set and token id
    /// within the model, no sentence longer than its positions or empty.
    pub fn check(&self, model: &Model) -> Result<(), WireError> {
        match (self.family(), model) {
            (Family::Encoder, Model::Encoder(e)) => self.check_on_encoder(&e.bert),
            (Family::Decoder, Model::Decoder(d)) => self.check_on_decoder(&d.gpt2),
            _ => Err(WireError::OtherFamily),
        }
    }

    /// Runs the piece on `model` with `kernel`, checked first ([`Piece::check`]).
    pub fn run(&self, model: &Model, kernel: Kernel) -> Result<Done, WireError> {
        self.check(model)?;
        Ok(match model {
            Model::Encoder(e) => self.run_on_encoder(&e.bert, kernel),
            Model::Decoder(d) => match self {
                Piece::PrecisionDrift { .. } => {
                    let other = d.at_precision(kernel, d.precision().other());
                    self.run_at_both(d, &other, kernel)
                }
                _ => self.run_on_decoder(&d.gpt2, kernel),
            },
        })
    }

    /// Whether `done` can be this piece's result on a model of shape `spec`: an embedding of the
    /// model's width per sentence (and per head removed), or as many numbers as the piece says.
    pub fn accepts(&self, spec: &ModelSpec, done: &Done) -> bool {
        match self.family() {
            Family::Encoder => encoder::accepts(self, spec, done),
            Family::Decoder => decoder::accepts(self, spec, done),
        }
    }
}

impl Done {
    /// The embeddings of several pieces' results, in order (other results have none).
    pub fn embeddings(done: Vec<Done>) -> Vec<Vec<f32>> {
        done.into_iter()
            .flat_map(|d| match d {
                Done::Embeddings(e) => e,
                Done::Sums(_) => Vec::new(),
            })
            .collect()
    }

    /// The numbers of a [`Done::Sums`] (none for embeddings).
    pub fn sums(&self) -> &[f64] {
        match self {
            Done::Sums(s) => s,
            Done::Embeddings(_) => &[],
        }
    }
}
