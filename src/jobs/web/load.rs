//! Loading a trained model into the page, from any of its sources: the built-in one (its model
//! file fetched from the page's server and checked against the hash built into the page), a
//! folder the handbook serves beside the page, or the reader's own files; the last two are
//! converted by [`crate::model::load::checkpoint::load_into`] while they are read. The model file
//! lies in JavaScript buffers outside the page's wasm memory ([`JsFile`]): the page builds the
//! model from there, and copies it to each worker.

use std::cell::Cell;
use std::rc::Rc;

use super::files::{ReaderFiles, ServedFiles};
use super::workers::ModelFile;
use super::{fetch_bytes, now_ms, yield_to_browser, JsFile};
use crate::model::load::checkpoint::{self, Options};
use crate::model::load::files::{last_part, Entry, Files, Read};
use crate::model::load::model_file;
use crate::model::spec::PAGE_BYTES;
use crate::model::Model;

/// Where the page finds the built-in model's file (copied next to index.html by trunk).
pub const BUILT_IN_URL: &str = "minilm-f16.bin";

/// Where a model comes from.
pub enum Source {
    /// The page's own model.
    BuiltIn,
    /// A model folder on the page's server, at this path.
    Served(String),
    /// The reader's files.
    Reader(ReaderFiles),
}

impl Source {
    /// What the page calls the source while it loads.
    pub fn describe(&self) -> String {
        match self {
            Source::BuiltIn => "the built-in model".into(),
            Source::Served(path) => format!("the model at {path}"),
            Source::Reader(files) => match files.entries() {
                [] => "no files".into(),
                [one] => one.path.clone(),
                [first, ..] => {
                    let root = first.path.split('/').next().unwrap_or("");
                    match files.entries().iter().all(|e| e.path.starts_with(&format!("{root}/"))) {
                        true => format!("the folder {root}"),
                        false => format!("{} files", files.entries().len()),
                    }
                }
            },
        }
    }
}

/// A model ready for the page: the model, its file for the workers, and what the reader should
/// know about how it was read.
pub struct LoadedModel {
    /// The model: an encoder or a decoder.
    pub model: Model,
    /// Its file and id, for the workers.
    pub file: Rc<ModelFile>,
    /// Notes from reading the folder (tensors ignored, modules not applied).
    pub notes: Vec<String>,
    /// Bytes of weights read (the checkpoint's tensors, or the built-in file).
    pub bytes_read: u64,
    /// Seconds from the first byte asked for to the model decoded.
    pub seconds: f64,
    /// Of those, the seconds the model took to be built from its file (a decoder held at 8 bits
    /// only is calibrated and quantized a block at a time then).
    pub build_seconds: f64,
}

impl LoadedModel {
    /// The load's throughput, in megabytes (10^6 bytes) of weights per second.
    pub fn megabytes_per_second(&self) -> f64 {
        self.bytes_read as f64 / 1e6 / self.seconds.max(1e-3)
    }

    /// The reading's alone (the model not yet built), in megabytes of weights per second.
    pub fn read_megabytes_per_second(&self) -> f64 {
        self.bytes_read as f64 / 1e6 / (self.seconds - self.build_seconds).max(1e-3)
    }
}

/// Why a load failed, and whether loading again could help: a download that failed or came
/// damaged in transit may come whole next time; a file the folder lacks or holds wrong, or a
/// link the page refuses, will not.
pub struct LoadFailure {
    /// The file concerned and the problem.
    pub message: String,
    /// Whether a retry could help.
    pub retry_helps: bool,
}

impl LoadFailure {
    fn new(message: impl Into<String>, retry_helps: bool) -> LoadFailure {
        LoadFailure { message: message.into(), retry_helps }
    }
}

/// Loads `source`, reporting `(bytes read, bytes in all)` as it goes; `held` bytes are taken by
/// the model the page holds now. Setting `stop` abandons it (another load replaced it) at its
/// next read. An error says which file and what is wrong with it.
pub async fn load(
    source: Source,
    held: u64,
    stop: Rc<Cell<bool>>,
    progress: impl Fn(f64, Option<f64>) + 'static,
) -> Result<LoadedModel, LoadFailure> {
    let started = now_ms();
    // A served folder is named by its path's last part (a link names no folder of files).
    let name = match &source {
        Source::Served(path) => last_part(path),
        _ => None,
    };
    let options = Options { name, budget: PAGE_BYTES.saturating_sub(held), room: Some(room) };
    let (bytes, id, notes, bytes_read) = match source {
        Source::BuiltIn => {
            // The built-in file is built with the page: whatever failed happened on the way.
            let failed = |e: String| LoadFailure::new(format!("{BUILT_IN_URL}: {e}"), true);
            let bytes = fetch_bytes(BUILT_IN_URL, progress).await.map_err(failed)?;
            model_file::verify_in_pieces(&bytes, yield_to_browser)
                .await
                .map_err(|e| failed(e.to_string()))?;
            let read = bytes.len() as u64;
            (JsFile::copy_of(&bytes), model_file::ASSET_SHA256[..16].to_string(), Vec::new(), read)
        }
        Source::Served(path) => {
            let files = ServedFiles::list(&path)
                .await
                .map_err(|u| LoadFailure::new(u.error.to_string(), u.in_transit))?;
            let files = Stoppable { files, stop };
            let converted = convert(&files, &options, progress).await;
            converted.map_err(|e| LoadFailure::new(e, files.files.failed_in_transit()))?
        }
        Source::Reader(files) => convert(&Stoppable { files, stop }, &options, progress)
            .await
            .map_err(|e| LoadFailure::new(e, false))?,
    };
    // Decoding takes a moment: let the progress bar show the end first.
    yield_to_browser().await;
    let building = now_ms();
    let turns = crate::jobs::host::HostTurns::new(Rc::new(super::PageHost));
    let model = Model::from_file_in_steps(&bytes, id.clone(), &turns)
        .await
        .map_err(|e| LoadFailure::new(format!("the model file: {e}"), false))?;
    let (seconds, build_seconds) = ((now_ms() - started) / 1000.0, (now_ms() - building) / 1000.0);
    let file = Rc::new(ModelFile { id, bytes });
    Ok(LoadedModel { model, file, notes, bytes_read, seconds, build_seconds })
}

/// Whether the engine gives this page `bytes` more memory now: asked by reserving them before a
/// tensor is read, in pieces of at most 1 GiB (one allocation on wasm32 is below 2 GiB), all held
/// at once, then let go (the memory stays the page's, free for the model that asked: a wasm
/// memory never shrinks, and the model is about to fill it).
fn room(bytes: u64) -> bool {
    const PIECE: u64 = 1 << 30;
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut left = bytes;
    while left > 0 {
        let mut piece = Vec::new();
        if piece.try_reserve_exact(left.min(PIECE) as usize).is_err() {
            return false;
        }
        left -= left.min(PIECE);
        held.push(piece);
    }
    true
}

/// A checkpoint folder read into a model file, written outside the page's wasm memory: the
/// file, its id, the loader's notes, and the bytes of tensors read.
async fn convert(
    files: &dyn Files,
    options: &Options,
    progress: impl Fn(f64, Option<f64>),
) -> Result<(JsFile, String, Vec<String>, u64), String> {
    let mut report = |p: checkpoint::Progress| progress(p.done as f64, Some(p.total as f64));
    let loaded = checkpoint::load_into(files, options, JsFile::new(), &mut report, yield_to_browser)
        .await
        .map_err(|e| e.to_string())?;
    Ok((loaded.file, loaded.id, loaded.notes, loaded.tensor_bytes))
}

/// Files whose reads fail once `stop` is set.
struct Stoppable<F> {
    files: F,
    stop: Rc<Cell<bool>>,
}

impl<F: Files> Files for Stoppable<F> {
    fn entries(&self) -> &[Entry] {
        self.files.entries()
    }

    fn read(&self, index: usize, start: u64, len: u64) -> Read<'_> {
        let stopped = self.stop.get();
        let read = self.files.read(index, start, len);
        Box::pin(async move {
            if stopped {
                return Err("another load replaced this one".into());
            }
            read.await
        })
    }
}
