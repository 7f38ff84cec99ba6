//! The app inside someone else's page: what an embedding asks for in the URL, and the
//! `postMessage` schema between the app and its host page.
//!
//! Messages, version 1 (every field required, no others allowed):
//!
//! | direction   | message                                                                  |
//! |-------------|--------------------------------------------------------------------------|
//! | app → host  | `{"from": "headlab", "version": 1, "type": "resize", "height": 812}`     |
//! | host → app  | `{"to": "headlab", "version": 1, "type": "set-theme", "theme": "dark"}`  |
//! | host → app  | `{"to": "headlab", "version": 1, "type": "set-preset", "preset": "gpt2-large"}` |
//! | host → app  | `{"to": "headlab", "version": 1, "type": "request-size"}` (answered by `resize`) |
//!
//! `height` is the content height in CSS pixels; `theme` is `auto`, `light` or `dark`; `preset`
//! is any `preset=` value of the URL. The app accepts a host message only from its parent window,
//! only from the origin named by `host=` when the embedder gave one, and only if it parses here;
//! anything else is ignored. Parsing is pure so that it is tested (and fuzzed) natively.

use std::fmt;

use serde_json::Value;

use crate::attention::config::preset_by_id;
use crate::settings::{ModelChoice, Theme, TRAINED_ID};

/// The protocol name in every message.
pub const PROTOCOL: &str = "headlab";

/// The schema version this build speaks.
pub const VERSION: u64 = 1;

/// Longest host message read, as JSON text; anything longer is refused unread.
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// Which part of the explorer an embedding shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum View {
    /// Everything, compactly.
    #[default]
    All,
    /// The d_model-vs-heads chart and the three claims.
    Chart,
    /// The heatmaps, one per head.
    Heads,
    /// Heatmaps with their toggles, and the drift they cause.
    Prune,
}

impl View {
    /// Every view, in the order the documentation lists them.
    pub const ALL: [View; 4] = [View::All, View::Chart, View::Heads, View::Prune];

    /// The `view=` value.
    pub fn as_str(self) -> &'static str {
        match self {
            View::All => "all",
            View::Chart => "chart",
            View::Heads => "heads",
            View::Prune => "prune",
        }
    }

    /// Parses a `view=` value.
    pub fn parse(value: &str) -> Option<View> {
        View::ALL.into_iter().find(|v| v.as_str() == value)
    }

    /// Whether the view includes the config chart.
    pub fn shows_chart(self) -> bool {
        matches!(self, View::All | View::Chart)
    }

    /// Whether the view includes the per-head heatmaps.
    pub fn shows_heads(self) -> bool {
        matches!(self, View::All | View::Heads | View::Prune)
    }

    /// Whether the view includes the drift panel.
    pub fn shows_drift(self) -> bool {
        matches!(self, View::All | View::Prune)
    }
}

/// Whose messages the app accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostOrigin {
    /// Any origin (the embedder named none); the message must still come from the parent.
    Any,
    /// Only this origin (`https://handbook.example:8443`).
    Only(String),
    /// Nobody: the embedder named an origin that is not one, so nothing is trusted.
    Nobody,
}

impl HostOrigin {
    /// Reads a `host=` value; a malformed one trusts nobody rather than everybody (and is written
    /// back as `host=none`, so the page's own URL keeps that).
    pub fn parse(value: &str) -> (HostOrigin, Option<String>) {
        if value.trim() == "none" {
            return (HostOrigin::Nobody, None);
        }
        match normalize_origin(value) {
            Some(origin) => (HostOrigin::Only(origin), None),
            None => (
                HostOrigin::Nobody,
                Some(format!(
                    "host={} is not an origin like https://handbook.example; messages from the host page are ignored.",
                    crate::settings::shorten(value)
                )),
            ),
        }
    }

    /// Whether a message from `origin` may be read.
    pub fn allows(&self, origin: &str) -> bool {
        match self {
            HostOrigin::Any => true,
            HostOrigin::Only(allowed) => normalize_origin(origin).as_deref() == Some(allowed.as_str()),
            HostOrigin::Nobody => false,
        }
    }

    /// The `host=` value that reproduces this, if any.
    pub fn as_param(&self) -> Option<&str> {
        match self {
            HostOrigin::Any => None,
            HostOrigin::Only(origin) => Some(origin),
            HostOrigin::Nobody => Some("none"),
        }
    }
}

/// `scheme://host[:port]` in lower case, for `http` and `https` only; `None` for anything else
/// (paths, queries, credentials, spaces, other schemes, `null`).
fn normalize_origin(value: &str) -> Option<String> {
    let lower = value.trim().to_ascii_lowercase();
    let (scheme, rest) = lower.split_once("://")?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    // An IPv6 literal keeps its colons inside brackets; otherwise the last colon starts the port.
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (addr, after) = v6.split_once(']')?;
            let port = match after {
                "" => None,
                a => Some(a.strip_prefix(':')?),
            };
            (addr.chars().all(|c| c.is_ascii_hexdigit() || c == ':').then_some(addr)?, port)
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && (authority.starts_with('[')
            || host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-')));
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    (matches!(scheme, "http" | "https") && host_ok && port_ok).then(|| format!("{scheme}://{authority}"))
}

/// How the page was embedded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Embed {
    /// The part of the explorer shown.
    pub view: View,
    /// Whose messages are read.
    pub host: HostOrigin,
}

impl Default for Embed {
    fn default() -> Self {
        Embed { view: View::All, host: HostOrigin::Any }
    }
}

/// A message from the host page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostMessage {
    /// Switch the colour theme.
    SetTheme(Theme),
    /// Show another model.
    SetPreset(ModelChoice),
    /// Post the current height again (for a host script that started after the frame).
    RequestSize,
}

/// Why a host message was refused (the app logs it and changes nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MessageError {
    /// Over [`MAX_MESSAGE_BYTES`].
    TooLong(usize),
    /// Not a JSON object.
    NotAnObject,
    /// Not addressed to headlab (other libraries share the channel); ignored silently.
    NotForUs,
    /// A version this build does not speak.
    Version(String),
    /// A field missing, of the wrong type, or not one of its values.
    Field(&'static str),
    /// A field the schema does not have.
    Unexpected(String),
    /// A `type` the schema does not have.
    UnknownType(String),
}

impl fmt::Display for MessageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MessageError::TooLong(n) => write!(f, "message of {n} bytes is over {MAX_MESSAGE_BYTES}"),
            MessageError::NotAnObject => f.write_str("message is not an object"),
            MessageError::NotForUs => f.write_str("message is not addressed to headlab"),
            MessageError::Version(v) => write!(f, "version {v} is not {VERSION}"),
            MessageError::Field(name) => write!(f, "field \"{name}\" is missing or not a valid value"),
            MessageError::Unexpected(name) => {
                write!(f, "field \"{}\" is not in the schema", crate::settings::shorten(name))
            }
            MessageError::UnknownType(t) => {
                write!(
                    f,
                    "type \"{}\" is not set-theme, set-preset or request-size",
                    crate::settings::shorten(t)
                )
            }
        }
    }
}

impl std::error::Error for MessageError {}

impl HostMessage {
    /// Parses a host message from its JSON text (`JSON.stringify(event.data)`).
    pub fn parse(json: &str) -> Result<HostMessage, MessageError> {
        if json.len() > MAX_MESSAGE_BYTES {
            return Err(MessageError::TooLong(json.len()));
        }
        let value: Value = serde_json::from_str(json).map_err(|_| MessageError::NotAnObject)?;
        let Value::Object(fields) = value else { return Err(MessageError::NotAnObject) };
        if fields.get("to").and_then(Value::as_str) != Some(PROTOCOL) {
            return Err(MessageError::NotForUs);
        }
        match fields.get("version") {
            Some(v) if v.as_u64() == Some(VERSION) => {}
            Some(v) => return Err(MessageError::Version(crate::settings::shorten(&v.to_string()))),
            None => return Err(MessageError::Field("version")),
        }
        let kind = fields.get("type").and_then(Value::as_str).ok_or(MessageError::Field("type"))?;
        let (payload, message) = match kind {
            "request-size" => ("", HostMessage::RequestSize),
            "set-theme" => {
                let theme = fields.get("theme").and_then(Value::as_str).and_then(Theme::parse);
                ("theme", HostMessage::SetTheme(theme.ok_or(MessageError::Field("theme"))?))
            }
            "set-preset" => {
                let id = fields.get("preset").and_then(Value::as_str).ok_or(MessageError::Field("preset"))?;
                ("preset", HostMessage::SetPreset(preset_choice(id).ok_or(MessageError::Field("preset"))?))
            }
            other => return Err(MessageError::UnknownType(other.to_string())),
        };
        // Only the schema's fields: the common three and the type's payload field, if it has one
        // (`request-size` has none, so even an empty key is one too many).
        let known = |k: &str| matches!(k, "to" | "version" | "type") || (!payload.is_empty() && k == payload);
        if let Some(extra) = fields.keys().find(|k| !known(k)) {
            return Err(MessageError::Unexpected(extra.clone()));
        }
        Ok(message)
    }
}

/// The model a `preset=` id names, if it names one.
pub fn preset_choice(id: &str) -> Option<ModelChoice> {
    use crate::attention::config::PRESETS;
    if id == TRAINED_ID {
        return Some(ModelChoice::Trained);
    }
    let preset = preset_by_id(id)?;
    PRESETS.iter().position(|p| p == preset).map(ModelChoice::Preset)
}

/// The `resize` message for a content height in CSS pixels, as JSON text (the page posts the
/// equivalent object).
pub fn resize_message(height: u32) -> String {
    format!(r#"{{"from":"{PROTOCOL}","version":{VERSION},"type":"resize","height":{height}}}"#)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_messages_parse_only_when_they_match_the_schema() {
        let ok = |s: &str| HostMessage::parse(s).unwrap();
        assert_eq!(
            ok(r#"{"to":"headlab","version":1,"type":"set-theme","theme":"dark"}"#),
            HostMessage::SetTheme(Theme::Dark)
        );
        assert_eq!(
            ok(r#"{"type":"set-preset","preset":"gpt2-large","version":1,"to":"headlab"}"#),
            HostMessage::SetPreset(ModelChoice::Preset(5))
        );
        assert_eq!(
            ok(r#"{"to":"headlab","version":1,"type":"set-preset","preset":"minilm"}"#),
            HostMessage::SetPreset(ModelChoice::Trained)
        );
        let err = |s: &str| HostMessage::parse(s).unwrap_err();
        assert_eq!(ok(r#"{"to":"headlab","version":1,"type":"request-size"}"#), HostMessage::RequestSize);
        // Found by tests/fuzz.rs: an empty key once passed as request-size's (absent) payload.
        assert_eq!(
            err(r#"{"":"dark","to":"headlab","version":1,"type":"request-size"}"#),
            MessageError::Unexpected(String::new())
        );
        assert_eq!(
            err(r#"{"to":"headlab","version":1,"type":"request-size","height":3}"#),
            MessageError::Unexpected("height".into())
        );
        assert_eq!(err("[]"), MessageError::NotAnObject);
        assert_eq!(err("\"set-theme\""), MessageError::NotAnObject);
        assert_eq!(err("{"), MessageError::NotAnObject);
        assert_eq!(err(r#"{"to":"other","version":1}"#), MessageError::NotForUs);
        assert_eq!(
            err(r#"{"to":"headlab","version":2,"type":"set-theme","theme":"dark"}"#).to_string(),
            "version 2 is not 1"
        );
        assert_eq!(
            err(r#"{"to":"headlab","version":"1","type":"set-theme","theme":"dark"}"#),
            MessageError::Version("\"1\"".into())
        );
        assert_eq!(
            err(r#"{"to":"headlab","type":"set-theme","theme":"dark"}"#),
            MessageError::Field("version")
        );
        assert_eq!(
            err(r#"{"to":"headlab","version":1,"type":"set-theme","theme":"pink"}"#),
            MessageError::Field("theme")
        );
        assert_eq!(
            err(r#"{"to":"headlab","version":1,"type":"set-theme","theme":1}"#),
            MessageError::Field("theme")
        );
        assert_eq!(
            err(r#"{"to":"headlab","version":1,"type":"set-preset","preset":"gpt-5"}"#),
            MessageError::Field("preset")
        );
        assert_eq!(
            err(r#"{"to":"headlab","version":1,"type":"eval","code":"x"}"#),
            MessageError::UnknownType("eval".into())
        );
        assert_eq!(
            err(r#"{"to":"headlab","version":1,"type":"set-theme","theme":"dark","preset":"bert-base"}"#),
            MessageError::Unexpected("preset".into())
        );
        let long = format!(
            r#"{{"to":"headlab","version":1,"type":"set-theme","theme":"dark","x":"{}"}}"#,
            "a".repeat(5000)
        );
        assert!(matches!(err(&long), MessageError::TooLong(_)));
    }

    #[test]
    fn origins_are_compared_normalised_and_a_bad_one_trusts_nobody() {
        let (host, note) = HostOrigin::parse("HTTPS://Handbook.Example:8443/");
        assert_eq!((host.clone(), note), (HostOrigin::Only("https://handbook.example:8443".into()), None));
        assert!(host.allows("https://handbook.example:8443"));
        assert!(!host.allows("https://handbook.example"));
        assert!(!host.allows("https://evil.example"));
        assert!(!host.allows("null"));
        for bad in [
            "",
            "handbook.example",
            "javascript:alert(1)",
            "https://a.example/path",
            "ftp://a.example",
            "https://u:p@a.example",
            "null",
            "https://a b",
            "http://[::1]x",
            "http://a.example:80x",
        ] {
            let (host, note) = HostOrigin::parse(bad);
            assert_eq!(host, HostOrigin::Nobody, "{bad}");
            assert!(note.is_some() && !host.allows("https://a.example"), "{bad}");
        }
        assert!(HostOrigin::Any.allows("https://anyone.example"));
        assert_eq!(HostOrigin::parse(HostOrigin::Nobody.as_param().unwrap()), (HostOrigin::Nobody, None));
        assert!(HostOrigin::parse("http://[::1]:8080").0.allows("http://[::1]:8080"));
    }

    #[test]
    fn views_round_trip_and_say_what_they_show() {
        for v in View::ALL {
            assert_eq!(View::parse(v.as_str()), Some(v));
        }
        assert_eq!(View::parse("everything"), None);
        assert!(View::Chart.shows_chart() && !View::Chart.shows_heads() && !View::Chart.shows_drift());
        assert!(View::Prune.shows_heads() && View::Prune.shows_drift() && !View::Prune.shows_chart());
        assert_eq!(
            serde_json::from_str::<Value>(&resize_message(812)).unwrap(),
            serde_json::json!({"from": "headlab", "version": 1, "type": "resize", "height": 812})
        );
    }
}
