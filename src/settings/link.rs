//! Everything a link carries, and its round trip.

use super::query::{format_head_list, pairs, parse_head_list, percent_encode, shorten};
use super::source::TrainedSource;
use super::{Frame, HostOrigin, Measure, ModelChoice, Panels, Settings, MAX_TEXT_CHARS};
use crate::attention::HeadSet;

/// Most heads a link may prune in the trained model: more than any model the page can load holds.
/// The loaded model's own count is checked once it is loaded (`ModelSpec::fit_heads`).
pub const MAX_TRAINED_HEADS: usize = 9216;

/// Most layers a link may name for the trained model (checked against the loaded model's own).
pub const MAX_TRAINED_LAYERS: usize = 96;

/// Everything a link carries: the settings, the trained model's sentence and layer, the pruned
/// heads, and how the page is framed. [`Link::from_query`] never fails: each part that cannot
/// be read falls back to its default with a note, and [`Link::to_query`] reproduces the state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// Shape, sequence, seed, backend and theme.
    pub settings: Settings,
    /// Which trained model: the built-in one, a served folder, or the reader's own files.
    pub source: TrainedSource,
    /// The trained model's sentence, when the link names one.
    pub text: Option<String>,
    /// The trained model's layer shown (checked against the model's layers once it is loaded).
    pub layer: usize,
    /// What makes one of the trained model's heads important.
    pub measure: Measure,
    /// The heads (`pruned=` lists those switched off): the synthetic model's; or the trained
    /// one's, numbered `layer * heads + head`, as many as the last one listed (the loaded model
    /// gives the set its size).
    pub heads: HeadSet,
    /// Set when the page is framed in a host page (`embed=1`).
    pub frame: Option<Frame>,
}

impl Link {
    /// The state a URL query describes, with a note for every part that could not be used.
    pub fn from_query(query: &str) -> (Link, Vec<String>) {
        let (settings, mut notes) = Settings::from_query(query);
        let mut link = Link {
            settings,
            source: TrainedSource::BuiltIn,
            text: None,
            layer: 0,
            measure: Measure::Drift,
            heads: HeadSet::default(),
            frame: None,
        };
        let (mut pruned, mut embed, mut view, mut host) = (None, None, None, None);
        let (mut model, mut weights, mut name) = (None, None, None);
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
                    Ok(l) if l < MAX_TRAINED_LAYERS => link.layer = l,
                    _ => notes.push(format!("layer={} is not a layer number; showing 0.", shorten(&value))),
                },
                "importance" => match Measure::parse(value.trim()) {
                    Some(m) => link.measure = m,
                    None => notes.push(format!(
                        "importance={} is not drift, margin or task; using drift.",
                        shorten(&value)
                    )),
                },
                "pruned" => pruned = Some(value),
                "model" => model = Some(value),
                "weights" => weights = Some(value),
                "name" => name = Some(value),
                "embed" => embed = Some(value),
                "view" => view = Some(value),
                "host" => host = Some(value),
                _ => {}
            }
        }
        let (source, source_notes) =
            TrainedSource::from_params(model.as_deref(), weights.as_deref(), name.as_deref());
        notes.extend(source_notes);
        if source != TrainedSource::BuiltIn {
            // A link that names a trained model shows it, whatever its preset says.
            link.settings.model = ModelChoice::Trained;
        }
        link.source = source;
        let count = match link.settings.model {
            ModelChoice::Trained => MAX_TRAINED_HEADS,
            _ => link.settings.config().num_heads.min(crate::attention::config::MAX_HEADS),
        };
        let (heads, note) = parse_head_list(pruned.as_deref().unwrap_or(""), count);
        link.heads = match link.settings.model {
            ModelChoice::Trained => heads.resized(heads.pruned().last().map_or(0, |h| h + 1)),
            _ => heads,
        };
        notes.extend(note);
        match embed.as_deref().map(str::trim) {
            None | Some("0" | "false") => {}
            Some("1" | "true" | "") => {
                let mut frame = Frame::default();
                if let Some(v) = view {
                    match Panels::parse(v.trim()) {
                        Some(v) => frame.panels = v,
                        None => notes.push(format!(
                            "view={} is not all, chart, heads, prune, code or flow; showing all.",
                            shorten(&v)
                        )),
                    }
                }
                if let Some(h) = host {
                    let (origin, note) = HostOrigin::parse(&h);
                    frame.host = origin;
                    notes.extend(note);
                }
                link.frame = Some(frame);
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
        if let Some(frame) = &self.frame {
            query.push_str("&embed=1");
            if frame.panels != Panels::All {
                query.push_str(&format!("&view={}", frame.panels.as_str()));
            }
            if let Some(origin) = frame.host.as_param() {
                query.push_str(&format!("&host={}", percent_encode(origin)));
            }
        }
        query
    }

    /// The same state as a full page (not framed): the "open full explorer" link.
    pub fn full_view_query(&self) -> String {
        let mut query = self.settings.to_query();
        if self.settings.model == ModelChoice::Trained {
            query.push_str(&self.source.to_query());
            if let Some(text) = &self.text {
                query.push_str(&format!("&text={}", percent_encode(text)));
            }
            query.push_str(&format!("&layer={}", self.layer));
            if self.measure != Measure::Drift {
                query.push_str(&format!("&importance={}", self.measure.as_str()));
            }
        }
        if self.heads.any_pruned() {
            query.push_str(&format!("&pruned={}", format_head_list(&self.heads)));
        }
        query
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_carry_the_whole_state_and_round_trip() {
        let mut link = Link::from_query("").0;
        link.settings.model = ModelChoice::Trained;
        link.text = Some("Tom & Jerry: 50% \"off\"? é 😀 +=".into());
        link.layer = 3;
        link.measure = Measure::Margin;
        link.source = TrainedSource::Files { name: "my bert".into(), weights: "0123456789abcdef".into() };
        // The trained model's heads, as many as the last one pruned (the model sizes them).
        link.heads = HeadSet::with_pruned(72, [0, 13, 71]);
        link.frame =
            Some(Frame { panels: Panels::Prune, host: HostOrigin::Only("https://handbook.example".into()) });
        assert_eq!(Link::from_query(&link.to_query()), (link.clone(), vec![]));
        // The full view drops only the frame.
        let full = Link::from_query(&link.full_view_query()).0;
        assert_eq!(full, Link { frame: None, ..link });
        // The synthetic model carries no sentence or layer, and its heads are bounded by its own.
        let (synthetic, notes) = Link::from_query("preset=transformer&pruned=1,7,8&text=hi&layer=2");
        assert_eq!(synthetic.heads, HeadSet::with_pruned(8, [1, 7]));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(!synthetic.to_query().contains("text="));
        assert!(!Link::from_query("importance=task").0.to_query().contains("importance="));
        // A served model is the trained model, whatever the preset says; another site is refused.
        let (served, notes) = Link::from_query("preset=bert-base&model=models/tiny");
        assert_eq!(served.settings.model, ModelChoice::Trained);
        assert_eq!(served.source, TrainedSource::Served { path: "models/tiny".into(), weights: None });
        assert!(notes.is_empty() && served.to_query().contains("&model=models%2Ftiny"));
        let (refused, notes) = Link::from_query("model=https://elsewhere.example/m");
        assert_eq!((refused.source, notes.len()), (TrainedSource::BuiltIn, 1));
    }

    #[test]
    fn bad_link_parts_fall_back_one_by_one() {
        let (link, notes) = Link::from_query("preset=minilm&layer=99&embed=yes&view=x&host=evil");
        assert_eq!((link.layer, link.frame, link.settings.model), (0, None, ModelChoice::Trained));
        assert_eq!(notes.len(), 2, "{notes:?}");
        // A layer or head the built-in model lacks is the loaded model's to judge.
        let (link, notes) = Link::from_query("preset=minilm&layer=9&pruned=3,200");
        assert_eq!((link.layer, link.heads, notes), (9, HeadSet::with_pruned(201, [3, 200]), vec![]));
        assert_eq!(Link::from_query("preset=minilm&pruned=9999").1.len(), 1, "past any model");
        let (link, notes) = Link::from_query("embed=1&view=x&host=javascript:alert(1)&layer=-1");
        let frame = link.frame.unwrap();
        assert_eq!((frame.panels, frame.host), (Panels::All, HostOrigin::Nobody));
        assert_eq!(notes.len(), 3, "{notes:?}");
        let long = "é".repeat(MAX_TEXT_CHARS + 5);
        let (link, notes) = Link::from_query(&format!("preset=minilm&text={long}"));
        assert_eq!((link.text.unwrap().chars().count(), notes.len()), (MAX_TEXT_CHARS, 1));
        let (link, notes) = Link::from_query("preset=minilm&importance=loud");
        assert_eq!((link.measure, notes.len()), (Measure::Drift, 1));
        for m in Measure::ALL {
            let (link, notes) = Link::from_query(&format!("preset=minilm&importance={}", m.as_str()));
            assert_eq!((link.measure, notes), (m, vec![]));
        }
    }
}
