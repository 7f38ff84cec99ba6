//! BERT's WordPiece tokenizer, as the model was trained with it:
//!
//! 1. the special tokens (`[CLS]`, `[SEP]`, `[UNK]`, `[PAD]`, `[MASK]`) written literally in the
//!    text are kept as themselves;
//! 2. the rest is normalised: control and format characters dropped, whitespace made a space,
//!    CJK ideographs surrounded by spaces; for an uncased model also accents stripped (NFD, then
//!    combining marks removed) and lower-cased;
//! 3. split on whitespace, and every punctuation character becomes a word of its own;
//! 4. each word is cut greedily into the longest vocabulary pieces, continuations marked `##`;
//!    a word with no such cut (or over 100 characters) becomes `[UNK]`;
//! 5. `[CLS] ... [SEP]`, truncated to the model's positions (512 for BERT).

use std::collections::HashMap;

use unicode_categories::UnicodeCategories;
use unicode_normalization::UnicodeNormalization;

use crate::model::tokenize::{Token, VocabError};

const MAX_WORD_CHARS: usize = 100;
const SPECIALS: [&str; 5] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];

/// Whether the model's text is lower-cased and stripped of accents before it is cut (BERT's
/// `do_lower_case`; `tokenizers`' BertNormalizer `lowercase`, its `strip_accents` following it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Casing {
    /// Lower-cased, accents stripped: bert-base-uncased, MiniLM, DistilBERT.
    Uncased,
    /// As written: bert-base-cased.
    Cased,
}

impl Casing {
    /// Its name in the page's model file.
    pub fn name(self) -> &'static str {
        match self {
            Casing::Uncased => "uncased",
            Casing::Cased => "cased",
        }
    }

    /// The casing named `name` ([`Casing::name`]).
    pub fn from_name(name: &str) -> Option<Casing> {
        [Casing::Uncased, Casing::Cased].into_iter().find(|c| c.name() == name)
    }
}

/// A WordPiece vocabulary and the tokenizer built on it.
#[derive(Clone, Debug)]
pub struct WordPiece {
    casing: Casing,
    ids: HashMap<String, u32>,
    tokens: Vec<String>,
    unk: u32,
    cls: u32,
    sep: u32,
    /// Longest sequence the model takes, [CLS] and [SEP] included.
    max_tokens: usize,
}

impl WordPiece {
    /// Builds an uncased tokenizer from `vocab.txt` (one piece per line; the line number is the
    /// id) for a model that reads at most `max_tokens` tokens (its positions, at least 3).
    pub fn from_vocab(vocab: &str, max_tokens: usize) -> Result<Self, VocabError> {
        Self::with_casing(vocab, max_tokens, Casing::Uncased)
    }

    /// [`WordPiece::from_vocab`] with the model's casing.
    pub fn with_casing(vocab: &str, max_tokens: usize, casing: Casing) -> Result<Self, VocabError> {
        if max_tokens < 3 {
            return Err(VocabError(format!(
                "a model of {max_tokens} positions cannot read [CLS] a word [SEP]"
            )));
        }
        let tokens: Vec<String> = vocab.lines().map(|l| l.trim_end_matches('\r').to_string()).collect();
        let ids: HashMap<String, u32> =
            tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let id = |t: &str| ids.get(t).copied().ok_or_else(|| VocabError(format!("it has no {t}")));
        let (unk, cls, sep) = (id("[UNK]")?, id("[CLS]")?, id("[SEP]")?);
        Ok(WordPiece { casing, ids, tokens, unk, cls, sep, max_tokens })
    }

    /// The model's casing.
    pub fn casing(&self) -> Casing {
        self.casing
    }

    /// Longest sequence [`WordPiece::encode`] gives, [CLS] and [SEP] included.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Number of pieces in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// `[CLS] pieces [SEP]`, at most [`WordPiece::max_tokens`] long.
    pub fn encode(&self, text: &str) -> Vec<Token> {
        self.encode_counting_cut(text).0
    }

    /// [`WordPiece::encode`], and how many pieces were cut from the end to fit the model's
    /// positions (0: nothing was cut).
    pub fn encode_counting_cut(&self, text: &str) -> (Vec<Token>, usize) {
        let mut out = vec![self.token(self.cls)];
        let room = self.max_tokens - 2;
        let mut cut = 0;
        for (segment, special) in split_specials(text) {
            if special {
                if out.len() > room {
                    cut += 1;
                    continue;
                }
                // A special the vocabulary lacks is unknown, not a panic.
                out.push(self.token(self.ids.get(segment).copied().unwrap_or(self.unk)));
                continue;
            }
            for word in pre_tokenize(&normalize(segment, self.casing)) {
                for id in self.word_pieces(&word) {
                    if out.len() > room {
                        cut += 1;
                        continue;
                    }
                    out.push(self.token(id));
                }
            }
        }
        out.push(self.token(self.sep));
        (out, cut)
    }

    fn token(&self, id: u32) -> Token {
        Token { id, piece: self.tokens[id as usize].clone() }
    }

    fn word_pieces(&self, word: &str) -> Vec<u32> {
        let chars: Vec<char> = word.chars().collect();
        if chars.len() > MAX_WORD_CHARS {
            return vec![self.unk];
        }
        let mut pieces = Vec::new();
        let mut start = 0;
        while start < chars.len() {
            let mut end = chars.len();
            let found = loop {
                if end == start {
                    break None;
                }
                let mut piece: String = chars[start..end].iter().collect();
                if start > 0 {
                    piece.insert_str(0, "##");
                }
                if let Some(&id) = self.ids.get(&piece) {
                    break Some(id);
                }
                end -= 1;
            };
            match found {
                Some(id) => pieces.push(id),
                None => return vec![self.unk],
            }
            start = end;
        }
        pieces
    }
}

/// The most pieces a vocabulary may have (BERT's have 30 000; multilingual ones 120 000).
pub const MAX_VOCAB: usize = 1 << 20;

/// A `tokenizer.json` (the `tokenizers` package's format) as `vocab.txt` text (the pieces in id
/// order, one per line) and its casing, for a WordPiece model with BERT's normaliser. Its
/// truncation and padding are not read: the page cuts at the model's positions and never pads.
pub fn from_tokenizer_json(text: &str) -> Result<(String, Casing), VocabError> {
    use serde_json::Value;
    let bad = |s: String| VocabError(s);
    let root: Value =
        serde_json::from_str(text).map_err(|e| bad(format!("tokenizer.json is not JSON ({e})")))?;
    let model = root.get("model").ok_or_else(|| bad("tokenizer.json has no model".into()))?;
    let kind = model.get("type").and_then(Value::as_str).unwrap_or("(none)");
    if kind != "WordPiece" {
        return Err(bad(format!("tokenizer.json's model is {:?}, not WordPiece (BERT's)", short(kind))));
    }
    if let Some(prefix) = model.get("continuing_subword_prefix").and_then(Value::as_str) {
        if prefix != "##" {
            return Err(bad(format!("tokenizer.json marks continuations with {:?}, not ##", short(prefix))));
        }
    }
    let casing = match root.get("normalizer") {
        None | Some(Value::Null) => Casing::Cased,
        Some(n) if n.get("type").and_then(Value::as_str) == Some("BertNormalizer") => {
            let lowercase = n.get("lowercase").and_then(Value::as_bool).unwrap_or(true);
            let strip = n.get("strip_accents").and_then(Value::as_bool).unwrap_or(lowercase);
            match (lowercase, strip) {
                (true, true) => Casing::Uncased,
                (false, false) => Casing::Cased,
                _ => return Err(bad("tokenizer.json lower-cases without stripping accents (or the reverse): headlab reads BERT's two casings".into())),
            }
        }
        Some(n) => {
            let kind = n.get("type").and_then(Value::as_str).unwrap_or("(none)");
            return Err(bad(format!("tokenizer.json's normalizer is {:?}, not BERT's", short(kind))));
        }
    };
    let vocab = model
        .get("vocab")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("tokenizer.json's model has no vocab".into()))?;
    if vocab.len() > MAX_VOCAB {
        return Err(bad(format!(
            "tokenizer.json has {} pieces; headlab reads at most {MAX_VOCAB}",
            vocab.len()
        )));
    }
    let mut pieces: Vec<Option<&str>> = vec![None; vocab.len()];
    for (piece, id) in vocab {
        let id = id.as_u64().filter(|&i| (i as usize) < pieces.len()).ok_or_else(|| {
            bad(format!("tokenizer.json gives {:?} the id {id}, outside 0..{}", short(piece), pieces.len()))
        })?;
        if piece.contains(['\n', '\r']) {
            return Err(bad(format!("tokenizer.json has a piece with a line break ({:?})", short(piece))));
        }
        if pieces[id as usize].replace(piece).is_some() {
            return Err(bad(format!("tokenizer.json gives two pieces the id {id}")));
        }
    }
    let mut lines = String::new();
    for piece in pieces {
        // Every slot is filled: as many distinct ids below the count as there are pieces.
        lines.push_str(piece.unwrap_or_default());
        lines.push('\n');
    }
    Ok((lines, casing))
}

/// At most 40 characters of `s`, for a message.
fn short(s: &str) -> String {
    s.chars().take(40).collect()
}

/// Splits `text` around literal special tokens: `(segment, is_special)` in order.
fn split_specials(text: &str) -> Vec<(&str, bool)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some((at, special)) =
        SPECIALS.iter().filter_map(|s| rest.find(s).map(|at| (at, *s))).min_by_key(|(at, _)| *at)
    {
        if at > 0 {
            out.push((&rest[..at], false));
        }
        out.push((special, true));
        rest = &rest[at + special.len()..];
    }
    if !rest.is_empty() {
        out.push((rest, false));
    }
    out
}

fn is_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r') && c.is_other() // Cc, Cf, Cn, Co, Cs
}

fn is_punctuation(c: char) -> bool {
    matches!(c as u32, 33..=47 | 58..=64 | 91..=96 | 123..=126) || c.is_punctuation()
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

/// Clean, pad CJK and, uncased, strip accents and lower-case: BERT's normaliser.
fn normalize(text: &str, casing: Casing) -> String {
    let mut cleaned = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\0' || c == '\u{FFFD}' || is_control(c) {
            continue;
        }
        if c.is_whitespace() {
            cleaned.push(' ');
        } else if is_cjk(c) {
            cleaned.push(' ');
            cleaned.push(c);
            cleaned.push(' ');
        } else {
            cleaned.push(c);
        }
    }
    match casing {
        Casing::Uncased => {
            cleaned.nfd().filter(|c| !c.is_mark_nonspacing()).flat_map(char::to_lowercase).collect()
        }
        Casing::Cased => cleaned,
    }
}

/// Whitespace-separated words, with every punctuation character a word of its own.
fn pre_tokenize(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    for chunk in text.split_whitespace() {
        let mut word = String::new();
        for c in chunk.chars() {
            if is_punctuation(c) {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                words.push(c.to_string());
            } else {
                word.push(c);
            }
        }
        if !word.is_empty() {
            words.push(word);
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> WordPiece {
        WordPiece::from_vocab(
            "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nun\n##aff\n##able\n,\nthe\ncafe\nhello",
            512,
        )
        .unwrap()
    }

    #[test]
    fn greedy_longest_match_with_continuations_and_unknown_words() {
        let t = tiny();
        let ids: Vec<u32> = t.encode("Unaffable, the CAFÉ! xyz [MASK]").iter().map(|t| t.id).collect();
        // [CLS] un ##aff ##able , the cafe [UNK](!) [UNK](xyz) [MASK] [SEP]
        assert_eq!(ids, vec![2, 5, 6, 7, 8, 9, 10, 1, 1, 4, 3]);
        assert_eq!(t.encode("").iter().map(|t| t.id).collect::<Vec<_>>(), vec![2, 3]);
    }

    #[test]
    fn long_input_is_truncated_to_the_models_positions_with_sep_last() {
        let t = tiny();
        let ids = t.encode(&"hello ".repeat(2000));
        assert_eq!(ids.len(), t.max_tokens());
        assert_eq!((ids[0].id, ids[511].id, ids[510].id), (2, 3, 11));
        let short = WordPiece::from_vocab("[UNK]\n[CLS]\n[SEP]\nhello", 5).unwrap();
        assert_eq!(
            short.encode(&"hello ".repeat(9)).iter().map(|t| t.id).collect::<Vec<_>>(),
            [1, 3, 3, 3, 2]
        );
        assert!(WordPiece::from_vocab("[UNK]\n[CLS]\n[SEP]", 2).is_err());
        // What was cut is counted, and only then: a text that fills the positions exactly lost
        // nothing.
        assert_eq!(t.encode_counting_cut(&"hello ".repeat(2000)).1, 2000 - 510);
        assert_eq!(short.encode_counting_cut(&"hello ".repeat(3)).1, 0);
        assert_eq!(short.encode_counting_cut(&"hello ".repeat(4)).1, 1);
        assert_eq!(short.encode_counting_cut("hello hello hello [SEP] [SEP]").1, 2);
    }

    #[test]
    fn a_literal_special_the_vocabulary_lacks_is_unknown() {
        let t = WordPiece::from_vocab("[UNK]\n[CLS]\n[SEP]\nhi", 512).unwrap();
        let ids: Vec<u32> = t.encode("hi [MASK]").iter().map(|t| t.id).collect();
        assert_eq!(ids, vec![1, 3, 0, 2]);
    }

    #[test]
    fn a_cased_tokenizer_keeps_case_and_accents() {
        let t = WordPiece::with_casing("[UNK]\n[CLS]\n[SEP]\nCafé\ncafe\n!", 512, Casing::Cased).unwrap();
        let ids: Vec<u32> = t.encode("Café cafe CAFE!").iter().map(|t| t.id).collect();
        assert_eq!(ids, vec![1, 3, 4, 0, 5, 2]);
        assert_eq!(tiny().encode("Café")[1].piece, "cafe");
    }

    #[test]
    fn tokenizer_json_becomes_the_vocabulary_in_id_order_with_its_casing() {
        let json = |normalizer: &str, vocab: &str| {
            format!(
                r###"{{"normalizer": {normalizer}, "model": {{"type": "WordPiece", "continuing_subword_prefix": "##", "vocab": {vocab}}}}}"###
            )
        };
        let vocab = r#"{"[UNK]": 0, "[SEP]": 2, "[CLS]": 1, "hi": 3}"#;
        let uncased = json(r#"{"type": "BertNormalizer", "lowercase": true, "strip_accents": null}"#, vocab);
        assert_eq!(from_tokenizer_json(&uncased), Ok(("[UNK]\n[CLS]\n[SEP]\nhi\n".into(), Casing::Uncased)));
        let cased = json(r#"{"type": "BertNormalizer", "lowercase": false}"#, vocab);
        assert_eq!(from_tokenizer_json(&cased).unwrap().1, Casing::Cased);
        for (text, problem) in [
            (json("null", r#"{"a": 0, "b": 0}"#), "two pieces the id 0"),
            (json("null", r#"{"a": 0, "b": 5}"#), "outside 0..2"),
            (json("null", r#"{"a\nb": 0}"#), "line break"),
            (json(r#"{"type": "NFC"}"#, vocab), "normalizer is \"NFC\""),
            (
                json(r#"{"type": "BertNormalizer", "lowercase": true, "strip_accents": false}"#, vocab),
                "two casings",
            ),
            (r#"{"model": {"type": "BPE", "vocab": {}}}"#.to_string(), "not WordPiece"),
            ("[1, 2".to_string(), "not JSON"),
        ] {
            let err = from_tokenizer_json(&text).unwrap_err().to_string();
            assert!(err.contains(problem), "{text}: {err}");
        }
    }

    #[test]
    fn a_vocabulary_without_the_special_tokens_is_refused() {
        assert!(WordPiece::from_vocab("a\nb", 512).unwrap_err().to_string().contains("[UNK]"));
    }
}
