//! The app inside someone else's page: the `postMessage` schema between the app in its iframe
//! and the host page around it. (How the frame is configured, `embed=1&view=&host=`, is part of
//! the link: [`crate::settings::Frame`].)
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

use crate::settings::{shorten, ModelChoice, Theme};

/// The protocol name in every message.
pub const PROTOCOL: &str = "headlab";

/// The schema version this build speaks.
pub const VERSION: u64 = 1;

/// Longest host message read, as JSON text; anything longer is refused unread.
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// Refused host messages the app logs; after them it only ignores: a host that sends a stream
/// of bad messages gets a few lines that say why, not a flood.
pub const LOGGED_REFUSALS: u32 = 5;

/// The console line for the `count`-th refused host message (counting from 1), refused for
/// `why`; `None` past [`LOGGED_REFUSALS`].
pub fn refusal_line(count: u32, why: &str) -> Option<String> {
    let line = format!("headlab ignored a host message: {why}");
    match count.cmp(&LOGGED_REFUSALS) {
        std::cmp::Ordering::Less => Some(line),
        std::cmp::Ordering::Equal => Some(format!("{line} (further ignored messages are not logged)")),
        std::cmp::Ordering::Greater => None,
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
                write!(f, "field \"{}\" is not in the schema", shorten(name))
            }
            MessageError::UnknownType(t) => {
                write!(f, "type \"{}\" is not set-theme, set-preset or request-size", shorten(t))
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
            Some(v) => return Err(MessageError::Version(shorten(&v.to_string()))),
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
                (
                    "preset",
                    HostMessage::SetPreset(ModelChoice::from_id(id).ok_or(MessageError::Field("preset"))?),
                )
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

/// The `resize` message for a content height in CSS pixels, as JSON text (the page posts the
/// equivalent object).
pub fn resize_message(height: u32) -> String {
    format!(r#"{{"from":"{PROTOCOL}","version":{VERSION},"type":"resize","height":{height}}}"#)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_of_bad_messages_logs_a_few_lines_then_nothing() {
        let lines: Vec<Option<String>> =
            (1..=1000).map(|n| refusal_line(n, "message is not an object")).collect();
        assert_eq!(lines.iter().flatten().count(), LOGGED_REFUSALS as usize);
        assert_eq!(lines[0].as_deref(), Some("headlab ignored a host message: message is not an object"));
        assert!(lines[LOGGED_REFUSALS as usize - 1]
            .as_ref()
            .unwrap()
            .ends_with("(further ignored messages are not logged)"));
    }

    #[test]
    fn host_messages_parse_only_when_they_match_the_schema() {
        let ok = |s: &str| HostMessage::parse(s).unwrap();
        assert_eq!(
            ok(r#"{"to":"headlab","version":1,"type":"set-theme","theme":"dark"}"#),
            HostMessage::SetTheme(Theme::Dark)
        );
        let gpt2_large = ok(r#"{"type":"set-preset","preset":"gpt2-large","version":1,"to":"headlab"}"#);
        assert!(
            matches!(gpt2_large, HostMessage::SetPreset(ModelChoice::Preset(p)) if p.name == "GPT-2 Large"),
            "{gpt2_large:?}"
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
    fn the_resize_message_is_the_documented_json() {
        assert_eq!(
            serde_json::from_str::<Value>(&resize_message(812)).unwrap(),
            serde_json::json!({"from": "headlab", "version": 1, "type": "resize", "height": 812})
        );
    }
}
