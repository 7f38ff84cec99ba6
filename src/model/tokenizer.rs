//! BERT's uncased WordPiece tokenizer, as the model was trained with it:
//!
//! 1. the special tokens (`[CLS]`, `[SEP]`, `[UNK]`, `[PAD]`, `[MASK]`) written literally in the
//!    text are kept as themselves;
//! 2. the rest is normalised: control and format characters dropped, whitespace made a space,
//!    CJK ideographs surrounded by spaces, accents stripped (NFD, then combining marks removed),
//!    lower-cased;
//! 3. split on whitespace, and every punctuation character becomes a word of its own;
//! 4. each word is cut greedily into the longest vocabulary pieces, continuations marked `##`;
//!    a word with no such cut (or over 100 characters) becomes `[UNK]`;
//! 5. `[CLS] ... [SEP]`, truncated to the model's positions (512 for BERT).

use std::collections::HashMap;

use unicode_categories::UnicodeCategories;
use unicode_normalization::UnicodeNormalization;

const MAX_WORD_CHARS: usize = 100;
const SPECIALS: [&str; 5] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];

/// A WordPiece vocabulary and the tokenizer built on it.
#[derive(Clone, Debug)]
pub struct Tokenizer {
    ids: HashMap<String, u32>,
    tokens: Vec<String>,
    unk: u32,
    cls: u32,
    sep: u32,
    /// Longest sequence the model takes, [CLS] and [SEP] included.
    max_tokens: usize,
}

/// Why a vocabulary could not be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VocabError(pub String);

impl std::fmt::Display for VocabError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the vocabulary is unusable: {}", self.0)
    }
}

/// A token: its id and the text piece it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// Vocabulary id.
    pub id: u32,
    /// The piece as in the vocabulary (`##` marks a continuation).
    pub piece: String,
}

impl Tokenizer {
    /// Builds a tokenizer from `vocab.txt` (one piece per line; the line number is the id) for a
    /// model that reads at most `max_tokens` tokens (its positions, at least 3).
    pub fn from_vocab(vocab: &str, max_tokens: usize) -> Result<Self, VocabError> {
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
        Ok(Tokenizer { ids, tokens, unk, cls, sep, max_tokens })
    }

    /// Longest sequence [`Tokenizer::encode`] gives, [CLS] and [SEP] included.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Number of pieces in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// `[CLS] pieces [SEP]`, at most [`Tokenizer::max_tokens`] long.
    pub fn encode(&self, text: &str) -> Vec<Token> {
        let mut out = vec![self.token(self.cls)];
        let room = self.max_tokens - 2;
        'segments: for (segment, special) in split_specials(text) {
            if special {
                if out.len() > room {
                    break;
                }
                // A special the vocabulary lacks is unknown, not a panic.
                out.push(self.token(self.ids.get(segment).copied().unwrap_or(self.unk)));
                continue;
            }
            for word in pre_tokenize(&normalize(segment)) {
                for id in self.word_pieces(&word) {
                    if out.len() > room {
                        break 'segments;
                    }
                    out.push(self.token(id));
                }
            }
        }
        out.push(self.token(self.sep));
        out
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

/// Clean, pad CJK, strip accents, lower-case: BERT's uncased normaliser.
fn normalize(text: &str) -> String {
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
    cleaned.nfd().filter(|c| !c.is_mark_nonspacing()).flat_map(char::to_lowercase).collect()
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

    fn tiny() -> Tokenizer {
        Tokenizer::from_vocab(
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
        let short = Tokenizer::from_vocab("[UNK]\n[CLS]\n[SEP]\nhello", 5).unwrap();
        assert_eq!(
            short.encode(&"hello ".repeat(9)).iter().map(|t| t.id).collect::<Vec<_>>(),
            [1, 3, 3, 3, 2]
        );
        assert!(Tokenizer::from_vocab("[UNK]\n[CLS]\n[SEP]", 2).is_err());
    }

    #[test]
    fn a_literal_special_the_vocabulary_lacks_is_unknown() {
        let t = Tokenizer::from_vocab("[UNK]\n[CLS]\n[SEP]\nhi", 512).unwrap();
        let ids: Vec<u32> = t.encode("hi [MASK]").iter().map(|t| t.id).collect();
        assert_eq!(ids, vec![1, 3, 0, 2]);
    }

    #[test]
    fn a_vocabulary_without_the_special_tokens_is_refused() {
        assert!(Tokenizer::from_vocab("a\nb", 512).unwrap_err().to_string().contains("[UNK]"));
    }
}
