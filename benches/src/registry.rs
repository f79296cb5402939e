//! The registry of workloads by name: it sits above the workload modules, so that none
//! of them imports another.

use crate::report::Reporter;
use crate::{Bench, BenchError, cdc, index, reads, streaming, workloads};

/// Every workload, in the order `all` runs them: with the `sql` feature (the default),
/// `sql-overhead` last, so the default run's reads go through SQL beside the API.
/// `stream-load` and `stream-merge` (100M rows at scale 1) run only by name.
#[cfg(feature = "sql")]
pub const ALL: &[&str] = &[
    "load",
    "merge",
    "cdc",
    "mutations",
    "files",
    "reads",
    "index",
    "sql-overhead",
];

/// Every workload, in the order `all` runs them, in a build without the `sql` feature.
#[cfg(not(feature = "sql"))]
pub const ALL: &[&str] = &[
    "load",
    "merge",
    "cdc",
    "mutations",
    "files",
    "reads",
    "index",
];

/// What a build without the `sql` feature says when asked for a SQL workload.
pub const WITHOUT_SQL: &str = "tarn-bench was built without the `sql` feature (DataFusion \
    and the TPC-DS generator); build it with its default features: `cargo run --release -p \
    tarn-bench -- ...`";

/// Runs the workload called `name`.
///
/// Fails on an unknown name or when the workload fails.
pub async fn run(name: &str, bench: &Bench, reporter: &mut Reporter) -> Result<(), BenchError> {
    match name {
        "load" => workloads::load(bench, reporter).await,
        "merge" => workloads::merge(bench, reporter).await,
        "cdc" => cdc::cdc(bench, reporter).await,
        "mutations" => workloads::mutations(bench, reporter).await,
        "files" => workloads::files(bench, reporter).await,
        "reads" => reads::reads(bench, reporter).await,
        "index" => index::index(bench, reporter).await,
        "stream-load" => streaming::stream_load(bench, reporter).await,
        "stream-merge" => streaming::stream_merge(bench, reporter).await,
        #[cfg(feature = "sql")]
        "sql-overhead" => crate::sql_overhead::sql_overhead(bench, reporter).await,
        #[cfg(not(feature = "sql"))]
        "sql-overhead" => Err(WITHOUT_SQL.into()),
        other => Err(format!("unknown workload {other:?}; one of {ALL:?}").into()),
    }
}
