//! The page's model file: what a model is (its name, architecture, casing and [`ModelSpec`]),
//! its vocabulary and every weight in f16, in one buffer: a BERT-family encoder's or a GPT-2
//! decoder's. The built-in model is served in this
//! form (`minilm-f16.bin`, made by `scripts/build-model-asset.sh`); a checkpoint the reader
//! loads is converted into it while it is read ([`crate::model::load::checkpoint`]); the workers receive it
//! from the page.
//!
//! ```text
//! "HEADLAB-MODEL-2\n"                16 bytes: magic and format version
//! header length                      u32, little-endian
//! header                             JSON: {"name", "architecture", "casing", "spec": {...}}
//! vocabulary                         UTF-8 (its length is in the header): an encoder's vocab.txt
//!                                    text; a decoder's byte-level BPE as Bpe::canonical_json
//! weights                            f16 little-endian, the tensors of names::tensor_names(architecture,
//!                                    spec) in that order, each its shape's product of values
//! ```
//!
//! The weights' layout follows from the spec alone, so a file is exactly as long as its header
//! says and every range is checked before a value is read. f16 keeps about three significant
//! digits; the tests measure what that does to the attention maps and the sentence embedding
//! (README, "The trained model").

use std::collections::HashMap;

use half::f16;
use serde::Serialize;
use serde_json::Value;

use crate::model::load::config::{Architecture, LIMITS};
use crate::model::load::fields::Field;
use crate::model::load::names::tensor_names;
use crate::model::spec::{Activation, ModelSpec, Pooling};
use crate::model::tokenize::wordpiece::Casing;

const MAGIC: &[u8; 16] = b"HEADLAB-MODEL-2\n";

/// The most bytes a header may have: a spec and a name need a few hundred.
const MAX_HEADER: u32 = 1 << 16;

/// Why a model file could not be read. Each is a sentence for the page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AssetError {
    /// Not a headlab model file (or another version of the format).
    NotAnAsset,
    /// Shorter than its header says: a download that stopped early.
    Truncated {
        /// Bytes the file should have at least.
        expected: u64,
        /// Bytes it has.
        got: u64,
    },
    /// The header cannot be parsed, or describes a file other than this one.
    BadHeader(String),
    /// The bytes are not the asset this page was built with (damaged, or another build).
    Checksum {
        /// SHA-256 of what arrived, hex.
        got: String,
    },
}

/// SHA-256 of the asset `scripts/build-model-asset.sh` makes from the pinned checkpoint (the
/// converter is deterministic). The page refuses any other bytes; the script and
/// `tests/minilm_f16.rs` check the built asset against this.
pub const ASSET_SHA256: &str = "f840232194fea03fdf3839a79b4de38c36a16c58fedcf15d03cfe544952d4fce";

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    FileHasher::new(bytes).hex()
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the page knows a model file by: the first 16 hex digits of its SHA-256 (the file is
/// made deterministically from the weights, so the same checkpoint always has the same id).
pub fn file_id(bytes: &[u8]) -> String {
    FileHasher::new(bytes).id()
}

/// A model file's SHA-256 ([`sha256_hex`], [`file_id`]) computed as it is written, from its
/// bytes in order.
pub struct FileHasher(sha2::Sha256);

impl FileHasher {
    /// The hash of `start`, the file's first bytes.
    pub fn new(start: &[u8]) -> FileHasher {
        use sha2::Digest;
        let mut hasher = FileHasher(sha2::Sha256::new());
        hasher.update(start);
        hasher
    }

    /// Adds the file's next bytes, a MiB at a time: a browser's wasm engine first runs a function
    /// as baseline code and swaps in its optimised build only for later calls, so one call over a
    /// whole 174 MB file would run at baseline speed throughout (BENCHMARKS.md section 11: 2.6x
    /// slower loads).
    pub fn update(&mut self, bytes: &[u8]) {
        use sha2::Digest;
        bytes.chunks(1 << 20).for_each(|chunk| self.0.update(chunk));
    }

    /// The lower-case hex SHA-256 of the bytes added.
    pub fn hex(self) -> String {
        use sha2::Digest;
        hex(&self.0.finalize())
    }

    /// The id of the bytes added: [`file_id`] of the whole file.
    pub fn id(self) -> String {
        self.hex()[..16].to_string()
    }
}

/// Checks `bytes` against [`ASSET_SHA256`] before anything is decoded. When they differ, the
/// error names the damage where the first bytes can tell (not an asset, cut short in its
/// header), and is a checksum mismatch otherwise.
pub fn verify(bytes: &[u8]) -> Result<(), AssetError> {
    verify_hashed(bytes, sha256_hex(bytes))
}

/// [`verify`] with the hash computed a few MiB at a time and `between()` awaited between the
/// pieces: the page's thread gives the browser a turn (hashing the built-in 43 MiB at once held
/// it for over 100 ms, BENCHMARKS.md section 20).
pub async fn verify_in_pieces(bytes: &[u8], mut between: impl AsyncFnMut()) -> Result<(), AssetError> {
    let mut hasher = FileHasher::new(&[]);
    for piece in bytes.chunks(4 << 20) {
        hasher.update(piece);
        between().await;
    }
    verify_hashed(bytes, hasher.hex())
}

/// [`verify`] for `bytes` whose SHA-256 is `got` (hex).
fn verify_hashed(bytes: &[u8], got: String) -> Result<(), AssetError> {
    if got == ASSET_SHA256 {
        return Ok(());
    }
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(AssetError::NotAnAsset);
    }
    let len = bytes.len() as u64;
    if len < 20 {
        return Err(AssetError::Truncated { expected: 20, got: len });
    }
    let header_len = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes")) as u64;
    if len < 20 + header_len {
        return Err(AssetError::Truncated { expected: 20 + header_len, got: len });
    }
    Err(AssetError::Checksum { got })
}

impl std::fmt::Display for AssetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AssetError::NotAnAsset => {
                write!(f, "the model file is not a headlab model (wrong format or version)")
            }
            AssetError::Truncated { expected, got } => {
                write!(f, "the model file is incomplete: {got} of at least {expected} bytes arrived")
            }
            AssetError::BadHeader(e) => write!(f, "the model file's header is damaged ({e})"),
            AssetError::Checksum { got } => write!(
                f,
                "the model file is damaged or from another build: its SHA-256 is {}…, not the {}… this page expects",
                &got[..12.min(got.len())],
                &ASSET_SHA256[..12]
            ),
        }
    }
}

impl std::error::Error for AssetError {}

/// What a model is, beside its weights: the page's name for it, its architecture, its
/// tokenizer's casing and its shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Description {
    /// What the page calls it ("all-MiniLM-L6-v2").
    pub name: String,
    /// The family its checkpoint came from.
    pub architecture: Architecture,
    /// Its tokenizer's casing.
    pub casing: Casing,
    /// Its shape (pooling included).
    pub spec: ModelSpec,
}

/// A decoded model file: the description, f32 tensors by name, and the vocabulary text.
#[derive(Clone, Debug, PartialEq)]
pub struct Asset {
    /// What the model is.
    pub description: Description,
    /// Tensors by their name in [`tensor_names`]: shape and values.
    pub tensors: HashMap<String, (Vec<usize>, Vec<f32>)>,
    /// `vocab.txt`.
    pub vocab: String,
}

/// Where a model file being written goes: this thread's memory (a `Vec<u8>`), or elsewhere (the
/// page's file, in JavaScript buffers of at most 1 GiB outside its wasm memory, where its workers
/// copy it from).
pub trait FileSink {
    /// Makes room for the whole file, `len` bytes, before its first byte; a sink that cannot
    /// hold that many says why.
    fn begin(&mut self, len: usize) -> Result<(), String>;
    /// Appends the file's next bytes.
    fn append(&mut self, bytes: &[u8]);
    /// Whether the file lies outside this thread's memory, so that a model built from it a
    /// tensor at a time never holds it there.
    fn outside_memory(&self) -> bool {
        false
    }
}

impl FileSink for Vec<u8> {
    fn begin(&mut self, len: usize) -> Result<(), String> {
        self.try_reserve_exact(len).map_err(|_| format!("{len} bytes could not be allocated"))
    }

    fn append(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Writes a model file as its weights arrive, one tensor at a time in [`tensor_names`] order:
/// the header and vocabulary first, then each tensor's f16 bytes, so a checkpoint becomes a
/// model file without a second full copy of its weights. The file goes to a [`FileSink`]: a
/// `Vec<u8>` by default.
#[derive(Debug)]
pub struct Writer<S: FileSink = Vec<u8>> {
    out: S,
    /// The header and the vocabulary, the file's first bytes.
    head: Vec<u8>,
    tensors: std::vec::IntoIter<(String, Vec<usize>)>,
}

impl Writer {
    /// A file in memory for `description`'s model with the vocabulary `vocab`, room reserved for
    /// every weight.
    ///
    /// # Panics
    /// If that room cannot be allocated, as `Vec::with_capacity` would.
    pub fn new(description: &Description, vocab: &str) -> Writer {
        Writer::to(description, vocab, Vec::new()).unwrap_or_else(|e| panic!("a model file: {e}"))
    }
}

impl<S: FileSink> Writer<S> {
    /// A file for `description`'s model with the vocabulary `vocab`, written to `out`, which is
    /// asked first for the whole file's room (its refusal is the error).
    pub fn to(description: &Description, vocab: &str, mut out: S) -> Result<Writer<S>, String> {
        let spec = &description.spec;
        let header = serde_json::to_string(&Header::of(description, vocab.len()))
            .expect("a header of strings, numbers and booleans is JSON");
        let tensors = tensor_names(description.architecture, spec);
        let values: usize = tensors.iter().map(|(_, shape)| shape.iter().product::<usize>()).sum();
        let mut head = Vec::with_capacity(MAGIC.len() + 4 + header.len() + vocab.len());
        head.extend_from_slice(MAGIC);
        head.extend_from_slice(&(header.len() as u32).to_le_bytes());
        head.extend_from_slice(header.as_bytes());
        head.extend_from_slice(vocab.as_bytes());
        out.begin(head.len() + 2 * values)?;
        out.append(&head);
        Ok(Writer { out, head, tensors: tensors.into_iter() })
    }

    /// The file's first bytes: its header and vocabulary, written before any tensor.
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// The name and shape of the tensor the file takes next, or `None` once it is whole.
    pub fn next_tensor(&self) -> Option<&(String, Vec<usize>)> {
        self.tensors.as_slice().first()
    }

    /// Appends the next tensor as f16 values (`f16_le`, two bytes each, little-endian).
    ///
    /// # Panics
    /// If the file is whole or `f16_le` is not the next tensor's length: the caller reads the
    /// shapes from [`Writer::next_tensor`].
    pub fn push(&mut self, f16_le: &[u8]) {
        let (name, shape) = self.tensors.next().expect("a tensor the file still needs");
        assert_eq!(f16_le.len(), 2 * shape.iter().product::<usize>(), "{name}: its shape's values");
        self.out.append(f16_le);
    }

    /// The file, once every tensor is in.
    ///
    /// # Panics
    /// If a tensor is missing.
    pub fn finish(self) -> S {
        assert!(self.tensors.as_slice().is_empty(), "every tensor pushed");
        self.out
    }
}

/// A model file from f32 tensors (rounded to f16): `get` gives each tensor of
/// [`tensor_names`]'s list by name, with that shape's number of values.
pub fn encode(description: &Description, vocab: &str, mut get: impl FnMut(&str) -> Vec<f32>) -> Vec<u8> {
    let mut writer = Writer::new(description, vocab);
    while let Some((name, _)) = writer.next_tensor() {
        let bytes: Vec<u8> = get(name).iter().flat_map(|&v| f16::from_f32(v).to_le_bytes()).collect();
        writer.push(&bytes);
    }
    writer.finish()
}

/// What a model file holds (an encoder or a decoder, its name and shape), from its header alone.
pub fn describe(bytes: &[u8]) -> Result<Description, AssetError> {
    header(bytes).map(|(description, _, _)| description)
}

/// [`describe`] of a file wherever it lies ([`FileBytes`]), reading its header alone.
pub fn describe_file(bytes: &dyn FileBytes) -> Result<Description, AssetError> {
    describe(&bytes.get(0..bytes.byte_len().min(MAGIC.len() + 4 + MAX_HEADER as usize)))
}

/// The file's description, its vocabulary's length and its header's.
fn header(bytes: &[u8]) -> Result<(Description, u64, u32), AssetError> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(AssetError::NotAnAsset);
    }
    let got = bytes.len() as u64;
    let need =
        |expected: u64| if got < expected { Err(AssetError::Truncated { expected, got }) } else { Ok(()) };
    need(MAGIC.len() as u64 + 4)?;
    let header_len = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
    if header_len > MAX_HEADER {
        return Err(AssetError::BadHeader(format!("a header of {header_len} bytes")));
    }
    need(20 + header_len as u64)?;
    let header = std::str::from_utf8(&bytes[20..20 + header_len as usize])
        .map_err(|_| AssetError::BadHeader("not UTF-8".into()))?;
    let (description, vocab_len) = read_header(header).map_err(AssetError::BadHeader)?;
    Ok((description, vocab_len, header_len))
}

/// Reads a model file, checking the header's sizes against [`LIMITS`] and every range against
/// the file's length before a value is read.
pub fn decode(bytes: &[u8]) -> Result<Asset, AssetError> {
    let mut decoding = Decoding::new(bytes)?;
    while decoding.step() {}
    Ok(decoding.finish())
}

/// [`decode`] with `between()` awaited after each tensor is converted: the page's thread gives
/// the browser a turn (converting all of a model's tensors at once held it for over 100 ms,
/// BENCHMARKS.md section 20).
pub async fn decode_in_steps(bytes: &[u8], mut between: impl AsyncFnMut()) -> Result<Asset, AssetError> {
    let mut decoding = Decoding::new(bytes)?;
    while decoding.step() {
        between().await;
    }
    Ok(decoding.finish())
}

/// Where a model file's bytes are: in this thread's memory (`&[u8]`), or elsewhere (a worker's
/// file, in JavaScript buffers outside its wasm memory), read a range at a time.
pub trait FileBytes {
    /// The file's length in bytes.
    fn byte_len(&self) -> usize;
    /// Bytes `range` (within [`FileBytes::byte_len`]).
    fn get(&self, range: std::ops::Range<usize>) -> std::borrow::Cow<'_, [u8]>;
}

impl FileBytes for &[u8] {
    fn byte_len(&self) -> usize {
        <[u8]>::len(self)
    }

    fn get(&self, range: std::ops::Range<usize>) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Borrowed(&self[range])
    }
}

/// A model file checked but not converted: each tensor is read and converted to f32 when it is
/// taken ([`Opened::take`]), so a model built a block at a time never holds every weight in f32
/// at once (GPT-2 Large's would take 3.1 GB beside its 1.5 GB file), nor, when the file lies
/// outside its memory, the file.
pub struct Opened<'b> {
    /// What the model is.
    pub description: Description,
    /// The tokenizer's text.
    pub vocab: String,
    /// Each tensor not yet taken: its name, shape and bytes (a list: a model has a few hundred,
    /// and a map of this kind would be one more map's code in the wasm).
    tensors: Vec<(String, Vec<usize>, std::ops::Range<usize>)>,
    bytes: &'b dyn FileBytes,
}

impl Opened<'_> {
    /// The tensor `name`, converted to f32 now; `None` if the file has none of that name (or it
    /// was taken already).
    pub fn take(&mut self, name: &str) -> Option<(Vec<usize>, Vec<f32>)> {
        let at = self.tensors.iter().position(|(n, _, _)| n == name)?;
        let (_, shape, range) = self.tensors.swap_remove(at);
        let raw = self.bytes.get(range);
        let values = raw.chunks_exact(2).map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32()).collect();
        Some((shape, values))
    }
}

/// Opens a model file: the header's sizes checked against [`LIMITS`] and every range against the
/// file's length, as [`decode`] checks them, reading only the header and the vocabulary.
pub fn open(bytes: &dyn FileBytes) -> Result<Opened<'_>, AssetError> {
    let got = bytes.byte_len();
    // The header is at most MAX_HEADER bytes: what it says is checked against the whole file's
    // length when the file is shorter than that.
    let prefix = bytes.get(0..got.min(MAGIC.len() + 4 + MAX_HEADER as usize));
    let (description, vocab_len, header_len) = header(&prefix)?;
    let tensors = tensor_names(description.architecture, &description.spec);
    let values: u64 = tensors.iter().map(|(_, shape)| shape.iter().product::<usize>() as u64).sum();
    let vocab_start = 20 + header_len as u64;
    let expected = vocab_start + vocab_len + 2 * values;
    if (got as u64) < expected {
        return Err(AssetError::Truncated { expected, got: got as u64 });
    }
    if got as u64 > expected {
        return Err(AssetError::BadHeader(format!("{} bytes after the last weight", got as u64 - expected)));
    }
    let vocab = bytes.get(vocab_start as usize..(vocab_start + vocab_len) as usize);
    let vocab = std::str::from_utf8(&vocab)
        .map_err(|_| AssetError::BadHeader("the vocabulary is not UTF-8".into()))?
        .to_string();
    let mut at = (vocab_start + vocab_len) as usize;
    let tensors = tensors
        .into_iter()
        .map(|(name, shape)| {
            let len = 2 * shape.iter().product::<usize>();
            at += len;
            (name, shape, at - len..at)
        })
        .collect();
    Ok(Opened { description, vocab, tensors, bytes })
}

/// A model file checked and being converted, a tensor per [`Decoding::step`].
struct Decoding<'b> {
    description: Description,
    vocab: String,
    /// The tensors still to convert, in the file's order.
    left: std::vec::IntoIter<InFile<'b>>,
    /// The tensor being converted, and its values so far.
    current: Option<(InFile<'b>, Vec<f32>)>,
    /// Bytes converted per step at most ([`DECODED_PER_STEP`]; fewer in tests).
    per_step: usize,
    out: HashMap<String, (Vec<usize>, Vec<f32>)>,
}

/// A tensor in a model file: its name, shape and f16 bytes.
type InFile<'b> = (String, Vec<usize>, &'b [u8]);

/// Bytes of f16 values one [`Decoding::step`] converts at most (a few ms): a large tensor (GPT-2's
/// embedding table is 77 MB) takes several steps.
const DECODED_PER_STEP: usize = 8 << 20;

impl<'b> Decoding<'b> {
    /// Checks the header and the sizes; converts nothing yet.
    fn new(bytes: &'b [u8]) -> Result<Decoding<'b>, AssetError> {
        let (description, vocab_len, header_len) = header(bytes)?;
        let got = bytes.len() as u64;
        let need = |expected: u64| {
            if got < expected {
                Err(AssetError::Truncated { expected, got })
            } else {
                Ok(())
            }
        };
        let tensors = tensor_names(description.architecture, &description.spec);
        let values: u64 = tensors.iter().map(|(_, shape)| shape.iter().product::<usize>() as u64).sum();
        let vocab_start = 20 + header_len as u64;
        let expected = vocab_start + vocab_len + 2 * values;
        need(expected)?;
        if got > expected {
            return Err(AssetError::BadHeader(format!("{} bytes after the last weight", got - expected)));
        }
        let vocab = std::str::from_utf8(&bytes[vocab_start as usize..(vocab_start + vocab_len) as usize])
            .map_err(|_| AssetError::BadHeader("the vocabulary is not UTF-8".into()))?
            .to_string();
        let mut at = (vocab_start + vocab_len) as usize;
        let out = HashMap::with_capacity(tensors.len());
        let left: Vec<_> = tensors
            .into_iter()
            .map(|(name, shape)| {
                let count: usize = shape.iter().product();
                at += 2 * count;
                (name, shape, &bytes[at - 2 * count..at])
            })
            .collect();
        Ok(Decoding {
            description,
            vocab,
            left: left.into_iter(),
            current: None,
            per_step: DECODED_PER_STEP,
            out,
        })
    }

    /// Converts the next `per_step` bytes of the tensor under way (or of the next one); `false`
    /// once none is left.
    fn step(&mut self) -> bool {
        let ((name, shape, raw), mut values) = match self.current.take() {
            Some(current) => current,
            None => match self.left.next() {
                Some(next) => {
                    let values = Vec::with_capacity(next.2.len() / 2);
                    (next, values)
                }
                None => return false,
            },
        };
        let from = 2 * values.len();
        let to = (from + self.per_step).min(raw.len());
        values.extend(raw[from..to].chunks_exact(2).map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32()));
        match to < raw.len() {
            true => self.current = Some(((name, shape, raw), values)),
            false => {
                self.out.insert(name, (shape, values));
            }
        }
        self.current.is_some() || self.left.len() > 0
    }

    /// The converted asset (converts any tensors left).
    fn finish(mut self) -> Asset {
        while self.step() {}
        Asset { description: self.description, tensors: self.out, vocab: self.vocab }
    }
}

/// The model file's header as JSON, field for field: its order is the bytes' (and so the file's
/// id), the derive writes the fields in the order they are declared. Read by name
/// ([`Header::read`], `crate::model::load::fields`).
#[derive(Serialize)]
struct Header {
    name: Field<String>,
    architecture: Field<String>,
    casing: Field<String>,
    vocab_bytes: Field<u64>,
    spec: Field<HeaderSpec>,
}

/// The header's `spec`.
#[derive(Serialize)]
struct HeaderSpec {
    layers: Field<u64>,
    heads: Field<u64>,
    d_model: Field<u64>,
    ffn: Field<u64>,
    vocab: Field<u64>,
    positions: Field<u64>,
    activation: Field<String>,
    pooling: Field<String>,
    normalize: Field<bool>,
    layer_norm_eps: Field<f64>,
}

impl crate::model::load::fields::FromJson for HeaderSpec {
    fn from_json(json: &Value) -> Option<HeaderSpec> {
        json.is_object().then(|| HeaderSpec {
            layers: Field::of(json, "layers"),
            heads: Field::of(json, "heads"),
            d_model: Field::of(json, "d_model"),
            ffn: Field::of(json, "ffn"),
            vocab: Field::of(json, "vocab"),
            positions: Field::of(json, "positions"),
            activation: Field::of(json, "activation"),
            pooling: Field::of(json, "pooling"),
            normalize: Field::of(json, "normalize"),
            layer_norm_eps: Field::of(json, "layer_norm_eps"),
        })
    }
}

impl Header {
    /// The header in the JSON object `json`.
    fn read(json: &Value) -> Header {
        Header {
            name: Field::of(json, "name"),
            architecture: Field::of(json, "architecture"),
            casing: Field::of(json, "casing"),
            vocab_bytes: Field::of(json, "vocab_bytes"),
            spec: Field::of(json, "spec"),
        }
    }

    /// The header of `d`'s model with a vocabulary of `vocab_bytes`.
    fn of(d: &Description, vocab_bytes: usize) -> Header {
        let spec = &d.spec;
        let (pooling, normalize) = match spec.pooling {
            Pooling::Mean { normalize } => ("mean", normalize),
            Pooling::Cls { normalize } => ("cls", normalize),
        };
        let size = |n: usize| Field::Valid(n as u64);
        let text = |t: &str| Field::Valid(t.to_string());
        Header {
            name: text(&d.name),
            architecture: text(d.architecture.model_type()),
            casing: text(d.casing.name()),
            vocab_bytes: size(vocab_bytes),
            spec: Field::Valid(HeaderSpec {
                layers: size(spec.layers),
                heads: size(spec.heads),
                d_model: size(spec.d_model),
                ffn: size(spec.ffn),
                vocab: size(spec.vocab),
                positions: size(spec.positions),
                activation: text(match spec.activation {
                    Activation::Gelu => "gelu",
                    Activation::GeluTanh => "gelu_tanh",
                }),
                pooling: text(pooling),
                normalize: Field::Valid(normalize),
                layer_norm_eps: Field::Valid(spec.layer_norm_eps),
            }),
        }
    }
}

impl HeaderSpec {
    /// The shape, every size within [`LIMITS`] and the whole validated.
    fn spec(&self) -> Result<ModelSpec, String> {
        let size = |field: &Field<u64>, key: &str, limit: usize| {
            field
                .valid()
                .filter(|&n| n >= 1 && n <= limit as u64)
                .map(|n| n as usize)
                .ok_or_else(|| format!("spec.{key} is not a size from 1 to {limit}"))
        };
        let text = |field: &Field<String>| field.valid();
        let normalize = self.normalize.valid().ok_or("no spec.normalize")?;
        let spec = ModelSpec {
            layers: size(&self.layers, "layers", LIMITS[0].1)?,
            heads: size(&self.heads, "heads", LIMITS[1].1)?,
            d_model: size(&self.d_model, "d_model", LIMITS[2].1)?,
            ffn: size(&self.ffn, "ffn", LIMITS[3].1)?,
            vocab: size(&self.vocab, "vocab", LIMITS[4].1)?,
            positions: size(&self.positions, "positions", LIMITS[5].1)?,
            activation: match text(&self.activation).as_deref() {
                Some("gelu") => Activation::Gelu,
                Some("gelu_tanh") => Activation::GeluTanh,
                _ => return Err("spec.activation is not gelu or gelu_tanh".into()),
            },
            pooling: match text(&self.pooling).as_deref() {
                Some("mean") => Pooling::Mean { normalize },
                Some("cls") => Pooling::Cls { normalize },
                _ => return Err("spec.pooling is not mean or cls".into()),
            },
            layer_norm_eps: self.layer_norm_eps.valid().ok_or("no spec.layer_norm_eps")?,
        };
        spec.validate().map_err(|e| e.0)?;
        Ok(spec)
    }
}

/// The header's description and vocabulary length, every size within [`LIMITS`].
fn read_header(text: &str) -> Result<(Description, u64), String> {
    let root: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let header = match root.is_object() {
        true => Header::read(&root),
        false => return Err("not JSON: not an object".into()),
    };
    let text = |field: &Field<String>| field.valid();
    let spec = match &header.spec {
        Field::Valid(spec) => spec.spec()?,
        _ => return Err("no spec".into()),
    };
    let architecture = match text(&header.architecture).as_deref() {
        Some("bert") => Architecture::Bert,
        Some("distilbert") => Architecture::DistilBert,
        Some("gpt2") => Architecture::Gpt2,
        _ => return Err("architecture is not bert, distilbert or gpt2".into()),
    };
    let casing =
        text(&header.casing).and_then(|c| Casing::from_name(&c)).ok_or("casing is not cased or uncased")?;
    let name = text(&header.name).filter(|n| !n.is_empty()).ok_or("no name")?;
    let vocab_len = header.vocab_bytes.valid().ok_or("no vocab_bytes")?;
    Ok((Description { name, architecture, casing, spec }, vocab_len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Description {
        let spec = ModelSpec {
            layers: 1,
            heads: 2,
            d_model: 4,
            ffn: 3,
            vocab: 5,
            positions: 6,
            pooling: Pooling::Cls { normalize: false },
            activation: Activation::GeluTanh,
            ..ModelSpec::MINILM_L6_V2
        };
        Description {
            name: "tiny".into(),
            architecture: Architecture::DistilBert,
            casing: Casing::Cased,
            spec,
        }
    }

    #[test]
    fn round_trip_rounds_to_f16_and_keeps_the_description_and_vocabulary() {
        let mut n = 0.0f32;
        let bytes = encode(&tiny(), "[UNK]\nä\n", |name| {
            let count: usize = tensor_names(tiny().architecture, &tiny().spec)
                .into_iter()
                .find(|(t, _)| t == name)
                .unwrap()
                .1
                .iter()
                .product();
            (0..count)
                .map(|_| {
                    n += 1.0;
                    -0.333_333_3 * n
                })
                .collect()
        });
        let asset = decode(&bytes).unwrap();
        assert_eq!((asset.description, asset.vocab.as_str()), (tiny(), "[UNK]\nä\n"));
        let (shape, values) = &asset.tensors["embeddings.word_embeddings.weight"];
        assert_eq!(shape, &vec![5, 4]);
        assert!((values[0] + 0.333_333_3).abs() < 2e-4 && values[0] != -0.333_333_3);
        assert_eq!(asset.tensors.len(), tensor_names(tiny().architecture, &tiny().spec).len());
        // In steps, a turn for the browser between each two tensors: the same asset.
        #[cfg(not(target_arch = "wasm32"))]
        {
            let turns = std::cell::Cell::new(0);
            let stepped = pollster::block_on(decode_in_steps(&bytes, async || turns.set(turns.get() + 1)));
            assert_eq!(stepped.as_ref().map(|a| (&a.tensors, &a.vocab)), Ok((&asset.tensors, &asset.vocab)));
            assert_eq!(turns.get(), asset.tensors.len() - 1);
        }
        // In steps of three values: a tensor over several steps, the same values.
        let mut decoding = Decoding::new(&bytes).unwrap();
        decoding.per_step = 6;
        let mut steps = 1;
        while decoding.step() {
            steps += 1;
        }
        let expected: usize = asset.tensors.values().map(|(_, v)| v.len().div_ceil(3).max(1)).sum();
        assert_eq!(steps, expected, "each tensor's steps (the last one says none is left)");
        let cut = decoding.finish();
        assert_eq!((&cut.tensors, &cut.vocab), (&asset.tensors, &asset.vocab));
    }

    #[test]
    fn a_files_id_hashed_as_it_is_written_is_its_id() {
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for cuts in [vec![0], vec![17, 1 << 20, (1 << 20) + 5, 2_999_999], vec![3_000_000]] {
            let mut hasher = FileHasher::new(&bytes[..cuts[0]]);
            let ends = cuts.iter().skip(1).copied().chain([bytes.len()]);
            cuts.iter().zip(ends).for_each(|(&a, b)| hasher.update(&bytes[a..b]));
            // Against the digest of the whole file in one call.
            let whole = hex(&<sha2::Sha256 as sha2::Digest>::digest(&bytes));
            assert_eq!(hasher.id(), whole[..16], "cut at {cuts:?}");
        }
    }

    #[test]
    fn damaged_files_are_typed_errors() {
        let full = encode(&tiny(), "v", |name| {
            vec![
                0.5;
                tensor_names(tiny().architecture, &tiny().spec)
                    .into_iter()
                    .find(|(t, _)| t == name)
                    .unwrap()
                    .1
                    .iter()
                    .product()
            ]
        });
        assert_eq!(decode(b"GIF89a"), Err(AssetError::NotAnAsset));
        for cut in [17, 30, full.len() - 1] {
            let err = decode(&full[..cut]).unwrap_err();
            assert!(matches!(err, AssetError::Truncated { .. }), "cut at {cut}: {err:?}");
            assert!(err.to_string().contains("incomplete"));
        }
        let mut longer = full.clone();
        longer.push(0);
        assert!(decode(&longer).unwrap_err().to_string().contains("1 bytes after the last weight"));
        let text = String::from_utf8_lossy(&full[20..]).to_string();
        for (from, to, why) in [
            ("\"layers\":1", "\"layers\":1000000", "spec.layers is not a size from 1 to 128"),
            ("\"heads\":2", "\"heads\":3", "not a multiple of 3 heads"),
            ("\"cased\"", "\"shouty\"", "casing"),
            ("{\"", "[\"", "not JSON"),
        ] {
            let header_len = u32::from_le_bytes(full[16..20].try_into().unwrap()) as usize;
            let header = text[..header_len].replacen(from, to, 1);
            let mut bad = full[..16].to_vec();
            bad.extend_from_slice(&(header.len() as u32).to_le_bytes());
            bad.extend_from_slice(header.as_bytes());
            bad.extend_from_slice(&full[20 + header_len..]);
            let err = decode(&bad).unwrap_err();
            assert!(matches!(&err, AssetError::BadHeader(e) if e.contains(why)), "{from} -> {to}: {err:?}");
        }
    }

    /// A file outside this thread's memory, as a worker holds it: each read is counted.
    struct Counted<'a>(&'a [u8], std::cell::Cell<usize>);

    impl FileBytes for Counted<'_> {
        fn byte_len(&self) -> usize {
            self.0.len()
        }

        fn get(&self, range: std::ops::Range<usize>) -> std::borrow::Cow<'_, [u8]> {
            self.1.set(self.1.get() + range.len());
            std::borrow::Cow::Owned(self.0[range].to_vec())
        }
    }

    #[test]
    fn an_opened_file_gives_each_tensor_as_decoded_reading_only_its_header_and_vocabulary_first() {
        let names = tensor_names(tiny().architecture, &tiny().spec);
        let mut n = 0.0f32;
        let bytes = encode(&tiny(), "[UNK]\nä\n", |name| {
            let count: usize = names.iter().find(|(t, _)| t == name).unwrap().1.iter().product();
            (0..count).map(|_| (n += 0.37, n).1).collect()
        });
        let asset = decode(&bytes).unwrap();
        let source = Counted(&bytes, std::cell::Cell::new(0));
        let mut opened = open(&source).unwrap();
        assert_eq!((&opened.description, opened.vocab.as_str()), (&asset.description, "[UNK]\nä\n"));
        // The header's most (here the whole small file) and the vocabulary, never a tensor more.
        let most = MAGIC.len() + 4 + MAX_HEADER as usize;
        assert_eq!(source.1.get(), bytes.len().min(most) + "[UNK]\nä\n".len());
        // Any order, each once.
        for (name, _) in names.iter().rev() {
            assert_eq!(opened.take(name).as_ref(), Some(&asset.tensors[name]), "{name}");
            assert_eq!(opened.take(name), None, "{name} taken twice");
        }
        // The refusals are decode's.
        for cut in [0, 17, 30, bytes.len() - 1] {
            assert_eq!(open(&&bytes[..cut]).err(), decode(&bytes[..cut]).err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(open(&longer.as_slice()).err(), decode(&longer).err());
    }

    #[test]
    fn verification_names_the_damage_it_can_see() {
        assert_eq!(verify(b"<html>404</html>"), Err(AssetError::NotAnAsset));
        let mut cut = MAGIC.to_vec();
        cut.extend_from_slice(&16u32.to_le_bytes());
        cut.extend_from_slice(b"short");
        assert_eq!(verify(&cut), Err(AssetError::Truncated { expected: 36, got: 25 }));
        cut.extend_from_slice(&[b'x'; 40]);
        let err = verify(&cut).unwrap_err();
        assert!(matches!(err, AssetError::Checksum { .. }) && err.to_string().contains("damaged"), "{err}");
    }

    /// Hashed in pieces with a turn for the browser after each 4 MiB, the same verdict and hash.
    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn verification_in_pieces_gives_the_same_verdict_and_a_turn_per_piece() {
        let mut big = MAGIC.to_vec();
        big.extend_from_slice(&16u32.to_le_bytes());
        big.extend((0..9usize << 20).map(|i| (i * 31 % 251) as u8));
        for bytes in [&big[..], b"<html>404</html>", &big[..30]] {
            let turns = std::cell::Cell::new(0);
            let got = pollster::block_on(verify_in_pieces(bytes, async || turns.set(turns.get() + 1)));
            assert_eq!(got, verify(bytes));
            assert_eq!(turns.get(), bytes.len().div_ceil(4 << 20));
        }
    }
}
