//! Fuzzed input, zero panics: every parser and entry point that takes text from outside (the URL
//! query, custom configurations, host-page messages, `pruned=` lists, the trained model's
//! tokenizer, a model folder's safetensors headers, config.json and whole folders) run on at least
//! 10 000 generated inputs each, built from fragments chosen to break things: garbage, huge and
//! negative numbers, repeated keys, bad percent escapes, invalid UTF-8, control and zero-width
//! characters, emoji, CJK, and 100 kB texts. Each must give a value or a typed error with a
//! readable message, and the properties below must hold. The generator is seeded (counter-based),
//! so a failure names a case that reproduces.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use headlab::attention::config::MEMORY_BUDGET_BYTES;
use headlab::attention::synthetic::hash32;
use headlab::attention::ModelConfig;
use headlab::embed::HostMessage;
use headlab::settings::{parse_head_list, Link};

const CASES: u32 = 10_000;

/// A seeded source of choices.
struct Gen(u32);

impl Gen {
    fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_add(1);
        hash32(self.0 ^ 0x5bd1_e995)
    }
    fn below(&mut self, n: usize) -> usize {
        self.next() as usize % n.max(1)
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    /// Up to `max` fragments from `items`, concatenated.
    fn text(&mut self, items: &[&str], max: usize) -> String {
        (0..self.below(max + 1)).map(|_| self.pick(items)).collect()
    }
}

const KEYS: &[&str] = &[
    "preset",
    "seq",
    "seed",
    "d_model",
    "heads",
    "backend",
    "theme",
    "text",
    "layer",
    "pruned",
    "embed",
    "view",
    "host",
    "",
    "x",
    "PRESET",
    "seq[]",
    "%73eq",
    "preset%00",
];

const VALUES: &[&str] = &[
    "bert-base",
    "gpt3",
    "minilm",
    "custom",
    "transformer",
    "gpt2-large",
    "1",
    "0",
    "-1",
    "12",
    "768",
    "7",
    "1024",
    "1025",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "99999999999999999999999",
    "1e3",
    "0x10",
    " 12 ",
    "+5",
    "3.5",
    "NaN",
    "%",
    "%2",
    "%ZZ",
    "%F0%28",
    "%F0%9F%98%80",
    "%00",
    "%FF%FE",
    "+",
    "dark",
    "light",
    "auto",
    "neon",
    "cpu",
    "gpu",
    "all",
    "chart",
    "prune",
    "heads",
    "1,2,3",
    "1,,x,-2,99",
    "https://handbook.example",
    "http://[::1]:8080",
    "javascript:alert(1)",
    "null",
    "<script>",
    "é",
    "😀",
    "日本語",
    "\u{200b}",
    "\u{202e}",
    "aaa",
];

const SEPARATORS: &[&str] = &["&", "=", "&&", "?", "#", "=="];

fn query(g: &mut Gen) -> String {
    let mut q = if g.below(2) == 0 { "?".to_string() } else { String::new() };
    for _ in 0..g.below(12) {
        match g.below(10) {
            0 => q.push_str(&g.text(SEPARATORS, 3)),
            1 => q.push_str(&g.text(VALUES, 3)),
            2 => q.push_str(&"9".repeat(g.below(400))),
            _ => {
                q.push_str(g.pick(KEYS));
                q.push('=');
                q.push_str(&g.text(VALUES, 3));
                q.push('&');
            }
        }
    }
    q
}

#[test]
fn url_queries_parse_to_a_link_whose_own_query_is_canonical() {
    let mut g = Gen(1);
    for case in 0..CASES {
        let q = query(&mut g);
        let (first, notes) = Link::from_query(&q);
        let pairs = q.split('&').count();
        assert!(notes.len() <= pairs + 2, "case {case} {q:?}: {} notes for {pairs} pairs", notes.len());
        assert!(
            notes.iter().all(|n| !n.is_empty() && n.chars().count() < 400),
            "case {case} {q:?}: {notes:?}"
        );
        // The link the page writes back parses cleanly, to a state that writes the same link.
        let canonical = first.to_query();
        let (second, notes) = Link::from_query(&canonical);
        assert!(notes.is_empty(), "case {case} {q:?}: canonical {canonical:?} has notes {notes:?}");
        assert_eq!(second.to_query(), canonical, "case {case} {q:?}");
        assert_eq!(Link::from_query(&second.to_query()).0, second, "case {case} {q:?}");
    }
    println!("URL query: {CASES} cases, no panic, every canonical link stable");
}

#[test]
fn configurations_validate_or_explain_and_never_overflow() {
    let mut g = Gen(2);
    let sizes =
        [0, 1, 2, 3, 7, 8, 12, 13, 64, 96, 768, 1023, 1024, 1025, 12288, 16384, 16385, 1 << 20, usize::MAX];
    for case in 0..CASES {
        let pick = |g: &mut Gen| match g.below(3) {
            0 => sizes[g.below(sizes.len())],
            1 => g.below(20_000),
            _ => g.next() as usize,
        };
        let config = ModelConfig { d_model: pick(&mut g), num_heads: pick(&mut g), seq_len: pick(&mut g) };
        match config.validate() {
            Ok(()) => {
                // What validation lets through fits: no single buffer near wasm32's 2 GiB, the
                // total within the budget, and the arithmetic that sizes it exact.
                let f = config.footprint();
                assert!(f.total() <= MEMORY_BUDGET_BYTES, "case {case} {config:?}");
                for (what, bytes) in headlab::gpu::buffer_sizes(&config) {
                    let stored = !config.generates_weights() || !what.starts_with("W_");
                    assert!(!stored || bytes < 1 << 31, "case {case} {config:?}: {what} is {bytes} bytes");
                }
                let (n, d) = (config.seq_len as u64, config.d_model as u64);
                assert!(n
                    .checked_mul(d)
                    .and_then(|v| v.checked_mul(d))
                    .and_then(|v| v.checked_mul(8))
                    .is_some());
                assert_eq!(config.d_model % config.num_heads, 0);
            }
            Err(e) => assert!(e.to_string().len() > 20, "case {case} {config:?}: {e}"),
        }
    }
    println!("configurations: {CASES} cases, each valid or explained");
}

#[test]
fn host_messages_parse_or_are_refused_with_a_reason() {
    let mut g = Gen(3);
    let fields = ["to", "version", "type", "theme", "preset", "height", "from", "extra", "__proto__", ""];
    let json_values = [
        "\"headlab\"",
        "1",
        "2",
        "1.0",
        "-1",
        "1e999",
        "\"1\"",
        "null",
        "true",
        "[]",
        "{}",
        "\"set-theme\"",
        "\"set-preset\"",
        "\"request-size\"",
        "\"dark\"",
        "\"light\"",
        "\"auto\"",
        "\"gpt3\"",
        "\"minilm\"",
        "\"\\u0000\"",
        "\"😀\"",
        "{\"to\":\"headlab\"}",
        "\"<img src=x onerror=alert(1)>\"",
    ];
    let (mut accepted, mut refused) = (0, 0);
    for case in 0..CASES {
        let text = match g.below(6) {
            // A valid message, its fields in any order; sometimes with one field too many.
            5 => {
                let mut obj = vec!["\"to\":\"headlab\"".to_string(), "\"version\":1".to_string()];
                match g.below(3) {
                    0 => obj.push(format!(
                        "\"type\":\"set-theme\",\"theme\":\"{}\"",
                        g.pick(&["auto", "light", "dark"])
                    )),
                    1 => obj.push(format!(
                        "\"type\":\"set-preset\",\"preset\":\"{}\"",
                        g.pick(&["gpt3", "bert-base", "minilm", "gpt2-large"])
                    )),
                    _ => obj.push("\"type\":\"request-size\"".to_string()),
                }
                if g.below(4) == 0 {
                    obj.push(format!(
                        "\"{}\":{}",
                        fields[g.below(fields.len())],
                        json_values[g.below(json_values.len())]
                    ));
                }
                let at = g.below(obj.len());
                obj.swap(0, at);
                format!("{{{}}}", obj.join(","))
            }
            0 => g.text(&["{", "}", "\"", ":", ",", "[", "]", "headlab", "1", "\\", "null"], 30),
            1 => format!(
                "{{\"to\":\"headlab\",\"version\":1,\"type\":\"set-theme\",\"theme\":\"{}\"}}",
                "x".repeat(g.below(6000))
            ),
            _ => {
                let mut obj: Vec<String> = Vec::new();
                if g.below(4) > 0 {
                    obj.push("\"to\":\"headlab\"".into());
                }
                if g.below(4) > 0 {
                    obj.push("\"version\":1".into());
                }
                for _ in 0..g.below(4) {
                    obj.push(format!(
                        "\"{}\":{}",
                        fields[g.below(fields.len())],
                        json_values[g.below(json_values.len())]
                    ));
                }
                format!("{{{}}}", obj.join(","))
            }
        };
        match HostMessage::parse(&text) {
            Ok(message) => {
                // Nothing but the schema gets through: exactly the four fields of its type.
                let fields = serde_json::from_str::<serde_json::Value>(&text).unwrap();
                let expected = if message == HostMessage::RequestSize { 3 } else { 4 };
                assert_eq!(fields.as_object().map(|o| o.len()), Some(expected), "case {case} {text:?}");
                accepted += 1;
            }
            Err(e) => {
                assert!(!e.to_string().is_empty(), "case {case} {text:?}");
                refused += 1;
            }
        }
    }
    assert!(
        accepted > 100 && refused > 1000,
        "the generator must reach both outcomes: {accepted} / {refused}"
    );
    println!("host messages: {CASES} cases, {accepted} accepted, {refused} refused with a reason");
}

#[test]
fn head_lists_keep_only_heads_that_exist() {
    let mut g = Gen(4);
    for case in 0..CASES {
        let raw = g.text(&["1", "0", ",", "-", "99", "x", " ", "%2C", "18446744073709551616", "7", ",,"], 40);
        let limit = [0, 1, 8, 12, 72, 96, 256][g.below(7)];
        let (heads, note) = parse_head_list(&raw, limit);
        assert_eq!(heads.len(), limit, "case {case} {raw:?}");
        if let Some(note) = note {
            assert!(note.chars().count() < 400, "case {case}: {note}");
        }
    }
    println!("pruned= lists: {CASES} cases, no panic");
}

#[test]
fn the_tokenizer_takes_any_text() {
    use headlab::model::tokenize::wordpiece::WordPiece;
    let vocab = std::fs::read_to_string(common::model_dir().join("vocab.txt")).unwrap();
    let tok = WordPiece::from_vocab(&vocab, 512).unwrap();
    let vocab_size = vocab.lines().count() as u32;
    let fragments = [
        "the",
        "bank",
        "river",
        " ",
        "  ",
        "\t",
        "\n",
        "\r\n",
        ".",
        ",",
        "'",
        "\"",
        "(",
        ")",
        "-",
        "unaffable",
        "don't",
        "123",
        "3.14",
        "$",
        "€",
        "\u{0}",
        "\u{7}",
        "\u{1b}",
        "\u{7f}",
        "\u{200b}",
        "\u{200d}",
        "\u{feff}",
        "\u{202e}",
        "\u{301}",
        "é",
        "ñ",
        "ß",
        "İ",
        "😀",
        "👩\u{200d}👩\u{200d}👧",
        "🏳️\u{200d}🌈",
        "日本語",
        "中文",
        "한국어",
        "العربية",
        "עברית",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        "[UNK]",
        "[PAD]",
        "[cls]",
        "##ing",
        "supercalifragilisticexpialidocious",
        "\u{10ffff}",
        "\u{fffd}",
    ];
    let mut g = Gen(5);
    let cases = CASES + 20;
    for case in 0..cases {
        let text = if case >= CASES {
            // 100 kB texts: long words, long runs of one character, mixed scripts.
            let unit = g.text(&fragments, 40);
            unit.repeat(100_000 / unit.len().max(1) + 1)
        } else {
            g.text(&fragments, 60)
        };
        let tokens = tok.encode(&text);
        assert!((2..=512).contains(&tokens.len()), "case {case}: {} tokens", tokens.len());
        assert_eq!(
            (tokens[0].piece.as_str(), tokens.last().unwrap().piece.as_str()),
            ("[CLS]", "[SEP]"),
            "case {case}"
        );
        assert!(tokens.iter().all(|t| t.id < vocab_size), "case {case}: an id past the vocabulary");
    }
    println!("tokenizer: {cases} cases (20 of 100 kB), every one 2..=512 tokens inside the vocabulary");
}

/// `bytes` with up to 8 edits: a byte changed, a run cut out, a fragment spliced in.
fn mutate(g: &mut Gen, bytes: &[u8], fragments: &[&str]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for _ in 0..1 + g.below(8) {
        let at = g.below(out.len() + 1);
        match g.below(3) {
            0 if at < out.len() => out[at] = g.next() as u8,
            1 => {
                let end = (at + g.below(16)).min(out.len());
                out.drain(at..end);
            }
            _ => {
                let fragment = g.pick(fragments).as_bytes().to_vec();
                out.splice(at..at, fragment);
            }
        }
    }
    out
}

const JSON_FRAGMENTS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "0",
    "-1",
    "1e400",
    "18446744073709551616",
    "4294967296",
    "1099511627776",
    "null",
    "true",
    "\"F16\"",
    "\"BF16\"",
    "\"I64\"",
    "\"F99\"",
    "\"shape\"",
    "\"data_offsets\"",
    "[0,0]",
    "[1048576,1048576]",
    "\"dtype\"",
    "\"__metadata__\"",
    "\"bert\"",
    "\"distilbert\"",
    "\"gpt2\"",
    "\"num_hidden_layers\"",
    "\"hidden_size\"",
    "\"gelu_new\"",
    "1000000",
    "\u{0}",
    "é",
    "\\u0000",
    "\\ud800",
];

/// safetensors headers and config.json files, mutated: parsed or refused, never a panic, and a
/// header the crate accepts always has offsets that fit its sizes.
#[test]
fn checkpoint_headers_and_configs_parse_or_are_refused() {
    use common::folder::{tensors_of, tiny_config, TINY};
    use headlab::model::load::checkpoint::parse_header;
    let tensors = tensors_of(&headlab::model::encoder::bert::Bert::random(TINY, 1));
    let file = common::folder::safetensors(&tensors);
    let n = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    let header = &file[8..8 + n];
    let config = tiny_config();
    let mut g = Gen(11);
    let (mut headers_ok, mut configs_ok) = (0, 0);
    for case in 0..CASES {
        let bad = mutate(&mut g, header, JSON_FRAGMENTS);
        if let Ok(meta) = parse_header(&bad) {
            headers_ok += 1;
            let mut end = 0;
            for name in meta.offset_keys() {
                let info = meta.info(&name).unwrap();
                assert_eq!(info.data_offsets.0, end, "case {case}: {name} starts where the last ended");
                end = info.data_offsets.1;
            }
            assert_eq!(end, meta.data_len(), "case {case}");
        }
        let bad = String::from_utf8_lossy(&mutate(&mut g, config.as_bytes(), JSON_FRAGMENTS)).to_string();
        match headlab::model::load::config::parse(&bad) {
            Ok(c) => {
                configs_ok += 1;
                assert!(
                    c.spec.validate().is_ok() && c.spec.layers <= 128 && c.spec.d_model <= 16384,
                    "case {case}"
                );
            }
            Err(e) => assert!(
                e.to_string().starts_with("config.json: ") && e.to_string().len() < 400,
                "case {case}: {e}"
            ),
        }
    }
    println!("checkpoint headers: {CASES} cases ({headers_ok} accepted); configs: {CASES} cases ({configs_ok} accepted); no panic");
}

/// Whole folders with a mutated model.safetensors (header and data) or config.json, read by the
/// loader: a model whose weights are all finite f16, or an error naming a file; never a panic.
#[test]
fn mutated_folders_load_or_are_refused_with_the_file_named() {
    use headlab::model::load::checkpoint::{load, Options};
    use headlab::model::load::files::now;
    let (files, _) = common::folder::tiny_folder(5);
    let weights = files.get("tiny/model.safetensors").unwrap().to_vec();
    let options = Options { name: None, budget: 1 << 30, room: None };
    let mut g = Gen(12);
    let mut loaded = 0;
    for case in 0..CASES {
        let mut folder = files.clone();
        if g.below(4) == 0 {
            let config = common::folder::tiny_config();
            folder.put("tiny/config.json", mutate(&mut g, config.as_bytes(), JSON_FRAGMENTS));
        } else {
            // Most edits land in the header's first 4 kB, where they matter most.
            let window = weights.len().min(if g.below(2) == 0 { 4096 } else { usize::MAX });
            let mut bad = mutate(&mut g, &weights[..window], JSON_FRAGMENTS);
            bad.extend_from_slice(&weights[window..]);
            folder.put("tiny/model.safetensors", bad);
        }
        match now(load(&folder, &options, &mut |_| {})) {
            Ok(l) => {
                loaded += 1;
                let model = headlab::model::encoder::Encoder::from_file(&l.file, l.id)
                    .expect("a loaded folder decodes");
                assert!(model.bert.word.iter().all(|v| v.is_finite()), "case {case}");
            }
            Err(e) => assert!(e.file.starts_with("tiny/") || e.file == "config.json", "case {case}: {e}"),
        }
    }
    println!("mutated model folders: {CASES} cases ({loaded} loaded); no panic");
}
