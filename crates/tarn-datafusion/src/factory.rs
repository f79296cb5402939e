//! `CREATE EXTERNAL TABLE name [(columns)] STORED AS TARN [PARTITIONED BY (..)] LOCATION
//! 'url' [OPTIONS (..)]`: registers the Tarn table at the location, creating it with the
//! columns given when none is there yet. Options are the store's (`region`, `endpoint`,
//! ...), plus `version` or `timestamp` to read the table as of then.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::Schema;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider, TableProviderFactory};
use datafusion::common::{Result, plan_err};
use datafusion::logical_expr::CreateExternalTable;
use tarn::protocol::StructType;
use tarn::{StoreOptions, Table};

use crate::{TarnTableProvider, to_datafusion};

/// The `STORED AS` name of Tarn tables.
pub const TARN_FORMAT: &str = "TARN";

/// Makes Tarn tables for `CREATE EXTERNAL TABLE ... STORED AS TARN`; [`crate::register`]
/// installs it.
#[derive(Debug, Default)]
pub struct TarnTableFactory;

/// Where a table is read as of, from a statement's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AsOf {
    /// The latest version.
    Latest,
    /// A version.
    Version(i64),
    /// The newest version committed at or before this time, in milliseconds since 1970.
    Timestamp(i64),
}

impl AsOf {
    /// Moves `table` to this point; fails as [`Table::load_version`] or
    /// [`Table::load_timestamp`] do.
    pub(crate) async fn load(self, table: &mut Table) -> tarn::Result<()> {
        match self {
            Self::Latest => Ok(()),
            Self::Version(version) => table.load_version(version).await,
            Self::Timestamp(ms) => table.load_timestamp(ms).await,
        }
    }

    /// The provider of `table` loaded at this point: read-only unless at the latest.
    pub(crate) fn provider(self, table: Table) -> TarnTableProvider {
        match self {
            Self::Latest => TarnTableProvider::new(table),
            _ => TarnTableProvider::read_only(table),
        }
    }
}

/// The store options and the point in time of a statement's options (DataFusion writes
/// keys without a dot as `format.key`).
fn split_options(options: &HashMap<String, String>) -> Result<(StoreOptions, AsOf)> {
    let mut store = StoreOptions::new();
    let mut as_of = AsOf::Latest;
    for (key, value) in options {
        let key = key.strip_prefix("format.").unwrap_or(key);
        as_of = match (key, as_of) {
            ("version" | "timestamp", AsOf::Version(_) | AsOf::Timestamp(_)) => {
                return plan_err!("a Tarn table is read as of a version or a timestamp, not both");
            }
            ("version", _) => match value.parse() {
                Ok(version) => AsOf::Version(version),
                Err(_) => return plan_err!("the version option takes a number, not {value}"),
            },
            ("timestamp", _) => AsOf::Timestamp(parse_timestamp(value)?),
            _ => {
                store = store.with(key, value.clone());
                as_of
            }
        };
    }
    Ok((store, as_of))
}

/// An RFC 3339 time (`2024-05-01T12:00:00Z`) in milliseconds since 1970.
pub(crate) fn parse_timestamp(text: &str) -> Result<i64> {
    match tarn::expr::Scalar::timestamp(text) {
        Some(tarn::expr::Scalar::Timestamp(us)) => Ok(us.div_euclid(1000)),
        _ => plan_err!("{text} is not an RFC 3339 time such as 2024-05-01T12:00:00Z"),
    }
}

#[async_trait]
impl TableProviderFactory for TarnTableFactory {
    async fn create(
        &self,
        _state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> Result<Arc<dyn TableProvider>> {
        let [location] = cmd.locations.as_slice() else {
            return plan_err!("a Tarn table has one LOCATION, not {}", cmd.locations.len());
        };
        let (options, as_of) = split_options(&cmd.options)?;
        let columns = cmd.schema.as_arrow();
        let mut table = match Table::open_with_options(location, &options).await {
            Ok(table) => table,
            Err(tarn::Error::TableNotFound { .. })
                if !columns.fields().is_empty() && as_of == AsOf::Latest =>
            {
                let created = Table::create(location)
                    .with_store_options(options)
                    .with_arrow_schema(columns)
                    .with_partition_columns(cmd.table_partition_cols.clone())
                    .execute()
                    .await
                    .map_err(to_datafusion)?;
                return Ok(Arc::new(TarnTableProvider::new(created)));
            }
            Err(e) => return Err(to_datafusion(e)),
        };
        as_of.load(&mut table).await.map_err(to_datafusion)?;
        if !columns.fields().is_empty() {
            same_columns(location, columns, table.snapshot().schema())?;
        }
        Ok(Arc::new(as_of.provider(table)))
    }
}

/// Fails unless the statement's columns are the table's, by name and Delta type: the
/// statement's SQL types are taken as Tarn would store them (DataFusion's `VARCHAR` is a
/// string view, which Tarn stores as a string).
fn same_columns(location: &str, given: &Schema, table: &StructType) -> Result<()> {
    let given = StructType::try_from_arrow(given).map_err(to_datafusion)?;
    let names = |schema: &StructType| -> Vec<String> {
        schema
            .fields
            .iter()
            .map(|f| format!("{} {}", f.name, f.data_type))
            .collect()
    };
    let (given, table) = (names(&given), names(table));
    match given == table {
        true => Ok(()),
        false => plan_err!(
            "the table at {location} has the columns ({}), not ({}); leave the columns \
             out to take the table's",
            table.join(", "),
            given.join(", ")
        ),
    }
}
