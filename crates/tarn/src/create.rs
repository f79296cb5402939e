//! Creating a table: [`CreateBuilder`], started by [`Table::create`] or
//! [`Table::create_at`], writes version 0 with put-if-absent: empty
//! ([`CreateBuilder::execute`]), or with the rows of a stream already in it (CREATE TABLE
//! AS SELECT, [`CreateBuilder::execute_stream`]).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use futures::StreamExt;
use serde_json::{Map, Value};
use tarn_store::{StoreLocation, StoreOptions};
use uuid::Uuid;

use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::paths::validate_name;
use crate::protocol::features::ensure_writable;
use crate::protocol::mapping;
use crate::protocol::properties::{PARQUET_COMPRESSION, parse_compression};
use crate::protocol::{Action, DataType, Format, Metadata, Protocol, StructType};
use crate::snapshot::Snapshot;
use crate::table::Table;
use crate::txn::{Creation, commit_create};
use crate::write::{
    BatchStream, from_reader, from_stream, validate_partition_columns, write_new_table,
};

impl Table {
    /// Starts creating a table at `url`.
    pub fn create(url: &str) -> CreateBuilder {
        CreateBuilder::new(Target::Url(url.to_string(), StoreOptions::default()))
    }

    /// Starts creating a table at a location built by hand.
    pub fn create_at(location: StoreLocation) -> CreateBuilder {
        CreateBuilder::new(Target::Location(location))
    }
}

#[derive(Debug, Clone)]
enum Target {
    Url(String, StoreOptions),
    Location(StoreLocation),
}

/// A table being created; run it with [`execute`](Self::execute).
#[derive(Debug, Clone)]
#[must_use]
pub struct CreateBuilder {
    target: Target,
    schema: Option<StructType>,
    arrow_schema: Option<Schema>,
    partition_columns: Vec<String>,
    properties: HashMap<String, String>,
    name: Option<String>,
    description: Option<String>,
    clock: Arc<dyn Clock>,
    fresh_location: bool,
}

impl CreateBuilder {
    fn new(target: Target) -> Self {
        Self {
            target,
            schema: None,
            arrow_schema: None,
            partition_columns: Vec::new(),
            properties: HashMap::new(),
            name: None,
            description: None,
            clock: Arc::new(SystemClock),
            fresh_location: false,
        }
    }

    /// Store options for a URL target (endpoint, credentials, region).
    pub fn with_store_options(mut self, options: StoreOptions) -> Self {
        if let Target::Url(url, _) = self.target {
            self.target = Target::Url(url, options);
        }
        self
    }

    /// The schema, from Arrow.
    pub fn with_arrow_schema(mut self, schema: &Schema) -> Self {
        self.arrow_schema = Some(schema.clone());
        self
    }

    /// The schema, as a Delta schema.
    pub fn with_schema(mut self, schema: StructType) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Partition columns, in folder order.
    pub fn with_partition_columns(
        mut self,
        columns: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.partition_columns = columns.into_iter().map(Into::into).collect();
        self
    }

    /// A table property (`delta.checkpointInterval`, `delta.appendOnly`, ...).
    pub fn with_property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.insert(key.into(), value.into());
        self
    }

    /// The table's name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The table's description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// The clock the creation time and commit timestamp come from; the table handle
    /// returned keeps it for its commits.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Skips the listing that looks for an existing table, saving a round trip, for a
    /// caller that named the folder itself moments ago (with a random part, as the
    /// catalog does). Version 0 is still written with put-if-absent, so a table whose
    /// version 0 exists still fails with [`Error::TableAlreadyExists`]; but a log whose
    /// first commits were cleaned up after a checkpoint would go unnoticed, so this is
    /// not for folders anyone else may have written.
    pub fn with_fresh_location(mut self) -> Self {
        self.fresh_location = true;
        self
    }

    /// Checks the schema and partition columns without writing anything, so a caller
    /// that must do other work before [`execute`](Self::execute) can refuse bad input
    /// first.
    ///
    /// Fails as [`execute`](Self::execute) does for them: [`Error::InvalidArgument`]
    /// without a schema or for bad column names or partition columns, and
    /// [`Error::InvalidSchema`] for Arrow types Delta lacks.
    pub fn validate(&self) -> Result<()> {
        let schema = self.delta_schema()?;
        validate_schema(&schema)?;
        validate_partition_columns(&schema, &self.partition_columns)?;
        parse_compression(self.properties.get(PARQUET_COMPRESSION).map(String::as_str))?;
        Ok(())
    }

    fn delta_schema(&self) -> Result<StructType> {
        match (&self.schema, &self.arrow_schema) {
            (Some(s), _) => Ok(s.clone()),
            (None, Some(a)) => StructType::try_from_arrow(a),
            (None, None) => Err(Error::InvalidArgument {
                name: "schema",
                reason: "a table needs a schema".into(),
            }),
        }
    }

    /// Writes version 0.
    ///
    /// Fails with [`Error::InvalidArgument`] without a schema or for bad column names
    /// (empty, with `/` or control characters, duplicated), partition columns, a
    /// `delta.columnMapping.mode` other than `none`, `name` or `id`, or a
    /// `tarn.parquet.compression` naming no codec Tarn writes,
    /// [`Error::InvalidSchema`] for Arrow types Delta lacks, and
    /// [`Error::TableAlreadyExists`] when the location already holds a table. With
    /// `delta.columnMapping.mode` `name` or `id`, every column gets a column id and a
    /// physical name (`col-<uuid>`) that its data files use.
    pub async fn execute(self) -> Result<Table> {
        let definition = self.define().await?;
        let actions = definition.actions();
        definition.commit("CREATE TABLE", actions, Map::new()).await
    }

    /// CREATE TABLE AS SELECT: creates the table with the rows of `stream` already in
    /// version 0 (one commit: protocol, metadata and the data files), writing files as
    /// batches arrive, so memory holds a couple of batches and the files being encoded.
    /// Without a schema given, the first batch's schema is the table's. Identity,
    /// generated columns and constraints apply as they do to an append.
    ///
    /// Fails as [`execute`](Self::execute) does (before any file is written), with
    /// [`Error::InvalidArgument`] for an empty stream without a schema, with the stream's
    /// error as [`Error::InputStream`], and as an append does for batches that do not fit
    /// the schema. Nothing is committed on failure: files already uploaded are orphans
    /// that `vacuum` removes once the table exists.
    pub async fn execute_stream<S, E>(self, stream: S) -> Result<Table>
    where
        S: futures::Stream<Item = std::result::Result<RecordBatch, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        self.create_as(from_stream(stream)).await
    }

    /// CREATE TABLE AS SELECT from the batches of `reader` (an Arrow
    /// `RecordBatchReader`), read on a blocking thread, as
    /// [`execute_stream`](Self::execute_stream) does.
    pub async fn execute_reader<R>(self, reader: R) -> Result<Table>
    where
        R: arrow::array::RecordBatchReader + Send + 'static,
    {
        self.create_as(from_reader(reader)).await
    }

    async fn create_as(self, mut stream: BatchStream) -> Result<Table> {
        let first = stream.next().await.transpose()?;
        let builder = match (&self.schema, &self.arrow_schema, &first) {
            (None, None, Some(batch)) => self.with_arrow_schema(&batch.schema()),
            (None, None, None) => {
                return Err(Error::InvalidArgument {
                    name: "schema",
                    reason: "the stream ended before its first batch and no schema was \
                             given: a table created from a stream takes the first \
                             batch's schema"
                        .into(),
                });
            }
            _ => self,
        };
        let definition = builder.define().await?;
        let now = definition.clock.now_ms();
        let empty = Snapshot::new_table(definition.location.clone(), now, definition.actions())?;
        let (written, marked) = write_new_table(&empty, first, stream, now).await?;
        let mut actions = vec![
            Action::Protocol(definition.protocol.clone()),
            Action::Metadata(marked.unwrap_or_else(|| definition.metadata.clone())),
        ];
        let mut metrics = Map::new();
        metrics.insert("numFiles".into(), written.adds.len().to_string().into());
        metrics.insert("numOutputRows".into(), written.rows.to_string().into());
        metrics.insert("numOutputBytes".into(), written.bytes.to_string().into());
        actions.extend(written.adds.into_iter().map(Action::Add));
        definition
            .commit("CREATE TABLE AS SELECT", actions, metrics)
            .await
    }

    /// The table's protocol and metadata, checked, at a location that holds no table.
    async fn define(self) -> Result<Definition> {
        let location = match &self.target {
            Target::Url(url, options) => tarn_store::open_with_options(url, options)?,
            Target::Location(location) => location.clone(),
        };
        let schema = self.delta_schema()?;
        validate_schema(&schema)?;
        validate_partition_columns(&schema, &self.partition_columns)?;
        parse_compression(self.properties.get(PARQUET_COMPRESSION).map(String::as_str))?;
        let existing = if self.fresh_location {
            None
        } else {
            crate::log::versions::latest_version(&location).await?
        };
        if let Some(version) = existing {
            return Err(Error::TableAlreadyExists {
                url: location.url().to_string(),
                version,
            });
        }
        let mut schema = schema;
        let mut metadata = Metadata {
            id: Uuid::new_v4().to_string(),
            name: self.name,
            description: self.description,
            format: Format::default(),
            schema_string: schema.to_json(),
            partition_columns: self.partition_columns.clone(),
            configuration: self
                .properties
                .into_iter()
                .map(|(k, v)| (k, Some(v)))
                .collect(),
            created_time: Some(self.clock.now_ms()),
        };
        // Under column mapping, every column gets an id and a physical name now.
        mapping::annotate(&mut schema, &mut metadata, false)?;
        crate::txn::name_materialized_columns(&mut metadata);
        let protocol = Protocol::for_new_table(&schema, &metadata);
        ensure_writable(&protocol, &metadata, &schema)?;
        Ok(Definition {
            location,
            protocol,
            metadata,
            partition_columns: self.partition_columns,
            clock: self.clock,
        })
    }
}

/// A new table's definition, checked, for version 0.
struct Definition {
    location: StoreLocation,
    protocol: Protocol,
    metadata: Metadata,
    partition_columns: Vec<String>,
    clock: Arc<dyn Clock>,
}

impl Definition {
    /// The protocol and metadata actions.
    fn actions(&self) -> Vec<Action> {
        vec![
            Action::Protocol(self.protocol.clone()),
            Action::Metadata(self.metadata.clone()),
        ]
    }

    /// Commits `actions` as version 0 with put-if-absent and opens the table.
    async fn commit(
        self,
        operation: &'static str,
        actions: Vec<Action>,
        metrics: Map<String, Value>,
    ) -> Result<Table> {
        let mut parameters = Map::new();
        parameters.insert(
            "partitionBy".into(),
            Value::from(serde_json::to_string(&self.partition_columns).unwrap_or_default()),
        );
        let creation = Creation {
            operation,
            parameters,
            metrics,
        };
        let (timestamp, actions) =
            commit_create(&self.location, actions, creation, self.clock.as_ref()).await?;
        let snapshot = Snapshot::new_table(self.location, timestamp, actions)?;
        Ok(Table::from_snapshot(snapshot).with_clock(self.clock))
    }
}

/// Column names must be usable as folder names and unique regardless of case (Delta
/// resolves names case-insensitively).
fn validate_schema(schema: &StructType) -> Result<()> {
    if schema.fields.is_empty() {
        return Err(Error::InvalidArgument {
            name: "schema",
            reason: "a table needs at least one column".into(),
        });
    }
    fn walk(s: &StructType) -> Result<()> {
        let mut seen = std::collections::HashSet::new();
        for field in &s.fields {
            validate_name("column", &field.name)?;
            if !seen.insert(field.name.to_lowercase()) {
                return Err(Error::InvalidArgument {
                    name: "schema",
                    reason: format!(
                        "column {:?} appears twice (names are case-insensitive)",
                        field.name
                    ),
                });
            }
            if let DataType::Struct(inner) = &field.data_type {
                walk(inner)?;
            }
        }
        Ok(())
    }
    walk(schema)
}
