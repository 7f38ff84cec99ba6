//! What 8 bits change in a decoder, as jobs: the text set at both precisions ([`SetAtBoth`]: a
//! [`Piece::PrecisionDrift`] per passage, run on the workers, each on its model and its copy at
//! the other precision), and a pass over the reader's text at both, timed on the page's thread
//! ([`TimePrecisions`]: each pass in the page's turns, as the page runs its own passes).

use std::rc::Rc;

use crate::attention::clock::{show_ms, Clock};
use crate::attention::precision::Precision;
use crate::attention::HeadSet;
use crate::backend::precision_speed::PrecisionCost;
use crate::backend::timing::{Interleaved, Timed};
use crate::jobs::driver::{Job, Next, Plan, Progress};
use crate::jobs::engine::Engine;
use crate::jobs::host::HostClock;
use crate::jobs::work::{Done, Piece};
use crate::model::decoder::gpt2::Keep;
use crate::model::decoder::precision::{PassageDrift, PrecisionDrift};
use crate::model::decoder::Decoder;
use crate::model::digits::{bytes_change_text, signed_percent_text};

use super::{perplexity_text, DECODER_KERNEL};

/// The text set's passages at f16 and at 8 bits, every head active: one piece per passage.
pub struct SetAtBoth {
    pieces: Vec<Piece>,
    results: Vec<Done>,
    handed: bool,
}

impl SetAtBoth {
    /// The drift on `passages` (2 tokens or more each).
    pub fn new(passages: &[Vec<u32>]) -> SetAtBoth {
        let piece = |p: &Vec<u32>| Piece::PrecisionDrift { passages: vec![p.clone()] };
        SetAtBoth { pieces: passages.iter().map(piece).collect(), results: Vec::new(), handed: false }
    }
}

impl Plan<Decoder> for SetAtBoth {
    type Output = PrecisionDrift;

    fn next(&mut self) -> Next<PrecisionDrift> {
        if !std::mem::replace(&mut self.handed, true) {
            return Next::Run(self.pieces.clone());
        }
        let passages = self.results.iter().filter_map(|d| PassageDrift::from_sums(d.sums())).collect();
        Next::Finished(PrecisionDrift { passages })
    }

    fn absorb(&mut self, done: Done) {
        self.results.push(done);
    }

    fn progress(&self, engine: &Engine<Decoder>) -> Progress {
        let left =
            self.pieces[self.results.len().min(self.pieces.len())..].iter().map(|p| engine.flops(p)).sum();
        let place = self.pieces.first().map(|p| engine.place_of(p));
        Progress {
            done: self.results.len(),
            total: self.pieces.len(),
            left: place.map(|place| (left, place)),
        }
    }
}

/// A pass over one text with every head, at f16 and at 8 bits, timed against each other on the
/// page's thread: interleaved rounds after an untimed one, medians ([`Interleaved`]).
pub struct TimePrecisions {
    models: [Rc<Decoder>; 2],
    ids: Vec<u32>,
    timing: Interleaved,
}

/// Rounds of the precision timing (after one untimed round).
pub const TIMING_ROUNDS: usize = 3;

impl TimePrecisions {
    /// `f16` against `int8` (one model at both precisions) on `ids`.
    pub fn new(f16: Rc<Decoder>, int8: Rc<Decoder>, ids: Vec<u32>) -> TimePrecisions {
        assert_eq!((f16.precision(), int8.precision()), (Precision::F16, Precision::Int8));
        TimePrecisions { models: [f16, int8], ids, timing: Interleaved::new(TIMING_ROUNDS) }
    }
}

impl Job<Decoder> for TimePrecisions {
    type Output = PrecisionCost;

    async fn step(&mut self, engine: &Engine<Decoder>) -> Option<PrecisionCost> {
        let clock = HostClock(engine.host());
        if let Some((int8_side, reps)) = self.timing.next() {
            let gpt2 = &self.models[usize::from(int8_side)].gpt2;
            let (all, none) = (HeadSet::all(gpt2.spec.total_heads()), Keep::Layer(gpt2.spec.layers));
            let t0 = clock.now_ms();
            for _ in 0..reps {
                std::hint::black_box(
                    gpt2.forward_in_turns(DECODER_KERNEL, &self.ids, &all, none, engine.turns()).await,
                );
            }
            self.timing.record(clock.now_ms() - t0, clock.resolution_ms());
            if self.timing.next().is_some() {
                return None;
            }
        }
        let Timed { first_ms, second_ms, step_ms } = self.timing.result(clock.resolution_ms());
        let [f16, int8] = &self.models;
        Some(PrecisionCost {
            f16_ms: first_ms,
            int8_ms: second_ms,
            step_ms,
            f16_bytes: f16.gpt2.stored_bytes(),
            int8_bytes: int8.gpt2.stored_bytes(),
        })
    }

    fn progress(&self, _engine: &Engine<Decoder>) -> Progress {
        let (done, total) = self.timing.progress();
        Progress { done, total, left: None }
    }
}

/// What the decoder panel says of 8 bits against f16, from what is measured so far.
pub fn precision_text(drift: Option<&PrecisionDrift>, cost: Option<&PrecisionCost>) -> String {
    let pct = |v: f64| format!("{:.1} %", 100.0 * v);
    let ppl = perplexity_text;
    let quality = match drift {
        None => "next token and perplexity: measuring…".to_string(),
        Some(d) => match (d.kl(), d.agreement(), d.perplexity(Precision::F16), d.perplexity(Precision::Int8), d.perplexity_change()) {
            (Some(kl), Some(agree), Some(f16), Some(int8), Some(change)) => format!(
                "next-token KL to f16 {:.1e} nats per position (95 % interval {:.1e} to {:.1e}), the same top token at {} of {} positions ({} to {}), perplexity {} ({} to {}) -> {} ({} to {}), a change of {} % (95 % interval {} to {} %)",
                kl.value, kl.lo, kl.hi,
                pct(agree.value), d.passages.iter().map(|p| p.positions).sum::<usize>(), pct(agree.lo), pct(agree.hi),
                ppl(f16.value), ppl(f16.lo), ppl(f16.hi), ppl(int8.value), ppl(int8.lo), ppl(int8.hi),
                signed_percent_text(change.value), signed_percent_text(change.lo), signed_percent_text(change.hi),
            ),
            _ => "no passage to compare".to_string(),
        },
    };
    let cost = match cost {
        Some(c) => format!(
            "a pass over your text {} -> {} ({:.2}x, on the CPU kernel in this page's turns), weights {}",
            show_ms(c.f16_ms, c.step_ms),
            show_ms(c.int8_ms, c.step_ms),
            c.ratio(),
            bytes_change_text(c.f16_bytes, c.int8_bytes)
        ),
        None => "pass time and weights: measuring…".to_string(),
    };
    format!("8-bit weights instead of f16, every head kept: {cost}; {quality}.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn the_line_says_what_is_measured_and_what_is_not_yet() {
        let p = |positions, kl, agree, f16: f64, int8: f64| PassageDrift {
            positions,
            kl,
            agree,
            loss: [f16, int8],
        };
        let drift = PrecisionDrift {
            passages: vec![p(101, 0.05, 99, 300.0, 301.0), p(201, 0.08, 197, 600.0, 601.0)],
        };
        let cost = PrecisionCost {
            f16_ms: 80.0,
            int8_ms: 40.0,
            step_ms: 0.1,
            f16_bytes: 250 << 20,
            int8_bytes: 150 << 20,
        };
        let line = precision_text(Some(&drift), Some(&cost));
        assert!(line.starts_with("8-bit weights instead of f16, every head kept: a pass over your text 80.0 ms -> 40.0 ms (0.50x"), "{line}");
        assert!(line.contains("weights 250.0 -> 150.0 MiB"), "{line}");
        assert!(line.contains("next-token KL to f16 4.3e-4 nats per position"), "{line}");
        assert!(line.contains("the same top token at 98.0 % of 302 positions"), "{line}");
        let waiting = precision_text(None, None);
        assert!(
            waiting.contains("pass time and weights: measuring") && waiting.contains("perplexity: measuring"),
            "{waiting}"
        );
        assert!(precision_text(Some(&PrecisionDrift { passages: vec![] }), None)
            .contains("no passage to compare"));
    }
}
