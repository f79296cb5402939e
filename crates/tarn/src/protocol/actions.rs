//! Delta log actions as plain structs, with the protocol's field names.
//!
//! Field docs follow the Delta PROTOCOL.md. Unknown fields are ignored on read, as the
//! protocol asks; optional fields are omitted on write when absent.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

pub use super::partition_values::PartitionValues;
use super::stats::Stats;

/// `protocol`: the reader and writer versions and features a table requires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Protocol {
    /// The minimum reader version.
    pub min_reader_version: i32,
    /// The minimum writer version.
    pub min_writer_version: i32,
    /// Reader features, present exactly when `min_reader_version` is 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reader_features: Option<Vec<String>>,
    /// Writer features, present exactly when `min_writer_version` is 7.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer_features: Option<Vec<String>>,
}

/// `metaData.format`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Format {
    /// The file format; always `parquet`.
    pub provider: String,
    /// Format options.
    #[serde(default)]
    pub options: HashMap<String, String>,
}

impl Default for Format {
    fn default() -> Self {
        Self {
            provider: "parquet".into(),
            options: HashMap::new(),
        }
    }
}

/// `metaData`: the table's id, schema, partitioning and properties.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// A unique id for the table.
    pub id: String,
    /// A user-given name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A user-given description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The data files' format.
    #[serde(default)]
    pub format: Format,
    /// The schema, as Delta schema JSON (empty when a writer left it out; such a table
    /// cannot be read).
    #[serde(default)]
    pub schema_string: String,
    /// Partition columns, in order (logical names).
    #[serde(default)]
    pub partition_columns: Vec<String>,
    /// Table properties (`delta.*` and user ones).
    #[serde(default)]
    pub configuration: HashMap<String, Option<String>>,
    /// Creation time in milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_time: Option<i64>,
}

impl Metadata {
    /// A table property, if set (and not null).
    pub fn property(&self, key: &str) -> Option<&str> {
        self.configuration.get(key).and_then(|v| v.as_deref())
    }
}

/// `deletionVector`: where a file's deleted rows are recorded.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletionVectorDescriptor {
    /// `u` (relative path with a UUID), `i` (inline) or `p` (absolute path).
    pub storage_type: String,
    /// The encoded path or the inline Z85 data.
    pub path_or_inline_dv: String,
    /// Start of the DV's record in its file (absent for inline DVs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<i32>,
    /// Size of the serialized bitmap in bytes.
    pub size_in_bytes: i32,
    /// Number of rows the DV marks deleted.
    pub cardinality: i64,
}

impl DeletionVectorDescriptor {
    /// The DV's unique id: storage type, path or data, and offset.
    pub fn unique_id(&self) -> String {
        match self.offset {
            Some(offset) => format!("{}{}@{offset}", self.storage_type, self.path_or_inline_dv),
            None => format!("{}{}", self.storage_type, self.path_or_inline_dv),
        }
    }
}

/// `add`: a data file that is part of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Add {
    /// URI-encoded path, relative to the table root or absolute.
    pub path: String,
    /// Partition values (physical column names).
    #[serde(default)]
    pub partition_values: PartitionValues,
    /// File size in bytes.
    pub size: i64,
    /// Modification time in milliseconds since the epoch.
    #[serde(default)]
    pub modification_time: i64,
    /// Whether the commit changed data (false for compaction).
    #[serde(default)]
    pub data_change: bool,
    /// Statistics (`numRecords`, `minValues`, `maxValues`, `nullCount`, `tightBounds`):
    /// JSON text, or typed values from a checkpoint's `stats_parsed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<Stats>,
    /// User tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<HashMap<String, Option<String>>>,
    /// The file's deletion vector, if rows of it are deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_vector: Option<DeletionVectorDescriptor>,
    /// Row tracking: the first row id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_row_id: Option<i64>,
    /// Row tracking: the commit version rows of this file were written in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_row_commit_version: Option<i64>,
    /// Clustering provider name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clustering_provider: Option<String>,
}

impl Add {
    /// The `remove` that takes this file out of the table at `now_ms`, carrying its
    /// partition values, size, tags, deletion vector and row-tracking fields, as Delta
    /// asks of a remove with extended file metadata.
    pub fn into_remove(self, now_ms: i64) -> Remove {
        Remove {
            path: self.path,
            deletion_timestamp: Some(now_ms),
            data_change: true,
            extended_file_metadata: Some(true),
            partition_values: Some(self.partition_values),
            size: Some(self.size),
            stats: None,
            tags: self.tags,
            deletion_vector: self.deletion_vector,
            base_row_id: self.base_row_id,
            default_row_commit_version: self.default_row_commit_version,
        }
    }

    /// The same file with another deletion vector. Its statistics no longer bound only
    /// live rows (`tightBounds: false`), and `numRecords` still counts the file's
    /// physical rows.
    pub fn with_deletion_vector(mut self, descriptor: DeletionVectorDescriptor) -> Add {
        self.deletion_vector = Some(descriptor);
        self.data_change = true;
        if let Some(stats) = &self.stats
            && let Ok(serde_json::Value::Object(mut map)) =
                serde_json::from_str::<serde_json::Value>(&stats.json())
        {
            map.insert("tightBounds".into(), serde_json::Value::Bool(false));
            self.stats = Some(serde_json::Value::Object(map).to_string().into());
        }
        self
    }
}

/// `remove`: a data file that left the table (a tombstone until vacuumed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Remove {
    /// URI-encoded path, as in the `add`.
    pub path: String,
    /// When the file was removed, milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<i64>,
    /// Whether the commit changed data.
    #[serde(default)]
    pub data_change: bool,
    /// Whether the following fields are present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_file_metadata: Option<bool>,
    /// Partition values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_values: Option<PartitionValues>,
    /// File size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
    /// Statistics JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<String>,
    /// User tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<HashMap<String, Option<String>>>,
    /// The deletion vector the removed file had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_vector: Option<DeletionVectorDescriptor>,
    /// Row tracking: the first row id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_row_id: Option<i64>,
    /// Row tracking: the default row commit version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_row_commit_version: Option<i64>,
}

/// `txn`: the last version an application committed, for exactly-once writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Txn {
    /// The application's id.
    pub app_id: String,
    /// The application's version.
    pub version: i64,
    /// When it was committed, milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<i64>,
}

/// `domainMetadata`: configuration of one named metadata domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DomainMetadata {
    /// The domain's name.
    pub domain: String,
    /// Its configuration, as a string (usually JSON).
    pub configuration: String,
    /// Whether the domain is removed.
    pub removed: bool,
}

/// `cdc`: a change-data file (read only; not part of the table's data).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cdc {
    /// Path of the change file.
    pub path: String,
    /// Partition values.
    #[serde(default)]
    pub partition_values: PartitionValues,
    /// Size in bytes.
    pub size: i64,
    /// Always false.
    #[serde(default)]
    pub data_change: bool,
}

/// `commitInfo`: provenance of a commit. Only the fields Tarn uses are typed; the rest are
/// kept as JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitInfo {
    /// Wall-clock time of the commit, milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    /// The in-commit timestamp, when the table enables them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_commit_timestamp: Option<i64>,
    /// The operation's name (`WRITE`, `CREATE TABLE`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// A unique id of the transaction that wrote the commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txn_id: Option<String>,
    /// Everything else.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// `checkpointMetadata`: marks a V2 checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointMetadata {
    /// The checkpoint's version.
    pub version: i64,
}

/// `sidecar`: a file of a V2 checkpoint holding `add` and `remove` actions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sidecar {
    /// Path relative to `_delta_log/_sidecars/` (or absolute).
    pub path: String,
    /// Size in bytes.
    pub size_in_bytes: i64,
    /// Modification time, milliseconds since the epoch.
    #[serde(default)]
    pub modification_time: i64,
}

/// One action of a commit or checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[allow(clippy::large_enum_variant)]
pub enum Action {
    /// `protocol`.
    Protocol(Protocol),
    /// `metaData`.
    #[serde(rename = "metaData")]
    Metadata(Metadata),
    /// `add`.
    Add(Add),
    /// `remove`.
    Remove(Remove),
    /// `txn`.
    Txn(Txn),
    /// `commitInfo`.
    CommitInfo(CommitInfo),
    /// `domainMetadata`.
    DomainMetadata(DomainMetadata),
    /// `cdc`.
    Cdc(Cdc),
    /// `checkpointMetadata`.
    CheckpointMetadata(CheckpointMetadata),
    /// `sidecar`.
    Sidecar(Sidecar),
}

/// One line of a commit, parsed leniently: actions Tarn does not know are ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ActionLine {
    protocol: Option<Protocol>,
    #[serde(rename = "metaData")]
    metadata: Option<Metadata>,
    add: Option<Add>,
    remove: Option<Remove>,
    txn: Option<Txn>,
    commit_info: Option<CommitInfo>,
    domain_metadata: Option<DomainMetadata>,
    cdc: Option<Cdc>,
    checkpoint_metadata: Option<CheckpointMetadata>,
    sidecar: Option<Sidecar>,
}

impl ActionLine {
    /// The actions of the line, in a fixed order (a line normally holds one).
    pub(crate) fn into_actions(self) -> impl Iterator<Item = Action> {
        [
            self.protocol.map(Action::Protocol),
            self.metadata.map(Action::Metadata),
            self.add.map(Action::Add),
            self.remove.map(Action::Remove),
            self.txn.map(Action::Txn),
            self.commit_info.map(Action::CommitInfo),
            self.domain_metadata.map(Action::DomainMetadata),
            self.cdc.map(Action::Cdc),
            self.checkpoint_metadata.map(Action::CheckpointMetadata),
            self.sidecar.map(Action::Sidecar),
        ]
        .into_iter()
        .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_known_actions_and_ignore_unknown_ones() {
        let line = r#"{"add":{"path":"a%20b.parquet","partitionValues":{"p":null},"size":1,"modificationTime":2,"dataChange":true,"futureField":1}}"#;
        let actions: Vec<Action> = serde_json::from_str::<ActionLine>(line)
            .unwrap()
            .into_actions()
            .collect();
        let Action::Add(add) = &actions[0] else {
            panic!("not an add: {actions:?}")
        };
        assert_eq!(add.path, "a%20b.parquet");
        assert_eq!(add.partition_values.get("p"), Some(&None));

        let unknown = r#"{"someFutureAction":{"x":1}}"#;
        assert_eq!(
            serde_json::from_str::<ActionLine>(unknown)
                .unwrap()
                .into_actions()
                .count(),
            0
        );
    }

    #[test]
    fn actions_serialize_with_protocol_names() {
        let json = serde_json::to_string(&Action::Protocol(Protocol {
            min_reader_version: 1,
            min_writer_version: 2,
            reader_features: None,
            writer_features: None,
        }))
        .unwrap();
        assert_eq!(
            json,
            r#"{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}"#
        );
        let dv = DeletionVectorDescriptor {
            storage_type: "u".into(),
            path_or_inline_dv: "ab^-aqEH.-t@S}K{vb[*k^".into(),
            offset: Some(4),
            size_in_bytes: 40,
            cardinality: 6,
        };
        assert_eq!(dv.unique_id(), "uab^-aqEH.-t@S}K{vb[*k^@4");
    }
}
