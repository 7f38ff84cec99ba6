//! Makes the page's data files: a model's file from its checkpoint folder, read by the same
//! loader as a folder the reader drops on the page (named as the folder's config names it, or
//! with `--built-in` as the page's built-in model, for scripts/fetch-model.sh's MiniLM; the
//! benchmarks convert their checkpoints so too), and the sentence pairs from the STS
//! Benchmark's test split (scripts/fetch-pairs.sh), and a decoder's text set from the novel's
//! chapters (scripts/fetch-texts.sh):
//!
//!     cargo run --release --bin convert-model -- [--built-in] MODEL_DIR OUT_FILE
//!     cargo run --release --bin convert-model -- --pairs STS_TEST_CSV OUT_FILE
//!     cargo run --release --bin convert-model -- --texts CHAPTERS_DIR OUT_FILE

use headlab::model::decoder::texts;
use headlab::model::encoder::task;
use headlab::model::encoder::BUILT_IN_NAME;
use headlab::model::load::checkpoint::{load, Options};
use headlab::model::load::files::{now, DirFiles};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match &args[..] {
        [flag, csv, out] if flag == "--pairs" => pairs(csv.as_ref(), out.as_ref()),
        [flag, dir, out] if flag == "--texts" => text_set(dir.as_ref(), out.as_ref()),
        [flag, model_dir, out] if flag == "--built-in" => {
            convert(model_dir.as_ref(), out.as_ref(), Some(BUILT_IN_NAME.to_string()))
        }
        [model_dir, out] => convert(model_dir.as_ref(), out.as_ref(), None),
        _ => {
            eprintln!(
                "usage: convert-model [--built-in] MODEL_DIR OUT_FILE | convert-model --pairs STS_TEST_CSV OUT_FILE | convert-model --texts CHAPTERS_DIR OUT_FILE"
            );
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("convert-model: {e}");
        std::process::exit(1);
    }
}

fn convert(
    model_dir: &std::path::Path,
    out: &std::path::Path,
    name: Option<String>,
) -> Result<(), Box<dyn std::error::Error>> {
    let files = DirFiles::new(model_dir)?;
    let options = Options { name, budget: u64::MAX, room: None };
    let loaded = now(load(&files, &options, &mut |_| {}))?;
    for note in &loaded.notes {
        println!("note: {note}");
    }
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(out, &loaded.file)?;
    println!("wrote {} ({:.1} MiB, f16)", out.display(), loaded.file.len() as f64 / 1048576.0);
    Ok(())
}

fn pairs(csv: &std::path::Path, out: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let text = task::select(&std::fs::read_to_string(csv)?);
    task::Pairs::parse(&text)?;
    std::fs::write(out, &text)?;
    println!("wrote {} ({} pairs)", out.display(), text.lines().count() - 1);
    Ok(())
}

/// The text set from `dir`'s `chapter_1.json` .. `chapter_135.json` (each `{"text": ...}`).
fn text_set(dir: &std::path::Path, out: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let chapters = (1..=texts::CHAPTERS)
        .map(|i| -> Result<String, Box<dyn std::error::Error>> {
            let path = dir.join(format!("chapter_{i}.json"));
            let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
            let text = json["text"].as_str().ok_or_else(|| format!("{}: no \"text\"", path.display()))?;
            Ok(text.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let text = texts::select(&chapters);
    let set = texts::TextSet::parse(&text)?;
    std::fs::write(out, &text)?;
    println!("wrote {} ({} passages)", out.display(), set.passages.len());
    Ok(())
}
