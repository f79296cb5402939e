//! The manifest: one row per namespace or table, in a Tarn table `__manifest` under the
//! catalog's root.
//!
//! Columns: `object_id` (names joined by `$`), `object_type` (`namespace` | `table`),
//! `location` (a table's folder, relative to the root; null for namespaces), `metadata`
//! (JSON text: `{"properties": {...}, "description": ..., "declared": bool}`),
//! `created_at` and `updated_at` (UTC timestamps, microseconds).

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit, TimestampMicrosecondType};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The manifest table's folder under the root.
pub const MANIFEST_DIR: &str = "__manifest";
/// `object_type` of namespaces.
pub const NAMESPACE: &str = "namespace";
/// `object_type` of tables.
pub const TABLE: &str = "table";

/// The manifest's Arrow schema.
pub fn schema() -> SchemaRef {
    let ts = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    Arc::new(Schema::new(vec![
        Field::new("object_id", DataType::Utf8, false),
        Field::new("object_type", DataType::Utf8, false),
        Field::new("location", DataType::Utf8, true),
        Field::new("metadata", DataType::Utf8, true),
        Field::new("created_at", ts.clone(), false),
        Field::new("updated_at", ts, false),
    ]))
}

/// What an object's `metadata` JSON holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ObjectMetadata {
    /// Properties.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
    /// A description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A table whose name is reserved but whose data does not exist yet.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub declared: bool,
}

/// One manifest row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `a$b$c`.
    pub object_id: String,
    /// `namespace` or `table`.
    pub object_type: String,
    /// For tables: the folder relative to the root.
    pub location: Option<String>,
    /// Properties, description.
    pub metadata: ObjectMetadata,
    /// Microseconds since the epoch.
    pub created_at: i64,
    /// Microseconds since the epoch.
    pub updated_at: i64,
}

/// The rows of a manifest batch.
///
/// Fails with [`Error::InvalidManifest`] when the batch does not have the manifest's
/// columns or a row's metadata is not JSON.
pub fn rows_of(batch: &RecordBatch) -> Result<Vec<Row>> {
    let invalid = |reason: String| Error::InvalidManifest { reason };
    let string = |name: &str| -> Result<&StringArray> {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_string_opt::<i32>())
            .ok_or_else(|| invalid(format!("no string column {name:?}")))
    };
    let time = |name: &str| -> Result<&arrow::array::PrimitiveArray<TimestampMicrosecondType>> {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_primitive_opt::<TimestampMicrosecondType>())
            .ok_or_else(|| invalid(format!("no timestamp column {name:?}")))
    };
    let (ids, types, locations, metadata) = (
        string("object_id")?,
        string("object_type")?,
        string("location")?,
        string("metadata")?,
    );
    let (created, updated) = (time("created_at")?, time("updated_at")?);
    (0..batch.num_rows())
        .map(|i| {
            let object_type = types.value(i).to_string();
            if object_type != NAMESPACE && object_type != TABLE {
                return Err(invalid(format!("object type {object_type:?}")));
            }
            let meta = if metadata.is_null(i) {
                ObjectMetadata::default()
            } else {
                serde_json::from_str(metadata.value(i))
                    .map_err(|e| invalid(format!("metadata of {:?}: {e}", ids.value(i))))?
            };
            Ok(Row {
                object_id: ids.value(i).to_string(),
                object_type,
                location: locations
                    .is_valid(i)
                    .then(|| locations.value(i).to_string()),
                metadata: meta,
                created_at: created.value(i),
                updated_at: updated.value(i),
            })
        })
        .collect()
}

/// Rows as one manifest batch, in the order given.
///
/// Fails with [`Error::InvalidManifest`] if metadata cannot be encoded.
pub fn batch_of<R: std::borrow::Borrow<Row>>(rows: &[R]) -> Result<RecordBatch> {
    let rows: Vec<&Row> = rows.iter().map(R::borrow).collect();
    let metadata = rows
        .iter()
        .map(|r| serde_json::to_string(&r.metadata).map(Some))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::InvalidManifest {
            reason: format!("encoding metadata: {e}"),
        })?;
    let ts = |values: Vec<i64>| TimestampMicrosecondArray::from(values).with_timezone("UTC");
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.object_id.as_str()),
            )),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.object_type.as_str()),
            )),
            Arc::new(StringArray::from_iter(
                rows.iter().map(|r| r.location.as_deref()),
            )),
            Arc::new(StringArray::from(metadata)),
            Arc::new(ts(rows.iter().map(|r| r.created_at).collect())),
            Arc::new(ts(rows.iter().map(|r| r.updated_at).collect())),
        ],
    )
    .map_err(|e| Error::InvalidManifest {
        reason: format!("building a manifest batch: {e}"),
    })
}
