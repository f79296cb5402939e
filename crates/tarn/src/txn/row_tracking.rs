//! Row tracking (the `rowTracking` writer feature): every row a commit adds gets a fresh
//! row id and commit version. Each new file's `add` takes `baseRowId` just above the
//! table's high-water mark (the `delta.rowTracking` domain's `rowIdHighWaterMark`) and
//! `defaultRowCommitVersion` = the commit's version; a file recommitted (a new deletion
//! vector) or removed keeps the fields of its live `add`. The commit raises the mark.
//!
//! Ids are assigned at every attempt, on the snapshot the attempt commits on, so writers
//! racing for a version never hand out the same ids and never conflict over the mark.

use serde_json::Value;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::paths;
use crate::protocol::properties::{
    MATERIALIZED_ROW_COMMIT_VERSION_COLUMN, MATERIALIZED_ROW_ID_COLUMN, TableProperties,
};
use crate::protocol::{
    Action, Add, DataType, DomainMetadata, Metadata, PrimitiveType, StructField,
};
use crate::snapshot::Snapshot;

/// The metadata domain holding the high-water mark.
pub(crate) const DOMAIN: &str = "delta.rowTracking";
/// The key of the high-water mark in the domain's configuration.
const HIGH_WATER_MARK: &str = "rowIdHighWaterMark";
/// The `commitInfo` tag saying whether the stable ids of copied rows were kept.
const PRESERVED_TAG: &str = "delta.rowTracking.preserved";

/// Names the hidden columns that would hold materialized row ids and commit versions,
/// as the protocol asks before `delta.enableRowTracking` may be true: unique names no
/// column can take. Names already there are kept.
pub(crate) fn name_materialized_columns(metadata: &mut Metadata) {
    if !TableProperties::new(metadata).row_tracking() {
        return;
    }
    for (key, prefix) in [
        (MATERIALIZED_ROW_ID_COLUMN, "_row-id-col-"),
        (
            MATERIALIZED_ROW_COMMIT_VERSION_COLUMN,
            "_row-commit-version-col-",
        ),
    ] {
        let named = metadata.configuration.get(key).is_some_and(Option::is_some);
        if !named {
            metadata
                .configuration
                .insert(key.into(), Some(format!("{prefix}{}", Uuid::new_v4())));
        }
    }
}

/// The hidden columns (64-bit integers) holding materialized row ids and commit versions,
/// when the table tracks rows (`delta.enableRowTracking`) and has named them.
pub(crate) fn materialized_fields(metadata: &Metadata) -> Option<Vec<StructField>> {
    if !TableProperties::new(metadata).row_tracking() {
        return None;
    }
    let name = |key: &str| metadata.configuration.get(key).cloned().flatten();
    let long = DataType::Primitive(PrimitiveType::Long);
    Some(vec![
        StructField::new(name(MATERIALIZED_ROW_ID_COLUMN)?, long.clone(), true),
        StructField::new(name(MATERIALIZED_ROW_COMMIT_VERSION_COLUMN)?, long, true),
    ])
}

/// The highest row id `base` has handed out; -1 before the first.
///
/// Fails with [`Error::InvalidArgument`] when the domain's configuration is not the JSON
/// object with an integer mark the protocol describes.
pub(crate) fn high_water_mark(base: &Snapshot) -> Result<i64> {
    let Some(config) = base.domain_metadata(DOMAIN) else {
        return Ok(-1);
    };
    serde_json::from_str::<Value>(config)
        .ok()
        .and_then(|v| v.get(HIGH_WATER_MARK).and_then(Value::as_i64))
        .ok_or_else(|| Error::InvalidArgument {
            name: "delta.rowTracking",
            reason: format!(
                "the domain's configuration {config:?} at version {} has no integer \
                 {HIGH_WATER_MARK}",
                base.version()
            ),
        })
}

/// Whether a commit of `actions` on `base` must track rows: the protocol it leaves (its
/// own, else the base's) has the `rowTracking` writer feature.
fn supported(base: &Snapshot, actions: &[Action]) -> bool {
    actions
        .iter()
        .rev()
        .find_map(|a| match a {
            Action::Protocol(p) => Some(p),
            _ => None,
        })
        .unwrap_or(base.protocol())
        .has_writer_feature("rowTracking")
}

/// Whether `add` (of `rows` rows) arrives with ids this table assigned before, all at or
/// under the high-water mark `mark`, and keeps them: a file added back as it was (a
/// restore). Its missing commit version, if any, is left as it was written.
fn restored_ids(add: &Add, rows: i64, mark: i64) -> bool {
    add.base_row_id
        .is_some_and(|base| base >= 0 && base.saturating_add(rows) - 1 <= mark)
}

/// Gives the `add` and `remove` actions of a commit at `version` on `base` their row ids
/// and commit versions and appends the raised high-water mark, when the table tracks
/// rows. Returns `None` when it does not, else whether the stable ids of every copied or
/// updated row were kept, for the `commitInfo` tag: as `kept` says when the writer said,
/// else only when the commit copied no rows (it did not both remove and add files).
///
/// A commit that turns `delta.enableRowTracking` on first recommits (without a data
/// change) every live file that has no `baseRowId`, as the protocol requires.
///
/// Fails with [`Error::InvalidArgument`] for a new file whose statistics lack
/// `numRecords` (its ids could not be counted) and as [`high_water_mark`] does.
pub(crate) fn assign(
    base: &Snapshot,
    actions: &mut Vec<Action>,
    version: i64,
    kept: Option<bool>,
) -> Result<Option<bool>> {
    if !supported(base, actions) {
        return Ok(None);
    }
    backfill(base, actions);
    actions.retain(|a| !matches!(a, Action::DomainMetadata(d) if d.domain == DOMAIN));
    let start = high_water_mark(base)?;
    let mut mark = start;
    let (mut fresh, mut removed) = (false, false);
    for action in actions.iter_mut() {
        match action {
            Action::Add(add) => {
                let live = base
                    .live_file(&add.path)
                    .filter(|live| live.base_row_id.is_some());
                if let Some(live) = live {
                    add.base_row_id = live.base_row_id;
                    add.default_row_commit_version = live.default_row_commit_version;
                    continue;
                }
                let rows = rows_of(add, version)?;
                // A file a restore adds back keeps the ids it had, as Spark's RESTORE
                // keeps them: they were assigned under the mark and are no longer live.
                if restored_ids(add, rows, start) {
                    continue;
                }
                add.base_row_id = Some(mark + 1);
                add.default_row_commit_version = Some(version);
                mark += rows;
                fresh = true;
            }
            Action::Remove(remove) => {
                removed = true;
                if remove.base_row_id.is_none()
                    && let Some(live) = base.live_file(&remove.path)
                {
                    remove.base_row_id = live.base_row_id;
                    remove.default_row_commit_version = live.default_row_commit_version;
                }
            }
            _ => {}
        }
    }
    if mark != start {
        actions.push(Action::DomainMetadata(DomainMetadata {
            domain: DOMAIN.into(),
            configuration: serde_json::json!({ HIGH_WATER_MARK: mark }).to_string(),
            removed: false,
        }));
    }
    Ok(Some(!(fresh && removed) || kept == Some(true)))
}

/// Tags a `commitInfo` with whether the commit kept the stable row ids of the rows it
/// copied.
pub(crate) fn tag(info: &mut Action, preserved: bool) {
    if let Action::CommitInfo(c) = info {
        let tags = c
            .other
            .entry("tags")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Value::Object(tags) = tags {
            tags.insert(PRESERVED_TAG.into(), Value::from(preserved.to_string()));
        }
    }
}

/// The rows of a new file, from its statistics.
fn rows_of(add: &Add, version: i64) -> Result<i64> {
    add.stats
        .as_ref()
        .and_then(|s| s.num_records())
        .map(|n| n as i64)
        .ok_or_else(|| Error::InvalidArgument {
            name: "add",
            reason: format!(
                "{} has no numRecords in its statistics: a row-tracking table needs the \
                 count to give its rows ids (commit {version})",
                add.path
            ),
        })
}

/// When `actions` turn row tracking on, recommits every live file of `base` without a
/// `baseRowId` that the commit does not already add or remove.
fn backfill(base: &Snapshot, actions: &mut Vec<Action>) {
    let enabling = actions.iter().rev().find_map(|a| match a {
        Action::Metadata(m) => Some(TableProperties::new(m).row_tracking()),
        _ => None,
    });
    if enabling != Some(true) || base.properties().row_tracking() {
        return;
    }
    let location = base.location();
    let touched: std::collections::HashSet<String> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Add(add) => Some(paths::canonical(location, &add.path)),
            Action::Remove(r) => Some(paths::canonical(location, &r.path)),
            _ => None,
        })
        .collect();
    let recommits: Vec<Action> = base
        .files()
        .filter(|f| f.base_row_id.is_none())
        .filter(|f| !touched.contains(&paths::canonical(location, &f.path)))
        .map(|f| {
            Action::Add(Add {
                data_change: false,
                ..f.clone()
            })
        })
        .collect();
    actions.extend(recommits);
}
