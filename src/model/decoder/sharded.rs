//! One text's pass through a GPT-2-family decoder cut across threads that share no memory (web
//! workers, each with its own wasm instance and its own share of the weights), as the encoder's
//! is ([`crate::model::layers::split`]).
//!
//! Shard `s` of `S` holds, in every block, a range of the heads (their rows of `W_attn`'s query,
//! key and value thirds and their columns of `W_proj`) and a range of the feed-forward units
//! (rows of `W_fc`, columns of `W_mlp`); and a range of the vocabulary (rows of the output head).
//! GPT-2 normalizes before each branch, so the thread that drives the pass ([`SplitPass`])
//! normalizes once and hands every shard the same rows:
//!
//! ```text
//! attention:     x <- x + b_proj + sum_s causal_s(LN1(x)) W_proj[:, s]^T
//! feed-forward:  x <- x + b_mlp  + sum_s GELU(LN2(x) W_fc[s]^T + b_fc[s]) W_mlp[:, s]^T
//! read-out:      loss_t = log sum_s exp(lse_s,t) - logit[t, id_t+1]     (lse_s,t over s's rows)
//!                next   = [last row's logits of shard 0 | shard 1 | ...]
//! ```
//!
//! The products into the residual stream sum over heads and units: each shard sums its own and
//! the driver adds the shards' sums, the single-thread pass's terms grouped differently (rounding
//! only; at 8 bits each shard quantizes its own part of `W_proj`'s and `W_mlp`'s input rows). The
//! read-out's logits are each a whole sum over `d_model`, as in the single-thread pass: only
//! their log-sum-exp is joined. The cut puts a second thread on one text's pass (BENCHMARKS.md
//! section 23); with a shard per worker each would hold about `1/S` of the weights, which is
//! how a model too large for one instance could run, once a worker builds its share straight
//! from the file ([`Gpt2Shard::new`] cuts a whole model today).

use std::ops::Range;

use crate::attention::turns::{at_once, AtOnce};
use crate::cpu::head_shards::even_ranges;
use crate::cpu::softmax::log_sum_exp;
use crate::cpu::{attend_in_turns, Kernel, Mask};
use crate::model::decoder::gpt2::{Gpt2, READ_OUT_ROWS};
use crate::model::layers::split::Step;
use crate::model::layers::{activate, layer_norm, linear, Linear};
use crate::model::spec::ModelSpec;

/// What every shard computes next in a decoder's pass: a layer's branch, then the read-out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecoderStep {
    /// A layer's attention or feed-forward branch.
    Layer(Step),
    /// The output head over every position of the final rows.
    ReadOut,
}

impl DecoderStep {
    /// The step as one number in a model of `layers` layers, for a message: its layer step's
    /// [`Step::code`], the read-out `2 layers`.
    pub fn code(self, layers: usize) -> u32 {
        match self {
            DecoderStep::Layer(step) => step.code(),
            DecoderStep::ReadOut => 2 * layers as u32,
        }
    }

    /// The step a [`DecoderStep::code`] names; `None` past the read-out.
    pub fn from_code(code: u32, layers: usize) -> Option<DecoderStep> {
        match Step::from_code(code, layers) {
            Some(step) => Some(DecoderStep::Layer(step)),
            None => (code == 2 * layers as u32).then_some(DecoderStep::ReadOut),
        }
    }
}

/// One block's share of a shard, without the biases of the products into the stream (the
/// driver adds them once).
#[derive(Clone, Debug)]
struct ShardBlock {
    /// `3 w x d`: the shard's heads' query rows, then their key rows, then their value rows.
    qkv: Linear,
    /// `d x w`: the shard's heads' columns of `W_proj`, a zero bias.
    out: Linear,
    ffn_in: Linear,
    /// `d x units`: the shard's units' columns of `W_mlp`, a zero bias.
    ffn_out: Linear,
}

/// Shard `index` of `count` of a decoder: its heads and units in every block, and its rows of
/// the output head.
#[derive(Clone, Debug)]
pub struct Gpt2Shard {
    spec: ModelSpec,
    /// How many heads per block it holds.
    heads: usize,
    blocks: Vec<ShardBlock>,
    /// Its vocabulary rows of the output head (at 8 bits, their 8-bit copy), a zero bias.
    head: Linear,
    vocab: Range<usize>,
}

impl Gpt2Shard {
    /// Shard `index` of `count` (`index < count <=` heads per layer) of `base`, at its precision.
    pub fn new(base: &Gpt2, index: usize, count: usize) -> Self {
        let spec = base.spec;
        assert!(
            index < count && count <= spec.heads,
            "shard {index} of {count}: at most {} shards",
            spec.heads
        );
        let (d, d_k) = (spec.d_model, spec.d_k());
        let heads = even_ranges(spec.heads, count)[index].clone();
        let units = even_ranges(spec.ffn, count)[index].clone();
        let vocab = even_ranges(spec.vocab, count)[index].clone();
        let rows: Vec<usize> = (0..3)
            .flat_map(|third| heads.clone().flat_map(move |h| third * d + h * d_k..third * d + (h + 1) * d_k))
            .collect();
        let columns = heads.start * d_k..heads.end * d_k;
        let blocks = base
            .blocks
            .iter()
            .map(|b| ShardBlock {
                qkv: b.qkv.select_outputs(&rows),
                out: b.out.select_inputs(std::slice::from_ref(&columns), vec![0.0; d]),
                ffn_in: b.ffn_in.select_outputs(&units.clone().collect::<Vec<_>>()),
                ffn_out: b.ffn_out.select_inputs(std::slice::from_ref(&units), vec![0.0; d]),
            })
            .collect();
        let head = match &base.head {
            Some(head) => head.select_outputs(&vocab.clone().collect::<Vec<_>>()),
            None => Linear::new(
                base.word.values(vocab.start * d..vocab.end * d).into_owned(),
                vec![0.0; vocab.len()],
            ),
        };
        Gpt2Shard { spec, heads: heads.len(), blocks, head, vocab }
    }

    /// This shard's partial branch of layer step `step` for the normalized rows `x`
    /// (`tokens x d_model`), the same shape.
    pub fn run(&self, kernel: Kernel, step: Step, x: &[f32]) -> Vec<f32> {
        let mut out = vec![0.0f32; x.len()];
        self.run_into(kernel, step, x, &mut out);
        out
    }

    /// [`Gpt2Shard::run`] into `out` (the shape of `x`; every element written).
    pub fn run_into(&self, kernel: Kernel, step: Step, x: &[f32], out: &mut [f32]) {
        let (d, d_k) = (self.spec.d_model, self.spec.d_k());
        assert!(x.len().is_multiple_of(d) && !x.is_empty(), "x must be tokens x {d}");
        assert_eq!(out.len(), x.len(), "the partial branch has the shape of x");
        let n = x.len() / d;
        match step {
            Step::Attention(l) => {
                let (block, w) = (&self.blocks[l], self.heads * d_k);
                let mut qkv = vec![0.0f32; n * 3 * w];
                linear(kernel, x, n, &block.qkv, &mut qkv, 3 * w);
                // One head's weights at a time, as the page's pass that keeps no attention.
                let (mut probs, mut concat) = (vec![0.0f32; n * n], vec![0.0f32; n * w]);
                let attend = attend_in_turns(
                    kernel,
                    &qkv,
                    n,
                    self.heads,
                    d_k,
                    Mask::Causal,
                    &mut probs,
                    &mut concat,
                    &AtOnce,
                );
                at_once(attend);
                linear(kernel, &concat, n, &block.out, out, d);
            }
            Step::FeedForward(l) => {
                let block = &self.blocks[l];
                let units = block.ffn_in.out();
                let mut hidden = vec![0.0f32; n * units];
                linear(kernel, x, n, &block.ffn_in, &mut hidden, units);
                activate(kernel, self.spec.activation, &mut hidden);
                linear(kernel, &hidden, n, &block.ffn_out, out, d);
            }
        }
    }

    /// This shard's part of the read-out of the final rows `hidden` (`n x d_model`, after the
    /// final LayerNorm) whose next tokens are `targets` (`n - 1` ids): per position `t < n - 1`
    /// the log-sum-exp of its logits over the shard's vocabulary rows, then per position the
    /// logit of `targets[t]` where the shard holds that row (0 where it does not), then the last
    /// position's logits over its rows ([`read_out_len`] values in all).
    pub fn read_out(&self, kernel: Kernel, hidden: &[f32], targets: &[u32]) -> Vec<f32> {
        let (d, v) = (self.spec.d_model, self.vocab.len());
        assert!(hidden.len().is_multiple_of(d) && !hidden.is_empty(), "hidden must be tokens x {d}");
        let n = hidden.len() / d;
        assert_eq!(targets.len(), n - 1, "a next token for every position but the last");
        let mut out = vec![0.0f32; read_out_len(n, v)];
        let mut logits = vec![0.0f32; READ_OUT_ROWS.min(n) * v];
        for (c, rows) in hidden.chunks(READ_OUT_ROWS * d).enumerate() {
            let r = rows.len() / d;
            linear(kernel, rows, r, &self.head, &mut logits[..r * v], v);
            for (i, row) in logits[..r * v].chunks_exact(v).enumerate() {
                let t = c * READ_OUT_ROWS + i;
                let Some(&target) = targets.get(t) else {
                    out[2 * (n - 1)..].copy_from_slice(row);
                    continue;
                };
                out[t] = log_sum_exp(kernel, row) as f32;
                if self.vocab.contains(&(target as usize)) {
                    out[n - 1 + t] = row[target as usize - self.vocab.start];
                }
            }
        }
        out
    }
}

/// Values in a shard's read-out of `n` positions over `vocab_rows` rows of the vocabulary.
pub fn read_out_len(n: usize, vocab_rows: usize) -> usize {
    2 * (n - 1) + vocab_rows
}

/// What a pass leaves: the next token's logits and every position's loss of the text's next
/// token, as [`crate::model::decoder::gpt2::DecoderOutput`] holds them.
#[derive(Clone, Debug, PartialEq)]
pub struct SplitOutput {
    /// `vocab` values.
    pub next_logits: Vec<f32>,
    /// `n - 1` losses, nats.
    pub losses: Vec<f64>,
}

/// A text's pass driven step by step: the driver hands out [`SplitPass::step`] and its input
/// (the normalized rows; at the read-out also [`SplitPass::targets`]), each of the `count`
/// shards runs it, and [`SplitPass::absorb`] joins their parts.
#[derive(Clone, Debug)]
pub struct SplitPass<'m> {
    base: &'m Gpt2,
    ids: Vec<u32>,
    count: usize,
    /// Each shard's rows of the vocabulary (its part of the read-out).
    vocab: Vec<Range<usize>>,
    /// The residual stream.
    x: Vec<f32>,
    /// The next step's input: `x` through the LayerNorm before it.
    input: Vec<f32>,
    next: Option<DecoderStep>,
    output: Option<SplitOutput>,
}

impl<'m> SplitPass<'m> {
    /// The pass of `ids` (1 to the spec's positions token ids) cut into `count` shards, at its
    /// first step.
    pub fn new(base: &'m Gpt2, ids: &[u32], count: usize) -> Self {
        let x = base.embed(ids);
        let mut pass = SplitPass {
            base,
            ids: ids.to_vec(),
            count,
            vocab: even_ranges(base.spec.vocab, count),
            input: Vec::new(),
            x,
            next: Some(DecoderStep::Layer(Step::Attention(0))),
            output: None,
        };
        pass.normalize();
        pass
    }

    /// What the shards compute next, `None` once the pass is done.
    pub fn step(&self) -> Option<DecoderStep> {
        self.next
    }

    /// The next step's input (`tokens x d_model`, normalized).
    pub fn input(&self) -> &[f32] {
        &self.input
    }

    /// Each position's next token in the text (the read-out's losses are theirs).
    pub fn targets(&self) -> &[u32] {
        &self.ids[1..]
    }

    /// How many values shard `index`'s part of the current step has.
    pub fn part_len(&self, index: usize) -> usize {
        match self.next {
            Some(DecoderStep::ReadOut) => read_out_len(self.ids.len(), self.vocab[index].len()),
            _ => self.x.len(),
        }
    }

    /// Joins every shard's part of the current step (shard 0's first; together the shards of
    /// one cut) and moves on.
    pub fn absorb(&mut self, parts: &[&[f32]]) {
        let step = self.next.expect("the pass is done: nothing to absorb");
        assert_eq!(parts.len(), self.count, "a part from each of the {} shards", self.count);
        assert!(
            parts.iter().enumerate().all(|(s, p)| p.len() == self.part_len(s)),
            "a part of another length"
        );
        let spec = &self.base.spec;
        let DecoderStep::Layer(layer_step) = step else {
            self.output = Some(self.join_read_out(parts));
            self.next = None;
            return;
        };
        let bias = match layer_step {
            Step::Attention(l) => &self.base.blocks[l].out.b,
            Step::FeedForward(l) => &self.base.blocks[l].ffn_out.b,
        };
        let mut branch = vec![0.0f32; self.x.len()];
        for p in parts {
            branch.iter_mut().zip(*p).for_each(|(s, v)| *s += v);
        }
        for (row, branch) in self.x.chunks_exact_mut(spec.d_model).zip(branch.chunks_exact(spec.d_model)) {
            row.iter_mut().zip(branch).zip(bias).for_each(|((v, s), b)| *v += s + b);
        }
        self.next = Some(layer_step.next(spec.layers).map_or(DecoderStep::ReadOut, DecoderStep::Layer));
        self.normalize();
    }

    /// The next token's logits and the losses, once the read-out is absorbed.
    pub fn output(&self) -> Option<&SplitOutput> {
        self.output.as_ref()
    }

    /// `input <- x` through the LayerNorm before the next step.
    fn normalize(&mut self) {
        let norm = match self.next {
            Some(DecoderStep::Layer(Step::Attention(l))) => &self.base.blocks[l].ln1,
            Some(DecoderStep::Layer(Step::FeedForward(l))) => &self.base.blocks[l].ln2,
            Some(DecoderStep::ReadOut) => &self.base.ln_f,
            None => return,
        };
        self.input.clone_from(&self.x);
        layer_norm(&mut self.input, norm, self.base.spec.layer_norm_eps);
    }

    fn join_read_out(&self, parts: &[&[f32]]) -> SplitOutput {
        let n = self.ids.len();
        let losses = (0..n - 1)
            .map(|t| {
                let max = parts.iter().map(|p| p[t] as f64).fold(f64::NEG_INFINITY, f64::max);
                let lse = max + parts.iter().map(|p| (p[t] as f64 - max).exp()).sum::<f64>().ln();
                let owner = self.vocab.iter().position(|r| r.contains(&(self.ids[t + 1] as usize)));
                lse - owner.map_or(f64::NAN, |s| parts[s][n - 1 + t] as f64)
            })
            .collect();
        let next_logits = parts.iter().flat_map(|p| p[2 * (n - 1)..].iter().copied()).collect();
        SplitOutput { next_logits, losses }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::precision::Precision;
    use crate::attention::HeadSet;

    fn spec() -> ModelSpec {
        use crate::model::spec::Activation;
        ModelSpec {
            layers: 2,
            heads: 5,
            d_model: 40,
            ffn: 70,
            vocab: 97,
            positions: 48,
            activation: Activation::GeluTanh,
            layer_norm_eps: 1e-5,
            ..ModelSpec::MINILM_L6_V2
        }
    }

    fn cut(base: &Gpt2, ids: &[u32], count: usize) -> SplitOutput {
        let shards: Vec<Gpt2Shard> = (0..count).map(|s| Gpt2Shard::new(base, s, count)).collect();
        let mut pass = SplitPass::new(base, ids, count);
        while let Some(step) = pass.step() {
            let parts: Vec<Vec<f32>> = shards
                .iter()
                .map(|s| match step {
                    DecoderStep::Layer(step) => s.run(Kernel::Simd, step, pass.input()),
                    DecoderStep::ReadOut => s.read_out(Kernel::Simd, pass.input(), pass.targets()),
                })
                .collect();
            pass.absorb(&parts.iter().map(Vec::as_slice).collect::<Vec<_>>());
        }
        pass.output().expect("done").clone()
    }

    fn close(a: &[f32], b: &[f32]) -> f64 {
        let top = b.iter().fold(0.0f64, |m, &v| m.max((v as f64).abs()));
        a.iter().zip(b).map(|(x, y)| (*x as f64 - *y as f64).abs()).fold(0.0, f64::max) / top
    }

    #[test]
    fn steps_run_through_every_layer_then_the_read_out() {
        for layers in [1, 3, 12] {
            let codes: Vec<u32> = (0..=2 * layers as u32).collect();
            let steps: Vec<DecoderStep> =
                codes.iter().map(|&c| DecoderStep::from_code(c, layers).unwrap()).collect();
            assert_eq!(steps.last(), Some(&DecoderStep::ReadOut));
            assert!(steps.iter().zip(&codes).all(|(s, &c)| s.code(layers) == c));
            assert_eq!(DecoderStep::from_code(2 * layers as u32 + 1, layers), None);
        }
    }

    #[test]
    fn a_pass_cut_across_shards_gives_the_whole_pass_on_a_table_of_cuts_and_lengths() {
        let base = Gpt2::random(spec(), 11);
        let all = HeadSet::all(spec().total_heads());
        for count in [1, 2, 3, 5] {
            for n in [1usize, 2, 31, 33, 48] {
                let ids: Vec<u32> = (0..n).map(|i| ((i * 37 + count) % 97) as u32).collect();
                let whole = base.forward_keeping(
                    Kernel::Simd,
                    &ids,
                    &all,
                    crate::model::decoder::gpt2::Keep::Layer(0),
                );
                let split = cut(&base, &ids, count);
                let err = close(&split.next_logits, &whole.next_logits);
                assert!(err < 1e-5, "{count} shards, {n} tokens: logits off by {err:.1e}");
                assert_eq!(split.losses.len(), whole.losses.len());
                for (a, b) in split.losses.iter().zip(&whole.losses) {
                    assert!(
                        (a - b).abs() < 1e-4 * b.abs().max(1.0),
                        "{count} shards, {n} tokens: loss {a} for {b}"
                    );
                }
                if count == 1 {
                    assert_eq!(split.next_logits, whole.next_logits, "one shard: the same bits");
                }
            }
        }
    }

    #[test]
    fn an_8_bit_pass_cut_across_shards_is_as_close_to_f16_as_the_whole_pass() {
        let f16 = Gpt2::random(spec(), 5);
        let calibration: Vec<Vec<u32>> =
            (0..3).map(|s| (0..20).map(|i| ((i * 13 + s) % 97) as u32).collect()).collect();
        let q8 = f16.at_precision(Kernel::Simd, Precision::Int8, &calibration);
        let ids: Vec<u32> = (0..40).map(|i| (i * 7 % 97) as u32).collect();
        let all = HeadSet::all(spec().total_heads());
        let exact = f16.forward(Kernel::Simd, &ids, &all).next_logits;
        let q8_whole = q8.forward(Kernel::Simd, &ids, &all);
        let q8_cut = cut(&q8, &ids, 2);
        let f16_losses = f16.forward(Kernel::Simd, &ids, &all).losses;
        let worst = |a: &[f64]| a.iter().zip(&f16_losses).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
        let (whole_losses, cut_losses) = (worst(&q8_whole.losses), worst(&q8_cut.losses));
        assert!(
            cut_losses < 2.0 * whole_losses,
            "losses off f16's by {cut_losses:.1e} cut, {whole_losses:.1e} whole"
        );
        let whole = close(&q8_whole.next_logits, &exact);
        let split = close(&q8_cut.next_logits, &exact);
        // Each shard quantizes its own part of W_proj's and W_mlp's inputs: as near f16 as the
        // whole 8-bit pass, not equal to it.
        assert!(whole > 0.0 && split < 3.0 * whole && split < 0.05, "cut {split:.1e}, whole {whole:.1e}");
    }

    #[test]
    #[should_panic(expected = "a part of another length")]
    fn a_part_of_the_wrong_length_is_refused() {
        let base = Gpt2::random(spec(), 1);
        let mut pass = SplitPass::new(&base, &[1, 2, 3], 2);
        let short = vec![0.0f32; 10];
        pass.absorb(&[&short, &short]);
    }
}
