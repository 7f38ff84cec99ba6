//! A Hugging Face model folder read into the page's model file ([`crate::model::load::model_file`]): the files the
//! reader gave the page (or the handbook serves beside it) are untrusted input, read with every
//! size checked before anything is allocated, and each refusal names the file and the problem.
//!
//! ```text
//! config.json                          architecture and shape (crate::model::config)
//! modules.json, <Pooling>/config.json  sentence-transformers' pooling and Normalize, if present
//! tokenizer.json | vocab.txt           the WordPiece vocabulary and its casing
//!   (+ tokenizer_config.json)
//!   | vocab.json + merges.txt          or a GPT-2 decoder's byte-level BPE
//! model.safetensors                    the weights in F32, F16 or BF16; or the shards that
//!   | model.safetensors.index.json     the index names
//! ```
//!
//! The safetensors headers are read first (parsed and validated by the `safetensors` crate), so
//! a model the page cannot hold is refused from its header, before its tensors are read. Then
//! each tensor the model needs is read alone, checked (no NaN or infinity, within f16's range)
//! and appended to the model file in f16: the page never holds two full copies of the weights.
//! Tensors the page does not use (a pooler, a language-model head, GPT-2's mask buffers) are
//! listed in a note.

use std::collections::{BTreeSet, HashMap};

use half::f16;
use safetensors::tensor::{Dtype, Metadata, TensorInfo};
use serde_json::Value;

use crate::model::digits::bytes_text;
use crate::model::load::config::{self, Architecture, CheckpointConfig};
use crate::model::load::files::{last_part, Entry, Files};
use crate::model::load::model_file::{Description, FileHasher, FileSink, Writer};
use crate::model::load::names::{tensor_names, Table};
use crate::model::spec::{Holding, ModelSpec, Pooling};
use crate::model::tokenize::bpe::Bpe;
use crate::model::tokenize::wordpiece::{self, Casing, WordPiece};

/// Why a folder cannot become a model: the file and the problem, a sentence for the page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointError {
    /// The file at fault (its path in the folder), or what is missing.
    pub file: String,
    /// What is wrong with it.
    pub problem: String,
}

impl std::fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file, self.problem)
    }
}

impl std::error::Error for CheckpointError {}

fn fail<T>(file: &str, problem: impl Into<String>) -> Result<T, CheckpointError> {
    Err(CheckpointError { file: file.to_string(), problem: problem.into() })
}

/// What a load is told: the name to give the model (else the folder's or the config's), how
/// many bytes the page can give it (its f16 file and its weights together), and how to ask the
/// engine whether it can have them.
#[derive(Clone, Debug)]
pub struct Options {
    /// The model's name in the page, overriding the folder's and the config's.
    pub name: Option<String>,
    /// The most bytes the model may take in the page.
    pub budget: u64,
    /// Whether the engine gives the page this many bytes more now (a browser may give a page
    /// less than the 4 GiB a wasm page can address: WebKit, a phone); asked before a tensor is
    /// read. `None`: no need to ask (natively).
    pub room: Option<fn(u64) -> bool>,
}

/// Bytes of the checkpoint's tensors read so far, of all the model needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Read and converted.
    pub done: u64,
    /// To read in all.
    pub total: u64,
}

/// A folder read into a model file, in memory (`Vec<u8>`) or in another [`FileSink`].
#[derive(Clone, Debug, PartialEq)]
pub struct Loaded<F = Vec<u8>> {
    /// The model file ([`crate::model::load::model_file`]'s format), for [`crate::model::encoder::Encoder::from_file`] and the workers.
    pub file: F,
    /// [`crate::model::load::model_file::file_id`] of the file.
    pub id: String,
    /// What the model is.
    pub description: Description,
    /// What the page should tell the reader about the folder (tensors it ignored, modules it
    /// does not apply).
    pub notes: Vec<String>,
    /// Bytes of tensors read.
    pub tensor_bytes: u64,
}

/// The most bytes a small file of the folder may have, by kind (a tokenizer.json of a large
/// multilingual vocabulary is about 10 MB).
const SMALL_FILE: u64 = 1 << 20;
const TOKENIZER_FILE: u64 = 64 << 20;
/// The safetensors crate's own limit on a header.
const MAX_HEADER: u64 = 100_000_000;

/// Reads the folder in `files` into a model file, reporting each tensor read to `progress`.
pub async fn load(
    files: &dyn Files,
    options: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Loaded, CheckpointError> {
    load_in_steps(files, options, progress, async || {}).await
}

/// [`load`] with `between()` awaited after each step of at most [`STEP_BYTES`] converted or
/// hashed: the page's thread gives the browser a turn (a GPT-2 embedding table of 154 MB
/// converted and hashed at once held it for over 400 ms, BENCHMARKS.md section 20).
pub async fn load_in_steps(
    files: &dyn Files,
    options: &Options,
    progress: &mut dyn FnMut(Progress),
    between: impl AsyncFnMut(),
) -> Result<Loaded, CheckpointError> {
    load_into(files, options, Vec::new(), progress, between).await
}

/// [`load_in_steps`] with the model file written to `out` (the page's goes to a JavaScript
/// buffer outside its wasm memory, which then holds only the model built from it).
pub async fn load_into<S: FileSink>(
    files: &dyn Files,
    options: &Options,
    out: S,
    progress: &mut dyn FnMut(Progress),
    mut between: impl AsyncFnMut(),
) -> Result<Loaded<S>, CheckpointError> {
    let folder = Folder::new(files.entries())?;
    let config_file = folder.path("config.json");
    let text = folder.text(files, "config.json", SMALL_FILE).await?;
    let CheckpointConfig { architecture, mut spec, name } =
        config::parse(&text).map_err(|e| CheckpointError { file: config_file.clone(), problem: e.0 })?;
    let mut notes = Vec::new();
    let (vocab, casing, vocab_file, pieces) = if architecture.is_decoder() {
        let (bpe, file) = decoder_vocabulary(&folder, files).await?;
        // GPT-2's tokenizer keeps case; the file's casing field says so.
        (bpe.canonical_json(), Casing::Cased, file, bpe.vocab_size())
    } else {
        spec.pooling = pooling(&folder, files, &mut notes).await?;
        let (vocab, casing, vocab_file) = vocabulary(&folder, files).await?;
        let tokenizer = WordPiece::with_casing(&vocab, spec.positions, casing)
            .map_err(|e| CheckpointError { file: vocab_file.clone(), problem: e.to_string() })?;
        let pieces = tokenizer.vocab_size();
        (vocab, casing, vocab_file, pieces)
    };
    if pieces > spec.vocab {
        return fail(
            &vocab_file,
            format!(
                "its {pieces} pieces do not fit the model's {} embedding rows (config.json's vocab_size)",
                spec.vocab
            ),
        );
    }
    let shards = shards(&folder, files).await?;
    let plan = plan(architecture, &spec, &shards, &mut notes)?;
    let values: u64 = plan.iter().map(|s| s.count).sum();
    let holding = architecture.is_decoder().then(|| Holding::for_spec(&spec));
    let (need, how) = memory_needed(holding, &spec, values, out.outside_memory());
    if need > options.budget {
        return fail(
            &shards[0].path,
            format!(
                "the model has {:.0} M weights and would need about {} of the page's wasm memory ({how}); this page can give it {}",
                values as f64 / 1e6,
                bytes_text(need),
                bytes_text(options.budget)
            ),
        );
    }
    if options.room.is_some_and(|room| !room(need)) {
        return fail(
            &shards[0].path,
            format!(
                "the model needs about {} of the page's wasm memory ({how}), and this browser would not give the page that much more (a page can address 4 GiB; WebKit and phones give it less)",
                bytes_text(need)
            ),
        );
    }
    if holding == Some(Holding::Int8Only) {
        notes.push(format!(
            "Its {:.0} M weights are held at 8 bits only: in f32 beside the file they would need {}, more than a page has; so it has no f16 form to compare with.",
            values as f64 / 1e6,
            bytes_text(Holding::F32.page_bytes(&spec))
        ));
    }
    // Never a bare "model": loose files whose config names nothing are named by their family.
    let name = options
        .name
        .clone()
        .or(folder.name())
        .or(name)
        .unwrap_or_else(|| format!("{} from your files", architecture.model_type()));
    let description = Description { name, architecture, casing, spec };
    let writer = Writer::to(&description, &vocab, out).or_else(|e| {
        fail(&shards[0].path, format!("its model file ({}) could not be made: {e}", bytes_text(2 * values)))
    })?;
    let (file, id, done) = write(writer, &plan, &shards, files, progress, &mut between).await?;
    Ok(Loaded { file, id, description, notes, tensor_bytes: done })
}

/// What a model of `values` weights needs in this thread's memory (the page's wasm memory), and
/// what that is, in words. A decoder is held as `holding` says (one too large for f32 weights
/// beside its file is held at 8 bits only) and built a tensor at a time from its file, so a file
/// outside this memory (`file_outside`: the page's, in JavaScript buffers) never comes into it
/// whole: at 8 bits it then needs its weights alone; in f32, the file's room holds a copy at
/// another precision. An encoder's file is converted whole, so it comes in.
fn memory_needed(
    holding: Option<Holding>,
    spec: &ModelSpec,
    values: u64,
    file_outside: bool,
) -> (u64, &'static str) {
    match (holding, file_outside) {
        (Some(Holding::F32), false) => (Holding::F32.page_bytes(spec), "its f16 file and f32 weights"),
        (Some(Holding::F32), true) => {
            (Holding::F32.page_bytes(spec), "its f32 weights and room for a copy at another precision")
        }
        (Some(Holding::Int8Only), false) => (
            Holding::Int8Only.page_bytes(spec),
            "its f16 file and its weights at 8 bits, the least it can be held in",
        ),
        (Some(Holding::Int8Only), true) => (
            Holding::Int8Only.model_bytes(spec),
            "its weights at 8 bits, the least it can be held in; its file lies outside it",
        ),
        (None, _) => (6 * values, "its f16 file and f32 weights"),
    }
}

/// Bytes of a tensor converted, or of the file hashed, between two of the page's turns.
pub const STEP_BYTES: usize = 8 << 20;

/// Each tensor of `plan`, read from its shard, converted to f16 and hashed a step at a time into
/// `writer`: the file, its id and the bytes of tensors read.
async fn write<S: FileSink>(
    mut writer: Writer<S>,
    plan: &[Step],
    shards: &[Shard],
    files: &dyn Files,
    progress: &mut dyn FnMut(Progress),
    between: &mut impl AsyncFnMut(),
) -> Result<(S, String, u64), CheckpointError> {
    let mut hasher = FileHasher::new(writer.head());
    let total = plan.iter().map(|s| s.source.as_ref().map_or(0, |(_, _, len)| *len)).sum();
    let mut done = 0;
    progress(Progress { done, total });
    // The reads of the next tensors are under way while this one is converted (a served file's
    // request waits for the network, a picked one's for the browser), within READ_AHEAD_BYTES.
    let mut reads = std::collections::VecDeque::new();
    let (mut next, mut ahead) = (0, 0u64);
    for step in plan {
        while next < plan.len() && (reads.is_empty() || ahead < READ_AHEAD_BYTES) {
            if let Some((shard, start, len)) = &plan[next].source {
                reads.push_back(Box::pin(files.read(shards[*shard].index, *start, *len)));
                ahead += len;
            }
            next += 1;
        }
        let count = step.count as usize;
        let mut f16_le = vec![0u8; 2 * count];
        if let Some((shard, _, len)) = &step.source {
            let shard = &shards[*shard];
            let read = reads.pop_front().expect("each step with a source has its read started");
            ahead -= len;
            let raw = read.await.or_else(|e| fail(&shard.path, format!("could not be read ({e})")))?;
            done += len;
            progress(Progress { done, total });
            // (At least one part: an empty tensor's type is checked too.)
            for first in (0..count.max(1)).step_by(STEP_BYTES / 4) {
                let part = first..(first + STEP_BYTES / 4).min(count);
                to_f16_part(step.dtype, &raw, part, &mut f16_le)
                    .or_else(|problem| fail(&shard.path, format!("{}: {problem}", step.name)))?;
                between().await;
            }
        }
        for part in f16_le.chunks(STEP_BYTES) {
            hasher.update(part);
            between().await;
        }
        writer.push(&f16_le);
    }
    Ok((writer.finish(), hasher.id(), done))
}

/// How many bytes of tensors may be read ahead of the one being converted (at least one tensor
/// is, whatever its size).
const READ_AHEAD_BYTES: u64 = 32 << 20;

/// The files, seen from the folder that holds `config.json` (the shallowest one: a
/// sentence-transformers folder has another in `1_Pooling/`).
struct Folder<'a> {
    entries: &'a [Entry],
    /// The folder's path with its trailing `/`, or empty.
    root: String,
}

impl<'a> Folder<'a> {
    fn new(entries: &'a [Entry]) -> Result<Folder<'a>, CheckpointError> {
        let config = entries
            .iter()
            .map(|e| e.path.as_str())
            .filter(|p| *p == "config.json" || p.ends_with("/config.json"))
            .min_by_key(|p| (p.matches('/').count(), p.len()));
        let Some(config) = config else {
            let listed: Vec<&str> = entries.iter().take(5).map(|e| e.path.as_str()).collect();
            let problem = if entries.is_empty() {
                "no files were given".to_string()
            } else {
                format!("missing: a model folder has one beside its weights (given: {})", listed.join(", "))
            };
            return fail("config.json", problem);
        };
        Ok(Folder { entries, root: config[..config.len() - "config.json".len()].to_string() })
    }

    /// The folder's own name, when the files came as a folder.
    fn name(&self) -> Option<String> {
        last_part(&self.root)
    }

    /// The path of `name` (relative to the folder), as the reader's files name it.
    fn path(&self, name: &str) -> String {
        format!("{}{name}", self.root)
    }

    /// The index of `name` (relative to the folder) among the files.
    fn find(&self, name: &str) -> Option<usize> {
        let path = self.path(name);
        self.entries.iter().position(|e| e.path == path)
    }

    /// The text of `name`, which must be there, at most `max` bytes.
    async fn text(&self, files: &dyn Files, name: &str, max: u64) -> Result<String, CheckpointError> {
        let path = self.path(name);
        let Some(index) = self.find(name) else { return fail(&path, "missing") };
        let size = self.entries[index].size;
        if size > max {
            return fail(&path, format!("{size} bytes; headlab reads at most {max} for this file"));
        }
        let bytes =
            files.read(index, 0, size).await.or_else(|e| fail(&path, format!("could not be read ({e})")))?;
        String::from_utf8(bytes).or_else(|_| fail(&path, "not UTF-8 text"))
    }

    /// [`Folder::text`] of `name` if the folder has it.
    async fn optional_text(
        &self,
        files: &dyn Files,
        name: &str,
        max: u64,
    ) -> Result<Option<String>, CheckpointError> {
        match self.find(name) {
            Some(_) => self.text(files, name, max).await.map(Some),
            None => Ok(None),
        }
    }
}

/// The pooling sentence-transformers' `modules.json` and its Pooling module's config say (mean,
/// not normalised, without them: the plain encoder's token rows averaged).
async fn pooling(
    folder: &Folder<'_>,
    files: &dyn Files,
    notes: &mut Vec<String>,
) -> Result<Pooling, CheckpointError> {
    let Some(text) = folder.optional_text(files, "modules.json", SMALL_FILE).await? else {
        return Ok(Pooling::Mean { normalize: false });
    };
    let modules_file = folder.path("modules.json");
    let modules: Value =
        serde_json::from_str(&text).or_else(|e| fail(&modules_file, format!("not JSON ({e})")))?;
    let modules = modules.as_array().map_or_else(|| fail(&modules_file, "not a list of modules"), Ok)?;
    let kind = |m: &Value| {
        m.get("type").and_then(Value::as_str).unwrap_or("").rsplit('.').next().unwrap_or("").to_string()
    };
    let normalize = modules.iter().any(|m| kind(m) == "Normalize");
    for other in
        modules.iter().map(kind).filter(|k| !["Transformer", "Pooling", "Normalize"].contains(&k.as_str()))
    {
        notes.push(format!(
            "modules.json's {other} module is not applied: the page's embedding is the pooled one"
        ));
    }
    let Some(module) = modules.iter().find(|m| kind(m) == "Pooling") else {
        return Ok(Pooling::Mean { normalize });
    };
    let dir = module.get("path").and_then(Value::as_str).unwrap_or("1_Pooling").trim_matches('/');
    let config_name = format!("{dir}/config.json");
    let config_file = folder.path(&config_name);
    let text = folder.text(files, &config_name, SMALL_FILE).await?;
    let config: Value =
        serde_json::from_str(&text).or_else(|e| fail(&config_file, format!("not JSON ({e})")))?;
    let on = |key: &str| config.get(key).and_then(Value::as_bool) == Some(true);
    let modes: Vec<&str> = [
        "cls_token",
        "mean_tokens",
        "max_tokens",
        "mean_sqrt_len_tokens",
        "weightedmean_tokens",
        "lasttoken",
    ]
    .into_iter()
    .filter(|m| on(&format!("pooling_mode_{m}")))
    .collect();
    match modes[..] {
        ["cls_token"] => Ok(Pooling::Cls { normalize }),
        ["mean_tokens"] => Ok(Pooling::Mean { normalize }),
        _ => fail(
            &config_file,
            format!("pooling modes {modes:?}: headlab pools by the mean or by [CLS], one of them"),
        ),
    }
}

/// The vocabulary (as `vocab.txt` text), its casing and the file it came from: `tokenizer.json`
/// if the folder has one, else `vocab.txt` with `tokenizer_config.json`'s `do_lower_case`
/// (uncased when it does not say).
async fn vocabulary(
    folder: &Folder<'_>,
    files: &dyn Files,
) -> Result<(String, Casing, String), CheckpointError> {
    if let Some(text) = folder.optional_text(files, "tokenizer.json", TOKENIZER_FILE).await? {
        let file = folder.path("tokenizer.json");
        let (vocab, casing) = wordpiece::from_tokenizer_json(&text)
            .map_err(|e| CheckpointError { file: file.clone(), problem: e.0 })?;
        return Ok((vocab, casing, file));
    }
    let Some(vocab) = folder.optional_text(files, "vocab.txt", TOKENIZER_FILE).await? else {
        return fail(
            &folder.path("tokenizer.json"),
            "missing, and so is vocab.txt: the page needs the model's tokenizer",
        );
    };
    let casing = match folder.optional_text(files, "tokenizer_config.json", SMALL_FILE).await? {
        Some(text) => {
            let value: Value = serde_json::from_str(&text)
                .or_else(|e| fail(&folder.path("tokenizer_config.json"), format!("not JSON ({e})")))?;
            match value.get("do_lower_case").and_then(Value::as_bool) {
                Some(false) => Casing::Cased,
                _ => Casing::Uncased,
            }
        }
        None => Casing::Uncased,
    };
    if vocab.lines().count() > wordpiece::MAX_VOCAB {
        return fail(&folder.path("vocab.txt"), format!("more than {} pieces", wordpiece::MAX_VOCAB));
    }
    Ok((vocab, casing, folder.path("vocab.txt")))
}

/// A GPT-2 folder's byte-level BPE tokenizer and the file it came from: `tokenizer.json` if the
/// folder has one, else `vocab.json` with `merges.txt`.
async fn decoder_vocabulary(
    folder: &Folder<'_>,
    files: &dyn Files,
) -> Result<(Bpe, String), CheckpointError> {
    if let Some(text) = folder.optional_text(files, "tokenizer.json", TOKENIZER_FILE).await? {
        let file = folder.path("tokenizer.json");
        let bpe = Bpe::from_tokenizer_json(&text)
            .map_err(|e| CheckpointError { file: file.clone(), problem: e.problem })?;
        return Ok((bpe, file));
    }
    let (Some(vocab), Some(merges)) = (
        folder.optional_text(files, "vocab.json", TOKENIZER_FILE).await?,
        folder.optional_text(files, "merges.txt", TOKENIZER_FILE).await?,
    ) else {
        return fail(
            &folder.path("tokenizer.json"),
            "missing, and vocab.json or merges.txt with it: the page needs the model's tokenizer (GPT-2's is tokenizer.json, or vocab.json and merges.txt)",
        );
    };
    let bpe = Bpe::from_files(&vocab, &merges)
        .map_err(|e| CheckpointError { file: folder.path(&e.file), problem: e.problem })?;
    Ok((bpe, folder.path("merges.txt")))
}

/// The files a served folder is asked for (a server lists no folder): every name the loader
/// reads by itself. [`referenced_files`] gives those the index and modules.json name.
pub const SERVED_NAMES: [&str; 9] = [
    "config.json",
    "modules.json",
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "tokenizer_config.json",
    "model.safetensors.index.json",
    "model.safetensors",
];

/// The further files the folder's file `name` (its text) names: the index's shards, the
/// Pooling module's config in modules.json; none outside the folder, none for other files.
pub fn referenced_files(name: &str, text: &str) -> Vec<String> {
    let Ok(value) = serde_json::from_str::<Value>(text) else { return Vec::new() };
    let names: BTreeSet<String> = match name {
        "model.safetensors.index.json" => value
            .get("weight_map")
            .and_then(Value::as_object)
            .map(|m| m.values().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default(),
        "modules.json" => value
            .as_array()
            .map(|modules| {
                modules
                    .iter()
                    .filter(|m| m.get("type").and_then(Value::as_str).is_some_and(|t| t.ends_with("Pooling")))
                    .filter_map(|m| m.get("path").and_then(Value::as_str))
                    .map(|dir| format!("{}/config.json", dir.trim_matches('/')))
                    .collect()
            })
            .unwrap_or_default(),
        _ => BTreeSet::new(),
    };
    let inside = |n: &String| {
        !n.is_empty() && !n.contains("..") && !n.starts_with('/') && !n.contains(':') && !n.contains('\\')
    };
    names.into_iter().filter(inside).take(1024).collect()
}

/// One safetensors file: where it is among the files, its header, and where its data starts.
struct Shard {
    index: usize,
    path: String,
    metadata: Metadata,
    data_start: u64,
}

/// The weight files: `model.safetensors.index.json`'s shards, or `model.safetensors`, each
/// header read and validated.
async fn shards(folder: &Folder<'_>, files: &dyn Files) -> Result<Vec<Shard>, CheckpointError> {
    let index_name = "model.safetensors.index.json";
    let names: Vec<String> = match folder.optional_text(files, index_name, SMALL_FILE * 16).await? {
        Some(text) => {
            let index_file = folder.path(index_name);
            let value: Value =
                serde_json::from_str(&text).or_else(|e| fail(&index_file, format!("not JSON ({e})")))?;
            let map = value.get("weight_map").and_then(Value::as_object);
            let map = map.map_or_else(|| fail(&index_file, "it has no weight_map"), Ok)?;
            let set: BTreeSet<&str> = map.values().filter_map(Value::as_str).collect();
            if set.is_empty() || set.iter().any(|n| n.contains("..") || n.starts_with('/')) {
                return fail(&index_file, "its weight_map names no shard, or one outside the folder");
            }
            set.into_iter().map(str::to_string).collect()
        }
        None => vec!["model.safetensors".to_string()],
    };
    let mut shards = Vec::with_capacity(names.len());
    for name in names {
        let path = folder.path(&name);
        let Some(index) = folder.find(&name) else {
            let problem = if folder.find("pytorch_model.bin").is_some() {
                "missing; the folder has pytorch_model.bin, PyTorch's pickle format, which the page does not read (save the model with safe_serialization=True)"
            } else {
                "missing"
            };
            return fail(&path, problem);
        };
        shards.push(header(files, index, path).await?);
    }
    Ok(shards)
}

/// The header of the safetensors file `index`, validated against the file's size.
async fn header(files: &dyn Files, index: usize, path: String) -> Result<Shard, CheckpointError> {
    let size = files.entries()[index].size;
    if size < 8 {
        return fail(
            &path,
            format!("truncated: {size} bytes, not even the 8 that give a safetensors header's length"),
        );
    }
    let bytes = files.read(index, 0, 8).await.or_else(|e| fail(&path, format!("could not be read ({e})")))?;
    let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
    if n > MAX_HEADER || 8 + n > size {
        return fail(
            &path,
            format!(
                "its header length {n} goes beyond the file ({size} bytes): not safetensors, or cut short"
            ),
        );
    }
    let raw = files.read(index, 8, n).await.or_else(|e| fail(&path, format!("could not be read ({e})")))?;
    let metadata = parse_header(&raw).or_else(|problem| fail(&path, problem))?;
    let data_start = 8 + n;
    let data_len = metadata.data_len() as u64;
    if data_start + data_len > size {
        return fail(
            &path,
            format!(
                "truncated: its header places {data_len} bytes of tensors after itself, the file has {}",
                size - data_start
            ),
        );
    }
    Ok(Shard { index, path, metadata, data_start })
}

/// A safetensors header's JSON, checked here so that every refusal names its tensor: no name
/// twice, every dtype known, each tensor's offsets the size its shape and dtype give (no size
/// overflowing), and the tensors in order with neither overlap nor gap. `__metadata__` is not
/// read.
pub fn parse_header(raw: &[u8]) -> Result<Metadata, String> {
    let text = std::str::from_utf8(raw).map_err(|_| "its header is not UTF-8".to_string())?;
    let header: HeaderEntries = serde_json::from_str(text.trim_end())
        .map_err(|e| format!("its header is not a valid safetensors header ({e})"))?;
    if let Some(name) = header.twice {
        return Err(format!("its header names the tensor {} twice", shown(&name)));
    }
    let mut tensors = Vec::with_capacity(header.entries.len());
    for (name, value) in header.entries.into_iter().filter(|(name, _)| name != "__metadata__") {
        let info = tensor_info(&name, value)?;
        tensors.push((name, info));
    }
    tensors.sort_by_key(|(_, info)| info.data_offsets);
    let mut end = 0;
    for (name, info) in &tensors {
        let start = info.data_offsets.0;
        if start != end {
            let what = if start < end { "overlapping it" } else { "leaving a gap" };
            return Err(format!(
                "tensor {} starts at byte {start} of the data, where the one before it ends at {end} ({what})",
                shown(name)
            ));
        }
        end = info.data_offsets.1;
    }
    Metadata::new(None, tensors).map_err(|e| format!("its header is not a valid safetensors header ({e})"))
}

/// A tensor's entry in a safetensors header, with its size checked against its offsets.
fn tensor_info(name: &str, value: Value) -> Result<TensorInfo, String> {
    let info: TensorInfo = serde_json::from_value(value).map_err(|e| {
        let e = e.to_string();
        // serde lists every dtype it knows after an unknown one: name the one found instead.
        match e.split_once("unknown variant `").and_then(|(_, rest)| rest.split_once('`')) {
            Some((dtype, _)) => format!(
                "its header gives the tensor {} the unknown dtype {:?}",
                shown(name),
                dtype.chars().take(20).collect::<String>()
            ),
            None => format!("its header's entry for the tensor {} is not valid ({e})", shown(name)),
        }
    })?;
    let bits = info.shape.iter().try_fold(info.dtype.bitsize() as u64, |n, &d| n.checked_mul(d as u64));
    let whole = |b: &u64| b.is_multiple_of(8);
    let Some(bytes) = bits.filter(whole).map(|b| b / 8) else {
        let what =
            if bits.is_none() { "is too large for any file" } else { "is not a whole number of bytes" };
        return Err(format!(
            "the tensor {}'s shape {:?} of {:?} {what}",
            shown(name),
            info.shape,
            info.dtype
        ));
    };
    let (start, end) = info.data_offsets;
    if end < start || (end - start) as u64 != bytes {
        return Err(format!(
            "the tensor {}'s offsets {start}..{end} hold {} bytes, where its shape {:?} of {:?} needs {bytes}",
            shown(name),
            end.saturating_sub(start),
            info.shape,
            info.dtype
        ));
    }
    Ok(info)
}

/// A tensor's name as a refusal quotes it (the file is untrusted: at most 100 characters).
fn shown(name: &str) -> String {
    let cut: String = name.chars().take(100).collect();
    if cut.len() < name.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}

/// A safetensors header's entries in the file's order, and the first name given twice (a JSON
/// map with a repeated key is read by serde as its last value, silently).
struct HeaderEntries {
    entries: Vec<(String, Value)>,
    twice: Option<String>,
}

impl<'de> serde::Deserialize<'de> for HeaderEntries {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> serde::de::Visitor<'de> for Entries {
            type Value = HeaderEntries;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of tensor names to their entries")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<HeaderEntries, A::Error> {
                let (mut entries, mut seen, mut twice) = (Vec::new(), BTreeSet::new(), None);
                while let Some((name, value)) = map.next_entry::<String, Value>()? {
                    if !seen.insert(name.clone()) && twice.is_none() {
                        twice = Some(name.clone());
                    }
                    entries.push((name, value));
                }
                Ok(HeaderEntries { entries, twice })
            }
        }
        deserializer.deserialize_map(Entries)
    }
}

/// One tensor of the model file: its name there, how many values, and where they come from
/// (shard, start, length; `None`: zeros, for a table the architecture lacks).
struct Step {
    name: String,
    count: u64,
    dtype: Dtype,
    source: Option<(usize, u64, u64)>,
}

/// Which checkpoint tensor gives each of the model file's, shapes and dtypes checked against the
/// config; what is left over goes into a note.
fn plan(
    architecture: Architecture,
    spec: &crate::model::spec::ModelSpec,
    shards: &[Shard],
    notes: &mut Vec<String>,
) -> Result<Vec<Step>, CheckpointError> {
    let mut all: HashMap<String, (usize, TensorInfo)> = HashMap::new();
    for (s, shard) in shards.iter().enumerate() {
        for (name, info) in shard.metadata.tensors() {
            if let Some((other, _)) = all.insert(name.clone(), (s, info.clone())) {
                return fail(&shard.path, format!("{name} is also in {}", shards[other].path));
            }
        }
    }
    let table = Table::of(architecture);
    let (prefixes, probe) = (table.prefixes, table.probe);
    let Some(prefix) = prefixes.iter().find(|p| all.contains_key(&format!("{p}{probe}"))) else {
        return fail(
            &shards[0].path,
            format!("{probe} is missing (under none of the prefixes {prefixes:?})"),
        );
    };
    let mut used = BTreeSet::new();
    let mut steps = Vec::new();
    for (name, shape) in tensor_names(architecture, spec) {
        let count: u64 = shape.iter().map(|&d| d as u64).product();
        let candidates = table.source_names(&name);
        if candidates.is_empty() {
            steps.push(Step { name, count, dtype: Dtype::F16, source: None });
            continue;
        }
        let found = candidates.iter().map(|c| format!("{prefix}{c}")).find(|c| all.contains_key(c));
        let Some(source) = found else {
            let file =
                if shards.len() == 1 { shards[0].path.as_str() } else { "model.safetensors.index.json" };
            return fail(file, format!("{prefix}{} is missing", candidates[0]));
        };
        let (s, info) = &all[&source];
        let path = &shards[*s].path;
        if !matches!(info.dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16) {
            return fail(path, format!("{source} is {:?}; headlab reads F32, F16 and BF16", info.dtype));
        }
        let width = (info.dtype.bitsize() / 8) as u64;
        let start = shards[*s].data_start + info.data_offsets.0 as u64;
        // The token-type table: the page uses the first type; a model with one type is padded.
        let (ok, len) = if name.ends_with("token_type_embeddings.weight") {
            let fits = info.shape.len() == 2 && info.shape[0] >= 1 && info.shape[1] == spec.d_model;
            (fits, width * spec.d_model as u64)
        } else {
            (info.shape == shape, width * count)
        };
        if !ok {
            return fail(
                path,
                format!("{source} has shape {:?}; config.json makes it {shape:?}", info.shape),
            );
        }
        used.insert(source.clone());
        let dtype = info.dtype;
        steps.push(Step { name, count, dtype, source: Some((*s, start, len)) });
    }
    let mut unused: Vec<&String> = all.keys().filter(|n| !used.contains(*n)).collect();
    unused.sort();
    if !unused.is_empty() {
        let shown: Vec<&str> = unused.iter().take(4).map(|s| s.as_str()).collect();
        let more = if unused.len() > 4 { format!(" and {} more", unused.len() - 4) } else { String::new() };
        notes.push(format!(
            "{} tensor{} the page does not use (a pooler, a language-model head, a mask buffer) {} ignored: {}{more}",
            unused.len(),
            if unused.len() == 1 { "" } else { "s" },
            if unused.len() == 1 { "was" } else { "were" },
            shown.join(", ")
        ));
    }
    Ok(steps)
}

/// `raw` (values of `dtype`, little-endian) as `count` f16 values, little-endian; the first
/// `raw` holds fewer of are zeros (a token-type table of one type). A NaN, an infinity or a
/// value beyond f16's range is refused with its position.
pub fn to_f16(dtype: Dtype, raw: &[u8], count: usize) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; 2 * count];
    to_f16_part(dtype, raw, 0..count, &mut out)?;
    Ok(out)
}

/// [`to_f16`]'s values `part` (of `out`'s `out.len() / 2`) into their place in `out`: a large
/// tensor converted a part at a time gives the same bytes and the same refusals.
fn to_f16_part(dtype: Dtype, raw: &[u8], part: std::ops::Range<usize>, out: &mut [u8]) -> Result<(), String> {
    let put = |out: &mut [u8], i: usize, v: f32| -> Result<(), String> {
        if !v.is_finite() {
            return Err(format!("value {i} is {v}: the weights are damaged"));
        }
        let h = f16::from_f32(v);
        if !h.is_finite() {
            return Err(format!(
                "value {i} is {v}, beyond f16's range (±65504) in which the page keeps weights"
            ));
        }
        out[2 * i..2 * i + 2].copy_from_slice(&h.to_le_bytes());
        Ok(())
    };
    // The part's values that `raw` holds, numbered from the tensor's first.
    let values = |width: usize| {
        let (start, end) = ((part.start * width).min(raw.len()), (part.end * width).min(raw.len()));
        raw[start..end].chunks_exact(width).enumerate().map(move |(i, b)| (part.start + i, b))
    };
    match dtype {
        Dtype::F32 => {
            for (i, b) in values(4) {
                put(out, i, f32::from_le_bytes([b[0], b[1], b[2], b[3]]))?;
            }
        }
        Dtype::BF16 => {
            for (i, b) in values(2) {
                put(out, i, f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16))?;
            }
        }
        Dtype::F16 => {
            for (i, b) in values(2) {
                let h = f16::from_le_bytes([b[0], b[1]]);
                if !h.is_finite() {
                    return Err(format!("value {i} is {h}: the weights are damaged"));
                }
                out[2 * i..2 * i + 2].copy_from_slice(b);
            }
        }
        other => return Err(format!("it is {other:?}; headlab reads F32, F16 and BF16")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// `values` as `dtype`'s little-endian bytes.
    fn raw(dtype: Dtype, values: &[f32]) -> Vec<u8> {
        match dtype {
            Dtype::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            Dtype::BF16 => values.iter().flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes()).collect(),
            _ => values.iter().flat_map(|&v| f16::from_f32(v).to_le_bytes()).collect(),
        }
    }

    #[test]
    fn a_tensor_converted_in_parts_gives_the_bytes_and_refusals_of_one_conversion() {
        let values: Vec<f32> = (0..37).map(|i| (i as f32 - 18.0) * 0.37).collect();
        let mut damaged = values.clone();
        damaged[23] = f32::NAN;
        for dtype in [Dtype::F32, Dtype::BF16, Dtype::F16] {
            // Whole, and with fewer values than the tensor holds (the rest are zeros).
            for (bytes, count) in
                [(raw(dtype, &values), 37), (raw(dtype, &values[..30]), 37), (raw(dtype, &damaged), 37)]
            {
                let whole = to_f16(dtype, &bytes, count);
                for per in [1, 4, 10, 36] {
                    let mut out = vec![0u8; 2 * count];
                    let parts = (0..count)
                        .step_by(per)
                        .map(|a| to_f16_part(dtype, &bytes, a..(a + per).min(count), &mut out));
                    let cut = parts.collect::<Result<Vec<()>, String>>().map(|_| out);
                    assert_eq!(cut, whole, "{dtype:?}, parts of {per}");
                }
            }
            let refused = to_f16(dtype, &raw(dtype, &damaged), 37).unwrap_err();
            assert!(refused.starts_with("value 23 is NaN"), "{refused}");
        }
        assert!(to_f16(Dtype::I64, &[], 0).unwrap_err().contains("headlab reads F32, F16 and BF16"));
    }
}
