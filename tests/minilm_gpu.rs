//! The trained model on the GPU (Mesa's lavapipe natively): against the float64 reference, its
//! layer reuse, its plans, the really pruned model, and where the page's runner puts a sentence.
//! Needs the model files (scripts/fetch-model.sh) and a Vulkan adapter.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::rc::Rc;

use common::minilm::*;
use headlab::attention::turns::AtOnce;
use headlab::attention::HeadSet;
use headlab::cpu::Kernel;
use headlab::model::encoder::runner::Runner;

#[test]
fn gpu_forward_matches_the_reference_on_lavapipe() {
    let ctx = std::rc::Rc::new(
        pollster::block_on(headlab::gpu::GpuContext::acquire()).expect("a GPU adapter (lavapipe in CI)"),
    );
    println!("GPU adapter under test: {}", ctx.adapter_label());
    let bert = checkpoint();
    let gpu = pollster::block_on(headlab::gpu::GpuBert::new(ctx, &bert)).unwrap();
    let tok = tokenizer();
    let mut worst = 0.0f64;
    for case in fixture("minilm-forward.json").as_array().unwrap() {
        let ids: Vec<u32> = tok.encode(case["text"].as_str().unwrap()).iter().map(|t| t.id).collect();
        let out = pollster::block_on(gpu.forward(&bert, &ids, &HeadSet::all(SPEC.total_heads()))).unwrap();
        let pruned = fixture_pruned(case);
        let masked = pollster::block_on(gpu.forward(&bert, &ids, &pruned)).unwrap();
        for (what, e) in [
            ("embedding", rel_error(&out.embedding, &floats(&case["embedding"]))),
            ("layer 0 attention", rel_error(&out.attention[0], &floats(&case["attention_layer0"]))),
            ("layer 5 attention", rel_error(&out.attention[5], &floats(&case["attention_layer5"]))),
            ("pruned embedding", rel_error(&masked.embedding, &floats(&case["embedding_pruned"]))),
        ] {
            assert!(e < 1e-4, "gpu: {what} relative error {e:e}");
            worst = worst.max(e);
        }
    }
    println!("GPU: worst relative error vs the float64 reference {worst:.2e}");
}

#[test]
fn the_gpu_reuses_layers_the_same_way() {
    let ctx = std::rc::Rc::new(
        pollster::block_on(headlab::gpu::GpuContext::acquire()).expect("a GPU adapter (lavapipe in CI)"),
    );
    let bert = checkpoint();
    let gpu = pollster::block_on(headlab::gpu::GpuBert::new(ctx, &bert)).unwrap();
    let tok = tokenizer();
    let ids: Vec<u32> = tok.encode("The bank by the river was steep.").iter().map(|t| t.id).collect();
    let full = pollster::block_on(gpu.forward(&bert, &ids, &HeadSet::all(SPEC.total_heads()))).unwrap();
    assert_eq!(full.layer_inputs.len(), SPEC.layers);
    let cpu_full = bert.forward(Kernel::Simd, &ids, &HeadSet::all(SPEC.total_heads()));
    for (l, (g, c)) in full.layer_inputs.iter().zip(&cpu_full.layer_inputs).enumerate() {
        assert!(rel_error(g, &c.iter().map(|&v| v as f64).collect::<Vec<_>>()) < 1e-4, "layer {l} input");
    }
    for (mask, first) in staged_masks() {
        let scratch = pollster::block_on(gpu.forward(&bert, &ids, &mask)).unwrap();
        let reused = pollster::block_on(gpu.forward_from(&bert, &ids, &mask, Some(&full))).unwrap();
        assert_eq!(reused.first_computed, first);
        let e =
            rel_error(&reused.embedding, &scratch.embedding.iter().map(|&v| v as f64).collect::<Vec<_>>());
        assert!(e < 1e-6, "first layer {first}: embedding differs by {e:e}");
        assert_eq!(reused.attention.len(), SPEC.layers);
    }
}

#[test]
fn a_gpu_pass_of_a_known_length_makes_no_buffer_or_bind_group() {
    let ctx = std::rc::Rc::new(
        pollster::block_on(headlab::gpu::GpuContext::acquire()).expect("a GPU adapter (lavapipe in CI)"),
    );
    let (bert, tok) = (checkpoint(), tokenizer());
    let gpu = pollster::block_on(headlab::gpu::GpuBert::new(ctx, &bert)).unwrap();
    let ids: Vec<u32> = tok.encode("The bank by the river was steep.").iter().map(|t| t.id).collect();
    let full = pollster::block_on(gpu.forward(&bert, &ids, &HeadSet::all(SPEC.total_heads()))).unwrap();
    let before = headlab::gpu::resources::made();
    let mut outputs = Vec::new();
    for (heads, _) in staged_masks() {
        outputs.push(pollster::block_on(gpu.forward(&bert, &ids, &heads)).unwrap());
        outputs.push(pollster::block_on(gpu.forward_from(&bert, &ids, &heads, Some(&full))).unwrap());
    }
    let after = headlab::gpu::resources::made();
    assert_eq!(after, before, "passes of a known length made buffers or bind groups");
    // A new length makes its plan once: ten dispatches a layer, each with its bind group.
    let other: Vec<u32> = tok.encode("Something else entirely.").iter().map(|t| t.id).collect();
    pollster::block_on(gpu.forward(&bert, &other, &HeadSet::all(SPEC.total_heads()))).unwrap();
    let made = headlab::gpu::resources::made();
    assert_eq!(made.bind_groups - after.bind_groups, 10 * SPEC.layers as u64);
    pollster::block_on(gpu.forward(&bert, &other, &SPEC.layer_pruned(2))).unwrap();
    assert_eq!(headlab::gpu::resources::made(), made);
    // And the reused plan gives what the CPU kernel gives.
    let cpu = bert.forward(Kernel::Simd, &ids, &staged_masks()[1].0);
    let e = rel_error(&outputs[2].embedding, &cpu.embedding.iter().map(|&v| v as f64).collect::<Vec<_>>());
    assert!(e < 1e-4, "embedding differs by {e:e}");
    // The runner trait drives the GPU too (as the page's fallback runner does).
    assert_eq!(
        pollster::block_on(bert.run(&ids, &HeadSet::all(SPEC.total_heads()), None)).embedding,
        bert.forward(Kernel::Simd, &ids, &HeadSet::all(SPEC.total_heads())).embedding
    );
}

#[test]
fn the_really_pruned_model_on_the_gpu_gives_the_masked_models_embeddings() {
    use headlab::gpu::{GpuBert, GpuContext};
    use headlab::model::encoder::pruned::PrunedBert;
    let ctx =
        std::rc::Rc::new(pollster::block_on(GpuContext::acquire()).expect("a GPU adapter (lavapipe in CI)"));
    let (bert, tok) = (checkpoint(), tokenizer());
    let ids: Vec<u32> = tok.encode("The bank by the river was steep.").iter().map(|t| t.id).collect();
    let full = pollster::block_on(GpuBert::new(ctx.clone(), &bert)).unwrap();
    let (mut worst_gpu, mut worst_cpu) = (0.0f64, 0.0f64);
    for (what, heads) in pruned_sets() {
        let pruned =
            pollster::block_on(GpuBert::pruned(ctx.clone(), &PrunedBert::new(&bert, &heads))).unwrap();
        let out = pollster::block_on(pruned.forward(&bert, &ids, &heads)).unwrap();
        let masked = pollster::block_on(full.forward(&bert, &ids, &heads)).unwrap();
        let cpu = bert.forward(Kernel::Simd, &ids, &heads).embedding;
        let as_f64 = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
        let (e_gpu, e_cpu) =
            (rel_error(&out.embedding, &as_f64(&masked.embedding)), rel_error(&out.embedding, &as_f64(&cpu)));
        assert!(e_gpu < 1e-6, "{what}: pruned vs masked on the GPU, relative error {e_gpu:e}");
        assert!(e_cpu < 1e-4, "{what}: GPU pruned vs CPU masked, relative error {e_cpu:e}");
        // Its attention maps are its kept heads'.
        for (l, maps) in out.attention.iter().enumerate() {
            let kept = (0..SPEC.heads).filter(|&h| heads.is_active(l * SPEC.heads + h)).count();
            assert_eq!(maps.len(), kept * ids.len() * ids.len(), "{what}, layer {l}");
        }
        (worst_gpu, worst_cpu) = (worst_gpu.max(e_gpu), worst_cpu.max(e_cpu));
    }
    println!("GPU, really pruned vs masked: worst {worst_gpu:.1e}; vs the CPU kernel's masked pass {worst_cpu:.1e}");
}

#[test]
fn the_trained_model_runs_where_it_was_measured_faster_with_the_same_numbers() {
    use headlab::backend::{EncoderRunner, Place, Preference, Session};
    let start = std::time::Instant::now();
    let clock = move || start.elapsed().as_secs_f64() * 1e3;
    let model = fp32_model();
    let session = pollster::block_on(Session::start(Preference::Auto, false));
    let runner = pollster::block_on(EncoderRunner::new(model.clone(), &session, &clock, Rc::new(AtOnce)));
    let all = HeadSet::all(SPEC.total_heads());
    for text in ["A river.", &"The bank by the river was steep. ".repeat(12)] {
        let ids = model.ids(text);
        let choice = runner.choice(ids.len()).expect("measured on the adapter");
        println!("{} tokens: {}", ids.len(), runner.ran_on(ids.len()));
        assert_eq!(runner.on_gpu(ids.len()), choice.place == Place::Gpu);
        assert!(runner.ran_on(ids.len()).contains(", faster here than on the"));
        let got = pollster::block_on(runner.run(&ids, &all, None));
        let want = model.bert.forward(Kernel::Simd, &ids, &all);
        let e = rel_error(&got.embedding, &want.embedding.iter().map(|&v| v as f64).collect::<Vec<_>>());
        assert!(e < 1e-4, "{} tokens: {e:e} from the CPU kernel", ids.len());
    }
    // Forced onto the GPU: no measurement, every pass there.
    let forced = pollster::block_on(Session::start(Preference::Gpu, false));
    let runner = pollster::block_on(EncoderRunner::new(model, &forced, &clock, Rc::new(AtOnce)));
    assert!(runner.choice(10).is_none() && runner.on_gpu(10) && runner.on_gpu(500));
}
