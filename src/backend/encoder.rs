//! The trained model where the page runs it: on the GPU while that works and, unless the reader
//! forced the GPU, where it was measured faster for the sentence's length; else on the CPU kernel.

use std::rc::Rc;

use super::calibrate::{self, Probes};
use super::placed::Placed;
use super::placement::{Choice, Crossover, Place};
use super::session::Session;
use crate::attention::clock::Clock;
use crate::attention::precision::Precision;
use crate::attention::turns::{while_wanted, Turns};
use crate::attention::HeadSet;
use crate::cpu::Kernel;
use crate::gpu::{GpuBert, GpuError};
use crate::model::encoder::bert::BertOutput;
use crate::model::encoder::pruned;
use crate::model::encoder::runner::Runner;
use crate::model::encoder::Encoder;

/// The trained model where the page runs it: on the GPU while that works (its weights uploaded
/// once) and, unless the reader forced the GPU, where it was measured faster for the sentence's
/// length; else on the CPU kernel. A GPU failure moves it to the CPU for good, with a note; the
/// page's other passes are not affected.
pub struct EncoderRunner {
    model: Rc<Encoder>,
    placed: Placed<GpuBert>,
    /// The turns its CPU passes give their thread.
    turns: Rc<dyn Turns>,
}

/// The trained model's calibration: sentences of 8 and 64 tokens (fewer for a model of fewer
/// positions), over every length it accepts.
fn probes(model: &Encoder) -> Probes {
    let largest = model.spec().positions;
    Probes { small: 8.min(largest), large: 64.min(largest), largest }
}

impl EncoderRunner {
    /// Puts `model` on `session`'s GPU, if it has one, and (unless the reader forced the GPU)
    /// times it there and on the CPU kernel on `clock`; if that fails, the runner uses the CPU
    /// kernel and says why. Its CPU passes give their thread `turns`.
    pub async fn new(
        model: Rc<Encoder>,
        session: &Session,
        clock: &impl Clock,
        turns: Rc<dyn Turns>,
    ) -> EncoderRunner {
        let int8 = model.precision() == Precision::Int8;
        let placed = match session.gpu() {
            Some(_) if int8 => Placed::cpu(Some(
                "The 8-bit model runs on the CPU kernel: the GPU path multiplies the f16 weights."
                    .to_string(),
            )),
            None => Placed::cpu(None),
            Some(ctx) => {
                let placed = match GpuBert::new(ctx, &model.bert).await {
                    Ok(g) if session.measured => {
                        calibrate_trained(&model, &g, clock).await.map(|c| (g, Some(c)))
                    }
                    Ok(g) => Ok((g, None)),
                    Err(e) => Err(e),
                };
                match placed {
                    Ok((g, c)) => Placed::gpu(g, c),
                    Err(e) => Placed::cpu(Some(format!("The trained model runs on the CPU because {e}."))),
                }
            }
        };
        EncoderRunner { model, placed, turns }
    }

    /// The model.
    pub fn model(&self) -> &Encoder {
        &self.model
    }

    fn flops(&self, tokens: usize) -> u64 {
        let spec = self.model.spec();
        pruned::cost(spec, &HeadSet::all(spec.total_heads()), &[tokens]).total_flops
    }

    /// The measured choice for a sentence of `tokens` tokens, when the page chose.
    pub fn choice(&self, tokens: usize) -> Option<Choice> {
        self.placed.choice(self.flops(tokens))
    }

    /// The GPU model, when a sentence of `tokens` tokens runs on it.
    pub fn gpu_for(&self, tokens: usize) -> Option<Rc<GpuBert>> {
        self.placed.gpu_for(self.flops(tokens))
    }

    /// Whether a sentence of `tokens` tokens runs on the GPU now.
    pub fn on_gpu(&self, tokens: usize) -> bool {
        self.gpu_for(tokens).is_some()
    }

    /// Where a sentence of `tokens` tokens runs now, and why when a measurement chose, for the
    /// page: "the CPU kernel (wasm simd128), faster here than on the GPU: about 12 ms against …".
    pub fn ran_on(&self, tokens: usize) -> String {
        let flops = self.flops(tokens);
        let on = match self.model.precision() {
            Precision::F16 => self.placed.place_text(flops),
            p => format!("{}, {}", self.placed.place_text(flops), p.label()),
        };
        self.placed.with_why(flops, on)
    }

    /// Why it is not on the page's GPU, when it is not.
    pub fn note(&self) -> Option<String> {
        self.placed.note()
    }
}

/// Times the trained model on both backends ([`calibrate::crossover`]) on sentences of the
/// word "the", with every head.
async fn calibrate_trained(
    model: &Encoder,
    gpu: &GpuBert,
    clock: &impl Clock,
) -> Result<Crossover, GpuError> {
    let (spec, probes) = (model.spec(), probes(model));
    let all = HeadSet::all(spec.total_heads());
    let ids = |n: usize| model.ids(&"the ".repeat(n.saturating_sub(2)));
    let sentences = [ids(probes.small), ids(probes.large)];
    let flops = |n: usize| pruned::cost(spec, &all, &[n]).total_flops;
    calibrate::crossover(probes, flops, clock, async |place, n| {
        let ids = &sentences[usize::from(n != probes.small)];
        match place {
            Place::Gpu => gpu.forward(&model.bert, ids, &all).await.map(drop),
            Place::Cpu => {
                std::hint::black_box(model.bert.forward(Kernel::Simd, ids, &all));
                Ok(())
            }
        }
    })
    .await
}

impl EncoderRunner {
    /// [`Runner::run`] for as long as `wanted` holds: on the GPU when it runs there (a failure
    /// moves this pass and every later one to the CPU kernel); on the CPU kernel the pass ends at
    /// its next turn once `wanted` does not hold (`None`). A GPU pass is short and runs to its end.
    pub async fn run_while(
        &self,
        ids: &[u32],
        heads: &HeadSet,
        base: Option<&BertOutput>,
        wanted: &dyn Fn() -> bool,
    ) -> Option<BertOutput> {
        if let Some(gpu) = self.gpu_for(ids.len()) {
            match gpu.forward_from(&self.model.bert, ids, heads, base).await {
                Ok(out) => return Some(out),
                Err(e) => self.placed.fail(format!("The trained model switched to the CPU because {e}.")),
            }
        }
        let pass = self.model.bert.forward_in_turns(Kernel::Simd, ids, heads, base, &*self.turns);
        while_wanted(pass, wanted).await
    }
}

impl Runner for EncoderRunner {
    async fn run(&self, ids: &[u32], heads: &HeadSet, base: Option<&BertOutput>) -> BertOutput {
        self.run_while(ids, heads, base, &|| true).await.expect("a pass wanted throughout ends")
    }

    async fn embed(&self, ids: &[u32], heads: &HeadSet, base: Option<&BertOutput>) -> Vec<f32> {
        if self.gpu_for(ids.len()).is_some() {
            return self.run(ids, heads, base).await.embedding;
        }
        self.model.bert.embed_in_turns(Kernel::Simd, ids, heads, base, None, &*self.turns).await
    }
}
