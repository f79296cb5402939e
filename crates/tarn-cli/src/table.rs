//! The commands on one table: describe, history, files, scan, optimize, vacuum,
//! checkpoint, cleanup, restore and indices, each a call of Tarn's API printed readably
//! or as JSON.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tarn::{IndexKind, IndexMode, StoreOptions, Table};

use crate::args::{IndexCommand, IndexKindArg, ScanArgs};
use crate::error::{CliError, Result};
use crate::output::{Output, time_text, write_batches};
use crate::progress::Spinner;

/// Opens the table at `url`, at `version` when given.
pub(crate) async fn open(url: &str, options: &StoreOptions, version: Option<i64>) -> Result<Table> {
    let mut table = Table::open_with_options(url, options).await?;
    if let Some(version) = version {
        table.load_version(version).await?;
    }
    Ok(table)
}

/// `tarn describe`.
pub(crate) async fn describe(
    out: &Output,
    url: &str,
    options: &StoreOptions,
    version: Option<i64>,
) -> Result<()> {
    let table = open(url, options, version).await?;
    let d = table.describe()?;
    let protocol = &d.protocol;
    let features = |f: &Option<Vec<String>>| f.clone().unwrap_or_default();
    let indices: Vec<Value> = d
        .indices
        .iter()
        .map(|i| {
            json!({
                "name": i.name,
                "column": i.definition.column,
                "kind": i.definition.kind.name(),
                "mode": format!("{:?}", i.definition.mode).to_lowercase(),
                "segments": i.segments,
                "files_covered": i.files_covered,
                "files_total": i.files_total,
                "bytes": i.bytes,
            })
        })
        .collect();
    let schema: Value = serde_json::from_str(&d.schema.to_json()).unwrap_or(Value::Null);
    let value = json!({
        "location": d.location,
        "version": d.version,
        "timestamp": time_text(d.timestamp_ms),
        "timestamp_ms": d.timestamp_ms,
        "id": d.id,
        "name": d.name,
        "description": d.description,
        "created_time_ms": d.created_time,
        "schema": schema,
        "partition_columns": d.partition_columns,
        "properties": d.properties,
        "min_reader_version": protocol.min_reader_version,
        "min_writer_version": protocol.min_writer_version,
        "reader_features": features(&protocol.reader_features),
        "writer_features": features(&protocol.writer_features),
        "files": d.files,
        "bytes": d.bytes,
        "rows": d.rows,
        "files_with_deletion_vectors": d.files_with_deletion_vectors,
        "deleted_rows": d.deleted_rows,
        "tombstones": d.tombstones,
        "indices": indices,
    });
    let columns: Vec<String> = d
        .schema
        .fields
        .iter()
        .map(|f| {
            let null = if f.nullable { "" } else { " not null" };
            format!("{} {}{null}", f.name, f.data_type)
        })
        .collect();
    let list = |items: Vec<String>| {
        if items.is_empty() {
            "-".to_string()
        } else {
            items.join(", ")
        }
    };
    let properties: Vec<String> = d
        .properties
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let index_lines: Vec<String> = d
        .indices
        .iter()
        .map(|i| {
            format!(
                "{} ({} on {}, {} of {} files)",
                i.name,
                i.definition.kind.name(),
                i.definition.column,
                i.files_covered,
                i.files_total
            )
        })
        .collect();
    out.record(
        &value,
        &[
            ("location", d.location.clone()),
            ("version", d.version.to_string()),
            ("timestamp", time_text(d.timestamp_ms)),
            ("id", d.id.clone()),
            ("columns", columns.join("\n")),
            ("partitioned by", list(d.partition_columns.clone())),
            (
                "properties",
                if properties.is_empty() {
                    "-".into()
                } else {
                    properties.join("\n")
                },
            ),
            (
                "protocol",
                format!(
                    "reader {} writer {}",
                    protocol.min_reader_version, protocol.min_writer_version
                ),
            ),
            ("features", list(features(&protocol.writer_features))),
            ("files", d.files.to_string()),
            ("bytes", d.bytes.to_string()),
            ("rows", d.rows.map_or("unknown".into(), |r| r.to_string())),
            (
                "deletion vectors",
                format!(
                    "{} files, {} rows deleted",
                    d.files_with_deletion_vectors, d.deleted_rows
                ),
            ),
            ("tombstones", d.tombstones.to_string()),
            (
                "indices",
                if index_lines.is_empty() {
                    "-".into()
                } else {
                    index_lines.join("\n")
                },
            ),
        ],
    )
}

/// `tarn history`.
pub(crate) async fn history(
    out: &Output,
    url: &str,
    options: &StoreOptions,
    limit: Option<usize>,
) -> Result<()> {
    let table = open(url, options, None).await?;
    let history = table.history(limit).await?;
    let value: Vec<Value> = history
        .iter()
        .map(|c| {
            json!({
                "version": c.version,
                "timestamp": time_text(c.timestamp_ms),
                "timestamp_ms": c.timestamp_ms,
                "operation": c.operation,
                "parameters": c.parameters,
                "metrics": c.metrics,
                "engine_info": c.engine_info,
                "txn_id": c.txn_id,
                "read_version": c.read_version,
                "isolation_level": c.isolation_level,
                "is_blind_append": c.is_blind_append,
                "user_metadata": c.user_metadata,
                "group_members": c.group_members,
                "app_transactions": c.app_transactions.iter()
                    .map(|t| json!({"app_id": t.app_id, "version": t.version}))
                    .collect::<Vec<_>>(),
            })
        })
        .collect();
    let rows: Vec<Vec<String>> = history
        .iter()
        .map(|c| {
            let parameters: Vec<String> = c
                .parameters
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            vec![
                c.version.to_string(),
                time_text(c.timestamp_ms),
                c.operation.clone().unwrap_or_default(),
                c.engine_info.clone().unwrap_or_default(),
                parameters.join(" "),
            ]
        })
        .collect();
    out.rows(
        &Value::from(value),
        &["version", "timestamp", "operation", "engine", "parameters"],
        &rows,
    )
}

/// `tarn files`.
pub(crate) async fn files(
    out: &Output,
    url: &str,
    options: &StoreOptions,
    version: Option<i64>,
) -> Result<()> {
    let table = open(url, options, version).await?;
    let batch = table.snapshot().files_batch()?;
    if out.json() {
        let mut writer = arrow::json::ArrayWriter::new(Vec::new());
        writer
            .write(&batch)
            .and_then(|()| writer.finish())
            .map_err(|e| CliError::Output {
                what: "the files as JSON".into(),
                reason: e.to_string(),
            })?;
        let text = writer.into_inner();
        let value: Value = if text.is_empty() {
            Value::Array(vec![])
        } else {
            serde_json::from_slice(&text).map_err(|e| CliError::Output {
                what: "the files as JSON".into(),
                reason: e.to_string(),
            })?
        };
        return crate::output::print_json(&value);
    }
    // The statistics JSON is too wide to read in a table.
    let keep: Vec<usize> = (0..batch.num_columns())
        .filter(|i| batch.schema().field(*i).name() != "stats")
        .collect();
    let readable = batch.project(&keep).map_err(|e| CliError::Output {
        what: "the files".into(),
        reason: e.to_string(),
    })?;
    let schema = readable.schema();
    let stream = futures::stream::iter([Ok::<_, CliError>(readable)]);
    write_batches(schema, stream, crate::args::Format::Table, None).await?;
    Ok(())
}

/// `tarn scan`.
pub(crate) async fn scan(out: &Output, options: &StoreOptions, args: ScanArgs) -> Result<()> {
    let table = open(&args.table, options, args.version).await?;
    let mut scan = table.scan();
    if let Some(filter) = &args.filter {
        scan = scan.filter(tarn::expr::parse_sql(filter)?);
    }
    if !args.columns.is_empty() {
        scan = scan.select(args.columns.clone());
    }
    if let Some(limit) = args.limit {
        scan = scan.with_limit(limit);
    }
    let format = out.row_format(args.format);
    let _spinner = args
        .output
        .as_ref()
        .map(|p| Spinner::start(out, format!("writing {}", p.display())));
    let mut stream = scan.execute().await?;
    // The first batch names the columns as read; with none, the table's do.
    let first = stream.next().await.transpose()?;
    let schema = match &first {
        Some(batch) => batch.schema(),
        None => {
            let all = table.snapshot().arrow_schema();
            let kept: Vec<usize> = (0..all.fields().len())
                .filter(|i| args.columns.is_empty() || args.columns.contains(all.field(*i).name()))
                .collect();
            std::sync::Arc::new(all.project(&kept).map_err(|e| CliError::Output {
                what: "the scan's schema".into(),
                reason: e.to_string(),
            })?)
        }
    };
    let batches = futures::stream::iter(first.map(Ok)).chain(stream);
    let rows = write_batches(schema, batches.boxed(), format, args.output.as_deref()).await?;
    if let Some(path) = &args.output
        && !out.json()
    {
        eprintln!("{rows} rows written to {}", path.display());
    }
    Ok(())
}

/// `tarn optimize`.
pub(crate) async fn optimize(
    out: &Output,
    url: &str,
    options: &StoreOptions,
    target_size: Option<u64>,
    sort_by: Vec<String>,
    filter: Option<String>,
) -> Result<()> {
    let mut table = open(url, options, None).await?;
    let mut builder = table.optimize();
    if let Some(bytes) = target_size {
        builder = builder.with_target_file_size(bytes);
    }
    if !sort_by.is_empty() {
        builder = builder.with_sort_by(sort_by);
    }
    if let Some(filter) = filter {
        builder = builder.filter(tarn::expr::parse_sql(&filter)?);
    }
    let spinner = Spinner::start(out, "optimizing");
    let o = builder.execute().await?;
    drop(spinner);
    let committed = o.commit.attempts > 0;
    out.record(
        &json!({
            "version": o.commit.version,
            "committed": committed,
            "files_removed": o.files_removed,
            "files_added": o.files_added,
            "partitions_optimized": o.partitions_optimized,
            "deletion_vectors_purged": o.deletion_vectors_purged,
            "rows": o.rows,
            "bytes_removed": o.bytes_removed,
            "bytes_added": o.bytes_added,
            "duration_ms": o.duration.as_millis() as u64,
        }),
        &[
            (
                "version",
                if committed {
                    o.commit.version.to_string()
                } else {
                    format!("{} (nothing to rewrite)", o.commit.version)
                },
            ),
            ("files removed", o.files_removed.to_string()),
            ("files added", o.files_added.to_string()),
            (
                "deletion vectors purged",
                o.deletion_vectors_purged.to_string(),
            ),
            ("rows rewritten", o.rows.to_string()),
            ("bytes", format!("{} -> {}", o.bytes_removed, o.bytes_added)),
        ],
    )
}

/// `tarn vacuum`.
pub(crate) async fn vacuum(
    out: &Output,
    url: &str,
    options: &StoreOptions,
    retention_hours: Option<u64>,
    dry_run: bool,
    enforce_retention: bool,
) -> Result<()> {
    let table = open(url, options, None).await?;
    let mut builder = table
        .vacuum()
        .with_dry_run(dry_run)
        .with_enforce_retention(enforce_retention);
    if let Some(hours) = retention_hours {
        builder = builder.with_retention(hours_to_duration(hours)?);
    }
    let spinner = Spinner::start(out, "vacuuming");
    let v = builder.execute().await?;
    drop(spinner);
    out.record(
        &json!({
            "dry_run": v.dry_run,
            "files": v.files,
            "bytes": v.bytes,
            "retention_hours": v.retention.as_secs() / 3600,
        }),
        &[
            (
                if v.dry_run { "would delete" } else { "deleted" },
                format!("{} files, {} bytes", v.files.len(), v.bytes),
            ),
            (
                "retention",
                format!("{} hours", v.retention.as_secs() / 3600),
            ),
            (
                "files",
                if v.files.is_empty() {
                    "-".into()
                } else {
                    v.files.join("\n")
                },
            ),
        ],
    )
}

/// `tarn checkpoint`.
pub(crate) async fn checkpoint(out: &Output, url: &str, options: &StoreOptions) -> Result<()> {
    let table = open(url, options, None).await?;
    let written = table.checkpoint().await?;
    out.record(
        &json!({ "version": table.version(), "written": format!("{written:?}") }),
        &[("checkpoint of version", table.version().to_string())],
    )
}

/// `tarn cleanup`.
pub(crate) async fn cleanup(
    out: &Output,
    url: &str,
    options: &StoreOptions,
    retention_hours: Option<u64>,
    dry_run: bool,
    enforce_retention: bool,
) -> Result<()> {
    let table = open(url, options, None).await?;
    let mut builder = table
        .cleanup_log()
        .with_dry_run(dry_run)
        .with_enforce_retention(enforce_retention);
    if let Some(hours) = retention_hours {
        builder = builder.with_retention(hours_to_duration(hours)?);
    }
    let c = builder.execute().await?;
    out.record(
        &json!({
            "dry_run": c.dry_run,
            "oldest_version": c.oldest_version,
            "commits": c.commits,
            "checkpoints": c.checkpoints,
            "other_files": c.other_files,
            "proposals": c.proposals,
            "claims": c.claims,
            "retention_hours": c.retention.as_secs() / 3600,
        }),
        &[
            (
                if c.dry_run { "would delete" } else { "deleted" },
                format!(
                    "{} commits, {} checkpoint files, {} other log files, {} proposals, {} claims",
                    c.commits, c.checkpoints, c.other_files, c.proposals, c.claims
                ),
            ),
            (
                "oldest version kept",
                c.oldest_version
                    .map_or("all kept".into(), |v| v.to_string()),
            ),
            (
                "retention",
                format!("{} hours", c.retention.as_secs() / 3600),
            ),
        ],
    )
}

/// `tarn restore`.
pub(crate) async fn restore(
    out: &Output,
    url: &str,
    options: &StoreOptions,
    to_version: Option<i64>,
    to_timestamp: Option<String>,
) -> Result<()> {
    let mut table = open(url, options, None).await?;
    let builder = match (to_version, to_timestamp) {
        (Some(v), _) => table.restore().to_version(v),
        (None, Some(text)) => table.restore().to_timestamp(parse_time(&text)?),
        (None, None) => {
            return Err(CliError::Usage(
                "give --to-version or --to-timestamp".into(),
            ));
        }
    };
    let spinner = Spinner::start(out, "restoring");
    let r = builder.execute().await?;
    drop(spinner);
    out.record(
        &json!({
            "version": r.commit.version,
            "restored_version": r.restored_version,
            "files_added": r.files_added,
            "bytes_added": r.bytes_added,
            "files_removed": r.files_removed,
            "bytes_removed": r.bytes_removed,
            "files_after": r.files_after,
            "bytes_after": r.bytes_after,
        }),
        &[
            ("version", r.commit.version.to_string()),
            (
                "restored",
                format!("the state of version {}", r.restored_version),
            ),
            (
                "files added back",
                format!("{} ({} bytes)", r.files_added, r.bytes_added),
            ),
            (
                "files removed",
                format!("{} ({} bytes)", r.files_removed, r.bytes_removed),
            ),
            (
                "files now",
                format!("{} ({} bytes)", r.files_after, r.bytes_after),
            ),
        ],
    )
}

/// `hours` as a duration.
///
/// Fails with [`CliError::Usage`] when it does not fit.
fn hours_to_duration(hours: u64) -> Result<Duration> {
    hours
        .checked_mul(3600)
        .map(Duration::from_secs)
        .ok_or_else(|| CliError::Usage(format!("{hours} hours is too long a retention")))
}

/// A time as RFC 3339 or milliseconds since the epoch.
fn parse_time(text: &str) -> Result<i64> {
    if let Ok(ms) = text.trim().parse::<i64>() {
        return Ok(ms);
    }
    chrono::DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.timestamp_millis())
        .map_err(|e| {
            CliError::Usage(format!(
                "--to-timestamp {text:?} is neither RFC 3339 nor milliseconds: {e}"
            ))
        })
}

/// `tarn index`.
pub(crate) async fn index(
    out: &Output,
    options: &StoreOptions,
    command: IndexCommand,
) -> Result<()> {
    match command {
        IndexCommand::List { table } => {
            let table = open(&table, options, None).await?;
            let indices = table.indices()?;
            let value: Vec<Value> = indices
                .iter()
                .map(|i| {
                    json!({
                        "name": i.name,
                        "column": i.definition.column,
                        "kind": i.definition.kind.name(),
                        "mode": format!("{:?}", i.definition.mode).to_lowercase(),
                        "segments": i.segments,
                        "files_covered": i.files_covered,
                        "files_total": i.files_total,
                        "rows": i.rows,
                        "bytes": i.bytes,
                    })
                })
                .collect();
            let rows: Vec<Vec<String>> = indices
                .iter()
                .map(|i| {
                    vec![
                        i.name.clone(),
                        i.definition.column.clone(),
                        i.definition.kind.name().to_string(),
                        format!("{}/{}", i.files_covered, i.files_total),
                        i.bytes.to_string(),
                    ]
                })
                .collect();
            out.rows(
                &Value::from(value),
                &["name", "column", "kind", "files covered", "bytes"],
                &rows,
            )
        }
        IndexCommand::Create {
            table,
            column,
            name,
            kind,
            deferred,
        } => {
            let mut table = open(&table, options, None).await?;
            let kind = match kind {
                IndexKindArg::Btree => IndexKind::BTree,
                IndexKindArg::Bitmap => IndexKind::Bitmap,
                IndexKindArg::Fts => IndexKind::FullText,
            };
            let mode = if deferred {
                IndexMode::Deferred
            } else {
                IndexMode::Inline
            };
            let mut builder = table.create_index(column).with_kind(kind).with_mode(mode);
            if let Some(name) = name {
                builder = builder.with_name(name);
            }
            let spinner = Spinner::start(out, "building the index");
            let info = builder.execute().await?;
            drop(spinner);
            out.record(
                &json!({
                    "version": table.version(),
                    "name": info.name,
                    "files_covered": info.files_covered,
                }),
                &[
                    ("created", info.name.clone()),
                    ("version", table.version().to_string()),
                    ("files covered", info.files_covered.to_string()),
                ],
            )
        }
        IndexCommand::Drop { table, name } => {
            let mut table = open(&table, options, None).await?;
            let commit = table.drop_index(&name).await?;
            out.record(
                &json!({ "version": commit.version, "dropped": name }),
                &[
                    ("dropped", name.clone()),
                    ("version", commit.version.to_string()),
                ],
            )
        }
    }
}
