//! Reading a bench JSON document (`target/tierkit/bench/<name>.json`) and
//! the word a summary gives a target; shared by `clear`, `wi` and
//! `gigantic`.

use serde_json::Value;

pub(super) fn str_of(doc: &Value, key: &str) -> String {
    doc.get(key)
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string()
}

/// The program records (`results`) of a bench document that carry `key`.
pub(super) fn records<'a>(doc: &'a Value, key: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    doc.get("results")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(move |r| r.get(key).is_some())
}

/// The word a summary gives a target: met, missed, or n/a.
pub(super) fn target_word(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "missed",
        None => "n/a",
    }
}
