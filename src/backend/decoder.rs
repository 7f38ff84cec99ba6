//! A decoder where the page runs its passes: on the GPU while that works and, unless the reader
//! forced the GPU, where it was measured faster for the text's length; else on the CPU kernel. A
//! GPU failure moves it to the CPU for good, with a note. Only the page's own passes (the reader's
//! text, full and pruned) go to the GPU: the measurements that run many passes (importance,
//! perplexity, the curves) stay on the CPU kernel, which resumes a pass from a layer's input.

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
use crate::gpu::{GpuError, GpuGpt2};
use crate::model::decoder::cost::pass_flops;
use crate::model::decoder::gpt2::{DecoderOutput, Keep};
use crate::model::decoder::Decoder;

/// The kernel a decoder's CPU passes run on: the vector one (wasm simd128).
pub const DECODER_KERNEL: Kernel = Kernel::Simd;

/// The most a calibration pass may cost: 16 tokens of gpt2 are about 4 GFLOP, and the probe is
/// never shorter than that.
const PROBE_FLOPS: u64 = 2_000_000_000;

/// A decoder and where its page passes run.
pub struct DecoderRunner {
    decoder: Rc<Decoder>,
    placed: Placed<GpuGpt2>,
    /// The turns its CPU passes give their thread.
    turns: Rc<dyn Turns>,
}

impl DecoderRunner {
    /// Every pass on the CPU kernel, giving its thread `turns`.
    pub fn cpu(decoder: Rc<Decoder>, turns: Rc<dyn Turns>) -> DecoderRunner {
        DecoderRunner { decoder, placed: Placed::cpu(None), turns }
    }

    /// Puts `decoder` on `session`'s GPU, if it has one, and (unless the reader forced the GPU)
    /// times a pass there and on the CPU kernel on `clock`; if that fails, every pass runs on the
    /// CPU kernel and the runner says why. Its CPU passes give their thread `turns`.
    pub async fn new(
        decoder: Rc<Decoder>,
        session: &Session,
        clock: &impl Clock,
        turns: Rc<dyn Turns>,
    ) -> DecoderRunner {
        let Some(ctx) = session.gpu() else { return DecoderRunner::cpu(decoder, turns) };
        if decoder.precision() == Precision::Int8 {
            let why = "The 8-bit decoder runs on the CPU kernel: the GPU path multiplies the f16 weights.";
            return DecoderRunner { decoder, placed: Placed::cpu(Some(why.to_string())), turns };
        }
        let placed = match GpuGpt2::new(ctx, &decoder.gpt2).await {
            Ok(g) if session.measured => calibrate(&decoder, &g, clock).await.map(|c| (g, Some(c))),
            Ok(g) => Ok((g, None)),
            Err(e) => Err(e),
        };
        let placed = match placed {
            Ok((g, c)) => Placed::gpu(g, c),
            Err(e) => Placed::cpu(Some(format!("The decoder runs on the CPU because {e}."))),
        };
        DecoderRunner { decoder, placed, turns }
    }

    /// The decoder.
    pub fn decoder(&self) -> &Rc<Decoder> {
        &self.decoder
    }

    fn flops(&self, tokens: usize) -> u64 {
        pass_flops(self.decoder.spec(), tokens)
    }

    /// The measured choice for a text of `tokens` tokens, when the page chose.
    pub fn choice(&self, tokens: usize) -> Option<Choice> {
        self.placed.choice(self.flops(tokens))
    }

    /// Whether a text of `tokens` tokens runs on the GPU now.
    pub fn on_gpu(&self, tokens: usize) -> bool {
        self.placed.gpu_for(self.flops(tokens)).is_some()
    }

    /// Where a text of `tokens` tokens runs now, and why when a measurement chose.
    pub fn ran_on(&self, tokens: usize) -> String {
        let flops = self.flops(tokens);
        let on = match self.decoder.precision() {
            Precision::F16 => self.placed.place_text(flops),
            p => format!("{}, {}", self.placed.place_text(flops), p.label()),
        };
        self.placed.with_why(flops, on)
    }

    /// Why it is not on the page's GPU, when it was meant to be.
    pub fn note(&self) -> Option<String> {
        self.placed.note()
    }

    /// One pass over `ids` with `heads`, keeping what `keep` names: on the GPU when it runs
    /// there (a failure moves this pass and every later one to the CPU kernel), else on the CPU.
    /// The pass ends at its next turn once `wanted` no longer holds on the CPU kernel (`None`);
    /// a GPU pass is short and runs to its end.
    pub async fn pass_while(
        &self,
        ids: &[u32],
        heads: &HeadSet,
        keep: Keep,
        wanted: &dyn Fn() -> bool,
    ) -> Option<DecoderOutput> {
        if let Some(gpu) = self.placed.gpu_for(self.flops(ids.len())) {
            match gpu.forward(&self.decoder.gpt2, ids, heads, keep).await {
                Ok(out) => return Some(out),
                Err(e) => self.placed.fail(format!("The decoder switched to the CPU because {e}.")),
            }
        }
        let pass = self.decoder.gpt2.forward_in_turns(DECODER_KERNEL, ids, heads, keep, &*self.turns);
        while_wanted(pass, wanted).await
    }
}

/// Times the decoder on both backends ([`calibrate::crossover`]) on texts of the token 0.
async fn calibrate(decoder: &Decoder, gpu: &GpuGpt2, clock: &impl Clock) -> Result<Crossover, GpuError> {
    let spec = *decoder.spec();
    let probes = Probes::within(|n| pass_flops(&spec, n), PROBE_FLOPS, spec.positions);
    let all = HeadSet::all(spec.total_heads());
    let keep = Keep::Layer(0);
    calibrate::crossover(
        probes,
        |n| pass_flops(&spec, n),
        clock,
        async |place, n| {
            let ids = vec![0u32; n];
            match place {
                Place::Gpu => gpu.forward(&decoder.gpt2, &ids, &all, keep).await.map(drop),
                Place::Cpu => {
                    std::hint::black_box(decoder.gpt2.forward_keeping(DECODER_KERNEL, &ids, &all, keep));
                    Ok(())
                }
            }
        },
    )
    .await
}
