//! A decoder where the page runs its passes: on the GPU while that works and, unless the reader
//! forced the GPU, where it was measured faster for the text's length; else on the CPU kernel. A
//! GPU failure moves it to the CPU for good, with a note. Only the page's own passes (the reader's
//! text, full and pruned) go to the GPU: the measurements that run many passes (importance,
//! perplexity, the curves) stay on the CPU kernel, which resumes a pass from a layer's input.

use std::cell::RefCell;
use std::rc::Rc;

use super::calibrate::{self, Probes};
use super::placement::{Choice, Crossover, Place};
use super::session::Session;
use crate::attention::clock::Clock;
use crate::attention::HeadSet;
use crate::cpu::Kernel;
use crate::gpu::{GpuError, GpuGpt2};
use crate::model::decoder::Decoder;
use crate::model::gpt2::{DecoderOutput, Keep};
use crate::model::pruned;
use crate::model::spec::ModelSpec;

/// The kernel a decoder's CPU passes run on: the vector one (wasm simd128).
pub const DECODER_KERNEL: Kernel = Kernel::Simd;

/// FLOPs of a decoder's pass over `n` tokens: its blocks and the output head's logits.
pub fn pass_flops(spec: &ModelSpec, n: usize) -> u64 {
    let blocks = pruned::cost(spec, &HeadSet::all(spec.total_heads()), &[n]).total_flops;
    blocks + 2 * (n * spec.d_model * spec.vocab) as u64
}

/// The most a calibration pass may cost: 16 tokens of gpt2 are about 4 GFLOP, and the probe is
/// never shorter than that.
const PROBE_FLOPS: u64 = 2_000_000_000;

/// A decoder and where its page passes run.
pub struct DecoderRunner {
    decoder: Rc<Decoder>,
    gpu: RefCell<Option<Rc<GpuGpt2>>>,
    note: RefCell<Option<String>>,
    crossover: Option<Crossover>,
}

impl DecoderRunner {
    /// Every pass on the CPU kernel.
    pub fn cpu(decoder: Rc<Decoder>) -> DecoderRunner {
        DecoderRunner { decoder, gpu: RefCell::new(None), note: RefCell::new(None), crossover: None }
    }

    /// Puts `decoder` on `session`'s GPU, if it has one, and (unless the reader forced the GPU)
    /// times a pass there and on the CPU kernel on `clock`; if that fails, every pass runs on the
    /// CPU kernel and the runner says why.
    pub async fn new(decoder: Rc<Decoder>, session: &Session, clock: &impl Clock) -> DecoderRunner {
        let mut runner = DecoderRunner::cpu(decoder);
        let Some(ctx) = session.gpu() else { return runner };
        let placed = match GpuGpt2::new(ctx, &runner.decoder.gpt2).await {
            Ok(g) if session.measured => calibrate(&runner.decoder, &g, clock).await.map(|c| (g, Some(c))),
            Ok(g) => Ok((g, None)),
            Err(e) => Err(e),
        };
        match placed {
            Ok((g, c)) => (*runner.gpu.get_mut(), runner.crossover) = (Some(Rc::new(g)), c),
            Err(e) => *runner.note.get_mut() = Some(format!("The decoder runs on the CPU because {e}.")),
        }
        runner
    }

    /// The decoder.
    pub fn decoder(&self) -> &Rc<Decoder> {
        &self.decoder
    }

    /// The measured choice for a text of `tokens` tokens, when the page chose.
    pub fn choice(&self, tokens: usize) -> Option<Choice> {
        let choice = self.crossover?.choose(pass_flops(self.decoder.spec(), tokens));
        self.gpu.borrow().as_ref().map(|_| choice)
    }

    fn gpu_for(&self, tokens: usize) -> Option<Rc<GpuGpt2>> {
        let wanted = self.choice(tokens).is_none_or(|c| c.place == Place::Gpu);
        self.gpu.borrow().clone().filter(|_| wanted)
    }

    /// Whether a text of `tokens` tokens runs on the GPU now.
    pub fn on_gpu(&self, tokens: usize) -> bool {
        self.gpu_for(tokens).is_some()
    }

    /// Where a text of `tokens` tokens runs now, and why when a measurement chose.
    pub fn ran_on(&self, tokens: usize) -> String {
        let on = match self.on_gpu(tokens) {
            true => "the GPU (WebGPU)".to_string(),
            false => format!("the CPU kernel ({})", DECODER_KERNEL.describe()),
        };
        match self.choice(tokens) {
            Some(c) => format!("{on}, {}", c.why()),
            None => on,
        }
    }

    /// Why it is not on the page's GPU, when it was meant to be.
    pub fn note(&self) -> Option<String> {
        self.note.borrow().clone()
    }

    /// One pass over `ids` with `heads`, keeping what `keep` names: on the GPU when it runs
    /// there (a failure moves this pass and every later one to the CPU kernel), else on the CPU.
    pub async fn pass(&self, ids: &[u32], heads: &HeadSet, keep: Keep) -> DecoderOutput {
        if let Some(gpu) = self.gpu_for(ids.len()) {
            match gpu.forward(&self.decoder.gpt2, ids, heads, keep).await {
                Ok(out) => return out,
                Err(e) => self.fail(e),
            }
        }
        self.decoder.gpt2.forward_keeping(DECODER_KERNEL, ids, heads, keep)
    }

    fn fail(&self, e: GpuError) {
        *self.gpu.borrow_mut() = None;
        *self.note.borrow_mut() = Some(format!("The decoder switched to the CPU because {e}."));
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
