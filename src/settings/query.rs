//! The URL query codec: settings to and from `key=value` pairs, percent-encoding that any text
//! survives, and lists of pruned heads.

use super::{ModelChoice, Preference, Settings, Theme, Threads, DEFAULT_PRESET};
use crate::attention::precision::Precision;
use crate::attention::HeadSet;

impl Settings {
    /// Settings from a URL query (`?preset=bert-base&seq=32`, with or without the `?`), with a
    /// note for every parameter that could not be used. Unknown parameters are ignored; for a
    /// repeated one the last wins.
    pub fn from_query(query: &str) -> (Settings, Vec<String>) {
        let mut s = Settings::default();
        let mut notes = Vec::new();
        let mut preset: Option<String> = None;
        let (mut d_model, mut heads) = (None, None);
        for (key, value) in pairs(query) {
            let mut number = |what: &str| -> Option<u64> {
                match value.trim().parse::<u64>() {
                    Ok(v) => Some(v),
                    Err(_) => {
                        notes.push(format!(
                            "{key}={} is not a whole number {what}; ignored.",
                            shorten(&value)
                        ));
                        None
                    }
                }
            };
            match key {
                "preset" => preset = Some(value.clone()),
                "theme" => match Theme::parse(&value) {
                    Some(t) => s.theme = t,
                    None => notes.push(format!(
                        "theme={} is not auto, light or dark; following the system.",
                        shorten(&value)
                    )),
                },
                "backend" => match Preference::from_param(&value) {
                    Some(p) => s.backend = p,
                    None => notes.push(format!(
                        "backend={} is not cpu, gpu or auto; choosing automatically.",
                        shorten(&value)
                    )),
                },
                "threads" => match Threads::from_param(&value) {
                    Some(t) => s.threads = t,
                    None => notes.push(format!(
                        "threads={} is not auto or a whole number from 1 to {}; using every core.",
                        shorten(&value),
                        Threads::MAX
                    )),
                },
                "precision" => match Precision::from_key(&value) {
                    Some(p) => s.precision = p,
                    None => notes.push(format!(
                        "precision={} is not f16 or int8; using the f16 weights.",
                        shorten(&value)
                    )),
                },
                "d_model" => d_model = number("for d_model").map(saturate),
                "heads" => heads = number("of heads").map(saturate),
                "seq" => {
                    if let Some(v) = number("of tokens") {
                        s.seq_len = saturate(v);
                    }
                }
                "seed" => match number("(0 to 4294967295)").map(u32::try_from) {
                    Some(Ok(v)) => s.seed = v,
                    Some(Err(_)) => notes.push(format!("seed={value} is over 4294967295; using {}.", s.seed)),
                    None => {}
                },
                _ => {}
            }
        }
        match preset.as_deref() {
            Some("custom") | None if d_model.is_some() || heads.is_some() => {
                let base = DEFAULT_PRESET;
                s.model = ModelChoice::Custom {
                    d_model: d_model.unwrap_or(base.d_model),
                    num_heads: heads.unwrap_or(base.num_heads),
                };
            }
            Some("custom") | None => {}
            Some(id) => match ModelChoice::from_id(id) {
                Some(model) => s.model = model,
                None => notes.push(format!(
                    "preset={} is not a known model; showing {}.",
                    shorten(id),
                    DEFAULT_PRESET.name
                )),
            },
        }
        (s, notes)
    }

    /// The query string that [`Settings::from_query`] turns back into these settings.
    pub fn to_query(&self) -> String {
        let model = match self.model {
            ModelChoice::Custom { d_model, num_heads } => {
                format!("preset=custom&d_model={d_model}&heads={num_heads}")
            }
            other => format!("preset={}", other.id()),
        };
        let backend = self.backend.as_param().map(|b| format!("&backend={b}")).unwrap_or_default();
        let theme =
            if self.theme == Theme::Auto { String::new() } else { format!("&theme={}", self.theme.as_str()) };
        let threads = match self.threads {
            Threads::Auto => String::new(),
            Threads::Exactly(n) => format!("&threads={n}"),
        };
        let precision = match self.precision {
            Precision::F16 => String::new(),
            other => format!("&precision={}", other.key()),
        };
        format!("{model}&seq={}&seed={}{backend}{theme}{threads}{precision}", self.seq_len, self.seed)
    }
}

/// The key and decoded value of each `key=value` pair of a query, in order.
pub(super) fn pairs(query: &str) -> impl Iterator<Item = (&str, String)> {
    query.trim_start_matches('?').split('&').filter(|p| !p.is_empty()).map(|pair| {
        let (key, raw) = pair.split_once('=').unwrap_or((pair, ""));
        (key, percent_decode(raw))
    })
}

/// Escapes everything but unreserved characters, so any text survives a round trip.
pub(super) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Reads a `pruned=` list ("3,7,11") for a model of `heads` heads: the set with those heads
/// pruned, and a note for anything that is not one of them (the rest of the list is still used).
pub fn parse_head_list(raw: &str, heads: usize) -> (HeadSet, Option<String>) {
    let mut set = HeadSet::all(heads);
    // The first few bad items are named; the rest only counted, however long the list.
    let (mut named, mut bad) = (Vec::new(), 0usize);
    for item in raw.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match item.parse::<usize>() {
            Ok(h) if h < heads => set.set(h, false),
            _ => {
                bad += 1;
                if named.len() < 5 {
                    named.push(shorten(item));
                }
            }
        }
    }
    let note = (bad > 0).then(|| {
        let more = if bad > named.len() { format!(" and {} more", bad - named.len()) } else { String::new() };
        format!("pruned= names heads that do not exist here ({}{more}); they are ignored.", named.join(", "))
    });
    (set, note)
}

/// The `pruned=` value for a set of heads: its pruned ones ("3,7,11").
pub fn format_head_list(heads: &HeadSet) -> String {
    heads.pruned().map(|h| h.to_string()).collect::<Vec<_>>().join(",")
}

/// Values too large for `usize` become `usize::MAX`, which validation then refuses with a reason.
fn saturate(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// At most 40 characters of untrusted text, for a note.
pub fn shorten(s: &str) -> String {
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s.to_string()
    }
}

/// Decodes `%XX` escapes and `+`; invalid escapes and invalid UTF-8 are kept or replaced, never
/// an error.
pub(super) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::{ModelConfig, PRESETS};
    use crate::settings::TRAINED_ID;

    #[test]
    fn defaults_round_trip_and_presets_parse() {
        let (s, notes) = Settings::from_query("");
        assert_eq!((s, notes.len()), (Settings::default(), 0));
        for (i, p) in PRESETS.iter().enumerate() {
            let theme = [Theme::Auto, Theme::Light, Theme::Dark][i % 3];
            let want = Settings {
                model: ModelChoice::Preset(p),
                seq_len: 33,
                seed: 7,
                backend: Preference::Auto,
                theme,
                threads: [Threads::Auto, Threads::Exactly(1), Threads::Exactly(16)][i % 3],
                precision: Precision::ALL[i % 2],
            };
            assert_eq!(Settings::from_query(&want.to_query()), (want, vec![]), "{}", p.id);
        }
        let custom = Settings {
            model: ModelChoice::Custom { d_model: 768, num_heads: 7 },
            seq_len: 100_000,
            seed: 0,
            backend: Preference::Cpu,
            theme: Theme::Dark,
            threads: Threads::Exactly(3),
            precision: Precision::Int8,
        };
        assert_eq!(Settings::from_query(&format!("?{}", custom.to_query())), (custom, vec![]));
        // Out-of-range values are kept for validation to explain.
        assert!(custom.config().validate().is_err());
    }

    #[test]
    fn threads_are_auto_or_one_to_sixteen() {
        for (q, want) in [
            ("threads=1", Threads::Exactly(1)),
            ("threads=16", Threads::Exactly(16)),
            ("threads=auto", Threads::Auto),
        ] {
            assert_eq!(
                Settings::from_query(q),
                (Settings { threads: want, ..Settings::default() }, vec![]),
                "{q}"
            );
        }
        for bad in ["threads=0", "threads=17", "threads=-1", "threads=two", "threads=", "threads=99999999999"]
        {
            let (s, notes) = Settings::from_query(bad);
            assert_eq!(s.threads, Threads::Auto, "{bad}");
            assert!(notes.len() == 1 && notes[0].contains("using every core"), "{bad}: {notes:?}");
        }
        assert_eq!((Threads::Auto.count(6), Threads::Auto.count(0), Threads::Exactly(2).count(6)), (6, 1, 2));
    }

    #[test]
    fn precision_is_f16_or_int8_and_a_bad_one_keeps_f16_with_a_note() {
        for (q, want) in [
            ("precision=int8", Precision::Int8),
            ("precision=F16", Precision::F16),
            ("precision=INT8", Precision::Int8),
        ] {
            assert_eq!(
                Settings::from_query(q),
                (Settings { precision: want, ..Settings::default() }, vec![]),
                "{q}"
            );
        }
        assert!(!Settings::default().to_query().contains("precision"), "the default stays out of links");
        for bad in ["precision=int4", "precision=", "precision=%00", "precision=fp32"] {
            let (s, notes) = Settings::from_query(bad);
            assert_eq!(s.precision, Precision::F16, "{bad}");
            assert!(notes.len() == 1 && notes[0].contains("using the f16 weights"), "{bad}: {notes:?}");
        }
    }

    #[test]
    fn bad_parameters_fall_back_with_a_note_each() {
        let (s, notes) =
            Settings::from_query("preset=%F0%28nope&seq=abc&seed=99999999999&heads=-3&x=1&&=&seq");
        assert_eq!(s.seq_len, Settings::default().seq_len);
        assert_eq!(s.seed, Settings::default().seed);
        assert_eq!(notes.len(), 5, "{notes:?}");
        assert!(notes.iter().any(|n| n.contains("not a known model")), "{notes:?}");
        // Huge numbers saturate rather than wrap, and validation names the limit.
        let (s, _) = Settings::from_query("seq=18446744073709551615");
        assert_eq!(s.seq_len, usize::MAX);
        assert!(s.config().validate().unwrap_err().to_string().contains("limit"));
    }

    #[test]
    fn custom_shapes_fill_missing_parts_from_the_default_preset() {
        let (s, notes) = Settings::from_query("preset=minilm&seq=9");
        assert_eq!((s.model, notes.len()), (ModelChoice::Trained, 0));
        assert_eq!(Settings::from_query(&s.to_query()).0, s);
        let (s, _) = Settings::from_query("heads=7");
        assert_eq!(s.model, ModelChoice::Custom { d_model: 768, num_heads: 7 });
        assert_eq!(ModelChoice::from_id("gpt3"), Some(ModelChoice::Preset(&PRESETS[6])));
        assert_eq!((ModelChoice::from_id("gpt-5"), ModelChoice::Trained.id()), (None, TRAINED_ID));
        let (s, _) = Settings::from_query("preset=gpt2-large&seq=8");
        assert_eq!(s.config(), ModelConfig { d_model: 1280, num_heads: 20, seq_len: 8 });
    }

    #[test]
    fn head_lists_round_trip_and_ignore_what_is_not_a_head() {
        let (heads, note) = parse_head_list("3,7, 11,7", 12);
        assert_eq!(heads, HeadSet::with_pruned(12, [3, 7, 11]));
        assert_eq!((note, format_head_list(&heads)), (None, "3,7,11".to_string()));
        let (heads, note) = parse_head_list("1,x,99,-2,,5", 12);
        assert_eq!(heads, HeadSet::with_pruned(12, [1, 5]));
        assert!(note.unwrap().contains("x, 99, -2"));
        assert_eq!(parse_head_list("", 12), (HeadSet::all(12), None));
        // A list of a million heads names the model's own and counts the rest.
        let huge = (0..1_000_000).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
        let (heads, note) = parse_head_list(&huge, 12);
        assert_eq!(heads.pruned_count(), 12);
        assert!(note.unwrap().contains("12, 13, 14, 15, 16 and 999983 more"));
    }

    #[test]
    fn percent_decoding_tolerates_garbage() {
        assert_eq!(percent_decode("a%20b+c"), "a b c");
        assert_eq!(percent_decode("%"), "%");
        assert_eq!(percent_decode("%4"), "%4");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("%FF"), "\u{FFFD}");
        assert_eq!(shorten(&"x".repeat(50)).chars().count(), 41);
    }
}
