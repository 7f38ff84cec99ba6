//! What 8 bits buy, beside what pruning buys (the handbook's two ways to "reduce computation and
//! memory", side by side in the task panel): the model's quality on the task's pairs at f16 and
//! at 8 bits, every head kept, with the change paired over the pairs' resamples; and its forward
//! time at both precisions on the reader's sentence, with the bytes of the weights each reads.

use std::rc::Rc;

use super::task::{SetQuality, SetScore, TaskData};
use super::timing::{TimePrecision, ROUNDS};
use crate::attention::clock::show_ms;
use crate::attention::precision::Precision;
use crate::attention::HeadSet;
use crate::backend::precision_speed::{PrecisionCost, PrecisionTiming};
use crate::jobs::driver::{drive, drive_plan};
use crate::jobs::engine::Engine;
use crate::jobs::ticket::Ticket;
use crate::model::digits::{bytes_change_text, quality_text};
use crate::model::encoder::Encoder;
use crate::model::intervals::Estimate;

/// The model's quality at both precisions, every head kept.
#[derive(Clone, Debug, PartialEq)]
pub struct PrecisionQuality {
    /// With its f16 weights.
    pub f16: SetScore,
    /// At 8 bits.
    pub int8: SetScore,
    /// The 8-bit quality minus the f16 one, paired over the pairs' resamples.
    pub change: Option<Estimate>,
}

impl PrecisionQuality {
    /// The score at `precision`.
    pub fn at(&self, precision: Precision) -> &SetScore {
        match precision {
            Precision::F16 => &self.f16,
            Precision::Int8 => &self.int8,
        }
    }
}

/// The quality of `engine`'s model on `data`'s pairs at both precisions, every head kept: the
/// loaded precision's is `known` when the page has measured it (the reader's set with no head
/// pruned), the other's runs on the workers' copies of the model at it. `None` when `ticket`
/// stopped it; an error says why the page holds no copy at the other precision.
pub async fn precision_quality(
    engine: &Engine<Encoder>,
    data: Rc<TaskData>,
    known: Option<SetScore>,
    ticket: &Ticket,
) -> Option<Result<PrecisionQuality, String>> {
    let model = engine.model();
    let (loaded, total) = (model.precision(), model.spec().total_heads());
    let all = HeadSet::all(total);
    if let Some(why) = model.copy_refused(loaded.other()) {
        return Some(Err(why));
    }
    let own = match known.filter(|k| k.heads == all) {
        Some(k) => k,
        None => drive_plan(engine, SetQuality::new(data.clone(), all.clone()), ticket, &mut |_| {}).await?,
    };
    let job = SetQuality::new(data.clone(), all).at(loaded.other());
    let other = drive_plan(engine, job, ticket, &mut |_| {}).await?;
    let (f16, int8) = match loaded {
        Precision::F16 => (own, other),
        Precision::Int8 => (other, own),
    };
    let change = data.bootstrap.change(&f16.cosines, &int8.cosines);
    Some(Ok(PrecisionQuality { f16, int8, change }))
}

/// The model's forward pass at f16 against its 8-bit copy on `ids`, on the page's thread (the
/// copy is the one the page's thread runs 8-bit pieces on). `None` when `ticket` stopped it.
pub async fn precision_cost(
    engine: &Engine<Encoder>,
    ids: Vec<u32>,
    ticket: &Ticket,
) -> Option<Result<PrecisionCost, String>> {
    let (f16, int8) = match (engine.model_at(Precision::F16), engine.model_at(Precision::Int8)) {
        (Ok(f16), Ok(int8)) => (f16, int8),
        (Err(why), _) | (_, Err(why)) => return Some(Err(why)),
    };
    let timing = TimePrecision::new(PrecisionTiming::new(f16, int8, ids, ROUNDS));
    drive(engine, timing, ticket, |_, _| {}).await.map(Ok)
}

/// The task panel's line on what 8 bits buy, from what is measured so far.
pub fn lever_text(
    quality: Option<&Result<PrecisionQuality, String>>,
    cost: Option<&PrecisionCost>,
) -> String {
    let quality = match quality {
        Some(Err(why)) => return format!("No 8-bit model to set beside pruning: {why}."),
        Some(Ok(q)) => {
            let (a, b) = (quality_text(q.f16.quality), quality_text(q.int8.quality));
            match &q.change {
                Some(change) => format!("quality {a} -> {b}: {}", change.change_text()),
                None => format!("quality {a} -> {b}"),
            }
        }
        None => "quality: measuring…".to_string(),
    };
    let (speed, bytes) = match cost {
        Some(c) => (
            format!(
                "forward 1.00 -> {:.2} (measured on the CPU kernel: {} against {})",
                c.ratio(),
                show_ms(c.int8_ms, c.step_ms),
                show_ms(c.f16_ms, c.step_ms)
            ),
            format!("weights {}", bytes_change_text(c.f16_bytes, c.int8_bytes)),
        ),
        None => ("forward: measuring…".to_string(), "weights: measuring…".to_string()),
    };
    format!("8-bit weights instead of f16, every head kept: {quality}, {speed}, {bytes}.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn the_line_says_what_is_measured_and_what_is_not_yet() {
        let score = |quality| SetScore {
            heads: HeadSet::all(4),
            quality,
            cosines: std::sync::Arc::from(vec![0.5; 3]),
        };
        let quality = PrecisionQuality { f16: score(0.81304), int8: score(0.81279), change: None };
        let cost = PrecisionCost {
            f16_ms: 20.0,
            int8_ms: 11.0,
            step_ms: 0.1,
            f16_bytes: 45 << 20,
            int8_bytes: 38 << 20,
        };
        assert_eq!(
            lever_text(Some(&Ok(quality)), Some(&cost)),
            "8-bit weights instead of f16, every head kept: quality 0.813 -> 0.813, forward 1.00 -> 0.55 \
             (measured on the CPU kernel: 11.0 ms against 20.0 ms), weights 45.0 -> 38.0 MiB."
        );
        let waiting = lever_text(None, None);
        assert!(
            waiting.contains("quality: measuring") && waiting.contains("forward: measuring"),
            "{waiting}"
        );
        let refused = lever_text(Some(&Err("too large".into())), None);
        assert_eq!(refused, "No 8-bit model to set beside pruning: too large.");
    }
}
