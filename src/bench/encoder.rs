//! The trained model pruned for real: forward time of the full model against structurally
//! pruned ones at several lengths (natively `bench/native/trained.rs`, as wasm in Node through
//! `bench/trained.mjs`), and the pruning curves on the STS pairs with their time.

use std::rc::Rc;

use super::median;
use crate::attention::HeadSet;
use crate::cpu::Kernel;
use crate::jobs::driver::{Next, Plan};
use crate::jobs::encoder::curves::CurveRun;
use crate::jobs::encoder::task::TaskData;
use crate::jobs::work::Piece;
use crate::model::encoder::curves::{Curves, Order, RANDOM_SEEDS};
use crate::model::encoder::pruned::{cost, PrunedBert};
use crate::model::encoder::Encoder;
use crate::model::intervals::RESAMPLES;
use crate::model::spec::ModelSpec;

/// The sets the table prunes: Michel et al.'s 20 % and 40 % and one head per layer, each
/// taking heads in a fixed spread-out order (every 5th head, wrapping), so every layer loses
/// some: the time depends on how many heads each layer keeps, not which.
fn sets(spec: &ModelSpec) -> Vec<(String, HeadSet)> {
    let total = spec.total_heads();
    let spread: Vec<usize> = (0..total).map(|i| i * 5 % total).collect();
    let mut sets: Vec<(String, HeadSet)> = spec
        .michel_marks()
        .iter()
        .map(|&k| (format!("{k}"), HeadSet::with_pruned(total, spread[..k].iter().copied())))
        .collect();
    sets.push((
        format!("{} (one per layer)", spec.one_per_layer_pruned()),
        HeadSet::with_pruned(total, (0..total).filter(|&h| spec.head_in_layer(h) != 0)),
    ));
    sets
}

/// Token ids of a sentence of exactly `n` tokens, `[CLS]` and `[SEP]` included.
fn sentence(model: &Encoder, n: usize) -> Vec<u32> {
    let words =
        "the river bank was steep and she sat on it to watch the water run past the old mill ".repeat(40);
    let mut ids: Vec<u32> = model.tokenizer.encode(&words).iter().map(|t| t.id).collect();
    let sep = *ids.last().expect("[SEP]");
    ids.truncate(n - 1);
    ids.push(sep);
    ids
}

/// Full against pruned forward time at `lengths` tokens, interleaved over `rounds`, with the
/// attention FLOPs and f16 weight bytes of each, as a Markdown table.
pub fn pruned_report(now: &dyn Fn() -> f64, model: &Encoder, lengths: &[usize], rounds: usize) -> String {
    let spec = model.spec();
    let all = HeadSet::all(spec.total_heads());
    let full = PrunedBert::new(&model.bert, &all);
    let mut text = format!(
        "Full against really pruned {}, one sentence, {} kernel, median of {rounds} interleaved rounds\n| tokens | heads pruned | full ms | pruned ms | pruned / full | attention GFLOP | all GFLOP | weights MiB |\n|---:|---|---:|---:|---:|---:|---:|---:|\n",
        model.name,
        Kernel::Simd.describe()
    );
    let time = |m: &PrunedBert, ids: &[u32]| {
        let t0 = now();
        std::hint::black_box(m.embed(Kernel::Simd, ids));
        now() - t0
    };
    for &n in lengths {
        let ids = sentence(model, n);
        for (name, heads) in sets(spec) {
            let cut = PrunedBert::new(&model.bert, &heads);
            let (mut a, mut b, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
            for round in 0..=rounds.max(1) {
                let (ta, tb) = (time(&full, &ids), time(&cut, &ids));
                if round > 0 {
                    a.push(ta);
                    b.push(tb);
                    ratios.push(tb / ta);
                }
            }
            let (c0, c1) = (cost(spec, &all, &[n]), cost(spec, &heads, &[n]));
            let gf = |f: u64| f as f64 / 1e9;
            let mib = |b: u64| b as f64 / 1048576.0;
            text += &format!(
                "| {n} | {name} | {:.2} | {:.2} | {:.2} | {:.3} -> {:.3} | {:.3} -> {:.3} | {:.1} -> {:.1} |\n",
                median(a),
                median(b),
                median(ratios),
                gf(c0.attention_flops),
                gf(c1.attention_flops),
                gf(c0.total_flops),
                gf(c1.total_flops),
                mib(c0.weight_bytes),
                mib(c1.weight_bytes)
            );
        }
    }
    text
}

/// The importance sweep of one sentence at each of `lengths` tokens as one thread runs it
/// ([`Piece::Ablate`] of every head: one unpruned pass, then one pass per head without it, each
/// from the head's own layer), the median of `rounds`, with its FLOPs ([`ablation_flops`]).
pub fn sweep_report(now: &dyn Fn() -> f64, model: &Encoder, lengths: &[usize], rounds: usize) -> String {
    let spec = model.spec();
    let (total, all) = (spec.total_heads(), HeadSet::all(spec.total_heads()));
    let mut text = format!(
        "The importance sweep ({total} heads, one thread), {} kernel, {}, median of {rounds}\n| tokens | sweep ms | GFLOP | GFLOP/s |\n|---:|---:|---:|---:|\n",
        Kernel::Simd.describe(),
        model.bert.precision().label()
    );
    for &n in lengths {
        let ids = sentence(model, n);
        let sweep = Piece::Ablate {
            heads: all.clone(),
            sentences: vec![ids.clone()],
            ablate: (0..total).collect(),
            traces: vec![],
        };
        std::hint::black_box(model.bert.forward(Kernel::Simd, &ids, &all)); // warm-up
        let times: Vec<f64> = (0..rounds.max(1))
            .map(|_| {
                let t0 = now();
                std::hint::black_box(sweep.run_on_encoder(&model.bert, Kernel::Simd));
                now() - t0
            })
            .collect();
        let (ms, gflop) = (median(times), sweep.flops(spec) as f64 / 1e9);
        text += &format!("| {n} | {ms:.0} | {gflop:.0} | {:.1} |\n", gflop / ms * 1e3);
    }
    text
}

/// Where one encoder layer's time goes at `n` tokens (layer 1 of the model, the page's kernel),
/// stage by stage, medians of `rounds` after 300 ms of warm-up rounds, with each stage's GFLOP/s:
/// what the importance sweep's passes spend their time on.
pub fn layer_profile(now: &dyn Fn() -> f64, model: &Encoder, n: usize, rounds: usize) -> String {
    use crate::cpu::{attend, gelu::gelu_in_place, softmax::softmax_rows};
    use crate::model::layers::{layer_norm, linear};
    let spec = model.spec();
    let (d_, ffn, heads, d_k, eps) = (spec.d_model, spec.ffn, spec.heads, spec.d_k(), spec.layer_norm_eps);
    let (layer, k, input) = (&model.bert.layers[0], Kernel::Simd, model.bert.embed(&sentence(model, n)));
    let (mut qkv, mut att, mut outs) = (vec![0.0; n * 3 * d_], vec![0.0; heads * n * n], vec![0.0; n * d_]);
    let (mut branch, mut hidden, mut scores) =
        (vec![0.0; n * d_], vec![0.0; n * ffn], vec![0.0; heads * n * n]);
    let (nf, d, f) = (n as f64, d_ as f64, ffn as f64);
    let names = [
        format!("Q, K, V projections (3 GEMMs n x {d_} x {d_}, bias)"),
        format!("attention: {heads} heads' Q K^T (k = {d_k}), softmax, P V"),
        format!("of which the softmax alone ({heads} n x n)"),
        format!("output projection (n x {d_} x {d_}, bias)"),
        format!("feed-forward in (n x {d_} x {ffn}, bias)"),
        format!("GELU (n x {ffn})"),
        format!("feed-forward out (n x {ffn} x {d_}, bias)"),
        "residuals and the two LayerNorms".to_string(),
    ];
    let flops = [
        6.0 * nf * d * d,
        4.0 * nf * nf * d,
        0.0,
        2.0 * nf * d * d,
        2.0 * nf * d * f,
        0.0,
        2.0 * nf * f * d,
        0.0,
    ];
    let mut stages: Vec<(&str, f64, Vec<f64>)> =
        names.iter().zip(flops).map(|(name, f)| (name.as_str(), f, vec![])).collect();
    let mut round = |stages: &mut Vec<(&str, f64, Vec<f64>)>| {
        let time = |f: &mut dyn FnMut()| {
            let t0 = now();
            f();
            now() - t0
        };
        let finish = |x: &mut [f32], branch: &[f32], norm| {
            x.iter_mut().zip(branch).for_each(|(a, b)| *a += b);
            layer_norm(x, norm, eps);
        };
        let (mut x, mut t) = (input.clone(), [0.0; 8]);
        t[0] = time(&mut || (0..3).for_each(|i| linear(k, &x, n, &layer.qkv[i], &mut qkv[i * d_..], 3 * d_)));
        t[1] = time(&mut || attend(k, &qkv, n, heads, d_k, &mut att, &mut outs));
        scores.copy_from_slice(&att);
        t[2] = time(&mut || softmax_rows(k, &mut scores, n));
        t[3] = time(&mut || linear(k, &outs, n, &layer.out, &mut branch, d_));
        t[7] = time(&mut || finish(&mut x, &branch, &layer.ln1));
        t[4] = time(&mut || linear(k, &x, n, &layer.ffn_in, &mut hidden, ffn));
        t[5] = time(&mut || gelu_in_place(k, &mut hidden));
        t[6] = time(&mut || linear(k, &hidden, n, &layer.ffn_out, &mut branch, d_));
        t[7] += time(&mut || finish(&mut x, &branch, &layer.ln2));
        stages.iter_mut().zip(t).for_each(|(stage, ms)| stage.2.push(ms));
    };
    let (t0, mut warm) = (now(), 0);
    while warm == 0 || now() - t0 < 300.0 {
        round(&mut stages);
        warm += 1;
    }
    stages.iter_mut().for_each(|s| s.2.clear());
    (0..rounds.max(1)).for_each(|_| round(&mut stages));
    let rows: Vec<(&str, f64, f64)> =
        stages.into_iter().map(|(name, flops, times)| (name, flops, median(times))).collect();
    // The softmax is timed again on its own, inside the attention row already.
    let total: f64 = rows.iter().enumerate().filter(|(i, _)| *i != 2).map(|(_, r)| r.2).sum();
    let layer_flops: f64 = rows.iter().map(|r| r.1).sum();
    let mut text = format!(
        "One encoder layer at {n} tokens, {}, {}, median of {rounds}\n| stage | ms | share | GFLOP/s |\n|---|---:|---:|---:|\n",
        k.describe(),
        model.bert.precision().label()
    );
    for (name, flops, ms) in rows {
        let rate = if flops > 0.0 { format!("{:.1}", flops / 1e6 / ms) } else { "-".into() };
        text += &format!("| {name} | {ms:.2} | {:.0} % | {rate} |\n", 100.0 * ms / total);
    }
    text + &format!("| layer | {total:.2} | 100 % | {:.1} |", layer_flops / 1e6 / total)
}

/// The pruning curves on `data`'s pairs (one-shot order: the ablation ranking of the page's
/// first example sentence), computed here piece after piece, with the time to the first complete
/// curve and to the end, as text.
pub fn curves_report(
    now: &dyn Fn() -> f64,
    model: &Encoder,
    data: Rc<TaskData>,
    one_shot: Vec<usize>,
) -> String {
    let (spec, pairs) = (*model.spec(), data.pairs.pairs.len());
    let mut run = CurveRun::new(spec, data, Some(one_shot), Curves::new(spec.total_heads()), None);
    let t0 = now();
    let mut first = None;
    while let Next::Run(pieces) = run.next() {
        pieces.iter().for_each(|w| run.absorb(w.run_on_encoder(&model.bert, Kernel::Simd)));
        run.complete();
        if first.is_none() && run.coarse_complete() {
            first = Some(now() - t0);
        }
    }
    let total = now() - t0;
    let c = run.curves();
    let full = c.spread(Order::Iterative, 0).map(|s| s.quality.text()).unwrap_or_default();
    let [m20, m40] = spec.michel_marks();
    let heads = spec.total_heads();
    let band = c.random_band();
    let cell = |o: Order, k: usize| c.at(o, k).map_or("-".into(), |v| format!("{v:.3}"));
    let random = |k: usize| {
        band.iter().find(|b| b.0 == k).map_or("-".into(), |b| format!("{:.3} [{:.3}, {:.3}]", b.1, b.2, b.3))
    };
    // A change from the full model, paired over the same resamples: "+0.007 [-0.005, +0.021]".
    let change = |o: Order, k: usize| {
        c.spread(o, k)
            .and_then(|s| s.change)
            .map_or("-".into(), |e| format!("{:+.3} [{:+.3}, {:+.3}]", e.value, e.lo, e.hi))
    };
    let seeds = |k: usize| {
        let changes: Vec<_> =
            (0..RANDOM_SEEDS).filter_map(|s| c.spread(Order::Random(s), k).and_then(|s| s.change)).collect();
        let detected = changes.iter().filter(|e| e.excludes_zero()).count();
        match changes.len() {
            0 => "-".to_string(),
            n => format!("{detected} of {n}"),
        }
    };
    let mut text = format!(
        "Pruning curves, {} pairs, {} kernel: first complete curve after {:.0} s, all {} evaluations after {:.0} s\n| heads pruned | iterative | one-shot | random: mean [min, max] | iterative - full (95 % interval) | one-shot - full | random orders whose change is detectable |\n|---:|---:|---:|---|---|---|---|\n",
        pairs,
        Kernel::Simd.describe(),
        first.unwrap_or(f64::NAN) / 1e3,
        run.evaluations().0,
        total / 1e3
    );
    for k in [0, m20, m40, heads / 2, heads * 3 / 4, heads] {
        text += &format!(
            "| {k} | {} | {} | {} | {} | {} | {} |\n",
            cell(Order::Iterative, k),
            cell(Order::OneShot, k),
            random(k),
            change(Order::Iterative, k),
            change(Order::OneShot, k),
            seeds(k)
        );
    }
    text += &format!(
        "| one head per layer ({}) | {} | | | | | |\n",
        spec.one_per_layer_pruned(),
        c.one_per_layer.map_or("-".into(), |v| format!("{v:.3}"))
    );
    text += &format!("Full model: {full} (its 95 % interval, the {pairs} pairs resampled {RESAMPLES} times; changes paired over the same resamples)\n");
    text
}
