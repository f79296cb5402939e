//! Reading a Delta log's commits as the tests check them: a commit's `commitInfo` and the
//! writers (`txnId`s) it names, and its actions.

use object_store::ObjectStoreExt;
use tarn::StoreLocation;

/// The `commitInfo` of the commit at `version` (its first line), or `None` when there is
/// no such commit.
pub async fn commit_info_at(location: &StoreLocation, version: i64) -> Option<serde_json::Value> {
    let first = actions_at(location, version).await.into_iter().next()?;
    Some(first["commitInfo"].clone())
}

/// Every action of the commit at `version`, one JSON object per line; empty when there is
/// no such commit.
pub async fn actions_at(location: &StoreLocation, version: i64) -> Vec<serde_json::Value> {
    let path = location
        .root()
        .clone()
        .join("_delta_log")
        .join(format!("{version:020}.json"));
    let Ok(got) = location.store().get(&path).await else {
        return Vec::new();
    };
    let body = got.bytes().await.unwrap_or_default();
    body.split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect()
}

/// Every `txnId` the commit at `version` names, its committer's first and then those it
/// carried (`tarnGroup`) in order; empty when there is no such commit.
pub async fn txn_ids_at(location: &StoreLocation, version: i64) -> Vec<String> {
    let Some(info) = commit_info_at(location, version).await else {
        return Vec::new();
    };
    let mut ids: Vec<String> = info["txnId"]
        .as_str()
        .map(str::to_string)
        .into_iter()
        .collect();
    if let Some(group) = info["tarnGroup"].as_array() {
        ids.extend(group.iter().filter_map(|v| v.as_str().map(str::to_string)));
    }
    ids
}

/// The in-commit timestamps of versions `from..=to` of the table at `dir`. Panics when a
/// commit lacks one in its first action, where it must be.
pub async fn in_commit_timestamps(dir: &std::path::Path, from: i64, to: i64) -> Vec<i64> {
    let location = tarn_store::open(dir.to_str().expect("a UTF-8 path")).expect("open the store");
    let mut out = Vec::new();
    for v in from..=to {
        let info = commit_info_at(&location, v).await.expect("the commit");
        out.push(
            info["inCommitTimestamp"]
                .as_i64()
                .unwrap_or_else(|| panic!("version {v} starts without an in-commit timestamp")),
        );
    }
    out
}
