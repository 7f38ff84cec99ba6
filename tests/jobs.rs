//! The whole job layer on a model made here: two layers of four heads of five, random weights,
//! a vocabulary of a few dozen words and thirty sentence pairs. Every job (the drift and margin
//! sweeps, a set's quality, the task's importance, the pruning curves, the heads' roles, the
//! pruned-forward timing) runs through the one driver on the page's thread and on a fake pool of
//! workers, and gives what the model computes directly; the driver cancels, reports progress and
//! falls back from failed workers. No checkpoint needed: the model's shape is data.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use common::minilm::{engine, run};
use headlab::attention::precision::Precision;
use headlab::attention::{cosine, HeadSet};
use headlab::backend::precision_speed::PrecisionTiming;
use headlab::backend::Session;
use headlab::cpu::Kernel;
use headlab::jobs::driver::{drive, Planned, Status};
use headlab::jobs::encoder::curves::CurveRun;
use headlab::jobs::encoder::levers::{lever_text, precision_cost, precision_quality};
use headlab::jobs::encoder::sweep::{DriftSweep, MarginSweep};
use headlab::jobs::encoder::task::{
    HeadRoles, SetQuality, SetScore, TaskData, TaskImportance, ROLE_SENTENCES,
};
use headlab::jobs::encoder::timing::{TimePrecision, TimePruned, ROUNDS};
use headlab::jobs::engine::{Engine, Where, Workers, PIECES_PER_WORKER};
use headlab::jobs::native::{FakePool, NativeHost};
use headlab::jobs::ticket::{Slot, Ticket};
use headlab::model::encoder::bert::Bert;
use headlab::model::encoder::check::{meaning_check, CANDIDATES};
use headlab::model::encoder::curves::{Curves, Order, RANDOM_SEEDS};
use headlab::model::encoder::gradient::head_importance;
use headlab::model::encoder::pruned::PrunedBert;
use headlab::model::encoder::roles::{is_punctuation, RoleCounter};
use headlab::model::encoder::runner::embedding_drift;
use headlab::model::encoder::task::Pairs;
use headlab::model::encoder::Encoder;
use headlab::model::spec::ModelSpec;
use headlab::model::tokenize::wordpiece::WordPiece;

/// Two layers of four heads of five (odd widths), a feed-forward layer of 36.
const SPEC: ModelSpec = ModelSpec {
    layers: 2,
    heads: 4,
    d_model: 20,
    ffn: 36,
    vocab: 0, // the vocabulary's own size, set below
    positions: 40,
    ..ModelSpec::MINILM_L6_V2
};

const WORDS: &str = "a the man woman dog cat plays sings runs sleeps on in by river bank loan guitar song \
                     park house red small old . , i deposited my paycheck at we sat grassy financial \
                     institution approved";

/// The model: random weights of `SPEC`'s shape over a vocabulary of `WORDS`.
fn model() -> Rc<Encoder> {
    let mut vocab: Vec<&str> = vec!["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
    vocab.extend(WORDS.split_whitespace());
    let spec = ModelSpec { vocab: vocab.len(), ..SPEC };
    let tokenizer = WordPiece::from_vocab(&vocab.join("\n"), spec.positions).unwrap();
    Rc::new(Encoder {
        name: "small".into(),
        id: "small".into(),
        architecture: headlab::model::load::config::Architecture::Bert,
        bert: Bert::random(spec, 7),
        tokenizer,
    })
}

/// Thirty pairs of made-up sentences with scores, in the page's file format.
fn data(model: &Encoder) -> Rc<TaskData> {
    let subjects = ["the man", "a woman", "the dog", "a cat", "the old man", "a small dog"];
    let verbs = ["plays a song", "sings", "runs in the park", "sleeps by the river", "plays a guitar"];
    let mut text = "score\tgenre\tsource\tsentence1\tsentence2\tattribution1\tattribution2\n".to_string();
    for i in 0..30 {
        let a = format!("{} {} .", subjects[i % 6], verbs[i % 5]);
        let b = format!("{} {} .", subjects[(i * 7 + 1) % 6], verbs[(i * 3) % 5]);
        text += &format!("{:.2}\tmain-captions\tmade\t{a}\t{b}\t\t\n", (i * 13 % 50) as f64 / 10.0);
    }
    Rc::new(TaskData::new(Pairs::parse(&text).unwrap(), &model.tokenizer))
}

fn ids(model: &Encoder, text: &str) -> Vec<u32> {
    model.tokenizer.encode(text).iter().map(|t| t.id).collect()
}

/// Runs `job` to its end, with every status it published.
fn run_watched<J: headlab::jobs::driver::Job<Encoder>>(
    engine: &Engine<Encoder>,
    job: J,
) -> (J::Output, Vec<Status>) {
    let seen = RefCell::new(Vec::new());
    let out = pollster::block_on(drive(engine, job, &Ticket::always(), |_, s| seen.borrow_mut().push(s)));
    (out.expect("finished"), seen.into_inner())
}

#[test]
fn the_drift_sweep_is_each_heads_own_drift_wherever_it_runs() {
    let model = model();
    let total = model.spec().total_heads();
    let sentence = ids(&model, "the man sat by the river bank and watched the dog .");
    let (here, workers) = (engine(model.clone(), 1), engine(model.clone(), 3));
    // On the page's thread one head a step, each step's status published before it.
    let (ranking, seen) = run_watched(&here, Planned::new(DriftSweep::new(&here, sentence.clone())));
    assert_eq!(seen.len(), total + 1, "a status before each head's step and before the end");
    assert!(seen.windows(2).all(|w| w[0].done <= w[1].done && w[1].total == total), "{seen:?}");
    assert_eq!(seen.last().unwrap().done, total);
    // Three workers: three pieces through the wire, in one step; the same bits.
    assert_eq!(run(&workers, Planned::new(DriftSweep::new(&workers, sentence.clone()))), ranking);
    assert_eq!(workers.deal_ablation(std::slice::from_ref(&sentence), &HeadSet::all(total)), (3, vec![]));
    // Once the page has run the sentence's unpruned pass, the workers are handed it and the heads
    // are dealt finer (a worker that finishes first takes the next piece): the same bits again.
    let pass = pollster::block_on(workers.pass(sentence.clone(), &HeadSet::all(total), None));
    let (count, traces) = workers.deal_ablation(std::slice::from_ref(&sentence), &HeadSet::all(total));
    assert_eq!((count, traces.len()), (3 * PIECES_PER_WORKER, 1));
    assert!(std::sync::Arc::ptr_eq(&traces[0], &pass.out));
    assert_eq!(run(&workers, Planned::new(DriftSweep::new(&workers, sentence.clone()))), ranking);
    let full = model.bert.forward(Kernel::Simd, &sentence, &HeadSet::all(total));
    for h in 0..total {
        let alone = model.bert.forward(Kernel::Simd, &sentence, &HeadSet::with_pruned(total, [h]));
        let direct = embedding_drift(&full.embedding, &alone.embedding);
        assert!(
            (ranking.per_head[h] - direct).abs() < 1e-12,
            "head {h}: {} vs {direct}",
            ranking.per_head[h]
        );
    }
    assert!(ranking.max() > 0.0);
}

#[test]
fn the_margin_sweep_is_each_heads_own_meaning_check() {
    let model = model();
    let total = model.spec().total_heads();
    let (here, workers) = (engine(model.clone(), 1), engine(model.clone(), 2));
    let margins = run(&here, Planned::new(MarginSweep::new(&here)));
    assert_eq!(run(&workers, Planned::new(MarginSweep::new(&workers))), margins);
    let check = |heads: &HeadSet| pollster::block_on(meaning_check(&model.bert, &model.tokenizer, heads));
    let full = check(&HeadSet::all(total));
    assert_eq!(margins.full, full);
    for h in 0..total {
        let m = check(&HeadSet::with_pruned(total, [h])).margin_toward(full.closer);
        assert!((margins.margins[h] - m).abs() < 1e-9, "head {h}: {} vs {m}", margins.margins[h]);
    }
    assert!(margins.summary(model.spec()).contains("layer "), "{}", margins.summary(model.spec()));
    assert!(CANDIDATES.iter().all(|c| model.tokenizer.encode(c).len() > 3), "the check's words are known");
}

#[test]
fn a_sets_quality_and_the_tasks_importance_are_the_models_own() {
    let model = model();
    let (data, total) = (data(&model), model.spec().total_heads());
    let workers = engine(model.clone(), 2);
    for heads in
        [HeadSet::all(total), HeadSet::with_pruned(total, [1, 6]), HeadSet::with_pruned(total, 0..total)]
    {
        let score = run(&workers, Planned::new(SetQuality::new(data.clone(), heads.clone())));
        let embeddings = PrunedBert::new(&model.bert, &heads).embed_batch(Kernel::Simd, &data.ids);
        assert_eq!((&score.heads, score.quality), (&heads, data.pairs.quality(&embeddings)));
        assert_eq!(&score.cosines[..], &data.pairs.cosines(&embeddings)[..]);
        let importance = run(&workers, Planned::new(TaskImportance::new(&data, heads.clone())));
        let in_place = head_importance(&model.bert, Kernel::Simd, &data.subset(), &heads);
        for (h, (a, b)) in importance.per_head.iter().zip(&in_place).enumerate() {
            assert!((a - b).abs() <= 1e-12 * b.abs().max(1e-9), "head {h}: {a} vs {b}");
        }
    }
}

#[test]
fn a_sets_quality_at_the_other_precision_is_that_models_own_on_workers_and_here() {
    let model = model();
    let (data, total) = (data(&model), model.spec().total_heads());
    let int8 = model.at_precision(Precision::Int8).unwrap();
    let heads = HeadSet::with_pruned(total, [2]);
    let want = PrunedBert::new(&int8.bert, &heads).embed_batch(Kernel::Simd, &data.ids);
    let f16 = PrunedBert::new(&model.bert, &heads).embed_batch(Kernel::Simd, &data.ids);
    assert_ne!(want, f16, "the 8-bit model is another model");
    for threads in [1, 2] {
        let engine = engine(model.clone(), threads);
        let score =
            run(&engine, Planned::new(SetQuality::new(data.clone(), heads.clone()).at(Precision::Int8)));
        assert_eq!(score.quality, data.pairs.quality(&want), "{threads} threads");
        // The loaded model's precision, asked by name, is the loaded model.
        let same =
            run(&engine, Planned::new(SetQuality::new(data.clone(), heads.clone()).at(Precision::F16)));
        assert_eq!(same.quality, data.pairs.quality(&f16), "{threads} threads");
    }
}

#[test]
fn what_8_bits_buy_is_both_models_own_quality_and_their_timed_passes() {
    let model = model();
    let (data, total) = (data(&model), model.spec().total_heads());
    let all = HeadSet::all(total);
    let int8 = model.at_precision(Precision::Int8).unwrap();
    let quality =
        |bert: &Bert| data.pairs.quality(&PrunedBert::new(bert, &all).embed_batch(Kernel::Simd, &data.ids));
    let engine = engine(model.clone(), 2);
    let ticket = Ticket::always();
    let measured =
        pollster::block_on(precision_quality(&engine, data.clone(), None, &ticket)).unwrap().unwrap();
    assert_eq!((measured.f16.quality, measured.int8.quality), (quality(&model.bert), quality(&int8.bert)));
    assert!(measured.change.is_some());
    // The loaded model's score, when the page has it, is not measured again: a known one is used.
    let known = SetScore { quality: 0.5, ..measured.f16.clone() };
    let reused =
        pollster::block_on(precision_quality(&engine, data.clone(), Some(known), &ticket)).unwrap().unwrap();
    assert_eq!((reused.f16.quality, reused.int8.quality), (0.5, measured.int8.quality));
    let sentence = ids(&model, "the dog runs in the park .");
    let cost = pollster::block_on(precision_cost(&engine, sentence, &ticket)).unwrap().unwrap();
    assert!(cost.f16_ms > 0.0 && cost.int8_ms > 0.0, "{cost:?}");
    assert_eq!((cost.f16_bytes, cost.int8_bytes), (model.bert.stored_bytes(), int8.bert.stored_bytes()));
    let line = lever_text(Some(&Ok(measured)), Some(&cost));
    assert!(line.starts_with("8-bit weights instead of f16") && line.contains("forward 1.00 -> "), "{line}");
}

#[test]
fn the_f16_and_8_bit_passes_are_timed_sample_by_sample_with_their_bytes() {
    let model = model();
    let here = engine(model.clone(), 1);
    let int8 = Rc::new(model.at_precision(Precision::Int8).unwrap());
    let sentence = ids(&model, "the dog runs in the park .");
    let timing = PrecisionTiming::new(model.clone(), int8.clone(), sentence, ROUNDS);
    let (cost, seen) = run_watched(&here, TimePrecision::new(timing));
    assert!(cost.f16_ms > 0.0 && cost.int8_ms > 0.0 && cost.ratio().is_finite(), "{cost:?}");
    assert_eq!((cost.f16_bytes, cost.int8_bytes), (model.bert.stored_bytes(), int8.bert.stored_bytes()));
    assert!(seen.len() >= 2 * (ROUNDS + 1), "{} steps", seen.len());
    assert_eq!(seen.last().unwrap().total, 2 * (ROUNDS + 1));
}

#[test]
fn a_curve_run_told_the_full_models_quality_does_not_measure_it_again() {
    let model = model();
    let (data, spec) = (data(&model), *model.spec());
    let total = spec.total_heads();
    let here = engine(model.clone(), 1);
    let full = run(&here, Planned::new(SetQuality::new(data.clone(), HeadSet::all(total))));
    let fresh = || CurveRun::new(spec, data.clone(), None, Curves::new(total), None);
    let (plain, told) = (fresh(), fresh().knowing_full(&full));
    assert_eq!(told.evaluations().1 + 1, plain.evaluations().1, "one evaluation fewer planned");
    assert_eq!(told.curves().at(Order::Iterative, 0), Some(full.quality));
    // A score of another set changes nothing.
    let other = SetScore { heads: HeadSet::with_pruned(total, [1]), ..full.clone() };
    assert_eq!(fresh().knowing_full(&other).evaluations(), plain.evaluations());
    // The finished curves are the same: the point told is the point it would have measured.
    let (a, b) = (run(&here, Planned::new(plain)), run(&here, Planned::new(told)));
    assert_eq!(a, b);
}

#[test]
fn a_curve_run_takes_a_new_one_shot_order_without_restarting() {
    let model = model();
    let (data, spec) = (data(&model), *model.spec());
    let total = spec.total_heads();
    let here = engine(model.clone(), 2);
    let (a, b): (Vec<usize>, Vec<usize>) = (vec![5, 0, 7, 2, 3, 6, 1, 4], vec![1, 2, 3, 4, 5, 6, 7, 0]);
    let started =
        |order: Option<Vec<usize>>| CurveRun::new(spec, data.clone(), order, Curves::new(total), None);
    let reference = |order: &Vec<usize>| run(&here, Planned::new(started(Some(order.clone()))));
    // No order at first, `a` after two evaluations, `b` after five: one run to the end.
    let order: Rc<RefCell<Option<Vec<usize>>>> = Rc::default();
    let source = order.clone();
    let job = Planned::new(started(None).following(move || source.borrow().clone()));
    let switch = |done: usize| match done {
        2 => *order.borrow_mut() = Some(a.clone()),
        5 => *order.borrow_mut() = Some(b.clone()),
        _ => {}
    };
    let mut steps = 0;
    let curves = pollster::block_on(drive(&here, job, &Ticket::always(), |_, status| {
        switch(status.done);
        steps += 1;
    }))
    .unwrap();
    assert!(steps > 5);
    // Every point of the last order, none of the one it replaced; the other orders as ever.
    let want = reference(&b);
    for k in 0..=total {
        assert_eq!(curves.at(Order::OneShot, k), want.at(Order::OneShot, k), "one-shot at {k}");
        assert_eq!(curves.at(Order::Iterative, k), want.at(Order::Iterative, k), "iterative at {k}");
    }
    assert_ne!(reference(&a).at(Order::OneShot, 1), want.at(Order::OneShot, 1), "the orders differ");
}

#[test]
fn the_curves_of_a_small_model_have_its_own_marks_and_every_point_is_the_models_quality() {
    let model = model();
    let (data, spec) = (data(&model), *model.spec());
    let total = spec.total_heads();
    let one_shot: Vec<usize> = vec![5, 0, 7, 2, 3, 6, 1, 4];
    let curves = |engine: &Engine<Encoder>| {
        let run = CurveRun::new(spec, data.clone(), Some(one_shot.clone()), Curves::new(total), None);
        run_watched(engine, Planned::new(run))
    };
    let (here, workers) = (engine(model.clone(), 1), engine(model.clone(), 4));
    let ((c, seen), (on_workers, _)) = (curves(&here), curves(&workers));
    assert_eq!(c, on_workers, "the same curves on the page's thread and on workers");
    let last = seen.last().unwrap();
    assert!(last.done == last.total && last.total > 0, "{last:?}");
    // Two layers of four: marks at 2 and 3 heads (20 and 40 % of 8), one head per layer at 6.
    assert_eq!((spec.michel_marks(), spec.one_per_layer_pruned()), ([2, 3], 6));
    let quality = |heads: &HeadSet| {
        data.pairs.quality(&PrunedBert::new(&model.bert, heads).embed_batch(Kernel::Simd, &data.ids))
    };
    for k in 0..=total {
        assert_eq!(
            c.at(Order::OneShot, k),
            Some(quality(&HeadSet::with_pruned(total, one_shot[..k].iter().copied()))),
            "one-shot at {k}"
        );
        let random = (0..RANDOM_SEEDS).map(|s| c.at(Order::Random(s), k));
        assert!(random.clone().all(|q| q.is_some()), "random orders at {k}");
        let iterative =
            c.at(Order::Iterative, k).unwrap_or_else(|| panic!("iterative at {k}: {:?}", c.points));
        // Every head pruned is the same model whatever the order.
        let order = if k == total { (0..total).collect() } else { c.iterative_order[..k].to_vec() };
        assert_eq!(iterative, quality(&HeadSet::with_pruned(total, order)), "iterative at {k}");
    }
    // Every point measured here knows how sure it is: the full model's cosines are kept, and
    // each other point's change from it is paired over the same resamples of the pairs.
    assert!(c.full_cosines.is_some());
    for k in 0..=total {
        let s = c.spread(Order::OneShot, k).unwrap_or_else(|| panic!("no spread at {k}"));
        assert_eq!(Some(s.quality.value), c.at(Order::OneShot, k));
        assert!(s.quality.lo <= s.quality.value && s.quality.value <= s.quality.hi, "{s:?}");
        assert_eq!(s.change.is_none(), k == 0, "a change at {k} from the full model");
    }
    // The iterative order prunes the least important by the task's gradient, one head a step
    // (a twelfth of 8 heads, at least one), measured again after each, as far as a point needs.
    assert_eq!(c.iterative_order.len(), total - 1);
    let first = run(&here, Planned::new(TaskImportance::new(&data, HeadSet::all(total))));
    assert_eq!(c.iterative_order[0], first.ranked[0]);
    // One head per layer: each layer's most important head by the full model's gradients.
    let keep: Vec<usize> = (0..spec.layers)
        .map(|l| {
            spec.layer_heads(l).max_by(|&a, &b| first.per_head[a].total_cmp(&first.per_head[b])).unwrap()
        })
        .collect();
    assert_eq!(
        c.one_per_layer,
        Some(quality(&HeadSet::with_pruned(total, (0..total).filter(|h| !keep.contains(h)))))
    );
    assert!(c.summary(&spec).unwrap().contains("One head per layer (6 pruned)"));
}

#[test]
fn the_roles_are_counted_in_pieces_as_they_would_be_at_once() {
    let model = model();
    let data = data(&model);
    let (here, workers) = (engine(model.clone(), 1), engine(model.clone(), 3));
    let roles = run(&here, Planned::new(HeadRoles::new(&here, &data)));
    assert_eq!(run(&workers, Planned::new(HeadRoles::new(&workers, &data))), roles);
    let mut counter = RoleCounter::new(model.spec());
    let all = HeadSet::all(model.spec().total_heads());
    for (i, ids) in data.ids.iter().take(ROLE_SENTENCES).enumerate() {
        let punctuation: Vec<bool> = model
            .tokenizer
            .encode(&data.pairs.sentences[i])
            .iter()
            .map(|t| is_punctuation(&t.piece))
            .collect();
        counter.add(&model.bert.forward(Kernel::Simd, ids, &all).attention, &punctuation);
    }
    assert_eq!(roles, counter.roles());
}

#[test]
fn the_pruned_forward_is_timed_sample_by_sample_on_the_cpu_kernel() {
    let model = model();
    let here = engine(model.clone(), 1);
    let sentence = ids(&model, "the dog runs in the park .");
    let heads = HeadSet::with_pruned(model.spec().total_heads(), [0, 1, 2, 5]);
    let (speed, seen) = run_watched(&here, TimePruned::new(&here, sentence, heads));
    assert!(!speed.on_gpu && speed.full_ms > 0.0 && speed.pruned_ms > 0.0, "{speed:?}");
    assert!(speed.ratio().is_finite());
    // One untimed round to size the samples, then the timed ones: one step each.
    assert!(seen.len() >= 2 * (ROUNDS + 1), "{} steps", seen.len());
    assert_eq!(seen.last().unwrap().total, 2 * (ROUNDS + 1));
}

#[test]
fn the_pace_of_workers_leaves_out_their_start() {
    let model = model();
    let pool = Rc::new(FakePool::new(model.clone(), 2));
    // Starting takes longer than the work: a pace that counted it would be far too slow.
    pool.start_ms.set(300);
    let workers = Rc::new(Workers::new(pool));
    let engine = pollster::block_on(Engine::new(
        model.clone(),
        &Session::cpu_only(),
        workers.clone(),
        Rc::new(NativeHost::default()),
    ));
    let sentence = ids(&model, "the dog sleeps by the river .");
    let started = std::time::Instant::now();
    run(&engine, Planned::new(DriftSweep::new(&engine, sentence.clone())));
    assert!(started.elapsed().as_millis() >= 300, "the pool started");
    let spec = *model.spec();
    let flops: u64 =
        headlab::jobs::work::ablation_pieces(&spec, &[sentence], 2, &[]).iter().map(|w| w.flops(&spec)).sum();
    let seconds = workers.pace(Where::Workers(2)).seconds(flops).unwrap();
    assert!(seconds < 0.15, "the sweep's work timed at {seconds} s: the start was counted");
}

#[test]
fn the_engine_keeps_a_few_unpruned_passes_for_the_sweeps_that_start_from_them() {
    let model = model();
    let (spec, total) = (*model.spec(), model.spec().total_heads());
    let here = engine(model.clone(), 1);
    let sentences: Vec<Vec<u32>> = ["a dog .", "the cat .", "a man sings .", "we sat .", "the old park ."]
        .iter()
        .map(|s| ids(&model, s))
        .collect();
    for s in &sentences {
        pollster::block_on(here.pass(s.clone(), &HeadSet::all(total), None));
    }
    let sweep =
        |s: &Vec<u32>| headlab::jobs::work::ablation_pieces(&spec, std::slice::from_ref(s), 1, &[]).remove(0);
    // The newest four are kept: a sweep from them skips the unpruned pass; the oldest is gone.
    let unpruned = |s: &Vec<u32>| headlab::jobs::work::ablation_flops(&spec, s.len(), &[]);
    assert_eq!(
        here.flops(&sweep(&sentences[4])),
        sweep(&sentences[4]).flops(&spec) - unpruned(&sentences[4])
    );
    assert_eq!(here.flops(&sweep(&sentences[0])), sweep(&sentences[0]).flops(&spec), "dropped");
    // On workers every piece runs its own unpruned pass.
    let workers = engine(model.clone(), 2);
    pollster::block_on(workers.pass(sentences[4].clone(), &HeadSet::all(total), None));
    assert_eq!(workers.flops(&sweep(&sentences[4])), sweep(&sentences[4]).flops(&spec));
}

#[test]
fn a_job_whose_input_changed_stops_at_its_next_step() {
    let model = model();
    let here = engine(model.clone(), 1);
    let sentence = ids(&model, "a cat sleeps in the old house .");
    let slot = Slot::default();
    let ticket = slot.ticket();
    let steps = RefCell::new(0);
    // The reader changes the sentence after three heads: a newer ticket is taken.
    let stopped = pollster::block_on(drive(
        &here,
        Planned::new(DriftSweep::new(&here, sentence.clone())),
        &ticket,
        |_, _| {
            *steps.borrow_mut() += 1;
            if *steps.borrow() == 4 {
                slot.ticket();
            }
        },
    ));
    assert_eq!(stopped, None);
    assert_eq!(*steps.borrow(), 4, "no step after the ticket was replaced");
}

#[test]
fn workers_that_fail_leave_their_pieces_to_the_pages_thread_and_say_why() {
    let model = model();
    let sentence = ids(&model, "we sat on the grassy river bank .");
    let here = engine(model.clone(), 1);
    let reference = run(&here, Planned::new(DriftSweep::new(&here, sentence.clone())));
    let pool = Rc::new(FakePool::new(model.clone(), 2));
    pool.fail_after.set(Some(1));
    let workers = Rc::new(Workers::new(pool.clone()));
    let host = Rc::new(NativeHost::default());
    let engine =
        pollster::block_on(Engine::new(model.clone(), &Session::cpu_only(), workers.clone(), host.clone()));
    assert_eq!(workers.place(), Where::Workers(2));
    // Dealt for two workers; the first piece fails: both pieces run here, and give the same bits.
    let ranking = run(&engine, Planned::new(DriftSweep::new(&engine, sentence)));
    assert_eq!(ranking, reference);
    assert_eq!(workers.place(), Where::PageThread);
    assert!(
        workers.note().unwrap().contains("the 2 workers could not be used (a worker stopped"),
        "{:?}",
        workers.note()
    );
    assert_eq!(workers.used(), 1);
    assert!(host.turns() > 0, "the browser got its turns");
    // The pace recorded where the work ran gives estimates for more of it.
    let pace = workers.pace(Where::PageThread);
    assert!(pace.gflops().is_some());
    let big = (pace.gflops().unwrap() * 1e9 * 30.0) as u64;
    assert!(
        engine.estimate(big, Where::PageThread).unwrap().starts_with("about 30"),
        "{:?}",
        engine.estimate(big, Where::PageThread)
    );
    assert_eq!(engine.estimate(big, Where::Gpu), None, "nothing ran on a GPU");
    // The embedding the engine's pass gives is the model's.
    let pass = pollster::block_on(engine.pass(ids(&model, "a dog ."), &HeadSet::all(8), None));
    let direct = model.bert.forward(Kernel::Simd, &pass.ids, &HeadSet::all(8));
    assert_eq!(cosine(&pass.out.embedding, &direct.embedding), 1.0);
}
