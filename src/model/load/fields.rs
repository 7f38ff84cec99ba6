//! JSON fields of untrusted files, read by name and refused by name. Each is a [`Field`]: what
//! the field should hold, or whatever else it holds, so that the mapping onto the page's own types
//! says which field is wrong and how ("hidden_size is not a whole number (\"big\")"), where a
//! derived deserializer would say "invalid type at line 1 column 40". A field the file lacks is
//! [`Field::Missing`], one that is there but `null` is not. A valid field writes as its value
//! (the model file's header is written through the same struct it is read into).
//!
//! The fields are read from the parsed [`Value`] by name ([`Field::of`]), not through serde's
//! derive: a derived struct's deserializer is compiled again for every struct, and the config's
//! and the model file's cost the page's wasm kilobytes for the same result (BENCHMARKS.md
//! section 19).

use serde::Serialize;
use serde_json::Value;

/// A field's value: absent, of the type it should be, or anything else (kept, for the message).
/// A field the file lacks is [`Field::Missing`], one that holds `null` is [`Field::Invalid`].
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(untagged)]
pub enum Field<T> {
    /// Not in the file.
    #[default]
    Missing,
    /// Of the type it should be.
    Valid(T),
    /// Anything else, `null` included.
    Invalid(Value),
}

/// What a field may hold, read from its JSON.
pub trait FromJson: Sized {
    /// The value `json` holds, if it is of this type.
    fn from_json(json: &Value) -> Option<Self>;
}

impl FromJson for u64 {
    fn from_json(json: &Value) -> Option<u64> {
        json.as_u64()
    }
}

impl FromJson for f64 {
    fn from_json(json: &Value) -> Option<f64> {
        json.as_f64()
    }
}

impl FromJson for bool {
    fn from_json(json: &Value) -> Option<bool> {
        json.as_bool()
    }
}

impl FromJson for String {
    fn from_json(json: &Value) -> Option<String> {
        json.as_str().map(str::to_string)
    }
}

impl FromJson for Vec<Value> {
    fn from_json(json: &Value) -> Option<Vec<Value>> {
        json.as_array().cloned()
    }
}

impl<T: FromJson> Field<T> {
    /// The field `name` of the JSON object `object` (of anything else than an object, every field
    /// is missing).
    pub fn of(object: &Value, name: &str) -> Field<T> {
        match object.get(name) {
            None => Field::Missing,
            Some(value) => match T::from_json(value) {
                Some(v) => Field::Valid(v),
                None => Field::Invalid(value.clone()),
            },
        }
    }
}

/// `value` as a message shows it: its JSON, at most 40 characters.
pub fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(40) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

impl Field<u64> {
    /// The whole number `name` holds, from 1 to `max` (`what` it counts, for the message); or why
    /// not, naming the field.
    pub fn size(&self, name: &str, what: &str, max: usize) -> Result<usize, String> {
        match self {
            Field::Missing => Err(format!("{name} is missing")),
            Field::Invalid(v) => Err(format!("{name} is not a whole number ({})", shown(v))),
            Field::Valid(n) if *n == 0 || *n > max as u64 => {
                Err(format!("{name} claims {n} {what}; headlab reads 1 to {max}"))
            }
            Field::Valid(n) => Ok(*n as usize),
        }
    }
}

impl<T: Clone> Field<T> {
    /// The value, when it is of the type it should be.
    pub fn valid(&self) -> Option<T> {
        match self {
            Field::Valid(v) => Some(v.clone()),
            Field::Missing | Field::Invalid(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Sample {
        n: Field<u64>,
        s: Field<String>,
    }

    #[test]
    fn a_field_is_its_value_or_what_it_holds_instead_and_null_is_not_missing() {
        let read = |text: &str| {
            let json: Value = serde_json::from_str(text).unwrap();
            Sample { n: Field::of(&json, "n"), s: Field::of(&json, "s") }
        };
        let s = read(r#"{"n": 12, "s": "gelu"}"#);
        assert_eq!((s.n, s.s), (Field::Valid(12), Field::Valid("gelu".to_string())));
        let s = read(r#"{"n": -1, "s": null}"#);
        assert_eq!((s.n, s.s), (Field::Invalid(Value::from(-1)), Field::Invalid(Value::Null)));
        assert_eq!(read("{}").n, Field::Missing);
        assert_eq!(read(r#"{"n": 12}"#).n.size("n", "things", 100), Ok(12));
        assert_eq!(Field::Missing.size("n", "things", 100), Err("n is missing".into()));
        assert_eq!(
            read(r#"{"n": 12.5}"#).n.size("n", "things", 100),
            Err("n is not a whole number (12.5)".into())
        );
        assert_eq!(
            read(r#"{"n": 0}"#).n.size("n", "things", 100),
            Err("n claims 0 things; headlab reads 1 to 100".into())
        );
        assert_eq!(shown(&Value::from("x".repeat(60))).chars().count(), 41);
        // Of anything but an object, every field is missing.
        assert_eq!(Field::<u64>::of(&Value::from(vec![12]), "n"), Field::Missing);
    }
}
