//! The tokenizers, by model family, as huggingface/tokenizers keeps a folder per model: BERT's
//! WordPiece ([`wordpiece`], from `vocab.txt` or `tokenizer.json`, cased or uncased) and GPT-2's
//! byte-level BPE ([`bpe`]). Both read the reader's files as untrusted input and give
//! [`Token`]s.

pub mod bpe;
pub mod wordpiece;

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
