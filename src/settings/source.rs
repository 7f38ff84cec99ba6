//! Which trained model a link asks for: the built-in one, a model folder the handbook serves
//! beside the page (`model=PATH`, the page's own origin only), or one the reader loaded from their
//! own files, which a link cannot carry: it names it instead (`weights=ID&name=NAME`), so the page
//! can say which files to give it.

use super::query::{percent_encode, shorten};

/// Longest `model=` path a link may give.
pub const MAX_PATH_CHARS: usize = 512;
/// Longest model name a link may give.
pub const MAX_NAME_CHARS: usize = 80;

/// The trained model a link names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TrainedSource {
    /// The page's built-in model.
    #[default]
    BuiltIn,
    /// A model folder on the page's own server, at `path` (relative to the page, or from its
    /// root); `weights` is the id of the weights the link was made with, when it says.
    Served {
        /// The folder's path, checked to stay on the page's origin ([`served_path`]).
        path: String,
        /// [`crate::model::load::model_file::file_id`] of the model file the link was made with.
        weights: Option<String>,
    },
    /// A model the reader gave the page from their files.
    Files {
        /// Its name (the folder's or the config's).
        name: String,
        /// [`crate::model::load::model_file::file_id`] of its model file.
        weights: String,
    },
}

impl TrainedSource {
    /// The source the `model=`, `weights=` and `name=` values of a link give, with a note for
    /// each value that cannot be used (the built-in model is shown instead).
    pub fn from_params(
        model: Option<&str>,
        weights: Option<&str>,
        name: Option<&str>,
    ) -> (TrainedSource, Vec<String>) {
        let mut notes = Vec::new();
        let weights = weights.and_then(|w| match weights_id(w) {
            Some(id) => Some(id),
            None => {
                notes.push(format!("weights={} is not a model's 16-digit id; ignored.", shorten(w)));
                None
            }
        });
        let source = match (model, weights) {
            (Some(m), weights) => match served_path(m) {
                Ok(path) => TrainedSource::Served { path, weights },
                Err(why) => {
                    notes.push(format!("model={}: {why}; showing the built-in model.", shorten(m)));
                    TrainedSource::BuiltIn
                }
            },
            (None, Some(weights)) => {
                let name: String = name.unwrap_or("").trim().chars().take(MAX_NAME_CHARS).collect();
                let name = if name.is_empty() { "a model from your files".to_string() } else { name };
                TrainedSource::Files { name, weights }
            }
            (None, None) => TrainedSource::BuiltIn,
        };
        (source, notes)
    }

    /// The link's parameters for this source (each with its leading `&`).
    pub fn to_query(&self) -> String {
        match self {
            TrainedSource::BuiltIn => String::new(),
            TrainedSource::Served { path, weights } => {
                let weights = weights.as_ref().map(|w| format!("&weights={w}")).unwrap_or_default();
                format!("&model={}{weights}", percent_encode(path))
            }
            TrainedSource::Files { name, weights } => {
                format!("&weights={weights}&name={}", percent_encode(name))
            }
        }
    }
}

/// How a model on show came to the page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadedFrom {
    /// The built-in model.
    BuiltIn,
    /// The served folder at this path.
    Served(String),
    /// The reader's files.
    Files,
}

/// What a load means for the link: the source the page's link names from now on, whether the
/// link's sentence-independent state (its pruned heads and layer) is for this model, and what
/// to tell the reader when it is not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Adoption {
    /// The source to name in the page's link.
    pub source: TrainedSource,
    /// Whether the link's pruned heads and layer apply to the model (else every head is on).
    pub link_applies: bool,
    /// Why they do not, or what differs.
    pub note: Option<String>,
}

impl TrainedSource {
    /// The link's source once a model `name` with weights `id`, loaded from `from`, is on show.
    /// The link's pruned heads and layer are for the model it names: they apply to the page's
    /// first load when that is the model (by its weights' id, when the link has one).
    pub fn after_load(&self, from: &LoadedFrom, first: bool, name: &str, id: &str) -> Adoption {
        let source = match from {
            LoadedFrom::BuiltIn => TrainedSource::BuiltIn,
            LoadedFrom::Served(path) => {
                TrainedSource::Served { path: path.clone(), weights: Some(id.into()) }
            }
            LoadedFrom::Files => TrainedSource::Files { name: name.into(), weights: id.into() },
        };
        let adopt =
            |link_applies, note: Option<String>| Adoption { source: source.clone(), link_applies, note };
        if !first {
            return adopt(false, None);
        }
        match (self, from) {
            (TrainedSource::BuiltIn, LoadedFrom::BuiltIn) => adopt(true, None),
            (TrainedSource::Served { path, weights }, LoadedFrom::Served(loaded)) if path == loaded => {
                let changed = weights.as_ref().filter(|w| *w != id).map(|w| {
                    format!("The folder at {path} has other weights ({id}) than when the link was made ({w}).")
                });
                adopt(true, changed)
            }
            (TrainedSource::Files { weights, .. }, LoadedFrom::Files) if weights == id => adopt(true, None),
            (TrainedSource::Files { name: wanted, weights }, _) => adopt(
                false,
                Some(format!(
                    "The link's pruned heads and layer are for {wanted} (weights {weights}), not for {name} ({id}): every head of {name} is on."
                )),
            ),
            _ => adopt(false, None),
        }
    }
}

/// A model id as links write it: 16 lowercase hexadecimal digits.
fn weights_id(value: &str) -> Option<String> {
    let v = value.trim().to_ascii_lowercase();
    (v.len() == 16 && v.bytes().all(|b| b.is_ascii_hexdigit())).then_some(v)
}

/// `value` as a folder path on the page's own server, or why it is not one: a path relative to
/// the page or from the server's root, never a URL with a scheme or another host
/// (`https://elsewhere/`, `//elsewhere/`), a backslash or a control character. The page resolves
/// it against its own address and checks the origin once more before asking for a file.
pub fn served_path(value: &str) -> Result<String, String> {
    let path = value.trim().trim_end_matches('/');
    if path.is_empty() {
        return Err("no folder is named".into());
    }
    if path.chars().count() > MAX_PATH_CHARS {
        return Err(format!("the path is over {MAX_PATH_CHARS} characters"));
    }
    if path.chars().any(|c| c.is_control() || c == '\\') {
        return Err("the path has a control character or a backslash".into());
    }
    let first_segment = path.split('/').next().unwrap_or("");
    if path.starts_with("//") || first_segment.contains(':') {
        return Err("only folders on this page's own server are loaded, never another site".into());
    }
    Ok(path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_round_trip_through_their_parameters() {
        for source in [
            TrainedSource::BuiltIn,
            TrainedSource::Served { path: "models/bert base".into(), weights: None },
            TrainedSource::Served { path: "/m/x".into(), weights: Some("0123456789abcdef".into()) },
            TrainedSource::Files { name: "my bert & co".into(), weights: "fedcba9876543210".into() },
        ] {
            let query = source.to_query();
            let params: Vec<(String, String)> = query
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap();
                    (k.to_string(), crate::settings::query::percent_decode(v))
                })
                .collect();
            let get = |key: &str| params.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
            let (back, notes) = TrainedSource::from_params(get("model"), get("weights"), get("name"));
            assert_eq!(back, source, "{query}");
            assert!(notes.is_empty(), "{notes:?}");
        }
    }

    #[test]
    fn another_origin_or_a_bad_value_is_refused_with_a_note() {
        for bad in [
            "https://elsewhere.example/bert",
            "http:bert",
            "//elsewhere.example/bert",
            "javascript:alert(1)",
            "data:text/plain,x",
            "",
            "  /  ",
            "a\\b",
            "a\nb",
        ] {
            let (source, notes) = TrainedSource::from_params(Some(bad), None, None);
            assert_eq!(source, TrainedSource::BuiltIn, "{bad:?}");
            assert_eq!(notes.len(), 1, "{bad:?}");
            assert!(notes[0].contains("built-in"), "{notes:?}");
        }
        let long = "a/".repeat(400);
        assert!(TrainedSource::from_params(Some(&long), None, None).1[0].contains("512"));
        // Same-origin forms are kept as written (less a trailing slash).
        for good in ["models/bert", "/models/bert/", "./bert", "../shared/bert", "bert:v2/x"] {
            assert!(served_path(good).is_ok() || good.starts_with("bert:"), "{good}");
        }
        assert_eq!(served_path("/models/bert/").unwrap(), "/models/bert");
        assert!(served_path("bert:v2/x").is_err(), "a scheme-like first segment is refused");
        // A weights id must be 16 hex digits; a name is cut to its limit.
        let (source, notes) = TrainedSource::from_params(None, Some("xyz"), Some("n"));
        assert_eq!((source, notes.len()), (TrainedSource::BuiltIn, 1));
        let name = "n".repeat(200);
        let (source, _) = TrainedSource::from_params(None, Some("0123456789ABCDEF"), Some(&name));
        assert_eq!(
            source,
            TrainedSource::Files { name: "n".repeat(MAX_NAME_CHARS), weights: "0123456789abcdef".into() }
        );
        let (source, _) = TrainedSource::from_params(None, Some("0123456789abcdef"), None);
        assert!(matches!(source, TrainedSource::Files { name, .. } if name == "a model from your files"));
    }

    #[test]
    fn a_links_heads_apply_to_the_model_it_names_and_the_link_then_names_the_loaded_one() {
        let (id, other) = ("0123456789abcdef", "fedcba9876543210");
        let files = TrainedSource::Files { name: "my-bert".into(), weights: id.into() };
        // The reader's files with the link's weights: the link's heads apply; the name is the model's.
        let a = files.after_load(&LoadedFrom::Files, true, "bert", id);
        assert_eq!(
            a,
            Adoption {
                source: TrainedSource::Files { name: "bert".into(), weights: id.into() },
                link_applies: true,
                note: None
            }
        );
        // Other weights, or the built-in model instead: every head on, and the page says why.
        for from in [LoadedFrom::Files, LoadedFrom::BuiltIn] {
            let a = files.after_load(&from, true, "bert", other);
            assert!(!a.link_applies);
            assert!(a.note.unwrap().contains("my-bert"));
        }
        // A served folder: its weights recorded; changed weights are said, the heads kept.
        let served = TrainedSource::Served { path: "m/b".into(), weights: Some(other.into()) };
        let a = served.after_load(&LoadedFrom::Served("m/b".into()), true, "b", id);
        assert_eq!(a.source, TrainedSource::Served { path: "m/b".into(), weights: Some(id.into()) });
        assert!(a.link_applies && a.note.unwrap().contains(other));
        assert!(TrainedSource::BuiltIn.after_load(&LoadedFrom::BuiltIn, true, "m", id).link_applies);
        // A later load is the reader's new model: the link's state was for the first.
        let later = TrainedSource::BuiltIn.after_load(&LoadedFrom::Files, false, "bert", id);
        assert_eq!((later.link_applies, later.note), (false, None));
        assert_eq!(later.source, TrainedSource::Files { name: "bert".into(), weights: id.into() });
    }
}
