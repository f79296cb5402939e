//! The command line's grammar: global flags (output, store options) and one subcommand
//! per operation, as `clap` parses them.

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Inspect, query and maintain Tarn (Delta) tables and Tarn catalogs.
///
/// Tables and catalogs are named by URL: a local path, `file://`, `s3://bucket/prefix`,
/// `gs://bucket/prefix` or `az://container/prefix` (`abfss://` too), with credentials and
/// endpoints from each cloud's usual variables (`AWS_*`, `GOOGLE_*`, `AZURE_STORAGE_*`) or
/// the flags.
#[derive(Debug, Parser)]
#[command(name = "tarn", version, about, long_about = None)]
pub(crate) struct Cli {
    /// Print JSON for scripts instead of readable tables.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// Store options: endpoint, region, credentials.
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Store options on top of the cloud's environment variables.
#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    /// Where requests go: an S3-compatible server (MinIO), a GCS base URL or an Azure
    /// account URL.
    #[arg(long, global = true, value_name = "URL")]
    pub(crate) endpoint: Option<String>,
    /// The S3 region.
    #[arg(long, global = true)]
    pub(crate) region: Option<String>,
    /// Allow plain HTTP to the endpoint.
    #[arg(long, global = true)]
    pub(crate) allow_http: bool,
    /// Any other store option, as `key=value` (`aws_access_key_id=...`,
    /// `azure_storage_account_name=...`, `google_service_account=...`); repeatable.
    #[arg(long = "store-option", global = true, value_name = "KEY=VALUE")]
    pub(crate) options: Vec<String>,
}

/// The operations.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// What the table is: schema, properties, protocol, files, rows, deletion vectors,
    /// indices.
    Describe {
        /// The table's URL.
        table: String,
        /// Describe this version instead of the newest.
        #[arg(long)]
        version: Option<i64>,
    },
    /// The commits the log holds, newest first.
    History {
        /// The table's URL.
        table: String,
        /// At most this many commits.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// The table's live data files.
    Files {
        /// The table's URL.
        table: String,
        /// The files of this version instead of the newest.
        #[arg(long)]
        version: Option<i64>,
    },
    /// Reads rows: printed as a table, or written as CSV, JSON lines or Parquet.
    Scan(ScanArgs),
    /// Runs SQL (DataFusion) over tables and catalogs.
    Sql(SqlArgs),
    /// Compacts small files and purges deletion vectors.
    Optimize {
        /// The table's URL.
        table: String,
        /// The size files are packed up to, in bytes.
        #[arg(long, value_name = "BYTES")]
        target_size: Option<u64>,
        /// Sort the rewritten rows by these columns (comma-separated).
        #[arg(long, value_delimiter = ',')]
        sort_by: Vec<String>,
        /// Only the files this SQL predicate may match (on partition columns).
        #[arg(long, value_name = "EXPR")]
        filter: Option<String>,
    },
    /// Deletes data files no version within the retention references.
    Vacuum {
        /// The table's URL.
        table: String,
        /// The retention in hours (default: the table's, one week unless set).
        #[arg(long, value_name = "HOURS")]
        retention_hours: Option<u64>,
        /// Only list what would be deleted.
        #[arg(long)]
        dry_run: bool,
        /// Allow a retention shorter than the table's.
        #[arg(long)]
        no_enforce_retention: bool,
    },
    /// Writes a checkpoint of the newest version now.
    Checkpoint {
        /// The table's URL.
        table: String,
    },
    /// Deletes log files (commits, checkpoints) older than the log retention.
    Cleanup {
        /// The retention in hours (default: the table's `delta.logRetentionDuration`, 30
        /// days unless set).
        #[arg(long, value_name = "HOURS")]
        retention_hours: Option<u64>,
        /// Only count what would be deleted.
        #[arg(long)]
        dry_run: bool,
        /// Allow a retention shorter than the table's.
        #[arg(long)]
        no_enforce_retention: bool,
        /// The table's URL.
        table: String,
    },
    /// Brings the table back to an earlier version, in one new commit.
    Restore {
        /// The table's URL.
        table: String,
        /// The version to restore.
        #[arg(
            long,
            conflicts_with = "to_timestamp",
            required_unless_present = "to_timestamp"
        )]
        to_version: Option<i64>,
        /// The newest version at or before this time: RFC 3339
        /// (`2026-11-29T10:00:00Z`) or milliseconds since the epoch.
        #[arg(long)]
        to_timestamp: Option<String>,
    },
    /// The table's indices.
    #[command(subcommand)]
    Index(IndexCommand),
    /// A catalog's namespaces and tables.
    #[command(subcommand)]
    Catalog(CatalogCommand),
}

/// `tarn scan`.
#[derive(Debug, Args)]
pub(crate) struct ScanArgs {
    /// The table's URL.
    pub(crate) table: String,
    /// Keep the rows this SQL predicate holds for (`country = 'NL' AND amount > 10`).
    #[arg(long, value_name = "EXPR")]
    pub(crate) filter: Option<String>,
    /// Only these columns (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub(crate) columns: Vec<String>,
    /// At most this many rows.
    #[arg(long)]
    pub(crate) limit: Option<usize>,
    /// Read this version instead of the newest.
    #[arg(long)]
    pub(crate) version: Option<i64>,
    /// How to write the rows (default: a table, or JSON lines with `--json`).
    #[arg(long, value_enum)]
    pub(crate) format: Option<Format>,
    /// Write to this file instead of standard output (needed for Parquet).
    #[arg(long, short = 'o', value_name = "PATH")]
    pub(crate) output: Option<std::path::PathBuf>,
}

/// `tarn sql`.
#[derive(Debug, Args)]
pub(crate) struct SqlArgs {
    /// The statement.
    pub(crate) query: String,
    /// A table to register, as `name=URL`; repeatable.
    #[arg(long = "table", value_name = "NAME=URL")]
    pub(crate) tables: Vec<String>,
    /// A catalog to register, as `name=URL` (its namespaces become schemas).
    #[arg(long = "catalog", value_name = "NAME=URL")]
    pub(crate) catalogs: Vec<String>,
    /// How to write the result (default: a table, or JSON lines with `--json`).
    #[arg(long, value_enum)]
    pub(crate) format: Option<Format>,
    /// Write to this file instead of standard output (needed for Parquet).
    #[arg(long, short = 'o', value_name = "PATH")]
    pub(crate) output: Option<std::path::PathBuf>,
}

/// How rows are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// A readable table.
    Table,
    /// CSV with a header.
    Csv,
    /// One JSON object per row.
    Json,
    /// A Parquet file.
    Parquet,
}

/// `tarn index`.
#[derive(Debug, Subcommand)]
pub(crate) enum IndexCommand {
    /// The table's indices and their coverage.
    List {
        /// The table's URL.
        table: String,
    },
    /// Builds an index on a column.
    Create {
        /// The table's URL.
        table: String,
        /// The column.
        column: String,
        /// The index's name (default `<column>_idx`).
        #[arg(long)]
        name: Option<String>,
        /// Its kind.
        #[arg(long, value_enum, default_value = "btree")]
        kind: IndexKindArg,
        /// Maintain it later (`optimize_indices`) instead of with each write.
        #[arg(long)]
        deferred: bool,
    },
    /// Drops an index.
    Drop {
        /// The table's URL.
        table: String,
        /// The index's name.
        name: String,
    },
}

/// Index kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum IndexKindArg {
    /// Sorted values: equality and ranges.
    Btree,
    /// Value to rows: equality on few distinct values.
    Bitmap,
    /// Full-text search (`text_match`).
    Fts,
}

/// `tarn catalog`.
#[derive(Debug, Subcommand)]
pub(crate) enum CatalogCommand {
    /// The namespaces and tables in a namespace (the root by default).
    List {
        /// The catalog's URL.
        catalog: String,
        /// The namespace, its names joined by dots (`sales.eu`).
        namespace: Option<String>,
    },
    /// A namespace or a table: its properties, and a table's location and version.
    Describe {
        /// The catalog's URL.
        catalog: String,
        /// The namespace's or table's id, dotted.
        id: String,
    },
    /// Creates a namespace (and the catalog, when the URL holds none).
    CreateNamespace {
        /// The catalog's URL.
        catalog: String,
        /// The namespace's id, dotted.
        id: String,
        /// Its description.
        #[arg(long)]
        description: Option<String>,
        /// A property, as `key=value`; repeatable.
        #[arg(long = "property", value_name = "KEY=VALUE")]
        properties: Vec<String>,
    },
    /// Drops a namespace or a table.
    Drop {
        /// The catalog's URL.
        catalog: String,
        /// The namespace's or table's id, dotted.
        id: String,
        /// Drop a namespace with everything in it.
        #[arg(long)]
        cascade: bool,
        /// Delete a dropped table's data too.
        #[arg(long)]
        purge: bool,
    },
}
