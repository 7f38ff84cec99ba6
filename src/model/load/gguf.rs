//! GGUF files (version 3: llama.cpp's format, the one Ollama and LM Studio keep models in) read as
//! untrusted input. [`parse`] reads the header, every metadata entry and the tensor table from
//! the file's first bytes, checking each count and length against the bytes left before anything
//! is allocated, and each tensor's range against the file's length, the alignment and the other
//! tensors' ranges, before a tensor is read; [`dequantize`] then turns one tensor's bytes into
//! f32, a tensor at a time (never the whole model). Every refusal names the file and the key or
//! tensor at fault.
//!
//! ```text
//! "GGUF", u32 version (3), u64 tensor count, u64 metadata entry count
//! entry:  string key, u32 value type, value   (an array: u32 element type, u64 count, elements)
//! tensor: string name, u32 dimensions, u64 sizes (innermost first), u32 ggml type, u64 offset
//! padding to `general.alignment` (32 when absent), then the tensors' data at their offsets
//! string: u64 length, then that many bytes of UTF-8
//! ```
//!
//! Little-endian throughout. Shapes are given here outermost first, as PyTorch and safetensors
//! give them: GGUF's sizes `[in, out]` are the shape `[out, in]`.
//!
//! Tensor types read, ggml's blocks of 32 values along a row for the quantized ones:
//! - F32, F16, BF16: one value each;
//! - Q8_0: an f16 scale `d`, then 32 signed bytes `q`: value `d q`;
//! - Q4_0: an f16 `d`, then 16 bytes: value `j` is byte `j`'s low nibble and value `j + 16` its
//!   high nibble, each less 8, times `d`;
//! - Q4_1: an f16 `d` and an f16 `m`, then 16 bytes as Q4_0's, without the 8: `d q + m`.
//!
//! Any other type is refused by its name (the K-quants among them).

use std::collections::HashSet;
use std::ops::Range;

use half::{bf16, f16};

use crate::model::load::checkpoint::CheckpointError;
use crate::model::tokenize::bpe::{Bpe, Split};

const MAGIC: &[u8; 4] = b"GGUF";
/// The most tensors a file may list (a 70 B Llama has 723).
const MAX_TENSORS: u64 = 1 << 16;
/// The most metadata entries a file may have (a model's file has a few dozen).
const MAX_ENTRIES: u64 = 1 << 16;
/// The longest key, and the longest tensor name.
const MAX_NAME: u64 = 1 << 10;
/// The longest string value (a chat template is a few kB).
const MAX_STRING: u64 = 1 << 24;
/// How deep arrays may nest (a tokenizer's lists are arrays of strings: depth 1).
const MAX_DEPTH: usize = 2;
/// ggml's most dimensions.
const MAX_DIMS: u32 = 4;
/// The most values one tensor may hold (2^40, and what a `usize` holds: far above any tensor of
/// a model a page can hold).
const MAX_VALUES: u64 = 1 << 40;
/// The largest `general.alignment` accepted.
const MAX_ALIGNMENT: u32 = 1 << 20;

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Type 0.
    U8(u8),
    /// Type 1.
    I8(i8),
    /// Type 2.
    U16(u16),
    /// Type 3.
    I16(i16),
    /// Type 4.
    U32(u32),
    /// Type 5.
    I32(i32),
    /// Type 6.
    F32(f32),
    /// Type 7: a byte, 0 or 1.
    Bool(bool),
    /// Type 8.
    Str(String),
    /// Type 9: elements of one type.
    Array(Vec<Value>),
    /// Type 10.
    U64(u64),
    /// Type 11.
    I64(i64),
    /// Type 12.
    F64(f64),
}

impl Value {
    /// An integer of any width that is not negative.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// A float of either width.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }

    /// A string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// An array's elements.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// A tensor's element type, of those the page reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorType {
    /// ggml type 0.
    F32,
    /// ggml type 1.
    F16,
    /// ggml type 30: an f32's top 16 bits.
    BF16,
    /// ggml type 8: blocks of 32 bytes and a scale.
    Q8_0,
    /// ggml type 2: blocks of 32 nibbles and a scale, centred on 8.
    Q4_0,
    /// ggml type 3: blocks of 32 nibbles, a scale and a minimum.
    Q4_1,
}

impl TensorType {
    /// The type of ggml's number `code`, or a sentence naming a type the page does not read.
    fn from_code(code: u32) -> Result<TensorType, String> {
        Ok(match code {
            0 => TensorType::F32,
            1 => TensorType::F16,
            2 => TensorType::Q4_0,
            3 => TensorType::Q4_1,
            8 => TensorType::Q8_0,
            30 => TensorType::BF16,
            _ => {
                let name = match code {
                    6 => "Q5_0",
                    7 => "Q5_1",
                    9 => "Q8_1",
                    10 => "Q2_K",
                    11 => "Q3_K",
                    12 => "Q4_K",
                    13 => "Q5_K",
                    14 => "Q6_K",
                    15 => "Q8_K",
                    16..=23 | 29 => "an i-quant (IQ1-IQ4)",
                    24..=27 => "an integer type (I8-I64)",
                    28 => "F64",
                    34 | 35 => "a ternary type (TQ1_0, TQ2_0)",
                    39 => "MXFP4",
                    _ => return Err(format!("type number {code}, which ggml does not define")),
                };
                return Err(format!(
                    "{name}, which this page does not read (it reads F32, F16, BF16, Q8_0, Q4_0 and Q4_1)"
                ));
            }
        })
    }

    /// Its name, as ggml writes it.
    pub fn name(self) -> &'static str {
        match self {
            TensorType::F32 => "F32",
            TensorType::F16 => "F16",
            TensorType::BF16 => "BF16",
            TensorType::Q8_0 => "Q8_0",
            TensorType::Q4_0 => "Q4_0",
            TensorType::Q4_1 => "Q4_1",
        }
    }

    /// `(values, bytes)` of one block: a row's length must be a multiple of its values.
    pub fn block(self) -> (u64, u64) {
        match self {
            TensorType::F32 => (1, 4),
            TensorType::F16 | TensorType::BF16 => (1, 2),
            TensorType::Q8_0 => (32, 34),
            TensorType::Q4_0 => (32, 18),
            TensorType::Q4_1 => (32, 20),
        }
    }
}

/// One tensor of the table.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Its name in the file (`blk.0.attn_q.weight`).
    pub name: String,
    /// Outermost first (PyTorch's order).
    pub shape: Vec<usize>,
    /// Its element type.
    pub kind: TensorType,
    /// Where its bytes lie in the file: within it, aligned, apart from every other tensor's.
    pub range: Range<u64>,
}

impl TensorInfo {
    /// The values it holds.
    pub fn values(&self) -> usize {
        self.shape.iter().product()
    }
}

/// A GGUF file's header, metadata and tensor table, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Gguf {
    /// In the file's order; no key twice.
    pub metadata: Vec<(String, Value)>,
    /// In the file's order; no name twice.
    pub tensors: Vec<TensorInfo>,
    /// `general.alignment`, or 32.
    pub alignment: u64,
}

impl Gguf {
    /// The value of metadata key `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

/// Reads a GGUF file's header, metadata and tensor table from `head`, the file's first bytes
/// (the whole file, or at least up to its tensors' data), for a file of `file_len` bytes named
/// `file`.
pub fn parse(file: &str, head: &[u8], file_len: u64) -> Result<Gguf, CheckpointError> {
    let fail = |problem: String| CheckpointError { file: file.to_string(), problem };
    let mut r = Reader { bytes: head, at: 0, file_len };
    if head.len() < 4 || &head[..4] != MAGIC {
        return Err(fail("is not a GGUF file (it does not start with \"GGUF\")".into()));
    }
    r.at = 4;
    let version = r.u32("the version").map_err(fail)?;
    if version != 3 {
        return Err(fail(match version.swap_bytes() {
            3 => "is a big-endian GGUF file; this page reads little-endian ones".into(),
            _ => format!("is GGUF version {version}; this page reads version 3"),
        }));
    }
    let tensors = r.count("the tensor count", MAX_TENSORS).map_err(fail)?;
    let entries = r.count("the metadata entry count", MAX_ENTRIES).map_err(fail)?;
    let metadata = read_metadata(&mut r, entries).map_err(fail)?;
    let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
        None => 32,
        Some((_, Value::U32(a))) if a.is_power_of_two() && *a <= MAX_ALIGNMENT => u64::from(*a),
        Some((_, v)) => {
            return Err(fail(format!(
                "general.alignment is {v:?}; it must be a u32 power of two up to {MAX_ALIGNMENT}"
            )))
        }
    };
    let table = read_tensor_table(&mut r, tensors).map_err(fail)?;
    let data_start = (r.at as u64).next_multiple_of(alignment);
    let tensors = place_tensors(table, data_start, alignment, file_len).map_err(fail)?;
    Ok(Gguf { metadata, tensors, alignment })
}

/// The metadata's `entries` entries, each key new.
fn read_metadata(r: &mut Reader, entries: u64) -> Result<Vec<(String, Value)>, String> {
    let mut metadata = Vec::new();
    let mut keys = HashSet::new();
    for i in 0..entries {
        let key = r.string(&format!("metadata entry {i}'s key"), MAX_NAME)?;
        let code = r.u32(&format!("{key}'s type"))?;
        let value = r.value(&key, code, 0)?;
        if !keys.insert(key.clone()) {
            return Err(format!("has the metadata key {key} twice"));
        }
        metadata.push((key, value));
    }
    Ok(metadata)
}

/// A tensor as the table lists it: name, shape (outermost first), type, offset in the data.
type Listed = (String, Vec<usize>, TensorType, u64);

/// The table's `tensors` entries, each name new, each shape within the limits and whole blocks.
fn read_tensor_table(r: &mut Reader, tensors: u64) -> Result<Vec<Listed>, String> {
    let mut table = Vec::new();
    let mut names = HashSet::new();
    for i in 0..tensors {
        let name = r.string(&format!("tensor {i}'s name"), MAX_NAME)?;
        let dims = r.u32(&format!("tensor {name}'s dimension count"))?;
        if !(1..=MAX_DIMS).contains(&dims) {
            return Err(format!("tensor {name} has {dims} dimensions; ggml's tensors have 1 to {MAX_DIMS}"));
        }
        let mut sizes = Vec::new();
        for _ in 0..dims {
            sizes.push(r.u64(&format!("tensor {name}'s sizes"))?);
        }
        let kind = TensorType::from_code(r.u32(&format!("tensor {name}'s type"))?)
            .map_err(|why| format!("tensor {name} is in {why}"))?;
        let offset = r.u64(&format!("tensor {name}'s offset"))?;
        let most = MAX_VALUES.min(usize::MAX as u64);
        let values = sizes.iter().try_fold(1u64, |n, &s| n.checked_mul(s)).filter(|&n| n <= most);
        if sizes.contains(&0) || values.is_none() {
            return Err(format!(
                "tensor {name} has sizes {sizes:?}; each must be at least 1, and all together at most {most} values"
            ));
        }
        let (per_block, _) = kind.block();
        if !sizes[0].is_multiple_of(per_block) {
            return Err(format!(
                "tensor {name}'s rows have {} values, not a whole number of {}'s blocks of {per_block}",
                sizes[0],
                kind.name()
            ));
        }
        if !names.insert(name.clone()) {
            return Err(format!("lists the tensor {name} twice"));
        }
        let shape = sizes.iter().rev().map(|&s| s as usize).collect();
        table.push((name, shape, kind, offset));
    }
    Ok(table)
}

/// Each listed tensor's range in the file: its offset a multiple of `alignment`, within the
/// file, and apart from every other tensor's.
fn place_tensors(
    table: Vec<Listed>,
    data_start: u64,
    alignment: u64,
    file_len: u64,
) -> Result<Vec<TensorInfo>, String> {
    if data_start > file_len {
        return Err(format!("ends at byte {file_len}, before its tensors' data (byte {data_start})"));
    }
    let mut tensors = Vec::with_capacity(table.len());
    for (name, shape, kind, offset) in table {
        let (per_block, block_bytes) = kind.block();
        let bytes = shape.iter().product::<usize>() as u64 / per_block * block_bytes;
        if !offset.is_multiple_of(alignment) {
            return Err(format!(
                "tensor {name}'s offset {offset} is not a multiple of the alignment {alignment}"
            ));
        }
        let start = data_start.checked_add(offset);
        let end = start.and_then(|s| s.checked_add(bytes)).filter(|&e| e <= file_len);
        let (Some(start), Some(end)) = (start, end) else {
            return Err(format!(
                "tensor {name} ({} bytes at offset {offset}) runs past the end of the file ({file_len} bytes)",
                bytes
            ));
        };
        tensors.push(TensorInfo { name, shape, kind, range: start..end });
    }
    let mut by_start: Vec<&TensorInfo> = tensors.iter().collect();
    by_start.sort_by_key(|t| t.range.start);
    for pair in by_start.windows(2) {
        if pair[1].range.start < pair[0].range.end {
            return Err(format!("tensors {} and {} overlap", pair[0].name, pair[1].name));
        }
    }
    Ok(tensors)
}

/// A cursor over the file's first bytes; what it cannot read is a sentence naming what was
/// being read and whether the file ends there or the page read too little of it.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    file_len: u64,
}

impl Reader<'_> {
    fn take(&mut self, n: u64, what: &str) -> Result<&[u8], String> {
        let left = (self.bytes.len() - self.at) as u64;
        if n > left {
            return Err(match (self.bytes.len() as u64) < self.file_len {
                true => format!(
                    "its header is longer than the {} bytes this page reads before the tensors (at {what})",
                    self.bytes.len()
                ),
                false => format!("ends inside {what}"),
            });
        }
        let out = &self.bytes[self.at..self.at + n as usize];
        self.at += n as usize;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        Ok(self.take(N as u64, what)?.try_into().expect("N bytes"))
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A count, at most `max`.
    fn count(&mut self, what: &str, max: u64) -> Result<u64, String> {
        let n = self.u64(what)?;
        match n <= max {
            true => Ok(n),
            false => Err(format!("gives {n} as {what}; this page reads at most {max}")),
        }
    }

    /// A string of at most `max` bytes of UTF-8.
    fn string(&mut self, what: &str, max: u64) -> Result<String, String> {
        let len = self.u64(what)?;
        if len > max {
            return Err(format!("gives {what} a length of {len} bytes; this page reads at most {max}"));
        }
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| format!("{what} is not UTF-8"))
    }

    /// A value of type `code` for `key`, inside `depth` arrays.
    fn value(&mut self, key: &str, code: u32, depth: usize) -> Result<Value, String> {
        Ok(match code {
            0 => Value::U8(u8::from_le_bytes(self.array(key)?)),
            1 => Value::I8(i8::from_le_bytes(self.array(key)?)),
            2 => Value::U16(u16::from_le_bytes(self.array(key)?)),
            3 => Value::I16(i16::from_le_bytes(self.array(key)?)),
            4 => Value::U32(self.u32(key)?),
            5 => Value::I32(i32::from_le_bytes(self.array(key)?)),
            6 => Value::F32(f32::from_le_bytes(self.array(key)?)),
            7 => match self.array::<1>(key)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(format!("{key} is a bool of byte {b}; a bool is 0 or 1")),
            },
            8 => Value::Str(self.string(key, MAX_STRING)?),
            9 => self.array_value(key, depth)?,
            10 => Value::U64(self.u64(key)?),
            11 => Value::I64(i64::from_le_bytes(self.array(key)?)),
            12 => Value::F64(f64::from_le_bytes(self.array(key)?)),
            _ => return Err(format!("{key} has value type {code}, which GGUF does not define")),
        })
    }

    /// An array for `key`: its element type, its count (no more elements than the bytes left
    /// could hold), its elements.
    fn array_value(&mut self, key: &str, depth: usize) -> Result<Value, String> {
        if depth >= MAX_DEPTH {
            return Err(format!("{key} nests arrays more than {MAX_DEPTH} deep"));
        }
        let code = self.u32(key)?;
        let len = self.u64(key)?;
        let smallest: u64 = match code {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            8 | 10..=12 => 8,
            9 => 12,
            _ => return Err(format!("{key} is an array of value type {code}, which GGUF does not define")),
        };
        let left = (self.bytes.len() - self.at) as u64;
        if len.checked_mul(smallest).is_none_or(|n| n > left) {
            return Err(match (self.bytes.len() as u64) < self.file_len {
                true => format!(
                    "its header is longer than the {} bytes this page reads before the tensors (at {key})",
                    self.bytes.len()
                ),
                false => format!("gives {key} {len} elements, more than the file holds"),
            });
        }
        let mut values = Vec::with_capacity(len as usize);
        for _ in 0..len {
            values.push(self.value(key, code, depth + 1)?);
        }
        Ok(Value::Array(values))
    }
}

/// The byte-level BPE tokenizer a GGUF file's metadata holds (`tokenizer.ggml.model` `gpt2`): its
/// tokens by id, its merges by rank, its control and user-defined tokens (`token_type` 3 and 4)
/// kept whole where the text writes them, and the split `tokenizer.ggml.pre` names (`gpt-2`, or
/// SmolLM's `smollm`, digits apart; any other is refused by name, as is a SentencePiece model).
pub fn tokenizer(file: &str, g: &Gguf) -> Result<Bpe, CheckpointError> {
    let fail = |problem: String| CheckpointError { file: file.to_string(), problem };
    let text =
        |key: &str| g.get(key).map(|v| v.as_str().ok_or_else(|| fail(format!("{key} is not a string"))));
    match text("tokenizer.ggml.model").transpose()? {
        Some("gpt2") => {}
        Some(other) => {
            return Err(fail(format!(
                "its tokenizer is {other:?} (tokenizer.ggml.model); this page reads byte-level BPE (\"gpt2\")"
            )))
        }
        None => return Err(fail("it holds no tokenizer (tokenizer.ggml.model)".into())),
    }
    let split = match text("tokenizer.ggml.pre").transpose()? {
        None | Some("default" | "gpt-2") => Split::Gpt2,
        Some("smollm") => Split::DigitsApart,
        Some(other) => {
            return Err(fail(format!(
                "its tokenizer splits text as {other:?} (tokenizer.ggml.pre), which this page does not know (it knows gpt-2 and smollm)"
            )))
        }
    };
    let strings = |key: &str| -> Result<Vec<&str>, CheckpointError> {
        let list =
            g.get(key).and_then(Value::as_array).ok_or_else(|| fail(format!("it has no {key} list")))?;
        list.iter()
            .map(|v| v.as_str().ok_or_else(|| fail(format!("{key} holds a value that is not a string"))))
            .collect()
    };
    let (tokens, merges) = (strings("tokenizer.ggml.tokens")?, strings("tokenizer.ggml.merges")?);
    let mut added = Vec::new();
    if let Some(types) = g.get("tokenizer.ggml.token_type") {
        let types = types.as_array().filter(|t| t.len() == tokens.len()).ok_or_else(|| {
            fail(format!("tokenizer.ggml.token_type is not a list of {} token types", tokens.len()))
        })?;
        for (id, t) in types.iter().enumerate() {
            if matches!(t, Value::I32(3 | 4)) {
                added.push(id as u32);
            }
        }
    }
    let prefix_space = match g.get("tokenizer.ggml.add_space_prefix") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => return Err(fail(format!("tokenizer.ggml.add_space_prefix is {v:?}, not a bool"))),
    };
    Bpe::from_lists(file, &tokens, &merges, &added, (prefix_space, split))
        .map_err(|e| CheckpointError { file: e.file, problem: e.problem })
}

/// A tensor's values from its bytes (`bytes` is exactly [`TensorInfo::range`]'s), in the file's
/// order: row-major with the innermost size last in the shape.
///
/// # Panics
/// If `bytes` is not whole blocks of `kind`.
pub fn dequantize(kind: TensorType, bytes: &[u8]) -> Vec<f32> {
    let (per_block, block_bytes) = kind.block();
    let (per_block, block_bytes) = (per_block as usize, block_bytes as usize);
    assert!(bytes.len().is_multiple_of(block_bytes), "whole blocks of {}", kind.name());
    let mut out = Vec::with_capacity(bytes.len() / block_bytes * per_block);
    let half = |b: &[u8]| f16::from_le_bytes([b[0], b[1]]).to_f32();
    for block in bytes.chunks_exact(block_bytes) {
        match kind {
            TensorType::F32 => out.push(f32::from_le_bytes([block[0], block[1], block[2], block[3]])),
            TensorType::F16 => out.push(half(block)),
            TensorType::BF16 => out.push(bf16::from_le_bytes([block[0], block[1]]).to_f32()),
            TensorType::Q8_0 => {
                let d = half(block);
                out.extend(block[2..].iter().map(|&q| d * f32::from(q as i8)));
            }
            TensorType::Q4_0 | TensorType::Q4_1 => {
                let (d, m, qs) = match kind {
                    TensorType::Q4_0 => (half(block), -8.0 * half(block), &block[2..]),
                    _ => (half(block), half(&block[2..]), &block[4..]),
                };
                out.extend(qs.iter().map(|&q| d * f32::from(q & 0x0f) + m));
                out.extend(qs.iter().map(|&q| d * f32::from(q >> 4) + m));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GGUF file written as the format's description says, for the tests: metadata entries
    /// (already encoded values), then tensors (name, sizes innermost first, ggml type, bytes),
    /// each at the next multiple of `alignment` in the data.
    struct Writer {
        version: u32,
        entries: Vec<(String, u32, Vec<u8>)>,
        tensors: Vec<(String, Vec<u64>, u32, Vec<u8>)>,
        alignment: u64,
    }

    fn string(s: &str) -> Vec<u8> {
        let mut out = (s.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(s.as_bytes());
        out
    }

    impl Writer {
        fn new() -> Writer {
            Writer { version: 3, entries: Vec::new(), tensors: Vec::new(), alignment: 32 }
        }

        fn entry(mut self, key: &str, code: u32, value: Vec<u8>) -> Writer {
            self.entries.push((key.into(), code, value));
            self
        }

        fn tensor(mut self, name: &str, sizes: &[u64], code: u32, bytes: Vec<u8>) -> Writer {
            self.tensors.push((name.into(), sizes.to_vec(), code, bytes));
            self
        }

        /// The file.
        fn bytes(&self) -> Vec<u8> {
            let mut out = MAGIC.to_vec();
            out.extend(self.version.to_le_bytes());
            out.extend((self.tensors.len() as u64).to_le_bytes());
            out.extend((self.entries.len() as u64).to_le_bytes());
            for (key, code, value) in &self.entries {
                out.extend(string(key));
                out.extend(code.to_le_bytes());
                out.extend(value);
            }
            let mut offset = 0u64;
            let mut offsets = Vec::new();
            for (name, sizes, code, bytes) in &self.tensors {
                out.extend(string(name));
                out.extend((sizes.len() as u32).to_le_bytes());
                sizes.iter().for_each(|s| out.extend(s.to_le_bytes()));
                out.extend(code.to_le_bytes());
                out.extend(offset.to_le_bytes());
                offsets.push(offset);
                offset = (offset + bytes.len() as u64).next_multiple_of(self.alignment);
            }
            out.resize((out.len() as u64).next_multiple_of(self.alignment) as usize, 0);
            let start = out.len();
            for ((_, _, _, bytes), offset) in self.tensors.iter().zip(offsets) {
                out.resize(start + offset as usize, 0);
                out.extend(bytes);
            }
            out
        }
    }

    fn strings(items: &[&str]) -> Vec<u8> {
        let mut out = 8u32.to_le_bytes().to_vec();
        out.extend((items.len() as u64).to_le_bytes());
        items.iter().for_each(|s| out.extend(string(s)));
        out
    }

    fn f32s(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// A small file with one value of every type, an array of strings, an array of arrays, and
    /// a tensor of each type the page reads.
    fn sample() -> Writer {
        let q8 = [f16::from_f32(0.5).to_le_bytes().to_vec(), (0..32).map(|i| (i as i8 - 16) as u8).collect()]
            .concat();
        Writer::new()
            .entry("general.architecture", 8, string("llama"))
            .entry("u8", 0, vec![200])
            .entry("i8", 1, vec![0xff])
            .entry("u16", 2, 60000u16.to_le_bytes().to_vec())
            .entry("i16", 3, (-2i16).to_le_bytes().to_vec())
            .entry("llama.block_count", 4, 30u32.to_le_bytes().to_vec())
            .entry("i32", 5, (-7i32).to_le_bytes().to_vec())
            .entry("llama.rope.freq_base", 6, 10000.0f32.to_le_bytes().to_vec())
            .entry("bool", 7, vec![1])
            .entry("tokenizer.ggml.tokens", 9, strings(&["a", "b", "<|endoftext|>"]))
            .entry("u64", 10, u64::MAX.to_le_bytes().to_vec())
            .entry("i64", 11, (-1i64).to_le_bytes().to_vec())
            .entry("f64", 12, 0.25f64.to_le_bytes().to_vec())
            .entry(
                "nested",
                9,
                [
                    &9u32.to_le_bytes()[..],
                    &1u64.to_le_bytes(),
                    &7u32.to_le_bytes(),
                    &1u64.to_le_bytes(),
                    &[1],
                ]
                .concat(),
            )
            .tensor("output_norm.weight", &[3], 0, f32s(&[1.0, -2.0, 3.5]))
            .tensor(
                "f16",
                &[2, 1],
                1,
                [f16::from_f32(1.5), f16::from_f32(-0.25)].iter().flat_map(|v| v.to_le_bytes()).collect(),
            )
            .tensor("bf16", &[1], 30, bf16::from_f32(-3.0).to_le_bytes().to_vec())
            .tensor("token_embd.weight", &[32, 1], 8, q8)
    }

    #[test]
    fn a_file_reads_back_its_metadata_and_tensor_table() {
        let file = sample().bytes();
        let g = parse("m.gguf", &file, file.len() as u64).unwrap();
        assert_eq!(g.get("general.architecture").and_then(Value::as_str), Some("llama"));
        assert_eq!(g.get("llama.block_count").and_then(Value::as_u64), Some(30));
        assert_eq!(g.get("llama.rope.freq_base").and_then(Value::as_f64), Some(10000.0));
        assert_eq!(g.get("i8"), Some(&Value::I8(-1)));
        assert_eq!(g.get("i8").and_then(Value::as_u64), None, "a negative integer is no count");
        assert_eq!(g.get("u16"), Some(&Value::U16(60000)));
        assert_eq!(g.get("i16"), Some(&Value::I16(-2)));
        assert_eq!(g.get("i32"), Some(&Value::I32(-7)));
        assert_eq!(g.get("bool"), Some(&Value::Bool(true)));
        assert_eq!(g.get("u64"), Some(&Value::U64(u64::MAX)));
        assert_eq!(g.get("i64"), Some(&Value::I64(-1)));
        assert_eq!(g.get("f64").and_then(Value::as_f64), Some(0.25));
        assert_eq!(g.get("u8").and_then(Value::as_u64), Some(200));
        let tokens: Vec<&str> = g
            .get("tokenizer.ggml.tokens")
            .and_then(Value::as_array)
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(tokens, ["a", "b", "<|endoftext|>"]);
        assert_eq!(g.get("nested"), Some(&Value::Array(vec![Value::Array(vec![Value::Bool(true)])])));
        assert_eq!(g.alignment, 32);
        let names: Vec<&str> = g.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["output_norm.weight", "f16", "bf16", "token_embd.weight"]);
        let f16_info = g.tensor("f16").unwrap();
        assert_eq!((f16_info.shape.clone(), f16_info.kind), (vec![1, 2], TensorType::F16), "outermost first");
        let read = |name: &str| {
            let t = g.tensor(name).unwrap();
            assert!(t.range.start.is_multiple_of(32), "{name} aligned");
            let values = dequantize(t.kind, &file[t.range.start as usize..t.range.end as usize]);
            assert_eq!(values.len(), t.values());
            values
        };
        assert_eq!(read("output_norm.weight"), [1.0, -2.0, 3.5]);
        assert_eq!(read("f16"), [1.5, -0.25]);
        assert_eq!(read("bf16"), [-3.0]);
        assert_eq!(read("token_embd.weight"), (0..32).map(|i| 0.5 * (i as f32 - 16.0)).collect::<Vec<_>>());
    }

    /// Q4_0 and Q4_1 blocks written by hand: value `j` is byte `j`'s low nibble, value `j + 16`
    /// its high nibble (ggml's order, not interleaved).
    #[test]
    fn four_bit_blocks_put_low_nibbles_first_then_high_ones() {
        let qs: Vec<u8> = (0..16u8).map(|j| j | ((15 - j) << 4)).collect();
        let d = f16::from_f32(0.5).to_le_bytes();
        let q4_0 = dequantize(TensorType::Q4_0, &[d.as_slice(), &qs].concat());
        let want: Vec<f32> = (0..16).chain((0..16).map(|j| 15 - j)).map(|q| 0.5 * (q as f32 - 8.0)).collect();
        assert_eq!(q4_0, want);
        let m = f16::from_f32(-1.0).to_le_bytes();
        let q4_1 = dequantize(TensorType::Q4_1, &[d.as_slice(), &m, &qs].concat());
        let want: Vec<f32> = (0..16).chain((0..16).map(|j| 15 - j)).map(|q| 0.5 * q as f32 - 1.0).collect();
        assert_eq!(q4_1, want);
    }

    /// ggml's reference quantizers, written from its description, on a table of rows: the values
    /// come back within half a step (Q8_0, Q4_1) or a step (Q4_0, whose scale is set by the
    /// largest magnitude against -8), in order.
    #[test]
    fn quantized_rows_come_back_within_their_step() {
        let value = |i: usize| {
            ((crate::attention::synthetic::hash32(i as u32) >> 8) as f32 / 8_388_608.0 - 1.0) * 3.0
        };
        for blocks in [1, 2, 7] {
            let x: Vec<f32> = (0..32 * blocks).map(value).collect();
            for kind in [TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_1] {
                let mut bytes = Vec::new();
                let mut steps = Vec::new();
                for b in x.chunks_exact(32) {
                    let (block, step) = quantize_block(kind, b);
                    bytes.extend(block);
                    steps.push(step);
                }
                let y = dequantize(kind, &bytes);
                assert_eq!(y.len(), x.len());
                for (i, (a, b)) in x.iter().zip(&y).enumerate() {
                    let step = steps[i / 32];
                    let bound = if kind == TensorType::Q4_0 { step } else { step / 2.0 } * 1.01;
                    assert!((a - b).abs() <= bound, "{kind:?} value {i}: {a} came back {b}, step {step}");
                }
            }
        }
    }

    /// One block of 32 values in `kind`, as ggml's reference quantizer makes it, and its step.
    fn quantize_block(kind: TensorType, x: &[f32]) -> (Vec<u8>, f32) {
        let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        match kind {
            TensorType::Q8_0 => {
                let d = f16::from_f32(amax / 127.0);
                let q = x.iter().map(|v| (v / d.to_f32()).round().clamp(-127.0, 127.0) as i8 as u8);
                ([d.to_le_bytes().to_vec(), q.collect()].concat(), d.to_f32())
            }
            TensorType::Q4_0 => {
                let max = x.iter().copied().fold(0.0f32, |m, v| if v.abs() > m.abs() { v } else { m });
                let d = f16::from_f32(max / -8.0);
                let q = |v: f32| ((v / d.to_f32() + 8.5) as i32).clamp(0, 15) as u8;
                let qs = (0..16).map(|j| q(x[j]) | (q(x[j + 16]) << 4));
                ([d.to_le_bytes().to_vec(), qs.collect()].concat(), d.to_f32().abs())
            }
            _ => {
                let (lo, hi) = x.iter().fold((f32::MAX, f32::MIN), |(a, b), &v| (a.min(v), b.max(v)));
                let (d, m) = (f16::from_f32((hi - lo) / 15.0), f16::from_f32(lo));
                let q = |v: f32| (((v - m.to_f32()) / d.to_f32() + 0.5) as i32).clamp(0, 15) as u8;
                let qs = (0..16).map(|j| q(x[j]) | (q(x[j + 16]) << 4));
                ([d.to_le_bytes().to_vec(), m.to_le_bytes().to_vec(), qs.collect()].concat(), d.to_f32())
            }
        }
    }

    /// Every prefix of a valid file is refused with a sentence (never a panic); those past the
    /// table say the data is missing, those the caller cut short say the page read too little.
    #[test]
    fn every_truncation_is_refused_with_a_sentence() {
        let file = sample().bytes();
        for cut in 0..file.len() {
            let short = &file[..cut];
            let e = parse("m.gguf", short, cut as u64).unwrap_err();
            assert_eq!(e.file, "m.gguf");
            assert!(!e.problem.is_empty() && !e.problem.contains("panick"), "{cut}: {e}");
            let e = parse("m.gguf", short, file.len() as u64);
            if let Err(e) = e {
                assert!(
                    cut < 4 || e.problem.contains("this page reads") || e.problem.contains("ends"),
                    "{cut}: {e}"
                );
            }
        }
    }

    fn refusal(w: &Writer) -> String {
        let file = w.bytes();
        parse("bad.gguf", &file, file.len() as u64).unwrap_err().to_string()
    }

    fn patched(at: usize, with: &[u8]) -> String {
        let mut file = sample().bytes();
        file[at..at + with.len()].copy_from_slice(with);
        parse("bad.gguf", &file, file.len() as u64).unwrap_err().to_string()
    }

    #[test]
    fn hostile_headers_are_refused_by_name() {
        let cases: Vec<(String, &str)> = vec![
            (patched(0, b"GGUG"), "bad.gguf: is not a GGUF file"),
            (patched(4, &2u32.to_le_bytes()), "is GGUF version 2; this page reads version 3"),
            (patched(4, &3u32.to_be_bytes()), "big-endian"),
            (patched(8, &u64::MAX.to_le_bytes()), "as the tensor count; this page reads at most 65536"),
            (patched(16, &(1u64 << 40).to_le_bytes()), "as the metadata entry count"),
            (patched(24, &(1u64 << 50).to_le_bytes()), "metadata entry 0's key a length of"),
            (
                refusal(&Writer::new().entry("k", 13, vec![])),
                "k has value type 13, which GGUF does not define",
            ),
            (refusal(&Writer::new().entry("k", 7, vec![2])), "k is a bool of byte 2"),
            (
                refusal(&Writer::new().entry("k", 8, [u64::MAX.to_le_bytes().to_vec()].concat())),
                "gives k a length of",
            ),
            (
                refusal(
                    &Writer::new()
                        .entry("k", 8, string("\u{e9}")[..8].iter().chain(&[0xc3, 0x28]).copied().collect())
                        .entry("z", 0, vec![0]),
                ),
                "k is not UTF-8",
            ),
            (
                refusal(&Writer::new().entry(
                    "k",
                    9,
                    [&8u32.to_le_bytes()[..], &u64::MAX.to_le_bytes()].concat(),
                )),
                "gives k 18446744073709551615 elements, more than the file holds",
            ),
            (
                refusal(&Writer::new().entry(
                    "k",
                    9,
                    [13u32.to_le_bytes().to_vec(), 0u64.to_le_bytes().to_vec()].concat(),
                )),
                "array of value type 13",
            ),
            (
                refusal(
                    &Writer::new().entry(
                        "k",
                        9,
                        [
                            9u32.to_le_bytes().to_vec(),
                            1u64.to_le_bytes().to_vec(),
                            9u32.to_le_bytes().to_vec(),
                            1u64.to_le_bytes().to_vec(),
                            9u32.to_le_bytes().to_vec(),
                            0u64.to_le_bytes().to_vec(),
                        ]
                        .concat(),
                    ),
                ),
                "k nests arrays more than 2 deep",
            ),
            (
                refusal(&Writer::new().entry("k", 0, vec![1]).entry("k", 0, vec![2])),
                "has the metadata key k twice",
            ),
            (
                refusal(&Writer::new().entry("general.alignment", 4, 24u32.to_le_bytes().to_vec())),
                "general.alignment is U32(24)",
            ),
            (
                refusal(&Writer::new().entry("general.alignment", 10, 32u64.to_le_bytes().to_vec())),
                "general.alignment is U64(32)",
            ),
            (refusal(&Writer::new().tensor("t", &[], 0, vec![])), "tensor t has 0 dimensions"),
            (
                refusal(&Writer::new().tensor("t", &[1, 1, 1, 1, 1], 0, vec![0; 4])),
                "tensor t has 5 dimensions",
            ),
            (refusal(&Writer::new().tensor("t", &[4, 0], 0, vec![])), "tensor t has sizes [4, 0]"),
            (refusal(&Writer::new().tensor("t", &[1 << 32, 1 << 32], 0, vec![])), "tensor t has sizes"),
            (
                refusal(&Writer::new().tensor("t", &[32], 14, vec![])),
                "tensor t is in Q6_K, which this page does not read",
            ),
            (refusal(&Writer::new().tensor("t", &[32], 12, vec![])), "tensor t is in Q4_K"),
            (
                refusal(&Writer::new().tensor("t", &[32], 99, vec![])),
                "type number 99, which ggml does not define",
            ),
            (
                refusal(&Writer::new().tensor("t", &[16, 2], 8, vec![0; 34])),
                "tensor t's rows have 16 values, not a whole number of Q8_0's blocks of 32",
            ),
            (
                refusal(&Writer::new().tensor("t", &[4], 0, vec![0; 4])),
                "tensor t (16 bytes at offset 0) runs past the end of the file",
            ),
            (
                refusal(&Writer::new().tensor("t", &[1], 0, vec![0; 4]).tensor("t", &[1], 0, vec![0; 4])),
                "lists the tensor t twice",
            ),
        ];
        for (got, want) in cases {
            assert!(got.contains(want), "{got:?} should say {want:?}");
            assert!(got.starts_with("bad.gguf: "), "{got:?} names the file");
        }
    }

    /// Offsets the table gives: misaligned, overlapping, past the end.
    #[test]
    fn tensor_ranges_are_checked_against_the_alignment_each_other_and_the_file() {
        let w = Writer::new().tensor("a", &[8], 0, vec![0; 32]).tensor("b", &[8], 0, vec![0; 32]);
        let file = w.bytes();
        let at = |name: &str| {
            // The offset is the 8 bytes after the name, its dimension count, size and type.
            let needle = string(name);
            let p = file.windows(needle.len()).position(|s| s == needle.as_slice()).unwrap();
            p + needle.len() + 4 + 8 + 4
        };
        let with = |name: &str, offset: u64| {
            let mut f = file.clone();
            let p = at(name);
            f[p..p + 8].copy_from_slice(&offset.to_le_bytes());
            parse("x.gguf", &f, f.len() as u64).map(|_| ()).map_err(|e| e.to_string())
        };
        assert_eq!(with("b", 32), Ok(()), "as written");
        assert!(with("b", 4)
            .unwrap_err()
            .contains("tensor b's offset 4 is not a multiple of the alignment 32"));
        assert!(with("b", 0).unwrap_err().contains("tensors a and b overlap"));
        assert!(with("b", 64).unwrap_err().contains("tensor b (32 bytes at offset 64) runs past the end"));
        assert!(with("a", u64::MAX - 31).unwrap_err().contains("runs past the end"));
    }

    /// Bytes of a valid file changed at random, 4 000 times: each is read or refused, never a
    /// panic, and what is read has every tensor within the file, to be dequantized whole.
    #[test]
    fn damaged_files_are_read_or_refused_never_a_panic() {
        let file = sample().bytes();
        let (mut read, mut refused) = (0, 0);
        for seed in 0..4000u32 {
            let mut f = file.clone();
            let hash = |i: u32| crate::attention::synthetic::hash32(seed.wrapping_mul(0x9e37_79b9) ^ i);
            for i in 0..1 + seed % 4 {
                let at = hash(2 * i) as usize % f.len();
                f[at] = match hash(2 * i + 1) % 3 {
                    0 => 0xff,
                    1 => 0,
                    _ => hash(99) as u8,
                };
            }
            match parse("f.gguf", &f, f.len() as u64) {
                Ok(g) => {
                    read += 1;
                    for t in &g.tensors {
                        let bytes = &f[t.range.start as usize..t.range.end as usize];
                        assert_eq!(dequantize(t.kind, bytes).len(), t.values(), "{}", t.name);
                    }
                }
                Err(e) => {
                    refused += 1;
                    assert!(e.to_string().starts_with("f.gguf: "), "{e}");
                }
            }
        }
        assert!(read > 100 && refused > 100, "{read} read, {refused} refused");
    }

    /// A tokenizer the page does not read is refused by its key: another model, another split, a
    /// list missing or of the wrong kind.
    #[test]
    fn tokenizers_the_page_does_not_read_are_refused_by_key() {
        let tokens: Vec<Value> =
            crate::model::tokenize::bpe::byte_chars().iter().map(|c| Value::Str(c.to_string())).collect();
        let base = |extra: Vec<(&str, Value)>| {
            let mut metadata = vec![
                ("tokenizer.ggml.model".to_string(), Value::Str("gpt2".into())),
                ("tokenizer.ggml.tokens".to_string(), Value::Array(tokens.clone())),
                ("tokenizer.ggml.merges".to_string(), Value::Array(Vec::new())),
            ];
            for (k, v) in extra {
                metadata.retain(|(key, _)| key != k);
                metadata.push((k.to_string(), v));
            }
            tokenizer("t.gguf", &Gguf { metadata, tensors: Vec::new(), alignment: 32 }).map(|_| ())
        };
        assert_eq!(base(vec![]), Ok(()));
        let types = |n: usize| Value::Array(vec![Value::I32(1); n]);
        assert_eq!(base(vec![("tokenizer.ggml.token_type", types(256))]), Ok(()));
        let cases = [
            (vec![("tokenizer.ggml.model", Value::Str("llama".into()))], "its tokenizer is \"llama\""),
            (vec![("tokenizer.ggml.model", Value::U32(1))], "tokenizer.ggml.model is not a string"),
            (
                vec![("tokenizer.ggml.pre", Value::Str("qwen2".into()))],
                "splits text as \"qwen2\" (tokenizer.ggml.pre)",
            ),
            (vec![("tokenizer.ggml.merges", Value::U8(0))], "it has no tokenizer.ggml.merges list"),
            (
                vec![("tokenizer.ggml.tokens", Value::Array(vec![Value::U8(1)]))],
                "tokenizer.ggml.tokens holds a value that is not a string",
            ),
            (
                vec![("tokenizer.ggml.token_type", types(3))],
                "tokenizer.ggml.token_type is not a list of 256 token types",
            ),
            (
                vec![("tokenizer.ggml.add_space_prefix", Value::U8(1))],
                "tokenizer.ggml.add_space_prefix is U8(1), not a bool",
            ),
            (
                vec![("tokenizer.ggml.merges", Value::Array(vec![Value::Str("Ġ x".into())]))],
                "merge 1 (\"Ġ\" + \"x\") makes or uses \"Ġx\"",
            ),
        ];
        for (extra, want) in cases {
            let got = base(extra).unwrap_err().to_string();
            assert!(got.starts_with("t.gguf: ") && got.contains(want), "{got:?} should say {want:?}");
        }
        let none = tokenizer("t.gguf", &Gguf { metadata: Vec::new(), tensors: Vec::new(), alignment: 32 });
        assert!(none.unwrap_err().to_string().contains("it holds no tokenizer"));
    }

    /// A header longer than what the caller read says so, rather than calling the file short.
    #[test]
    fn a_header_longer_than_the_bytes_read_says_so() {
        let file = sample().bytes();
        let e = parse("m.gguf", &file[..200], file.len() as u64).unwrap_err();
        assert!(e.problem.contains("longer than the 200 bytes this page reads"), "{e}");
    }
}
