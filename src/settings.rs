//! What the reader has chosen, and its round trip through the page's URL query.
//!
//! Parsing never fails as a whole: each parameter that cannot be read falls back to its default
//! and leaves a note for the page. Numbers that parse but make no sense (`heads=7` with
//! `d_model=768`, `seq=100000`) are kept: [`ModelConfig::validate`] explains those.

use std::collections::BTreeSet;

use crate::attention::config::{preset_by_id, PRESETS};
use crate::attention::ModelConfig;
use crate::backend::Preference;
use crate::embed::{Embed, HostOrigin, View};

/// Which model shape is selected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelChoice {
    /// One of [`PRESETS`], by index.
    Preset(usize),
    /// The trained all-MiniLM-L6-v2 (384 wide, 12 heads, 6 layers).
    Trained,
    /// A shape typed by the reader.
    Custom {
        /// Width of the residual stream.
        d_model: usize,
        /// Number of heads.
        num_heads: usize,
    },
}

/// Colour theme.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Theme {
    /// Follow the system (`prefers-color-scheme`).
    #[default]
    Auto,
    /// Dark text on light.
    Light,
    /// Light text on dark.
    Dark,
}

impl Theme {
    /// The URL and `data-theme` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Theme::Auto => "auto",
            Theme::Light => "light",
            Theme::Dark => "dark",
        }
    }

    /// Parses a URL value.
    pub fn parse(value: &str) -> Option<Theme> {
        [Theme::Auto, Theme::Light, Theme::Dark].into_iter().find(|t| t.as_str() == value)
    }
}

/// Everything the reader set: what is computed and how it is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The model shape.
    pub model: ModelChoice,
    /// Tokens in the sequence.
    pub seq_len: usize,
    /// Seed of the synthetic weights and inputs.
    pub seed: u32,
    /// Which backend the reader asked for.
    pub backend: Preference,
    /// Colour theme.
    pub theme: Theme,
}

/// URL identifier of the trained model.
pub const TRAINED_ID: &str = "minilm";

/// Index of BERT-base in [`PRESETS`], the default.
const DEFAULT_PRESET: usize = 1;

impl Default for Settings {
    fn default() -> Self {
        Settings {
            model: ModelChoice::Preset(DEFAULT_PRESET),
            seq_len: 16,
            seed: 42,
            backend: Preference::Auto,
            theme: Theme::Auto,
        }
    }
}

impl Settings {
    /// The configuration to run (not yet validated).
    pub fn config(&self) -> ModelConfig {
        let (d_model, num_heads) = match self.model {
            ModelChoice::Preset(i) => (PRESETS[i].d_model, PRESETS[i].num_heads),
            ModelChoice::Trained => (crate::model::bert::D_MODEL, crate::model::bert::HEADS),
            ModelChoice::Custom { d_model, num_heads } => (d_model, num_heads),
        };
        ModelConfig { d_model, num_heads, seq_len: self.seq_len }
    }

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
                let base = PRESETS[DEFAULT_PRESET];
                s.model = ModelChoice::Custom {
                    d_model: d_model.unwrap_or(base.d_model),
                    num_heads: heads.unwrap_or(base.num_heads),
                };
            }
            Some("custom") | None => {}
            Some(TRAINED_ID) => s.model = ModelChoice::Trained,
            Some(id) => match PRESETS.iter().position(|p| Some(p) == preset_by_id(id)) {
                Some(i) => s.model = ModelChoice::Preset(i),
                None => notes.push(format!(
                    "preset={} is not a known model; showing {}.",
                    shorten(id),
                    PRESETS[DEFAULT_PRESET].name
                )),
            },
        }
        (s, notes)
    }

    /// The query string that [`Settings::from_query`] turns back into these settings.
    pub fn to_query(&self) -> String {
        let model = match self.model {
            ModelChoice::Preset(i) => format!("preset={}", PRESETS[i].id),
            ModelChoice::Trained => format!("preset={TRAINED_ID}"),
            ModelChoice::Custom { d_model, num_heads } => {
                format!("preset=custom&d_model={d_model}&heads={num_heads}")
            }
        };
        let backend = self.backend.as_param().map(|b| format!("&backend={b}")).unwrap_or_default();
        let theme =
            if self.theme == Theme::Auto { String::new() } else { format!("&theme={}", self.theme.as_str()) };
        format!("{model}&seq={}&seed={}{backend}{theme}", self.seq_len, self.seed)
    }
}

/// Longest sentence a link carries for the trained model, in characters.
pub const MAX_TEXT_CHARS: usize = 2000;

/// Everything a link carries: the settings, the trained model's sentence and layer, the pruned
/// heads, and how the page is embedded. [`Link::from_query`] never fails: each part that cannot
/// be read falls back to its default with a note, and [`Link::to_query`] reproduces the state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// Shape, sequence, seed, backend and theme.
    pub settings: Settings,
    /// The trained model's sentence, when the link names one.
    pub text: Option<String>,
    /// The trained model's layer shown, `0..LAYERS`.
    pub layer: usize,
    /// Pruned heads: of the synthetic model, or `layer * HEADS + head` of the trained one.
    pub pruned: BTreeSet<usize>,
    /// Set when the page is embedded (`embed=1`).
    pub embed: Option<Embed>,
}

impl Link {
    /// The state a URL query describes, with a note for every part that could not be used.
    pub fn from_query(query: &str) -> (Link, Vec<String>) {
        use crate::model::bert::{HEADS, LAYERS};
        let (settings, mut notes) = Settings::from_query(query);
        let mut link = Link { settings, text: None, layer: 0, pruned: BTreeSet::new(), embed: None };
        let (mut pruned, mut embed, mut view, mut host) = (None, None, None, None);
        for (key, value) in pairs(query) {
            match key {
                "text" => {
                    let cut: String = value.chars().take(MAX_TEXT_CHARS).collect();
                    if cut.len() < value.len() {
                        notes.push(format!("text= is over {MAX_TEXT_CHARS} characters; the rest is cut."));
                    }
                    link.text = Some(cut);
                }
                "layer" => match value.trim().parse::<usize>() {
                    Ok(l) if l < LAYERS => link.layer = l,
                    _ => notes.push(format!(
                        "layer={} is not a layer from 0 to {}; showing 0.",
                        shorten(&value),
                        LAYERS - 1
                    )),
                },
                "pruned" => pruned = Some(value),
                "embed" => embed = Some(value),
                "view" => view = Some(value),
                "host" => host = Some(value),
                _ => {}
            }
        }
        let limit = match link.settings.model {
            ModelChoice::Trained => LAYERS * HEADS,
            _ => link.settings.config().num_heads.min(crate::attention::config::MAX_HEADS),
        };
        let (heads, note) = parse_head_list(pruned.as_deref().unwrap_or(""), limit);
        link.pruned = heads;
        notes.extend(note);
        match embed.as_deref().map(str::trim) {
            None | Some("0" | "false") => {}
            Some("1" | "true" | "") => {
                let mut e = Embed::default();
                if let Some(v) = view {
                    match View::parse(v.trim()) {
                        Some(v) => e.view = v,
                        None => notes.push(format!(
                            "view={} is not all, chart, heads or prune; showing all.",
                            shorten(&v)
                        )),
                    }
                }
                if let Some(h) = host {
                    let (origin, note) = HostOrigin::parse(&h);
                    e.host = origin;
                    notes.extend(note);
                }
                link.embed = Some(e);
            }
            Some(other) => {
                notes.push(format!("embed={} is not 1 or 0; showing the full page.", shorten(other)))
            }
        }
        (link, notes)
    }

    /// The query (without `?`) that [`Link::from_query`] turns back into this state. The
    /// sentence and layer are carried only for the trained model.
    pub fn to_query(&self) -> String {
        let mut query = self.full_view_query();
        if let Some(embed) = &self.embed {
            query.push_str("&embed=1");
            if embed.view != View::All {
                query.push_str(&format!("&view={}", embed.view.as_str()));
            }
            if let Some(origin) = embed.host.as_param() {
                query.push_str(&format!("&host={}", percent_encode(origin)));
            }
        }
        query
    }

    /// The same state as a full page (no embedding): the "open full explorer" link.
    pub fn full_view_query(&self) -> String {
        let mut query = self.settings.to_query();
        if self.settings.model == ModelChoice::Trained {
            if let Some(text) = &self.text {
                query.push_str(&format!("&text={}", percent_encode(text)));
            }
            query.push_str(&format!("&layer={}", self.layer));
        }
        if !self.pruned.is_empty() {
            query.push_str(&format!("&pruned={}", format_head_list(&self.pruned)));
        }
        query
    }
}

/// The key and decoded value of each `key=value` pair of a query, in order.
fn pairs(query: &str) -> impl Iterator<Item = (&str, String)> {
    query.trim_start_matches('?').split('&').filter(|p| !p.is_empty()).map(|pair| {
        let (key, raw) = pair.split_once('=').unwrap_or((pair, ""));
        (key, percent_decode(raw))
    })
}

/// Escapes everything but unreserved characters, so any text survives a round trip.
fn percent_encode(s: &str) -> String {
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

/// Most heads a `pruned=` list may name (the largest model here has 256 heads a layer).
const MAX_LISTED_HEADS: usize = 1024;

/// Reads a `pruned=` list ("3,7,11"): the head indices below `limit`, and a note for anything
/// that is not one (the rest of the list is still used).
pub fn parse_head_list(raw: &str, limit: usize) -> (BTreeSet<usize>, Option<String>) {
    let mut heads = BTreeSet::new();
    let mut bad = Vec::new();
    for item in raw.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match item.parse::<usize>() {
            Ok(h) if h < limit && heads.len() < MAX_LISTED_HEADS => {
                heads.insert(h);
            }
            _ => bad.push(shorten(item)),
        }
    }
    let note = (!bad.is_empty()).then(|| {
        let shown = bad.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
        let more = if bad.len() > 5 { format!(" and {} more", bad.len() - 5) } else { String::new() };
        format!("pruned= names heads that do not exist here ({shown}{more}); they are ignored.")
    });
    (heads, note)
}

/// The `pruned=` value for a set of heads ("3,7,11").
pub fn format_head_list(heads: &BTreeSet<usize>) -> String {
    heads.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}

/// Values too large for `usize` become `usize::MAX`, which validation then refuses with a reason.
fn saturate(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// At most 40 characters of untrusted text, for a note.
pub(crate) fn shorten(s: &str) -> String {
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s.to_string()
    }
}

/// Decodes `%XX` escapes and `+`; invalid escapes and invalid UTF-8 are kept or replaced, never
/// an error.
fn percent_decode(s: &str) -> String {
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

    #[test]
    fn defaults_round_trip_and_presets_parse() {
        let (s, notes) = Settings::from_query("");
        assert_eq!((s, notes.len()), (Settings::default(), 0));
        for (i, p) in PRESETS.iter().enumerate() {
            let theme = [Theme::Auto, Theme::Light, Theme::Dark][i % 3];
            let want = Settings {
                model: ModelChoice::Preset(i),
                seq_len: 33,
                seed: 7,
                backend: Preference::Auto,
                theme,
            };
            assert_eq!(Settings::from_query(&want.to_query()), (want, vec![]), "{}", p.id);
        }
        let custom = Settings {
            model: ModelChoice::Custom { d_model: 768, num_heads: 7 },
            seq_len: 100_000,
            seed: 0,
            backend: Preference::Cpu,
            theme: Theme::Dark,
        };
        assert_eq!(Settings::from_query(&format!("?{}", custom.to_query())), (custom, vec![]));
        // Out-of-range values are kept for validation to explain.
        assert!(custom.config().validate().is_err());
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
        let (s, _) = Settings::from_query("preset=gpt2-large&seq=8");
        assert_eq!(s.config(), ModelConfig { d_model: 1280, num_heads: 20, seq_len: 8 });
    }

    #[test]
    fn head_lists_round_trip_and_ignore_what_is_not_a_head() {
        let (heads, note) = parse_head_list("3,7, 11,7", 12);
        assert_eq!(heads, BTreeSet::from([3, 7, 11]));
        assert_eq!((note, format_head_list(&heads)), (None, "3,7,11".to_string()));
        let (heads, note) = parse_head_list("1,x,99,-2,,5", 12);
        assert_eq!(heads, BTreeSet::from([1, 5]));
        assert!(note.unwrap().contains("x, 99, -2"));
        assert_eq!(parse_head_list("", 12), (BTreeSet::new(), None));
        // A list of a million heads is cut, not allocated.
        let huge = (0..1_000_000).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
        assert_eq!(parse_head_list(&huge, usize::MAX).0.len(), MAX_LISTED_HEADS);
    }

    #[test]
    fn links_carry_the_whole_state_and_round_trip() {
        let mut link = Link::from_query("").0;
        link.settings.model = ModelChoice::Trained;
        link.text = Some("Tom & Jerry: 50% \"off\"? é 😀 +=".into());
        link.layer = 3;
        link.pruned = BTreeSet::from([0, 13, 71]);
        link.embed =
            Some(Embed { view: View::Prune, host: HostOrigin::Only("https://handbook.example".into()) });
        assert_eq!(Link::from_query(&link.to_query()), (link.clone(), vec![]));
        // The full view drops only the embedding.
        let full = Link::from_query(&link.full_view_query()).0;
        assert_eq!(full, Link { embed: None, ..link });
        // The synthetic model carries no sentence or layer, and its heads are bounded by its own.
        let (synthetic, notes) = Link::from_query("preset=transformer&pruned=1,7,8&text=hi&layer=2");
        assert_eq!(synthetic.pruned, BTreeSet::from([1, 7]));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(!synthetic.to_query().contains("text="));
    }

    #[test]
    fn bad_link_parts_fall_back_one_by_one() {
        let (link, notes) = Link::from_query("preset=minilm&layer=9&embed=yes&view=x&host=evil");
        assert_eq!((link.layer, link.embed, link.settings.model), (0, None, ModelChoice::Trained));
        assert_eq!(notes.len(), 2, "{notes:?}");
        let (link, notes) = Link::from_query("embed=1&view=x&host=javascript:alert(1)&layer=-1");
        let embed = link.embed.unwrap();
        assert_eq!((embed.view, embed.host), (View::All, HostOrigin::Nobody));
        assert_eq!(notes.len(), 3, "{notes:?}");
        let long = "é".repeat(MAX_TEXT_CHARS + 5);
        let (link, notes) = Link::from_query(&format!("preset=minilm&text={long}"));
        assert_eq!((link.text.unwrap().chars().count(), notes.len()), (MAX_TEXT_CHARS, 1));
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
