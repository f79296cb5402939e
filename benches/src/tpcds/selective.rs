//! The selective query of `tarn-bench tpcds` that is not TPC-DS: one customer's store
//! sales (`WHERE ss_customer_sk = ...`), served on Tarn by a BTree index on
//! `store_sales.ss_customer_sk`. The index is built on Tarn's copy of the tables (data
//! files hard-linked): delta-rs cannot write to a table with Delta's `domainMetadata`
//! feature, which the index brings, so its tables stay as loaded. The peers run the same
//! SQL on the same data files.

use std::path::Path;
use std::time::Instant;

use tarn::Table;

use super::{Query, path};
use crate::BenchError;

/// The indexed column.
const TABLE: &str = "store_sales";
const COLUMN: &str = "ss_customer_sk";

/// The number the selective query goes by, past TPC-DS's 99.
pub(super) const NR: u32 = 100;

/// The selective query: one customer's sales, in a stable order. Customer 12345 exists
/// from scale factor 0.13 on (TPC-DS has 100,000 customers per scale factor 1).
pub(super) fn query() -> Query {
    Query {
        nr: NR,
        sql: format!(
            "SELECT ss_ticket_number, ss_item_sk, ss_quantity, ss_net_paid FROM {TABLE} \
             WHERE {COLUMN} = 12345 ORDER BY ss_ticket_number, ss_item_sk"
        ),
        label: Some(format!("index: {COLUMN} = 12345")),
    }
}

/// Creates the index on `store_sales` under `tables` (Tarn's copy); returns how long
/// the build took, in seconds.
///
/// Fails when the table does not open or the build fails.
pub(super) async fn create_index(tables: &Path) -> Result<f64, BenchError> {
    let mut table = Table::open(path(&tables.join(TABLE))?).await?;
    let started = Instant::now();
    table.create_index(COLUMN).execute().await?;
    Ok(started.elapsed().as_secs_f64())
}
