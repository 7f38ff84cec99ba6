//! The trained model pruned for real: forward time of the full model against structurally
//! pruned ones at several lengths (natively `benches/trained.rs`, as wasm in Node through
//! `bench/trained.mjs`), and the pruning curves on the STS pairs with their time.

use super::median;
use crate::attention::HeadSet;
use crate::cpu::Kernel;
use crate::model::bert::{HEADS, TOTAL_HEADS};
use crate::model::curves::{michel_marks, CurveRun, Curves, Order};
use crate::model::pruned::{cost, PrunedBert};
use crate::model::task::Pairs;
use crate::model::work::Work;
use crate::model::MiniLm;

/// The sets the table prunes: Michel et al.'s 20 % and 40 % and one head per layer (66), each
/// taking heads in a fixed spread-out order (every 5th head, wrapping), so every layer loses
/// some: the time depends on how many heads each layer keeps, not which.
fn sets() -> Vec<(String, HeadSet)> {
    let spread: Vec<usize> = (0..TOTAL_HEADS).map(|i| i * 5 % TOTAL_HEADS).collect();
    let [m20, m40] = michel_marks();
    let mut sets: Vec<(String, HeadSet)> = [m20, m40]
        .iter()
        .map(|&k| (format!("{k}"), HeadSet::with_pruned(TOTAL_HEADS, spread[..k].iter().copied())))
        .collect();
    sets.push((
        "66 (one per layer)".into(),
        HeadSet::with_pruned(TOTAL_HEADS, (0..TOTAL_HEADS).filter(|h| h % HEADS != 0)),
    ));
    sets
}

/// Token ids of a sentence of exactly `n` tokens, `[CLS]` and `[SEP]` included.
fn sentence(model: &MiniLm, n: usize) -> Vec<u32> {
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
pub fn pruned_report(now: &dyn Fn() -> f64, model: &MiniLm, lengths: &[usize], rounds: usize) -> String {
    let full = PrunedBert::new(&model.bert, &HeadSet::all(TOTAL_HEADS));
    let mut text = format!(
        "Full against really pruned all-MiniLM-L6-v2, one sentence, {} kernel, median of {rounds} interleaved rounds\n| tokens | heads pruned | full ms | pruned ms | pruned / full | attention GFLOP | all GFLOP | weights MiB |\n|---:|---|---:|---:|---:|---:|---:|---:|\n",
        Kernel::Simd.describe()
    );
    let time = |m: &PrunedBert, ids: &[u32]| {
        let t0 = now();
        std::hint::black_box(m.embed(Kernel::Simd, ids));
        now() - t0
    };
    for &n in lengths {
        let ids = sentence(model, n);
        for (name, heads) in sets() {
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
            let (c0, c1) = (cost(&HeadSet::all(TOTAL_HEADS), &[n]), cost(&heads, &[n]));
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

/// FLOPs of the importance sweep of one sentence of `n` tokens as [`Work::Ablate`] runs it.
fn sweep_flops(n: usize) -> u64 {
    crate::model::work::ablation_flops(n, &(0..TOTAL_HEADS).collect::<Vec<_>>())
}

/// The importance sweep of one sentence at each of `lengths` tokens as one thread runs it
/// ([`Work::Ablate`] of every head: one unpruned pass, then one pass per head without it, each
/// from the head's own layer), the median of `rounds`, with its FLOPs ([`sweep_flops`]).
pub fn sweep_report(now: &dyn Fn() -> f64, model: &MiniLm, lengths: &[usize], rounds: usize) -> String {
    let all = HeadSet::all(TOTAL_HEADS);
    let mut text = format!(
        "The importance sweep (72 heads, one thread), {} kernel, median of {rounds}\n| tokens | sweep ms | GFLOP | GFLOP/s |\n|---:|---:|---:|---:|\n",
        Kernel::Simd.describe()
    );
    for &n in lengths {
        let ids = sentence(model, n);
        let sweep = Work::Ablate { heads: all.clone(), ids: ids.clone(), ablate: (0..TOTAL_HEADS).collect() };
        std::hint::black_box(model.bert.forward(Kernel::Simd, &ids, &all)); // warm-up
        let times: Vec<f64> = (0..rounds.max(1))
            .map(|_| {
                let t0 = now();
                std::hint::black_box(sweep.run(&model.bert, Kernel::Simd));
                now() - t0
            })
            .collect();
        let (ms, gflop) = (median(times), sweep_flops(n) as f64 / 1e9);
        text += &format!("| {n} | {ms:.0} | {gflop:.0} | {:.1} |\n", gflop / ms * 1e3);
    }
    text
}

/// Where one encoder layer's time goes at `n` tokens (layer 1 of the model, the page's kernel),
/// stage by stage, medians of `rounds` after 300 ms of warm-up rounds, with each stage's GFLOP/s:
/// what the importance sweep's passes spend their time on.
pub fn layer_profile(now: &dyn Fn() -> f64, model: &MiniLm, n: usize, rounds: usize) -> String {
    use crate::cpu::{attend, gelu::gelu_in_place, softmax::softmax_rows};
    use crate::model::bert::{layer_norm, linear, D_K, D_MODEL as D, FFN};
    let (layer, k, input) = (&model.bert.layers[0], Kernel::Simd, model.bert.embed(&sentence(model, n)));
    let (mut qkv, mut att, mut outs) = (vec![0.0; n * 3 * D], vec![0.0; HEADS * n * n], vec![0.0; n * D]);
    let (mut branch, mut hidden, mut scores) =
        (vec![0.0; n * D], vec![0.0; n * FFN], vec![0.0; HEADS * n * n]);
    let (nf, d, f) = (n as f64, D as f64, FFN as f64);
    let mut stages: Vec<(&str, f64, Vec<f64>)> = vec![
        ("Q, K, V projections (3 GEMMs n x 384 x 384, bias)", 6.0 * nf * d * d, vec![]),
        ("attention: 12 heads' Q K^T (k = 32), softmax, P V", 4.0 * nf * nf * d, vec![]),
        ("of which the softmax alone (12 n x n)", 0.0, vec![]),
        ("output projection (n x 384 x 384, bias)", 2.0 * nf * d * d, vec![]),
        ("feed-forward in (n x 384 x 1536, bias)", 2.0 * nf * d * f, vec![]),
        ("GELU (n x 1536)", 0.0, vec![]),
        ("feed-forward out (n x 1536 x 384, bias)", 2.0 * nf * f * d, vec![]),
        ("residuals and the two LayerNorms", 0.0, vec![]),
    ];
    let mut round = |stages: &mut Vec<(&str, f64, Vec<f64>)>| {
        let time = |f: &mut dyn FnMut()| {
            let t0 = now();
            f();
            now() - t0
        };
        let finish = |x: &mut Vec<f32>, branch: &[f32], norm| {
            x.iter_mut().zip(branch).for_each(|(a, b)| *a += b);
            layer_norm(x, norm);
        };
        let (mut x, mut t) = (input.clone(), [0.0; 8]);
        t[0] = time(&mut || (0..3).for_each(|i| linear(k, &x, n, &layer.qkv[i], &mut qkv[i * D..], 3 * D)));
        t[1] = time(&mut || attend(k, &qkv, n, HEADS, D_K, &mut att, &mut outs));
        scores.copy_from_slice(&att);
        t[2] = time(&mut || softmax_rows(k, &mut scores, n));
        t[3] = time(&mut || linear(k, &outs, n, &layer.out, &mut branch, D));
        t[7] = time(&mut || finish(&mut x, &branch, &layer.ln1));
        t[4] = time(&mut || linear(k, &x, n, &layer.ffn_in, &mut hidden, FFN));
        t[5] = time(&mut || gelu_in_place(k, &mut hidden));
        t[6] = time(&mut || linear(k, &hidden, n, &layer.ffn_out, &mut branch, D));
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
        "One encoder layer at {n} tokens, {}, median of {rounds}\n| stage | ms | share | GFLOP/s |\n|---|---:|---:|---:|\n",
        k.describe()
    );
    for (name, flops, ms) in rows {
        let rate = if flops > 0.0 { format!("{:.1}", flops / 1e6 / ms) } else { "-".into() };
        text += &format!("| {name} | {ms:.2} | {:.0} % | {rate} |\n", 100.0 * ms / total);
    }
    text + &format!("| layer | {total:.2} | 100 % | {:.1} |", layer_flops / 1e6 / total)
}

/// The pruning curves on `pairs` (one-shot order: the ablation ranking of the page's first
/// example sentence), with the time to the first complete curve and to the end, as text.
pub fn curves_report(now: &dyn Fn() -> f64, model: &MiniLm, pairs: &Pairs, one_shot: Vec<usize>) -> String {
    let ids = pairs.ids(&model.tokenizer);
    let mut run = CurveRun::new(&model.bert, pairs, ids, Some(one_shot), Curves::default());
    let t0 = now();
    let mut first = None;
    while run.step(Kernel::Simd) {
        if first.is_none() && run.coarse_complete() {
            first = Some(now() - t0);
        }
    }
    let total = now() - t0;
    let c = run.curves();
    let [m20, m40] = michel_marks();
    let band = c.random_band();
    let cell = |o: Order, k: usize| c.at(o, k).map_or("-".into(), |v| format!("{v:.3}"));
    let random = |k: usize| {
        band.iter().find(|b| b.0 == k).map_or("-".into(), |b| format!("{:.3} [{:.3}, {:.3}]", b.1, b.2, b.3))
    };
    let mut text = format!(
        "Pruning curves, {} pairs, {} kernel: first complete curve after {:.0} s, all {} evaluations after {:.0} s\n| heads pruned | iterative | one-shot | random: mean [min, max] |\n|---:|---:|---:|---|\n",
        pairs.pairs.len(),
        Kernel::Simd.describe(),
        first.unwrap_or(f64::NAN) / 1e3,
        run.progress().0,
        total / 1e3
    );
    for k in [0, m20, m40, 36, 54, TOTAL_HEADS] {
        text += &format!(
            "| {k} | {} | {} | {} |\n",
            cell(Order::Iterative, k),
            cell(Order::OneShot, k),
            random(k)
        );
    }
    text += &format!(
        "| one head per layer (66) | {} | | |\n",
        c.one_per_layer.map_or("-".into(), |v| format!("{v:.3}"))
    );
    text
}
