//! The table modes: many processes appending to one table or deleting rows of its one
//! file, reading it cold or warm, and the exactly-once torture run.

use std::io::Write;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tarn::expr::{col, lit};
use tarn::{ChangeStrategy, Error, Snapshot, Table};
use tarn_bench::catalog::error_kind;
use tarn_bench::concurrency::{Ack, OpRecord, summarise, table_header, table_row};

use crate::levels::{
    BoxError, common_start, json_sink, kill_loop, kinds, print_record, run_level, timed_span,
    unix_ms, wait_for_start, worker_command, worker_location, write_summary,
};
use crate::{Common, Levels, TortureArgs, WorkerArgs, WorkerKind};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("writer", DataType::Int64, false),
        Field::new("bucket", DataType::Int64, false),
    ]))
}

fn rows(
    writer: i64,
    ids: std::ops::Range<i64>,
    buckets: i64,
) -> Result<RecordBatch, arrow::error::ArrowError> {
    let ids: Vec<i64> = ids.collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(Int64Array::from(vec![writer; ids.len()])),
            Arc::new(Int64Array::from(
                ids.iter().map(|i| i % buckets.max(1)).collect::<Vec<_>>(),
            )),
        ],
    )
}

async fn create_table(url: &str, partitioned: bool) -> Result<Table, BoxError> {
    let mut create = Table::create(url).with_arrow_schema(&schema());
    if partitioned {
        create = create.with_partition_columns(["bucket"]);
    }
    Ok(create.execute().await?)
}

pub(crate) async fn run_worker(common: Common, worker: WorkerArgs) -> Result<(), BoxError> {
    let WorkerArgs {
        kind,
        id,
        ops,
        fault_rate,
        fault_seed,
        ack_log,
        start_at_ms,
        ..
    } = worker;
    let (location, counter) =
        worker_location(&common, fault_rate, fault_seed, id as u64 + fault_seed)?;
    let base_id = id as i64 * 1_000_000;
    match kind {
        WorkerKind::Write | WorkerKind::Delete => {
            let mut table = Table::open_at(location).await?;
            wait_for_start(start_at_ms).await;
            for n in 0..ops {
                counter.reset();
                let started = Instant::now();
                let result = if kind == WorkerKind::Write {
                    let batch = rows(id as i64, base_id + n * 10..base_id + n * 10 + 10, 1)?;
                    table.append([batch]).await.map(|o| o.commit)
                } else {
                    // Every other seeded row, so the file never loses all of them.
                    table
                        .delete(col("id").eq(lit(base_id + 2 * n)))
                        .with_strategy(ChangeStrategy::MergeOnRead)
                        .execute()
                        .await
                        .map(|o| o.commit)
                };
                let counts = counter.take();
                print_record(&OpRecord {
                    worker: id,
                    op: kind.name().into(),
                    ok: result.is_ok(),
                    latency_ms: started.elapsed().as_secs_f64() * 1e3,
                    attempts: result.as_ref().map_or(0, |c| c.attempts),
                    conflict: matches!(result, Err(Error::Conflict { .. })),
                    requests: counts.requests(),
                    round_trips: counts.critical_path,
                    requests_by_kind: kinds(&counts),
                    version: result.as_ref().map_or(-1, |c| c.version),
                    error: result.as_ref().err().map(ToString::to_string),
                    error_kind: result.as_ref().err().map(error_kind),
                    peak_rss_mib: None,
                    end_unix_ms: Some(unix_ms()),
                });
                if result.is_err() {
                    table.refresh().await?;
                }
            }
        }
        WorkerKind::ColdRead | WorkerKind::WarmRead => {
            let mut snapshot = Snapshot::builder(location.clone()).build().await?;
            wait_for_start(start_at_ms).await;
            for _ in 0..ops {
                counter.reset();
                let started = Instant::now();
                let result = if kind == WorkerKind::ColdRead {
                    Snapshot::builder(location.clone()).build().await
                } else {
                    snapshot.refresh().await
                };
                let counts = counter.take();
                print_record(&OpRecord {
                    worker: id,
                    op: kind.name().into(),
                    ok: result.is_ok(),
                    latency_ms: started.elapsed().as_secs_f64() * 1e3,
                    attempts: 0,
                    conflict: false,
                    requests: counts.requests(),
                    round_trips: counts.critical_path,
                    requests_by_kind: kinds(&counts),
                    version: result.as_ref().map_or(-1, Snapshot::version),
                    error: result.as_ref().err().map(ToString::to_string),
                    error_kind: result.as_ref().err().map(error_kind),
                    peak_rss_mib: None,
                    end_unix_ms: Some(unix_ms()),
                });
                if let Ok(s) = result {
                    snapshot = s;
                }
            }
        }
        WorkerKind::ExactlyOnce => {
            let log_path = ack_log.ok_or("an exactly-once writer needs --ack-log")?;
            let (done, mut log) = crate::levels::open_ack_log(&log_path)?;
            let app_id = format!("writer-{id}");
            let mut table = loop {
                match Table::open_at(location.clone()).await {
                    Ok(t) => break t,
                    Err(e) => {
                        eprintln!("worker {id}: open failed, retrying: {e}");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            };
            for n in (0..ops).filter(|n| !done.contains(n)) {
                loop {
                    let batch = rows(id as i64, base_id + n * 10..base_id + n * 10 + 5, 1)?;
                    match table
                        .write([batch])
                        .with_app_transaction(&app_id, n)
                        .execute()
                        .await
                    {
                        Ok(outcome) => {
                            let ack = Ack {
                                writer: id,
                                n,
                                txn_id: outcome.commit.txn_id.clone(),
                                version: outcome.commit.version,
                                skipped: outcome.skipped,
                            };
                            writeln!(log, "{}", serde_json::to_string(&ack)?)?;
                            log.sync_all()?;
                            break;
                        }
                        Err(e) => {
                            eprintln!("worker {id}: write {n} failed, retrying: {e}");
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            let _ = table.refresh().await;
                        }
                    }
                }
            }
        }
        other => return Err(format!("{} is not a table worker", other.name()).into()),
    }
    Ok(())
}

/// Runs one table mode at every level; `delete` seeds its tables with the inline
/// threshold `dv_inline_threshold`.
pub(crate) async fn levels(
    levels: Levels,
    kind: WorkerKind,
    dv_inline_threshold: Option<usize>,
) -> Result<(), BoxError> {
    let mut json = json_sink(&levels.common)?;
    println!(
        "{} (profile {}, {} ops per worker, {})",
        kind.name(),
        levels.common.profile,
        levels.ops,
        levels.common.url
    );
    println!("{}", table_header());
    for &workers in &levels.levels {
        let mut common = levels.common.clone();
        if matches!(kind, WorkerKind::Write | WorkerKind::Delete) {
            // A fresh table per level, so every level starts from the same log.
            common.url = format!(
                "{}/level-{workers}-{}",
                common.url.trim_end_matches('/'),
                uuid::Uuid::new_v4().simple()
            );
            if kind == WorkerKind::Delete {
                let threshold = dv_inline_threshold.unwrap_or(8192);
                seed_deletes(&common.url, workers, levels.ops, threshold).await?;
            } else {
                create_table(&common.url, false).await?;
            }
        } else if Table::open(&common.url).await.is_err() {
            return Err(format!(
                "no table at {}: run `tarn-concurrency seed` first",
                common.url
            )
            .into());
        }
        // Warm readers refresh while one writer commits, so refreshes have work to do.
        let writer = if kind == WorkerKind::WarmRead {
            Some(
                worker_command(&common, &template(WorkerKind::Write, 999, levels.ops))?
                    .stdout(Stdio::null())
                    .spawn()?,
            )
        } else {
            None
        };
        // Workers start their timed operations together, once all have opened the table.
        let mut timed = template(kind, 0, levels.ops);
        timed.start_at_ms = common_start(workers);
        let (records, wall) = run_level(&common, &timed, workers).await?;
        if let Some(mut w) = writer {
            w.wait().await?;
        }
        let summary = summarise(
            kind.name(),
            workers,
            &records,
            timed_span(&records, timed.start_at_ms, wall),
        );
        println!("{}", table_row(&summary));
        let mut extra = vec![
            ("profile", levels.common.profile.clone().into()),
            ("group_commit", (!levels.common.no_group_commit).into()),
            // Start-up included, as levels were timed before the common start.
            ("wall_seconds", wall.as_secs_f64().into()),
        ];
        if let Some(threshold) = dv_inline_threshold {
            extra.push(("dv_inline_threshold", threshold.into()));
        }
        write_summary(json.as_mut(), &summary, &extra)?;
    }
    Ok(())
}

/// A table of one file holding `2 * ops` rows for each of `workers` delete workers (ids
/// from `worker * 1,000,000`), with deletion vectors on and kept inline up to
/// `dv_inline_threshold` bytes (8 KiB by default, so the DVs of every delete stay in the
/// log; 0 puts every one in a DV file). Either way a group commit unites them.
async fn seed_deletes(
    url: &str,
    workers: usize,
    ops: i64,
    dv_inline_threshold: usize,
) -> Result<(), BoxError> {
    let mut table = Table::create(url)
        .with_arrow_schema(&schema())
        .with_property(tarn::protocol::properties::ENABLE_DELETION_VECTORS, "true")
        .with_property(
            tarn::protocol::properties::DV_INLINE_THRESHOLD,
            dv_inline_threshold.to_string(),
        )
        .execute()
        .await?;
    let batches = (0..workers as i64)
        .map(|w| rows(w, w * 1_000_000..w * 1_000_000 + 2 * ops, 1))
        .collect::<Result<Vec<_>, _>>()?;
    let batch = arrow::compute::concat_batches(&schema(), &batches)?;
    table.append([batch]).await?;
    Ok(())
}

/// Creates the table the read modes read.
pub(crate) async fn seed(common: Common, files: usize, commits: usize) -> Result<(), BoxError> {
    let started = Instant::now();
    let per_commit = files.div_ceil(commits.max(1)) as i64;
    let mut table = create_table(&common.url, true).await?;
    let mut next = 0i64;
    for _ in 0..commits {
        // One file per bucket: `per_commit` buckets of one row each.
        let outcome = table
            .append([rows(0, next..next + per_commit, per_commit)?])
            .await?;
        next += per_commit;
        // A short-lived process waits for its checkpoints, or exits before they land.
        if let Some(task) = outcome.commit.checkpoint {
            task.wait().await?;
        }
    }
    println!(
        "seeded {} with {} files in {} commits in {:.1} s",
        common.url,
        table.snapshot().file_count(),
        table.version(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A worker's arguments with no faults and no catalog operation.
fn template(kind: WorkerKind, id: usize, ops: i64) -> WorkerArgs {
    WorkerArgs {
        kind,
        id,
        ops,
        fault_rate: 0.0,
        fault_seed: 0,
        ack_log: None,
        op: None,
        run: String::new(),
        entries: 0,
        start_at_ms: 0,
    }
}

/// Exactly-once writers with injected faults, killed and restarted at random.
pub(crate) async fn torture(torture: TortureArgs, commits: i64) -> Result<(), BoxError> {
    let common = &torture.common;
    std::fs::create_dir_all(&torture.ack_dir)?;
    if Table::open(&common.url).await.is_err() {
        create_table(&common.url, false).await?;
    }
    let started = Instant::now();
    let spawn = |id: usize, restart: u64| -> Result<tokio::process::Child, BoxError> {
        let mut worker = template(WorkerKind::ExactlyOnce, id, commits);
        worker.fault_rate = torture.fault_rate;
        worker.fault_seed = torture.seed * 1000 + id as u64 * 100 + restart;
        worker.ack_log = Some(torture.ack_dir.join(format!("writer-{id}.jsonl")));
        let mut command = worker_command(common, &worker)?;
        command.stdout(Stdio::null());
        Ok(command.spawn()?)
    };
    let kills = kill_loop(&torture, spawn).await?;
    println!(
        "{}",
        serde_json::json!({
            "writers": torture.writers,
            "commits_per_writer": commits,
            "fault_rate": torture.fault_rate,
            "kills": kills,
            "seconds": started.elapsed().as_secs_f64(),
        })
    );
    Ok(())
}
