//! What the `minilm_*` test files share: the fp32 checkpoint and the page's f16 copy of it, the
//! reference fixtures (tests/reference/minilm.py), head sets worth trying, and the job layer run
//! here (an engine on the CPU kernel, driven to the end).

use std::path::PathBuf;
use std::rc::Rc;

use headlab::attention::HeadSet;
use headlab::backend::Session;
use headlab::jobs::driver::{drive, Job};
use headlab::jobs::engine::{Engine, Family, Workers};
use headlab::jobs::native::{FakePool, NativeHost};
use headlab::jobs::ticket::Ticket;
use headlab::model::encoder::bert::Bert;
use headlab::model::encoder::Encoder;
use headlab::model::spec::ModelSpec;
use headlab::model::tokenize::wordpiece::WordPiece;
use serde_json::Value;

use super::{model_dir, pairs_csv};

/// MiniLM's shape, as its `config.json` gives it.
pub const SPEC: ModelSpec = ModelSpec::MINILM_L6_V2;

/// A fixture of tests/fixtures/.
pub fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// A JSON array of numbers.
pub fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

/// max |got - want| / max |want|.
pub fn rel_error(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    got.iter().zip(want).fold(0.0f64, |m, (&g, &w)| m.max((g as f64 - w).abs())) / scale
}

/// `v` in f64.
pub fn wide(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// The cosine of an f32 and an f64 vector, in f64.
pub fn cosine(a: &[f32], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y).sum();
    let na: f64 = a.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// The fp32 checkpoint, read with the safetensors crate.
pub fn checkpoint() -> Bert {
    let bytes = std::fs::read(model_dir().join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    Bert::from_tensors(SPEC, |name| {
        let t = st.tensor(name).ok()?;
        let data = t.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        Some((t.shape().to_vec(), data))
    })
    .unwrap()
}

/// The model's own WordPiece tokenizer.
pub fn tokenizer() -> WordPiece {
    WordPiece::from_vocab(&std::fs::read_to_string(model_dir().join("vocab.txt")).unwrap(), SPEC.positions)
        .unwrap()
}

/// The fp32 checkpoint as a model the job layer runs.
pub fn fp32_model() -> Rc<Encoder> {
    Rc::new(Encoder {
        name: "all-MiniLM-L6-v2 (fp32)".into(),
        id: "fp32".into(),
        architecture: headlab::model::load::config::Architecture::Bert,
        bert: checkpoint(),
        tokenizer: tokenizer(),
    })
}

/// The token ids of `text`.
pub fn ids(tok: &WordPiece, text: &str) -> Vec<u32> {
    tok.encode(text).iter().map(|t| t.id).collect()
}

/// The model the page runs: the checkpoint folder read by the page's loader (as convert-model
/// reads it for the page's asset), decoded as the page decodes it, with its tokenizer and the
/// model file's bytes.
pub fn f16_model() -> (Bert, WordPiece, Vec<u8>) {
    use headlab::model::load::checkpoint::{load, Options};
    use headlab::model::load::files::{now, DirFiles};
    let files = DirFiles::new(&model_dir()).unwrap();
    let options =
        Options { name: Some(headlab::model::encoder::BUILT_IN_NAME.into()), budget: u64::MAX, room: None };
    let loaded = now(load(&files, &options, &mut |_| {})).unwrap();
    let model = Encoder::from_file(&loaded.file, loaded.id).unwrap();
    (model.bert, model.tokenizer, loaded.file)
}

/// The heads a fixture case prunes, listed as `[layer, head]` pairs.
pub fn fixture_pruned(case: &Value) -> HeadSet {
    let pairs = case["pruned"].as_array().unwrap();
    let head = |p: &Value| p[0].as_u64().unwrap() as usize * SPEC.heads + p[1].as_u64().unwrap() as usize;
    HeadSet::with_pruned(SPEC.total_heads(), pairs.iter().map(head))
}

/// Masks that prune heads from a given layer on (and none before), with the first layer each
/// should recompute.
pub fn staged_masks() -> Vec<(HeadSet, usize)> {
    let (total, per) = (SPEC.total_heads(), SPEC.heads);
    let mut cases = vec![(HeadSet::all(total), SPEC.layers)];
    for (first, heads) in [(0, vec![3]), (2, vec![2 * per + 7, 4 * per]), (5, vec![5 * per + 11])] {
        cases.push((HeadSet::with_pruned(total, heads), first));
    }
    cases
}

/// Head sets from none to 66 pruned, whole layers included.
pub fn pruned_sets() -> Vec<(&'static str, HeadSet)> {
    let (total, per) = (SPEC.total_heads(), SPEC.heads);
    let scattered = HeadSet::with_pruned(total, [3, 17, 30, 45, 59, 70]);
    // Every other head of the model, and all but each layer's head 0 (one head per layer).
    let half = HeadSet::with_pruned(total, (0..total).step_by(2));
    let one_per_layer = HeadSet::with_pruned(total, (0..total).filter(|h| h % per != 0));
    let layers_2_and_5 = HeadSet::with_pruned(total, SPEC.layer_heads(1).chain(SPEC.layer_heads(4)));
    vec![
        ("none", HeadSet::all(total)),
        ("6 scattered", scattered),
        ("layer 1", SPEC.layer_pruned(0)),
        ("layers 2 and 5", layers_2_and_5),
        ("36, every other", half),
        ("66, one per layer", one_per_layer),
    ]
}

/// The page's sentence pairs, made from the benchmark as scripts/build-model-asset.sh makes them
/// (and checked against the hash the page expects).
pub fn sts_pairs() -> headlab::model::encoder::task::Pairs {
    use headlab::model::encoder::task::{select, Pairs};
    Pairs::from_file(select(&std::fs::read_to_string(pairs_csv()).unwrap()).as_bytes()).unwrap()
}

/// `model` (an encoder or a decoder) on the CPU kernel (a session without a GPU), its batch work
/// on a fake pool of `threads` (1: the page's own thread).
pub fn engine<F: Family>(model: Rc<F>, threads: usize) -> Engine<F> {
    let pool = Rc::new(FakePool::new(F::held(&model), threads));
    let workers = Rc::new(Workers::new(pool));
    pollster::block_on(Engine::new(model, &Session::cpu_only(), workers, Rc::new(NativeHost::default())))
}

/// Runs `job` on `engine` to its end.
pub fn run<F: Family, J: Job<F>>(engine: &Engine<F>, job: J) -> J::Output {
    pollster::block_on(drive(engine, job, &Ticket::always(), |_, _| {})).expect("an uncancelled job finishes")
}
