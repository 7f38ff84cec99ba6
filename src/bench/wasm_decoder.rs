//! The decoder's benchmarks as wasm exports, for `bench/decoder-speed.mjs`: its pass over a text
//! on one thread ([`DecoderCase`]), and the same pass cut across threads
//! ([`crate::model::decoder::sharded`]: [`DecoderCase::split_begin`] on the driving thread,
//! [`DecoderShard`] on each other one).

use wasm_bindgen::prelude::wasm_bindgen;

use super::wasm::{now, precision_of};
use crate::attention::HeadSet;
use crate::cpu::Kernel;
use crate::jobs::web::choose_dot_form;
use crate::model::decoder::gpt2::Keep;
use crate::model::decoder::sharded::{DecoderStep, Gpt2Shard, SplitPass};
use crate::model::decoder::Decoder;

/// A GPT-2-family decoder from its page model file (a checkpoint folder converted by the page's
/// loader), for `bench/decoder-speed.mjs`: the page's pass over a text (every layer, the output
/// head's logits at every position and each position's loss) on the CPU kernel.
#[wasm_bindgen]
pub struct DecoderCase {
    /// Leaked, as [`super::wasm::EncoderCase`]'s model is, so that a cut pass may borrow it.
    decoder: &'static Decoder,
    split: Option<Split>,
}

/// A pass cut across threads, this thread holding the first shard.
struct Split {
    count: usize,
    shard: Gpt2Shard,
    pass: SplitPass<'static>,
    /// This thread's part of the current step.
    mine: Vec<f32>,
}

#[wasm_bindgen]
impl DecoderCase {
    /// The decoder in a model file, checked and decoded once.
    #[wasm_bindgen(constructor)]
    pub fn new(asset: &[u8]) -> Result<DecoderCase, String> {
        let id = crate::model::load::model_file::sha256_hex(asset)[..16].to_string();
        let decoder = Decoder::from_file(asset, id).map_err(|e| e.to_string())?;
        Ok(DecoderCase { decoder: Box::leak(Box::new(decoder)), split: None })
    }

    /// The decoder at another precision (`"f16"` or `"int8"`: [`crate::model::decoder::Decoder::at_precision`],
    /// calibrated as the page calibrates it), the relaxed build's 8-bit form timed as the page times it.
    pub fn set_precision(&mut self, key: &str) -> Result<(), String> {
        let precision = precision_of(key)?;
        choose_dot_form();
        self.decoder = Box::leak(Box::new(self.decoder.at_precision(Kernel::Simd, precision)));
        self.split = None;
        Ok(())
    }

    /// The next token's logits after a pass over `ids` with every head (the pass makes every
    /// position's logits and loss, as the page's does).
    pub fn forward(&self, ids: &[u32]) -> Result<Vec<f32>, String> {
        self.check(ids)?;
        let spec = self.decoder.spec();
        let all = HeadSet::all(spec.total_heads());
        Ok(self.decoder.gpt2.forward_keeping(Kernel::Simd, ids, &all, Keep::Layer(0)).next_logits)
    }

    /// Where a pass over `ids` goes, stage by stage ([`super::decoder::pass_profile`]), as a table.
    pub fn profile(&self, ids: &[u32], rounds: usize) -> String {
        super::decoder::pass_profile(&now, &self.decoder.gpt2, ids, rounds)
    }

    /// Every position's loss of that pass (the text's token after it), in f64.
    pub fn losses(&self, ids: &[u32]) -> Vec<f64> {
        let all = HeadSet::all(self.decoder.spec().total_heads());
        self.decoder.gpt2.forward_keeping(Kernel::Simd, ids, &all, Keep::Layer(0)).losses
    }

    /// Starts the pass over `ids` cut into `count` shards (1 to the heads per layer), this
    /// thread holding the first; the other threads hold [`DecoderShard`]s of the same cut.
    pub fn split_begin(&mut self, ids: &[u32], count: usize) -> Result<(), String> {
        self.check(ids)?;
        let heads = self.decoder.spec().heads;
        if !(1..=heads).contains(&count) {
            return Err(format!("{count} shards: 1 to {heads}"));
        }
        let gpt2 = &self.decoder.gpt2;
        let shard = match self.split.take() {
            Some(s) if s.count == count => s.shard,
            _ => Gpt2Shard::new(gpt2, 0, count),
        };
        self.split = Some(Split { count, shard, pass: SplitPass::new(gpt2, ids, count), mine: Vec::new() });
        Ok(())
    }

    /// The current step's code ([`DecoderStep::code`]), or -1 once the pass is done.
    pub fn split_step(&self) -> i32 {
        let layers = self.decoder.spec().layers;
        self.split.as_ref().and_then(|s| s.pass.step()).map_or(-1, |step| step.code(layers) as i32)
    }

    /// The current step's input as a view on this instance's memory, without a copy or a new JS
    /// array (bench/decoder-speed.mjs copies it straight into the memory it shares with the
    /// worker).
    pub fn split_input_view(&self) -> js_sys::Float32Array {
        let x = self.split.as_ref().map_or(&[][..], |s| s.pass.input());
        // safety: the view shows memory this instance owns; the caller reads it before it calls
        // into the instance again, so nothing frees, changes or moves (memory growth) it meanwhile.
        unsafe { js_sys::Float32Array::view(x) }
    }

    /// How many values the other threads' parts of the current step have, one after the other.
    pub fn split_others_len(&self) -> usize {
        self.split.as_ref().map_or(0, |s| (1..s.count).map(|i| s.pass.part_len(i)).sum())
    }

    /// This thread's part of the current step, kept for [`DecoderCase::split_absorb`].
    pub fn split_local(&mut self) -> Result<(), String> {
        let s = self.split.as_mut().ok_or("no pass begun")?;
        s.mine = match s.pass.step().ok_or("the pass is done")? {
            DecoderStep::Layer(step) => s.shard.run(Kernel::Simd, step, s.pass.input()),
            DecoderStep::ReadOut => s.shard.read_out(Kernel::Simd, s.pass.input(), s.pass.targets()),
        };
        Ok(())
    }

    /// Joins this thread's part and the other threads' (`others`: theirs one after the other,
    /// [`DecoderCase::split_others_len`] values) and moves to the next step.
    pub fn split_absorb(&mut self, others: &[f32]) -> Result<(), String> {
        let want = self.split_others_len();
        let s = self.split.as_mut().ok_or("no pass begun")?;
        if s.mine.is_empty() || s.pass.step().is_none() || others.len() != want {
            return Err(format!("{} values from the other threads, {want} expected", others.len()));
        }
        let mut parts = vec![s.mine.as_slice()];
        let mut rest = others;
        for i in 1..s.count {
            let (part, tail) = rest.split_at(s.pass.part_len(i));
            parts.push(part);
            rest = tail;
        }
        s.pass.absorb(&parts);
        s.mine.clear();
        Ok(())
    }

    /// The next token's logits once the cut pass is done.
    pub fn split_next_logits(&self) -> Result<Vec<f32>, String> {
        let output = self.split.as_ref().and_then(|s| s.pass.output());
        output.map(|o| o.next_logits.clone()).ok_or_else(|| "the pass is not done".to_string())
    }

    /// Every position's loss of the cut pass, once it is done.
    pub fn split_losses(&self) -> Result<Vec<f64>, String> {
        let output = self.split.as_ref().and_then(|s| s.pass.output());
        output.map(|o| o.losses.clone()).ok_or_else(|| "the pass is not done".to_string())
    }

    fn check(&self, ids: &[u32]) -> Result<(), String> {
        let spec = self.decoder.spec();
        if ids.is_empty() || ids.len() > spec.positions || ids.iter().any(|&id| id as usize >= spec.vocab) {
            return Err(format!("1 to {} ids below {}", spec.positions, spec.vocab));
        }
        Ok(())
    }
}

/// Another thread's share of a decoder ([`Gpt2Shard`]), for a pass cut across threads.
#[wasm_bindgen]
pub struct DecoderShard {
    layers: usize,
    d_model: usize,
    shard: Gpt2Shard,
    /// The last step's part, for [`DecoderShard::run_view`].
    out: Vec<f32>,
}

#[wasm_bindgen]
impl DecoderShard {
    /// Shard `index` of `count` of the decoder in a model file, at `precision` (`"f16"` or
    /// `"int8"`: calibrated as [`DecoderCase::set_precision`] calibrates it, so the driver's and
    /// every shard's bytes are the same).
    #[wasm_bindgen(constructor)]
    pub fn new(asset: &[u8], index: usize, count: usize, precision: &str) -> Result<DecoderShard, String> {
        let precision = precision_of(precision)?;
        let decoder = Decoder::from_file(asset, String::new()).map_err(|e| e.to_string())?;
        let spec = *decoder.spec();
        if index >= count || count > spec.heads {
            return Err(format!("shard {index} of {count}: at most {} shards", spec.heads));
        }
        // The 8-bit products' form is the page's: `bench_dot_form` with its key.
        let decoder = decoder.at_precision(Kernel::Simd, precision);
        let shard = Gpt2Shard::new(&decoder.gpt2, index, count);
        Ok(DecoderShard { layers: spec.layers, d_model: spec.d_model, shard, out: Vec::new() })
    }

    /// This shard's part of the step `code` for its input `x` (the normalized rows) and, at the
    /// read-out, the text's next tokens `targets`, into a buffer the shard keeps, returned as a
    /// view on this instance's memory: no new JS array per step.
    pub fn run_view(
        &mut self,
        code: u32,
        x: &[f32],
        targets: &[u32],
    ) -> Result<js_sys::Float32Array, String> {
        let step = DecoderStep::from_code(code, self.layers).ok_or_else(|| format!("no step {code}"))?;
        if x.is_empty() || !x.len().is_multiple_of(self.d_model) {
            return Err(format!("{} values are no layer input", x.len()));
        }
        match step {
            DecoderStep::Layer(step) => {
                self.out.resize(x.len(), 0.0);
                self.shard.run_into(Kernel::Simd, step, x, &mut self.out);
            }
            DecoderStep::ReadOut => {
                if targets.len() + 1 != x.len() / self.d_model {
                    return Err(format!(
                        "{} next tokens for {} positions",
                        targets.len(),
                        x.len() / self.d_model
                    ));
                }
                self.out = self.shard.read_out(Kernel::Simd, x, targets);
            }
        }
        // safety: the view shows `self.out`; the caller reads it before it calls into the instance
        // again, so nothing frees, changes or moves (memory growth) it meanwhile.
        Ok(unsafe { js_sys::Float32Array::view(&self.out) })
    }
}
