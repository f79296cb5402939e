//! `commitInfo`, built in one place for every commit Tarn writes.
//!
//! Delta readers take `operationParameters` and `operationMetrics` as maps of string to
//! string (Spark's `DESCRIBE HISTORY` fails on anything else), so values that are not
//! strings are written as their JSON text, as Spark does.

use serde_json::{Map, Value};

use super::IsolationLevel;
use crate::protocol::{Action, CommitInfo};

/// The engine name written into `commitInfo.engineInfo`.
pub const ENGINE_INFO: &str = concat!("tarn/", env!("CARGO_PKG_VERSION"));

/// What a commit says of itself.
#[derive(Debug, Clone)]
pub(crate) struct CommitInfoParts<'a> {
    pub(crate) timestamp: i64,
    pub(crate) operation: &'a str,
    pub(crate) parameters: &'a Map<String, Value>,
    pub(crate) metrics: &'a Map<String, Value>,
    /// The version the transaction read (none for a table's first commit).
    pub(crate) read_version: Option<i64>,
    pub(crate) isolation: Option<IsolationLevel>,
    pub(crate) blind_append: bool,
    pub(crate) txn_id: &'a str,
}

/// The `commitInfo` action of a commit.
pub(crate) fn commit_info(parts: CommitInfoParts<'_>) -> Action {
    let mut other = Map::new();
    other.insert(
        "operationParameters".into(),
        Value::Object(string_map(parts.parameters)),
    );
    if !parts.metrics.is_empty() {
        other.insert(
            "operationMetrics".into(),
            Value::Object(string_map(parts.metrics)),
        );
    }
    if let Some(version) = parts.read_version {
        other.insert("readVersion".into(), Value::from(version));
    }
    if let Some(isolation) = parts.isolation {
        other.insert("isolationLevel".into(), Value::from(isolation.name()));
    }
    other.insert("isBlindAppend".into(), Value::from(parts.blind_append));
    other.insert("engineInfo".into(), Value::from(ENGINE_INFO));
    Action::CommitInfo(CommitInfo {
        timestamp: Some(parts.timestamp),
        in_commit_timestamp: None,
        operation: Some(parts.operation.to_string()),
        txn_id: Some(parts.txn_id.to_string()),
        other,
    })
}

/// A map of string to string: strings stay, other values become their JSON text.
fn string_map(map: &Map<String, Value>) -> Map<String, Value> {
    map.iter()
        .map(|(k, v)| (k.clone(), Value::String(delta_string(v))))
        .collect()
}

/// The text Delta expects for a parameter value: a string as it is, anything else as
/// JSON (`["a","b"]`, `3`, `true`, `null`).
pub(crate) fn delta_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The `commitInfo.txnId` of a commit's actions.
pub(crate) fn txn_id_of(actions: &[Action]) -> Option<&str> {
    actions.iter().find_map(|a| match a {
        Action::CommitInfo(c) => c.txn_id.as_deref(),
        _ => None,
    })
}

/// The timestamp a commit records: its in-commit timestamp, else `commitInfo.timestamp`.
pub(crate) fn commit_timestamp(actions: &[Action]) -> Option<i64> {
    actions.iter().find_map(|a| match a {
        Action::CommitInfo(c) => c.in_commit_timestamp.or(c.timestamp),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_and_metrics_are_maps_of_strings() {
        let mut parameters = Map::new();
        parameters.insert("properties".into(), Value::from(vec!["a", "b"]));
        parameters.insert("mode".into(), Value::from("Append"));
        let mut metrics = Map::new();
        metrics.insert("numFiles".into(), Value::from(3));
        let Action::CommitInfo(info) = commit_info(CommitInfoParts {
            timestamp: 5,
            operation: "SET TBLPROPERTIES",
            parameters: &parameters,
            metrics: &metrics,
            read_version: Some(1),
            isolation: Some(IsolationLevel::Serializable),
            blind_append: false,
            txn_id: "t",
        }) else {
            panic!("not a commitInfo")
        };
        assert_eq!(
            info.other["operationParameters"],
            serde_json::json!({"properties": "[\"a\",\"b\"]", "mode": "Append"})
        );
        assert_eq!(
            info.other["operationMetrics"],
            serde_json::json!({"numFiles": "3"})
        );
        assert_eq!(info.other["readVersion"], Value::from(1));
    }
}
