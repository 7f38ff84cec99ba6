//! Makes the page's data files: the f16 asset from the fp32 checkpoint (model.safetensors +
//! vocab.txt from scripts/fetch-model.sh), and the sentence pairs from the STS Benchmark's test
//! split (scripts/fetch-pairs.sh):
//!
//!     cargo run --release --bin convert-model -- MODEL_DIR OUT_FILE
//!     cargo run --release --bin convert-model -- --pairs STS_TEST_CSV OUT_FILE

use headlab::model::{asset, bert, spec::ModelSpec, task};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match &args[..] {
        [flag, csv, out] if flag == "--pairs" => pairs(csv.as_ref(), out.as_ref()),
        [model_dir, out] => convert(model_dir.as_ref(), out.as_ref()),
        _ => {
            eprintln!(
                "usage: convert-model MODEL_DIR OUT_FILE | convert-model --pairs STS_TEST_CSV OUT_FILE"
            );
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("convert-model: {e}");
        std::process::exit(1);
    }
}

fn convert(model_dir: &std::path::Path, out: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let bytes = std::fs::read(model_dir.join("model.safetensors"))?;
    let vocab = std::fs::read_to_string(model_dir.join("vocab.txt"))?;
    let st = safetensors::SafeTensors::deserialize(&bytes)?;
    let mut tensors = Vec::new();
    for (name, shape) in bert::tensor_names(&ModelSpec::MINILM_L6_V2) {
        let t = st.tensor(&name)?;
        if t.dtype() != safetensors::Dtype::F32 || t.shape() != shape.as_slice() {
            return Err(
                format!("{name}: expected F32 {shape:?}, found {:?} {:?}", t.dtype(), t.shape()).into()
            );
        }
        let values = t.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        tensors.push((name, shape, values));
    }
    let encoded = asset::encode(&tensors, &vocab);
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(out, &encoded)?;
    println!("wrote {} ({:.1} MiB, f16)", out.display(), encoded.len() as f64 / 1048576.0);
    Ok(())
}

fn pairs(csv: &std::path::Path, out: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let text = task::select(&std::fs::read_to_string(csv)?);
    task::Pairs::parse(&text)?;
    std::fs::write(out, &text)?;
    println!("wrote {} ({} pairs)", out.display(), text.lines().count() - 1);
    Ok(())
}
