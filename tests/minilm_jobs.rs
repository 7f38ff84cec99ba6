//! The page's jobs on the trained model: the importance sweeps, the meaning check, the task's
//! importance and the pruning curves, as the job layer runs them natively (the CPU kernel, on
//! the page's thread or on a fake pool of workers that takes every piece through the wire).
//! Needs the model files and the sentence pairs.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::rc::Rc;

use common::minilm::*;
use headlab::attention::importance::Ranking;
use headlab::attention::HeadSet;
use headlab::cpu::Kernel;
use headlab::jobs::driver::{Job, Next, Plan, Planned};
use headlab::jobs::encoder::curves::{CurveCache, CurveRun, Store};
use headlab::jobs::encoder::sweep::{DriftSweep, MarginSweep};
use headlab::jobs::encoder::task::{TaskData, TaskImportance};
use headlab::jobs::engine::Engine;
use headlab::jobs::pace::Pace;
use headlab::model::encoder::check::{meaning_check, Verdict};
use headlab::model::encoder::contrast::Contrast;
use headlab::model::encoder::curves::{Curves, Order, RANDOM_SEEDS};
use headlab::model::encoder::runner::embedding_drift;
use headlab::model::encoder::Encoder;

#[test]
fn importance_is_each_heads_own_drift_on_the_pages_thread_and_on_workers_alike() {
    let model = fp32_model();
    let ids = ids(&model.tokenizer, "He sat on the bank of the river and watched the water.");
    let total = SPEC.total_heads();
    // On the page's thread, one head a step, from the page's own unpruned pass.
    let here = engine(model.clone(), 1);
    let full = pollster::block_on(here.pass(ids.clone(), &HeadSet::all(total), None));
    let ranking = run(&here, Planned::new(DriftSweep::new(&here, ids.clone())));
    // On four workers: four pieces through the wire, each with its own unpruned pass.
    let workers = engine(model.clone(), 4);
    assert_eq!(
        run(&workers, Planned::new(DriftSweep::new(&workers, ids.clone()))),
        ranking,
        "workers vs here"
    );
    // Each value is the drift of a pass from scratch with that head alone pruned.
    for h in [0, 13, 40, 71] {
        let alone = model.bert.forward(Kernel::Simd, &ids, &HeadSet::with_pruned(total, [h]));
        let direct = embedding_drift(&full.out.embedding, &alone.embedding);
        assert!(
            (ranking.per_head[h] - direct).abs() < 1e-12,
            "head {h}: {} vs {direct}",
            ranking.per_head[h]
        );
    }
    // Least important first, every head once; a few heads matter far more than the median one.
    let values: Vec<f64> = ranking.ranked.iter().map(|&h| ranking.per_head[h]).collect();
    assert!(values.windows(2).all(|w| w[0] <= w[1]), "{values:?}");
    let median = ranking.median().unwrap();
    println!("importance: most {:.4}, median {median:.5}, least {:.6}", ranking.max(), values[0]);
    assert!(ranking.max() > 10.0 * median, "most {} vs median {median}", ranking.max());
    // Half the heads, least important first, leave the embedding close (README: cosine 0.89).
    let half = pollster::block_on(Contrast::measure(here.runner(), &ids, &full.out, &ranking));
    assert_eq!(half.pruned, total / 2);
    assert!(half.cosine > 0.8 && half.cosine < 0.99, "cosine with half pruned: {}", half.cosine);
}

#[test]
fn the_meaning_check_flips_when_layer_1_is_pruned() {
    let (bert, tok) = (checkpoint(), tokenizer());
    let full = pollster::block_on(meaning_check(&bert, &tok, &HeadSet::all(SPEC.total_heads())));
    assert_eq!(full.closer, 1, "the full model reads \"bank\" as money: {:?}", full.cosines);
    let pruned = pollster::block_on(meaning_check(&bert, &tok, &SPEC.layer_pruned(0)));
    println!("check: full {:?}, layer 1 pruned {:?}", full.cosines, pruned.cosines);
    assert_eq!(pruned.closer, 0, "without layer 1 the shared word wins: {:?}", pruned.cosines);
    // By far more than the f16 weights' error: the page says "flipped", not "too close to call".
    assert_eq!(pruned.verdict_from(&full), Verdict::Flips, "{:?}", pruned.cosines);
    assert_eq!(full.verdict_from(&full), Verdict::Holds, "{:?}", full.cosines);
    // Layer 6's heads alone do not flip it.
    let late = pollster::block_on(meaning_check(&bert, &tok, &SPEC.layer_pruned(5)));
    assert_eq!(late.closer, full.closer, "{:?}", late.cosines);
    assert_eq!(late.verdict_from(&full), Verdict::Holds, "{:?}", late.cosines);
}

#[test]
fn the_margin_sweep_is_each_heads_own_meaning_check_wherever_it_runs() {
    let model = fp32_model();
    let (here, workers) = (engine(model.clone(), 1), engine(model.clone(), 3));
    let margins = run(&here, Planned::new(MarginSweep::new(&here)));
    assert_eq!(run(&workers, Planned::new(MarginSweep::new(&workers))), margins, "workers vs here");
    let full =
        pollster::block_on(meaning_check(&model.bert, &model.tokenizer, &HeadSet::all(SPEC.total_heads())));
    assert_eq!(margins.full, full);
    for h in [0, 3, 40, 71] {
        let direct = pollster::block_on(meaning_check(
            &model.bert,
            &model.tokenizer,
            &HeadSet::with_pruned(SPEC.total_heads(), [h]),
        ));
        let m = direct.margin_toward(full.closer);
        assert!((margins.margins[h] - m).abs() < 1e-9, "head {h}: {} vs {m}", margins.margins[h]);
    }
}

/// The first `n` of the page's pairs, tokenized.
fn task_data(n: usize) -> Rc<TaskData> {
    Rc::new(TaskData::new(sts_pairs().first(n), &tokenizer()))
}

#[test]
fn task_importance_in_pieces_equals_the_gradient_importance_in_place() {
    use headlab::model::encoder::gradient::head_importance;
    let (model, data) = (fp32_model(), task_data(5));
    let workers = engine(model.clone(), 2);
    let subset = data.subset();
    assert_eq!(subset.len(), 5, "5 pairs: 2 pieces of at most 4");
    for heads in [HeadSet::all(SPEC.total_heads()), HeadSet::with_pruned(SPEC.total_heads(), [0, 5, 40, 71])]
    {
        let pieces = run(&workers, Planned::new(TaskImportance::new(&data, heads.clone())));
        let in_place = head_importance(&model.bert, Kernel::Simd, &subset, &heads);
        for (h, (a, b)) in pieces.per_head.iter().zip(&in_place).enumerate() {
            assert!((a - b).abs() <= 1e-12 * b.abs().max(1e-9), "head {h}: {a} vs {b}");
        }
        assert!(heads.pruned().all(|h| pieces.per_head[h] == 0.0), "pruned heads have no importance");
        assert_eq!(pieces.per_head.iter().filter(|&&v| v > 0.0).count(), heads.active_count());
    }
}

/// A store in memory, as the browser's is.
#[derive(Default)]
struct Memory(std::cell::RefCell<std::collections::HashMap<String, String>>);

impl Store for Memory {
    fn load(&self, key: &str) -> Option<String> {
        self.0.borrow().get(key).cloned()
    }

    fn save(&self, key: &str, value: &str) {
        self.0.borrow_mut().insert(key.into(), value.into());
    }
}

#[test]
fn pruning_curves_run_coarse_first_and_never_redo_what_is_known() {
    let (bert, data) = (checkpoint(), task_data(24));
    let total = SPEC.total_heads();
    let one_shot: Vec<usize> = (0..total).rev().collect();
    let store = Rc::new(Memory::default());
    let cache = || CurveCache::new(store.clone(), "test", "pairs", total);
    let mut run =
        CurveRun::new(SPEC, data.clone(), Some(one_shot.clone()), Curves::new(total), Some(cache()));
    // The work left is counted before anything runs; each job's pieces count their own FLOPs.
    let predicted = run.work_left();
    assert!(predicted.first_curve > 0 && predicted.all > predicted.first_curve);
    let (mut steps, mut done_flops) = (0, 0u64);
    while !run.coarse_complete() {
        let Next::Run(pieces) = run.next() else { panic!("finished before the first complete curve") };
        done_flops += pieces.iter().map(|w| w.flops(&SPEC)).sum::<u64>();
        pieces.iter().for_each(|w| run.absorb(w.run_on_encoder(&bert, Kernel::Simd)));
        run.complete();
        steps += 1;
        // What was done and what is left add up to the prediction (the iterative order's
        // importance measurements included, whichever heads they turned out to be).
        assert_eq!(done_flops + run.work_left().first_curve, predicted.first_curve, "after {steps} jobs");
    }
    assert_eq!(run.work_left().first_curve, 0);
    let mut pace = Pace::default();
    pace.record(done_flops, 1000.0);
    assert!(run.time_left(&pace).unwrap().starts_with("About "));
    let c = run.curves().clone();
    println!("first complete curve after {steps} steps, {:?} evaluations", run.evaluations());
    // Both ends are shared by every order; the random band holds the other orders there.
    let (full, none) = (c.at(Order::Iterative, 0).unwrap(), c.at(Order::Iterative, total).unwrap());
    for o in [Order::OneShot, Order::Random(RANDOM_SEEDS - 1)] {
        assert_eq!((c.at(o, 0), c.at(o, total)), (Some(full), Some(none)));
    }
    let band = c.random_band();
    assert_eq!(band.iter().map(|b| b.0).collect::<Vec<_>>(), vec![0, 14, 18, 29, 36, 54, 72]);
    assert!(c.one_per_layer.is_some() && c.iterative_order.len() >= 54);
    assert!(band.iter().all(|&(_, mean, lo, hi)| lo <= mean && mean <= hi));
    // Full quality is the one-shot pass's own: the same as a plain evaluation.
    let plain = data.pairs.quality(
        &headlab::model::encoder::pruned::PrunedBert::new(&bert, &HeadSet::all(total))
            .embed_batch(Kernel::Simd, &data.ids),
    );
    assert_eq!(full, plain);
    // Every new point was saved; a run from what is saved starts where this one stopped.
    let known = cache().saved(Some(&one_shot));
    assert_eq!(known, c);
    let again = CurveRun::new(SPEC, data, Some(one_shot.clone()), known, None);
    let (_, planned) = again.evaluations();
    assert!(planned < run.evaluations().1, "{planned} vs {:?}", run.evaluations());
    assert!(again.coarse_complete());
    // Another sentence's one-shot order is saved apart: the other orders stay.
    let other: Vec<usize> = (0..total).collect();
    let kept = cache().saved(Some(&other));
    assert_eq!(
        (kept.at(Order::OneShot, 36), kept.at(Order::Iterative, 36)),
        (None, c.at(Order::Iterative, 36))
    );
    assert_eq!(SPEC.michel_marks(), [14, 29]);
}

/// Steps `job` on `engine` until its plan has made `n` evaluations.
fn until_evaluations(engine: &Engine<Encoder>, job: &mut Planned<CurveRun>, n: usize) {
    while job.plan().evaluations().0 < n {
        assert!(pollster::block_on(job.step(engine)).is_none(), "finished early");
    }
}

#[test]
fn curves_on_the_workers_equal_curves_on_the_pages_thread() {
    let (model, data) = (fp32_model(), task_data(60));
    let total = SPEC.total_heads();
    // 120 sentences: three pieces an evaluation; importance in four pieces of pairs.
    let (here, workers) = (engine(model.clone(), 1), engine(model, 3));
    let start = || Planned::new(CurveRun::new(SPEC, data.clone(), None, Curves::new(total), None));
    let (mut a, mut b) = (start(), start());
    for n in 1..=6 {
        until_evaluations(&here, &mut a, n);
        until_evaluations(&workers, &mut b, n);
        assert_eq!(a.plan().curves(), b.plan().curves(), "after {n} evaluations");
    }
    assert!(a.plan().curves().iterative_order.len() >= 6, "importance was measured in pieces too");
    // The workers' pace is recorded where they ran; the estimate follows it.
    let place = workers.workers().place();
    assert!(workers.workers().pace(place).gflops().is_some());
    assert!(Job::progress(&b, &workers).left.is_some_and(|(flops, p)| flops > 0 && p == place));
}

#[test]
fn a_ranking_by_any_measure_orders_the_curves_one_shot_points() {
    // The one-shot order is the chosen measure's ranking: least important first.
    let ranking = Ranking::new((0..SPEC.total_heads()).map(|h| ((h * 37) % 72) as f64).collect());
    let run = CurveRun::new(
        SPEC,
        task_data(4),
        Some(ranking.ranked.clone()),
        Curves::new(SPEC.total_heads()),
        None,
    );
    assert!(!run.coarse_complete() && run.work_left().all > 0);
}

#[test]
fn patching_is_the_same_on_the_pages_thread_and_on_workers_and_is_each_heads_own_run() {
    use headlab::jobs::encoder::patching::PatchSweep;
    use headlab::model::encoder::bert::Patch;
    use headlab::model::encoder::patching::{PatchMetric, CLEAN, CORRUPTED};
    let model = fp32_model();
    let (clean, corrupted) = (ids(&model.tokenizer, CLEAN), ids(&model.tokenizer, CORRUPTED));
    let here = engine(model.clone(), 1);
    let sweep =
        |e: &Engine<Encoder>| run(e, Planned::new(PatchSweep::new(e, clean.clone(), corrupted.clone())));
    let patching = sweep(&here);
    // Four workers: four pieces (and the candidates') through the wire, the same bits.
    assert_eq!(sweep(&engine(model.clone(), 4)), patching, "workers vs here");
    let total = SPEC.total_heads();
    let all = HeadSet::all(total);
    let clean_run = model.bert.forward(Kernel::Simd, &clean, &all);
    for h in [0, 41, 71] {
        let alone = Patch { heads: &[h], from: &clean_run };
        let direct = model.bert.forward_patched(Kernel::Simd, &corrupted, &all, None, Some(alone));
        assert_eq!(patching.patched[h], direct.embedding, "head {h}");
    }
    // Either metric: the corrupted run reads "bank" as a river's, the clean one as money's.
    let margin = patching.effects(PatchMetric::Margin);
    assert!(margin.clean > 0.0 && margin.corrupted < -0.2 && margin.measurable(), "{margin:?}");
    let similarity = patching.effects(PatchMetric::Similarity);
    assert!((similarity.clean - 1.0).abs() < 1e-6 && similarity.measurable());
    println!("{}", margin.summary(&SPEC));
}

#[test]
fn the_atlas_is_the_same_on_workers_and_puts_alike_heads_together() {
    use headlab::jobs::encoder::task::{HeadAtlas, HeadRoles};
    use headlab::model::encoder::roles::Role;
    let model = fp32_model();
    let data = Rc::new(TaskData::new(sts_pairs(), &model.tokenizer));
    let here = engine(model.clone(), 1);
    let atlas = run(&here, Planned::new(HeadAtlas::new(&here, &data)));
    // Eight pieces of eight sentences through the wire on four workers: the same bits.
    let workers = engine(model.clone(), 4);
    assert_eq!(run(&workers, Planned::new(HeadAtlas::new(&workers, &data))), atlas, "workers vs here");
    let (d, total) = (&atlas.distances, SPEC.total_heads());
    for a in 0..total {
        assert_eq!(d.get(a, a), 0.0);
        for b in 0..total {
            assert_eq!(d.get(a, b), d.get(b, a));
        }
    }
    // Heads of one specialised role attend alike: closer to each other than to the other heads.
    let roles = run(&here, Planned::new(HeadRoles::new(&here, &data)));
    let mean = |pairs: Vec<(usize, usize)>| {
        pairs.iter().map(|&(a, b)| d.get(a, b)).sum::<f64>() / pairs.len() as f64
    };
    let mut checked = 0;
    for role in Role::ALL.into_iter().filter(|&r| r != Role::None) {
        let with: Vec<usize> = (0..total).filter(|&h| roles[h] == role).collect();
        if with.len() < 2 {
            continue;
        }
        checked += 1;
        let within = mean(
            with.iter().flat_map(|&a| with.iter().filter(move |&&b| b != a).map(move |&b| (a, b))).collect(),
        );
        let across = mean(
            with.iter()
                .flat_map(|&a| (0..total).filter(|b| !with.contains(b)).map(move |b| (a, b)))
                .collect(),
        );
        println!(
            "{} heads ({}): mean divergence {within:.3} among them, {across:.3} to the others",
            role.name(),
            with.len()
        );
        assert!(within < 0.6 * across, "{role:?}: {within} vs {across}");
    }
    // MiniLM has broad and to-[CLS] heads by the dozen.
    assert!(checked >= 2, "{checked} roles of two heads or more");
    let clusters = atlas.tree.clusters(6);
    println!("{:?}", headlab::model::encoder::filter::cluster_lines(&clusters, Some(&roles), &SPEC));
}
