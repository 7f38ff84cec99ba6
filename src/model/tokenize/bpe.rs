//! GPT-2's byte-level BPE tokenizer, as the model was trained with it (and as the `tokenizers`
//! package runs a `ByteLevel` BPE model):
//!
//! 1. the added tokens (`<|endoftext|>`) written literally in the text are kept as themselves;
//! 2. the rest is split by GPT-2's pattern
//!    `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
//!    (hand-written below: the `regex` crate has no look-ahead), after a space is put in front
//!    when the tokenizer says `add_prefix_space`; with [`Split::DigitsApart`] (SmolLM's
//!    `Digits` pre-tokenizer with `individual_digits`, llama.cpp's `smollm`) each `\p{N}`
//!    character is a word of its own first, and the pattern splits what lies between them;
//! 3. each piece's UTF-8 bytes become printable characters (GPT-2's byte-to-unicode table:
//!    printable Latin-1 bytes stand for themselves, the others for `Ā` onwards, so a space is `Ġ`);
//! 4. the piece's characters are merged pairwise, the pair with the lowest merge rank first,
//!    every occurrence of it left to right, until no pair has a rank; each symbol is a token.
//!
//! No text is lost and nothing is unknown where every byte has a piece (GPT-2's vocabulary). A
//! vocabulary may lack some bytes' pieces (SmolLM2's lacks 21: bytes no UTF-8 text holds and a
//! few control characters); such a byte is dropped, as the `tokenizers` package drops it, and
//! the merges see its neighbours side by side. Every printable ASCII character must have its
//! piece. Nothing is added around the text (GPT-2 has no `[CLS]`); cutting to the model's
//! positions is [`Bpe::encode_within`]'s.
//!
//! `\p{L}` is Unicode's Letter category from `unicode_categories`, whose tables are older than
//! the `tokenizers` package's: a letter added to Unicode since (rare scripts, not CJK or
//! emoji) may split differently.

use std::collections::HashMap;

use serde_json::Value;
use unicode_categories::UnicodeCategories;

use crate::model::tokenize::Token;

/// The most pieces a vocabulary may have (GPT-2's is 50 257).
pub const MAX_VOCAB: usize = 1 << 20;

/// Why a BPE vocabulary or merge list cannot be used: the file and the problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BpeError {
    /// The file at fault (`vocab.json`, `merges.txt`, `tokenizer.json`).
    pub file: String,
    /// What is wrong with it.
    pub problem: String,
}

impl std::fmt::Display for BpeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file, self.problem)
    }
}

impl std::error::Error for BpeError {}

fn fail<T>(file: &str, problem: impl Into<String>) -> Result<T, BpeError> {
    Err(BpeError { file: file.to_string(), problem: problem.into() })
}

/// A byte-level BPE vocabulary, its merges and its added tokens.
#[derive(Clone, Debug)]
pub struct Bpe {
    /// Piece -> id.
    ids: HashMap<String, u32>,
    /// Id -> piece (`None` for ids the vocabulary skips).
    pieces: Vec<Option<String>>,
    /// `(left id, right id)` -> `(rank, merged id)`.
    merges: HashMap<(u32, u32), (u32, u32)>,
    /// The id of each byte's character.
    byte_ids: [Option<u32>; 256],
    /// Literal tokens matched before splitting (`<|endoftext|>`), longest first.
    added: Vec<(String, u32)>,
    /// Whether a space is put before the text (`add_prefix_space`).
    prefix_space: bool,
    /// How the text is split into words.
    split: Split,
}

/// How the text between added tokens is split into words before the merges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// GPT-2's pattern (the module docs).
    Gpt2,
    /// Each number character alone, then GPT-2's pattern on the rest (SmolLM's).
    DigitsApart,
}

/// GPT-2's byte-to-character table: bytes that are printable Latin-1 (`!`..`~`, `¡`..`¬`,
/// `®`..`ÿ`) stand for themselves, the other 68 for U+0100 onwards, in byte order.
pub fn byte_chars() -> [char; 256] {
    let printable =
        |b: u32| (0x21..=0x7e).contains(&b) || (0xa1..=0xac).contains(&b) || (0xae..=0xff).contains(&b);
    let mut table = ['\0'; 256];
    let mut next = 0x100;
    for (b, slot) in table.iter_mut().enumerate() {
        let b = b as u32;
        *slot = if printable(b) {
            char::from_u32(b).expect("Latin-1")
        } else {
            next += 1;
            char::from_u32(next - 1).expect("below U+0200")
        };
    }
    table
}

impl Bpe {
    /// From `vocab.json` (piece -> id) and `merges.txt` (`left right` per line, by rank; a first
    /// line `#version: ...` is a comment). Every merge's two sides and their join must be pieces
    /// of the vocabulary, as must each of the 256 bytes' characters. Pieces written `<|...|>`
    /// (GPT-2's `<|endoftext|>`) are special tokens, kept whole where the text writes them, as
    /// GPT-2's tokenizer keeps its end-of-text token.
    pub fn from_files(vocab_json: &str, merges_txt: &str) -> Result<Bpe, BpeError> {
        let vocab: Value = serde_json::from_str(vocab_json)
            .map_err(|e| BpeError { file: "vocab.json".into(), problem: format!("not JSON ({e})") })?;
        let vocab = vocab.as_object().ok_or_else(|| BpeError {
            file: "vocab.json".into(),
            problem: "not a JSON object of pieces and ids".into(),
        })?;
        let mut merges = Vec::new();
        for (i, line) in merges_txt.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.is_empty() || (i == 0 && line.starts_with("#version")) {
                continue;
            }
            match line.split(' ').collect::<Vec<_>>()[..] {
                [a, b] if !a.is_empty() && !b.is_empty() => {
                    merges.push((a.to_string(), b.to_string(), i + 1))
                }
                _ => {
                    return fail(
                        "merges.txt",
                        format!("line {} ({:?}) is not two pieces and a space", i + 1, short(line)),
                    )
                }
            }
        }
        let specials = vocab
            .iter()
            .filter(|(p, _)| p.len() > 4 && p.starts_with("<|") && p.ends_with("|>"))
            .filter_map(|(p, id)| Some((p.clone(), id.as_u64()?)))
            .collect();
        Bpe::build("vocab.json", vocab, ("merges.txt", "line"), merges, specials, (false, Split::Gpt2))
    }

    /// From a `tokenizer.json` whose model is BPE and whose pre-tokenizer is byte-level (GPT-2's,
    /// RoBERTa's): its vocabulary, merges (as `"a b"` strings or `["a", "b"]` pairs) and added
    /// tokens. Anything the page would run differently from the file is refused.
    pub fn from_tokenizer_json(text: &str) -> Result<Bpe, BpeError> {
        const FILE: &str = "tokenizer.json";
        let root: Value = serde_json::from_str(text)
            .map_err(|e| BpeError { file: FILE.into(), problem: format!("not JSON ({e})") })?;
        let model = root
            .get("model")
            .ok_or_else(|| BpeError { file: FILE.into(), problem: "it has no model".into() })?;
        let kind = model.get("type").and_then(Value::as_str).unwrap_or("(none)");
        if kind != "BPE" {
            return fail(FILE, format!("its model is {:?}, not BPE (GPT-2's)", short(kind)));
        }
        for (field, why) in
            [("continuing_subword_prefix", "marks continuations"), ("end_of_word_suffix", "marks word ends")]
        {
            if model.get(field).is_some_and(|v| !v.is_null() && v.as_str() != Some("")) {
                return fail(FILE, format!("its BPE {why} ({field}); GPT-2's byte-level BPE does not"));
            }
        }
        if model.get("byte_fallback").and_then(Value::as_bool) == Some(true) {
            return fail(
                FILE,
                "its BPE falls back to bytes (a SentencePiece model's); headlab reads byte-level BPE",
            );
        }
        let (prefix_space, split) = byte_level(root.get("pre_tokenizer")).ok_or_else(|| BpeError {
            file: FILE.into(),
            problem: "its pre-tokenizer is not byte-level (GPT-2's)".into(),
        })?;
        if !matches!(root.get("normalizer"), None | Some(Value::Null)) {
            return fail(FILE, "it has a normalizer; GPT-2's byte-level BPE reads the text as written");
        }
        let vocab = model
            .get("vocab")
            .and_then(Value::as_object)
            .ok_or_else(|| BpeError { file: FILE.into(), problem: "its model has no vocab".into() })?;
        let list = model
            .get("merges")
            .and_then(Value::as_array)
            .ok_or_else(|| BpeError { file: FILE.into(), problem: "its model has no merges".into() })?;
        let mut merges = Vec::with_capacity(list.len());
        for (i, m) in list.iter().enumerate() {
            let pair = match m {
                Value::String(s) => s.split_once(' ').map(|(a, b)| (a.to_string(), b.to_string())),
                Value::Array(p) => match &p[..] {
                    [Value::String(a), Value::String(b)] => Some((a.clone(), b.clone())),
                    _ => None,
                },
                _ => None,
            };
            match pair {
                Some((a, b)) if !a.is_empty() && !b.is_empty() => merges.push((a, b, i + 1)),
                _ => return fail(FILE, format!("merge {} is not two pieces", i + 1)),
            }
        }
        let mut added = Vec::new();
        for t in root.get("added_tokens").and_then(Value::as_array).into_iter().flatten() {
            let (Some(content), Some(id)) =
                (t.get("content").and_then(Value::as_str), t.get("id").and_then(Value::as_u64))
            else {
                return fail(FILE, "an added token has no content or id");
            };
            if !content.is_empty() {
                added.push((content.to_string(), id));
            }
        }
        Bpe::build(FILE, vocab, (FILE, "merge"), merges, added, (prefix_space, split))
    }

    /// From a vocabulary listed by id (a GGUF file's `tokenizer.ggml.tokens`), merges by rank
    /// (`"a b"` strings), the ids kept whole where the text writes them (its control tokens),
    /// and how the text is split. `file` names the file for a refusal.
    pub fn from_lists(
        file: &str,
        tokens: &[&str],
        merges: &[&str],
        added: &[u32],
        (prefix_space, split): (bool, Split),
    ) -> Result<Bpe, BpeError> {
        let mut vocab = serde_json::Map::with_capacity(tokens.len());
        for (id, piece) in tokens.iter().enumerate() {
            if vocab.insert(piece.to_string(), Value::from(id)).is_some() {
                return fail(file, format!("its vocabulary has the piece {:?} twice", short(piece)));
            }
        }
        let mut pairs = Vec::with_capacity(merges.len());
        for (i, m) in merges.iter().enumerate() {
            match m.split_once(' ') {
                Some((a, b)) if !a.is_empty() && !b.is_empty() => {
                    pairs.push((a.to_string(), b.to_string(), i + 1))
                }
                _ => {
                    return fail(
                        file,
                        format!("merge {} ({:?}) is not two pieces and a space", i + 1, short(m)),
                    )
                }
            }
        }
        let mut kept = Vec::with_capacity(added.len());
        for &id in added {
            match tokens.get(id as usize) {
                Some(piece) if !piece.is_empty() => kept.push((piece.to_string(), u64::from(id))),
                _ => return fail(file, format!("the added token {id} is not a piece of its vocabulary")),
            }
        }
        Bpe::build(file, &vocab, (file, "merge"), pairs, kept, (prefix_space, split))
    }

    fn build(
        vocab_file: &str,
        vocab: &serde_json::Map<String, Value>,
        (merges_file, counted): (&str, &str),
        merges: Vec<(String, String, usize)>,
        added: Vec<(String, u64)>,
        (prefix_space, split): (bool, Split),
    ) -> Result<Bpe, BpeError> {
        if vocab.len() > MAX_VOCAB {
            return fail(
                vocab_file,
                format!("it has {} pieces; headlab reads at most {MAX_VOCAB}", vocab.len()),
            );
        }
        let mut ids = HashMap::with_capacity(vocab.len() + added.len());
        let mut pieces: Vec<Option<String>> = Vec::new();
        let mut insert = |piece: &str, id: u64, file: &str| -> Result<(), BpeError> {
            if id >= MAX_VOCAB as u64 {
                return fail(file, format!("{:?} has the id {id}, past {MAX_VOCAB}", short(piece)));
            }
            let slot = id as usize;
            if pieces.len() <= slot {
                pieces.resize(slot + 1, None);
            }
            match &pieces[slot] {
                Some(p) if p != piece => {
                    return fail(
                        file,
                        format!("two pieces have the id {id} ({:?}, {:?})", short(p), short(piece)),
                    )
                }
                _ => pieces[slot] = Some(piece.to_string()),
            }
            ids.insert(piece.to_string(), id as u32);
            Ok(())
        };
        for (piece, id) in vocab {
            let id = id.as_u64().ok_or_else(|| BpeError {
                file: vocab_file.into(),
                problem: format!("{:?} has the id {id}, not a whole number", short(piece)),
            })?;
            insert(piece, id, vocab_file)?;
        }
        for (piece, id) in &added {
            insert(piece, *id, vocab_file)?;
        }
        let chars = byte_chars();
        let byte_ids: [Option<u32>; 256] = std::array::from_fn(|b| ids.get(&chars[b].to_string()).copied());
        if let Some(b) = (0x21..0x7f).find(|&b| byte_ids[b].is_none()) {
            return fail(
                vocab_file,
                format!(
                    "it has no piece for the byte 0x{b:02x} ({:?}): not a byte-level vocabulary",
                    chars[b]
                ),
            );
        }
        let mut ranked = HashMap::with_capacity(merges.len());
        for (rank, (a, b, line)) in merges.iter().enumerate() {
            let id = |p: &str| {
                ids.get(p).copied().ok_or_else(|| BpeError {
                    file: merges_file.into(),
                    problem: format!(
                        "{counted} {line} ({:?} + {:?}) makes or uses {:?}, which {vocab_file} does not have: the merges do not match the vocabulary",
                        short(a),
                        short(b),
                        short(p)
                    ),
                })
            };
            let (left, right, joined) = (id(a)?, id(b)?, id(&format!("{a}{b}"))?);
            ranked.entry((left, right)).or_insert((rank as u32, joined));
        }
        let mut added: Vec<(String, u32)> = added.into_iter().map(|(s, id)| (s, id as u32)).collect();
        added.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
        Ok(Bpe { ids, pieces, merges: ranked, byte_ids, added, prefix_space, split })
    }

    /// The tokenizer as the page's model file keeps it: a `tokenizer.json` of the fields
    /// [`Bpe::from_tokenizer_json`] reads (the vocabulary in id order, the merges by rank, the
    /// added tokens, the prefix space), written field by field so the same tokenizer always
    /// gives the same bytes.
    pub fn canonical_json(&self) -> String {
        let q = |s: &str| Value::from(s).to_string();
        let vocab: Vec<String> = self
            .pieces
            .iter()
            .enumerate()
            .filter_map(|(id, p)| Some(format!("{}:{id}", q(p.as_ref()?))))
            .collect();
        let mut merges: Vec<(u32, u32, u32)> =
            self.merges.iter().map(|(&(a, b), &(rank, _))| (rank, a, b)).collect();
        merges.sort_unstable();
        let piece = |id: u32| self.pieces[id as usize].as_deref().unwrap_or_default();
        let merges: Vec<String> =
            merges.iter().map(|&(_, a, b)| format!("[{},{}]", q(piece(a)), q(piece(b)))).collect();
        let mut added = self.added.clone();
        added.sort_by_key(|(_, id)| *id);
        let added: Vec<String> =
            added.iter().map(|(s, id)| format!(r#"{{"id":{id},"content":{}}}"#, q(s))).collect();
        let byte_level = format!(r#"{{"type":"ByteLevel","add_prefix_space":{}}}"#, self.prefix_space);
        let pre = match self.split {
            Split::Gpt2 => byte_level,
            Split::DigitsApart => format!(
                r#"{{"type":"Sequence","pretokenizers":[{{"type":"Digits","individual_digits":true}},{byte_level}]}}"#
            ),
        };
        format!(
            r#"{{"added_tokens":[{}],"pre_tokenizer":{pre},"model":{{"type":"BPE","vocab":{{{}}},"merges":[{}]}}}}"#,
            added.join(","),
            vocab.join(","),
            merges.join(",")
        )
    }

    /// Rows the model's embedding needs: one past the largest id.
    pub fn vocab_size(&self) -> usize {
        self.pieces.len()
    }

    /// The id of `piece`, if the vocabulary has it.
    pub fn id(&self, piece: &str) -> Option<u32> {
        self.ids.get(piece).copied()
    }

    /// Every token of `text`, nothing added around them.
    pub fn encode(&self, text: &str) -> Vec<Token> {
        let mut out = Vec::new();
        let prefixed;
        let text = if self.prefix_space && !text.starts_with(' ') && !text.is_empty() {
            prefixed = format!(" {text}");
            &prefixed
        } else {
            text
        };
        for (segment, added) in self.split_added(text) {
            match added {
                Some(id) => out.push(self.token(id)),
                None => {
                    for word in self.words(segment) {
                        out.extend(self.word(word).into_iter().map(|id| self.token(id)));
                    }
                }
            }
        }
        out
    }

    /// [`Bpe::encode`] cut to a model's `positions`: the tokens it reads, and how many were cut
    /// from the end (for the page to say).
    pub fn encode_within(&self, text: &str, positions: usize) -> (Vec<Token>, usize) {
        let mut tokens = self.encode(text);
        let cut = tokens.len().saturating_sub(positions);
        tokens.truncate(positions);
        (tokens, cut)
    }

    /// The text token `id` stands for: its bytes as UTF-8, a character cut between tokens shown
    /// as U+FFFD (an emoji is often two or three tokens).
    pub fn text_of(&self, id: u32) -> String {
        String::from_utf8_lossy(&self.bytes_of(id)).into_owned()
    }

    /// The bytes token `id` stands for (an added token's text as written; an id the vocabulary
    /// lacks, none).
    pub fn bytes_of(&self, id: u32) -> Vec<u8> {
        let Some(Some(piece)) = self.pieces.get(id as usize) else {
            return Vec::new();
        };
        if self.added.iter().any(|(_, a)| *a == id) {
            return piece.as_bytes().to_vec();
        }
        let chars = byte_chars();
        let mut bytes = Vec::with_capacity(piece.len());
        for c in piece.chars() {
            match chars.iter().position(|&b| b == c) {
                Some(b) => bytes.push(b as u8),
                None => bytes.extend_from_slice(c.to_string().as_bytes()),
            }
        }
        bytes
    }

    /// The text of `ids` together (multi-byte characters across tokens whole again).
    pub fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids.iter().flat_map(|&id| self.bytes_of(id)).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn token(&self, id: u32) -> Token {
        Token { id, piece: self.pieces.get(id as usize).cloned().flatten().unwrap_or_default() }
    }

    /// `text` split around the added tokens written in it: `(segment, Some(id))` for an added
    /// token, `(segment, None)` for text between them.
    fn split_added<'a>(&self, text: &'a str) -> Vec<(&'a str, Option<u32>)> {
        let mut out = Vec::new();
        let mut rest = text;
        while let Some((at, len, id)) = self
            .added
            .iter()
            .filter_map(|(s, id)| rest.find(s.as_str()).map(|at| (at, s.len(), *id)))
            .min_by_key(|&(at, len, _)| (at, std::cmp::Reverse(len)))
        {
            if at > 0 {
                out.push((&rest[..at], None));
            }
            out.push((&rest[at..at + len], Some(id)));
            rest = &rest[at + len..];
        }
        if !rest.is_empty() {
            out.push((rest, None));
        }
        out
    }

    /// `segment` (text between added tokens) split into words as [`Split`] says.
    fn words<'a>(&self, segment: &'a str) -> Vec<&'a str> {
        if self.split == Split::Gpt2 {
            return split_words(segment);
        }
        let mut out = Vec::new();
        let mut start = 0;
        for (at, c) in segment.char_indices() {
            if c.is_numeric() {
                out.extend(split_words(&segment[start..at]));
                out.push(&segment[at..at + c.len_utf8()]);
                start = at + c.len_utf8();
            }
        }
        out.extend(split_words(&segment[start..]));
        out
    }

    /// The ids of one pre-tokenized word: its bytes' characters, merged by rank.
    fn word(&self, word: &str) -> Vec<u32> {
        let mut symbols: Vec<u32> = word.bytes().filter_map(|b| self.byte_ids[b as usize]).collect();
        loop {
            let best = symbols
                .windows(2)
                .filter_map(|p| {
                    self.merges.get(&(p[0], p[1])).map(|&(rank, joined)| (rank, p[0], p[1], joined))
                })
                .min_by_key(|m| m.0);
            let Some((_, left, right, joined)) = best else {
                return symbols;
            };
            let mut merged = Vec::with_capacity(symbols.len());
            let mut i = 0;
            while i < symbols.len() {
                if i + 1 < symbols.len() && symbols[i] == left && symbols[i + 1] == right {
                    merged.push(joined);
                    i += 2;
                } else {
                    merged.push(symbols[i]);
                    i += 1;
                }
            }
            symbols = merged;
        }
    }
}

/// Whether a `tokenizer.json` pre-tokenizer is byte-level (alone, or in a sequence with nothing
/// else, or after SmolLM's `Digits` with `individual_digits`), and if so whether it adds a
/// prefix space and how it splits; `None` when it is not.
fn byte_level(pre: Option<&Value>) -> Option<(bool, Split)> {
    let pre = pre?;
    match pre.get("type").and_then(Value::as_str)? {
        "ByteLevel" => {
            if pre.get("use_regex").and_then(Value::as_bool) == Some(false) {
                return None;
            }
            Some((pre.get("add_prefix_space").and_then(Value::as_bool).unwrap_or(false), Split::Gpt2))
        }
        "Sequence" => match &pre.get("pretokenizers")?.as_array()?[..] {
            [one] => byte_level(Some(one)),
            [digits, one]
                if digits.get("type").and_then(Value::as_str) == Some("Digits")
                    && digits.get("individual_digits").and_then(Value::as_bool) == Some(true) =>
            {
                match byte_level(Some(one))? {
                    (prefix, Split::Gpt2) => Some((prefix, Split::DigitsApart)),
                    _ => None,
                }
            }
            _ => None,
        },
        _ => None,
    }
}

/// What a character is to GPT-2's pattern.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Letter,
    Number,
    Space,
    Other,
}

fn class(c: char) -> Class {
    if c.is_whitespace() {
        Class::Space
    } else if c.is_letter() {
        Class::Letter
    } else if c.is_numeric() {
        Class::Number
    } else {
        Class::Other
    }
}

/// `text` split by GPT-2's pattern (see the module docs), every byte in exactly one piece.
pub fn split_words(text: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let end = |i: usize| chars.get(i).map_or(text.len(), |&(at, _)| at);
    let class_at = |i: usize| chars.get(i).map(|&(_, c)| class(c));
    let mut words = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let (_, c) = chars[i];
        let next = i + contraction(&chars[i..]).unwrap_or(0);
        let j = if next > i {
            next
        } else {
            // ` ?X+` for letters, numbers and the rest: an optional space, then a run of one class.
            let run_class = match class(c) {
                Class::Space if c == ' ' => class_at(i + 1).filter(|&k| k != Class::Space),
                Class::Space => None,
                k => Some(k),
            };
            match run_class {
                Some(k) => {
                    let mut j = if class(c) == Class::Space { i + 1 } else { i };
                    while class_at(j) == Some(k) {
                        j += 1;
                    }
                    j
                }
                None => {
                    // `\s+(?!\S)`, else `\s+`: a run of spaces, less its last when a word follows.
                    let mut j = i;
                    while class_at(j) == Some(Class::Space) {
                        j += 1;
                    }
                    if j < chars.len() && j - i > 1 {
                        j - 1
                    } else {
                        j
                    }
                }
            }
        };
        words.push(&text[end(i)..end(j)]);
        i = j;
    }
    words
}

/// The length in characters of an English contraction (`'s 't 're 've 'm 'll 'd`, lower case,
/// as GPT-2's pattern has them) at the start of `chars`.
fn contraction(chars: &[(usize, char)]) -> Option<usize> {
    if chars.first()?.1 != '\'' {
        return None;
    }
    let c = |i: usize| chars.get(i).map(|&(_, c)| c);
    match (c(1)?, c(2)) {
        ('s' | 't' | 'm' | 'd', _) => Some(2),
        ('r', Some('e')) | ('v', Some('e')) | ('l', Some('l')) => Some(3),
        _ => None,
    }
}

/// At most 40 characters of `s`, for a message.
fn short(s: &str) -> String {
    s.chars().take(40).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn the_byte_table_is_gpt2s() {
        let t = byte_chars();
        assert_eq!((t[b' ' as usize], t[b'\n' as usize], t[b'a' as usize], t[0]), ('Ġ', 'Ċ', 'a', 'Ā'));
        let mut sorted = t.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 256, "every byte its own character");
    }

    #[test]
    fn words_split_as_gpt2s_pattern_splits_them() {
        let cases: [(&str, &[&str]); 9] = [
            ("Hello world", &["Hello", " world"]),
            ("I'm here, they'll go", &["I", "'m", " here", ",", " they", "'ll", " go"]),
            ("a   b", &["a", "  ", " b"]),
            ("end  ", &["end", "  "]),
            ("x\n\ny", &["x", "\n", "\n", "y"]),
            (" 42 apples!!", &[" 42", " apples", "!!"]),
            ("''s 'S", &["''", "s", " '", "S"]),
            ("中文 emoji 🙂🙂", &["中文", " emoji", " 🙂🙂"]),
            ("", &[]),
        ];
        for (text, want) in cases {
            assert_eq!(split_words(text), want, "{text:?}");
        }
    }

    /// A vocabulary of the 256 bytes and the merges `h e`, `he l`, `Ġ w`, with `<|endoftext|>`
    /// (special, as a `<|...|>` piece of vocab.json is).
    pub(crate) fn tiny() -> Bpe {
        let chars = byte_chars();
        let mut vocab: serde_json::Map<String, Value> =
            chars.iter().enumerate().map(|(i, c)| (c.to_string(), Value::from(i))).collect();
        for (i, p) in ["he", "hel", "Ġw", "<|endoftext|>"].iter().enumerate() {
            vocab.insert(p.to_string(), Value::from(256 + i));
        }
        let merges = "#version: 0.2\nh e\nhe l\nĠ w\n";
        Bpe::from_files(&Value::Object(vocab).to_string(), merges).unwrap()
    }

    #[test]
    fn merges_apply_by_rank_and_text_comes_back_whole() {
        let bpe = tiny();
        let ids: Vec<u32> = bpe.encode("hello world<|endoftext|>").iter().map(|t| t.id).collect();
        assert_eq!(ids, [257, 108, 111, 258, 111, 114, 108, 100, 259]);
        assert_eq!(bpe.decode(&ids), "hello world<|endoftext|>");
        let emoji: Vec<u32> = bpe.encode("🙂").iter().map(|t| t.id).collect();
        assert_eq!(
            (emoji.len(), bpe.decode(&emoji).as_str(), bpe.text_of(emoji[0]).as_str()),
            (4, "🙂", "\u{fffd}")
        );
        let back = Bpe::from_tokenizer_json(&bpe.canonical_json()).unwrap();
        let again: Vec<u32> = back.encode("hello world<|endoftext|>").iter().map(|t| t.id).collect();
        assert_eq!((again, back.canonical_json()), (ids.clone(), bpe.canonical_json()));
        let (cut, dropped) = bpe.encode_within("hello world", 3);
        assert_eq!((cut.len(), dropped), (3, 5));
    }

    /// The lists a GGUF file holds, with SmolLM's split: each digit a word of its own (the merge
    /// `1 2` never applies), the pattern between them; a control token kept whole; a byte the
    /// vocabulary lacks dropped (a word of its own to the pattern, so `a` and `b` around it stay
    /// apart, as the `tokenizers` package keeps them); the tokenizer.json the model file keeps
    /// reads back the same.
    #[test]
    fn lists_with_digits_apart_split_each_digit_and_read_back_the_same() {
        let chars = byte_chars();
        let mut tokens: Vec<String> = chars.iter().filter(|&&c| c != 'Ą').map(char::to_string).collect();
        tokens.extend(["12", "ab", "<|im_start|>"].map(String::from));
        let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
        let control = tokens.len() as u32 - 1;
        let bpe =
            Bpe::from_lists("t.gguf", &tokens, &["1 2", "a b"], &[control], (false, Split::DigitsApart))
                .unwrap();
        let id = |p: &str| bpe.id(p).unwrap();
        let text = "a\u{4}b 123<|im_start|>x12";
        let ids: Vec<u32> = bpe.encode(text).iter().map(|t| t.id).collect();
        let want = [id("a"), id("b"), id("Ġ"), id("1"), id("2"), id("3"), control, id("x"), id("1"), id("2")];
        assert_eq!(ids, want);
        assert_eq!(bpe.decode(&ids), "ab 123<|im_start|>x12", "all but the byte with no piece");
        let gpt2 =
            Bpe::from_lists("t.gguf", &tokens, &["1 2", "a b"], &[control], (false, Split::Gpt2)).unwrap();
        assert_eq!(gpt2.encode("x12").iter().map(|t| t.id).collect::<Vec<_>>(), [id("x"), id("12")]);
        let back = Bpe::from_tokenizer_json(&bpe.canonical_json()).unwrap();
        assert_eq!(back.encode(text).iter().map(|t| t.id).collect::<Vec<_>>(), want);
        assert_eq!(back.canonical_json(), bpe.canonical_json());
        assert!(bpe.canonical_json().contains(r#""pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Digits","individual_digits":true},{"type":"ByteLevel","add_prefix_space":false}]}"#));
        let twice = Bpe::from_lists("t.gguf", &["a", "a"], &[], &[], (false, Split::Gpt2)).unwrap_err();
        assert_eq!(twice.to_string(), "t.gguf: its vocabulary has the piece \"a\" twice");
        let merge = Bpe::from_lists("t.gguf", &tokens, &["12"], &[], (false, Split::Gpt2)).unwrap_err();
        assert!(merge.to_string().contains("merge 1 (\"12\") is not two pieces and a space"), "{merge}");
        let added = Bpe::from_lists("t.gguf", &tokens, &[], &[99_999], (false, Split::Gpt2)).unwrap_err();
        assert!(added.to_string().contains("the added token 99999 is not a piece"), "{added}");
    }

    #[test]
    fn bad_files_are_refused_with_the_file_and_the_problem() {
        let chars = byte_chars();
        let vocab: serde_json::Map<String, Value> =
            chars.iter().enumerate().map(|(i, c)| (c.to_string(), Value::from(i))).collect();
        let vocab = Value::Object(vocab).to_string();
        let cases = [
            ("{", "", "vocab.json: not JSON"),
            ("[1]", "", "vocab.json: not a JSON object"),
            (r#"{"a": 0}"#, "", "vocab.json: it has no piece for the byte 0x21 ('!')"),
            (r#"{"a": -1}"#, "", "not a whole number"),
            (
                &vocab,
                "h e\n",
                "merges.txt: line 1 (\"h\" + \"e\") makes or uses \"he\", which vocab.json does not have",
            ),
            (&vocab, "#version: 0.2\nh\n", "merges.txt: line 2 (\"h\") is not two pieces"),
        ];
        for (v, m, want) in cases {
            let e = Bpe::from_files(v, m).unwrap_err().to_string();
            assert!(e.contains(want), "{e:?} should say {want:?}");
        }
        let wordpiece = r#"{"model": {"type": "WordPiece", "vocab": {}}}"#;
        assert!(Bpe::from_tokenizer_json(wordpiece).unwrap_err().to_string().contains("not BPE"));
        let no_byte_level = r#"{"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": "Whitespace"}}"#;
        assert!(Bpe::from_tokenizer_json(no_byte_level).unwrap_err().to_string().contains("not byte-level"));
    }
}
