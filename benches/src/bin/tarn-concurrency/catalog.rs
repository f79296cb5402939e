//! The catalog modes: seeding a catalog, writers and readers at levels of concurrency
//! (each worker a process with its own catalog handle), and the torture run of catalog
//! writers with faults and kills.

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use arrow::datatypes::{DataType, Field, Schema};
use clap::ValueEnum;
use object_store::ObjectStoreExt;
use object_store::path::Path;
use tarn::StoreLocation;
use tarn_bench::catalog::{Shape, error_kind, prepare, run, targets};
use tarn_bench::concurrency::{Ack, OpRecord, summarise, table_header, table_row};
use tarn_bench::memory;
use tarn_catalog::{Catalog, CatalogOptions, Layout, ObjectId, ObjectMetadata};

use crate::levels::{
    BoxError, common_start, json_sink, kill_loop, kinds, print_record, run_level, timed_span,
    unix_ms, wait_for_start, worker_command, worker_location, write_summary,
};
use crate::{CatalogLevels, Common, TortureArgs, WorkerArgs, WorkerKind};

/// The object beside `__manifest` recording what `catalog-seed` made.
const SEED_INFO: &str = "tarn-bench-catalog.json";

/// `--layout`.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub(crate) enum LayoutArg {
    Paged,
    FullRewrite,
}

impl LayoutArg {
    pub(crate) fn layout(self, rows_per_page: usize) -> Layout {
        match self {
            Self::Paged => Layout::Paged { rows_per_page },
            Self::FullRewrite => Layout::FullRewrite,
        }
    }
}

/// `--indices on|off`.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub(crate) enum Switch {
    On,
    Off,
}

fn layout_name(layout: Layout) -> String {
    match layout {
        Layout::FullRewrite => "full-rewrite".into(),
        Layout::Paged { rows_per_page } => format!("paged-{rows_per_page}"),
    }
}

fn seed_info_path(location: &StoreLocation) -> Path {
    location.root().clone().join(SEED_INFO)
}

/// Creates and fills a catalog, then records its shape for the other modes.
pub(crate) async fn seed(
    common: Common,
    entries: usize,
    layout: Layout,
    indices: Switch,
) -> Result<(), BoxError> {
    let location = tarn_store::open(&common.url)?;
    if tarn::Table::open(&format!("{}/__manifest", common.url.trim_end_matches('/')))
        .await
        .is_ok()
    {
        return Err(format!(
            "a catalog exists at {} already",
            tarn_store::redact_url(&common.url)
        )
        .into());
    }
    let catalog = Catalog::open_at(
        location.clone(),
        CatalogOptions {
            layout,
            indices: indices == Switch::On,
            ..CatalogOptions::default()
        },
    )
    .await?;
    let shape = Shape::of(entries);
    let started = Instant::now();
    let seeded = tarn_bench::catalog::seed(&catalog, shape).await?;
    let seeding = started.elapsed();
    // One segment per index, as a catalog that has been optimized would have.
    let mut manifest =
        tarn::Table::open(&format!("{}/__manifest", common.url.trim_end_matches('/'))).await?;
    if indices == Switch::On {
        manifest.optimize_indices().await?;
        manifest.refresh().await?;
    }
    // A checkpoint of the seeded version, as a long-lived writer would have left: the
    // background one a commit starts is lost when this process exits.
    manifest.checkpoint().await?;
    let snapshot = manifest.snapshot();
    let bytes: i64 = snapshot.files().map(|a| a.size).sum();
    let info = serde_json::json!({
        "entries": seeded,
        "layout": layout_name(layout),
        "indices": indices == Switch::On,
        "namespaces": shape.namespaces,
        "tables_per_namespace": shape.tables_per_namespace,
        "manifest_files": snapshot.file_count(),
        "manifest_bytes": bytes,
        "manifest_version": snapshot.version(),
        "seed_seconds": seeding.as_secs_f64(),
    });
    location
        .store()
        .put(&seed_info_path(&location), info.to_string().into())
        .await?;
    println!("{info}");
    Ok(())
}

async fn seed_info(common: &Common) -> Result<serde_json::Value, BoxError> {
    let location = tarn_store::open(&common.url)?;
    let body = location
        .store()
        .get(&seed_info_path(&location))
        .await
        .map_err(|e| {
            format!(
                "no seeded catalog at {} ({e}): run `tarn-concurrency catalog-seed` first",
                common.url
            )
        })?
        .bytes()
        .await?;
    Ok(serde_json::from_slice(&body)?)
}

/// Runs one catalog mode and operation at every level.
pub(crate) async fn levels(l: CatalogLevels, kind: WorkerKind) -> Result<(), BoxError> {
    let (levels, op, level_ops) = (l.levels, l.op, l.level_ops);
    let common = &levels.common;
    let info = seed_info(common).await?;
    let entries = info["entries"].as_u64().unwrap_or(0) as usize;
    let mut json = json_sink(common)?;
    println!(
        "{} {} (profile {}, {} entries, layout {}, indices {}, {}, {})",
        kind.name(),
        op,
        common.profile,
        entries,
        info["layout"],
        info["indices"],
        level_ops.map_or(format!("{} ops per worker", levels.ops), |n| format!(
            "{n} ops per level"
        )),
        common.url
    );
    println!("{}", table_header());
    for &workers in &levels.levels {
        let ops = level_ops.map_or(levels.ops, |total| {
            (total.max(0) as usize).div_ceil(workers.max(1)).max(2) as i64
        });
        let mut template = WorkerArgs {
            kind,
            id: 0,
            ops,
            fault_rate: 0.0,
            fault_seed: 0,
            ack_log: None,
            op: Some(op),
            run: format!("{:06x}", uuid::Uuid::new_v4().as_u128() & 0xff_ffff),
            entries,
            start_at_ms: 0,
        };
        // What the workers will act on exists before any of them starts.
        let catalog = open(tarn_store::open(&common.url)?).await?;
        let mut all = Vec::new();
        for id in 0..workers {
            all.extend(targets(
                op,
                Shape::of(entries),
                &template.run,
                id,
                ops as usize,
            )?);
        }
        prepare(&catalog, op, &all).await?;
        // Workers start their timed operations together, once all have opened.
        template.start_at_ms = common_start(workers);
        let (records, wall) = run_level(common, &template, workers).await?;
        let span = timed_span(&records, template.start_at_ms, wall);
        let summary = summarise(&format!("{op}"), workers, &records, span);
        println!("{}", table_row(&summary));
        write_summary(
            json.as_mut(),
            &summary,
            &[
                ("kind", kind.name().into()),
                ("profile", common.profile.clone().into()),
                ("entries", entries.into()),
                ("layout", info["layout"].clone()),
                ("indices", info["indices"].clone()),
                ("group_commit", (!common.no_group_commit).into()),
            ],
        )?;
    }
    Ok(())
}

async fn open(location: StoreLocation) -> Result<Catalog, tarn_catalog::Error> {
    Catalog::open_at(location, CatalogOptions::default()).await
}

/// One catalog worker process.
pub(crate) async fn run_worker(common: Common, worker: WorkerArgs) -> Result<(), BoxError> {
    let (location, counter) = worker_location(
        &common,
        worker.fault_rate,
        worker.fault_seed,
        worker.id as u64 + worker.fault_seed,
    )?;
    if worker.kind == WorkerKind::CatalogExactlyOnce {
        return exactly_once(location, &worker).await;
    }
    let op = worker.op.ok_or("a catalog worker needs --op")?;
    let shape = Shape::of(worker.entries);
    let targets = targets(
        op,
        shape,
        &worker.run,
        worker.id,
        worker.ops.max(0) as usize,
    )?;
    let catalog = open(location.clone()).await?;
    if worker.kind == WorkerKind::CatalogWrite {
        // A writer's handle is open before its timed mutations: the manifest is loaded
        // (the open on its own is what `catalog-cold-read --op open` measures).
        catalog.snapshot().await?;
    }
    if worker.kind == WorkerKind::CatalogWarmRead
        && let Some(first) = targets.first()
    {
        // Warm: the pages the reads need are loaded once beforehand.
        run(&catalog, op, first).await?;
    }
    wait_for_start(worker.start_at_ms).await;
    for target in &targets {
        counter.reset();
        memory::reset_peak();
        let before = catalog.stats();
        let started = Instant::now();
        let result = if worker.kind == WorkerKind::CatalogColdRead {
            match open(location.clone()).await {
                Ok(fresh) => run(&fresh, op, target).await,
                Err(e) => Err(e),
            }
        } else {
            run(&catalog, op, target).await
        };
        let latency_ms = started.elapsed().as_secs_f64() * 1e3;
        let counts = counter.take();
        let after = catalog.stats();
        let conflict = matches!(
            &result,
            Err(tarn_catalog::Error::Table(tarn::Error::Conflict { .. }))
        );
        print_record(&OpRecord {
            worker: worker.id,
            op: op.name().into(),
            ok: result.is_ok(),
            latency_ms,
            attempts: u32::try_from(1 + after.reruns - before.reruns).unwrap_or(u32::MAX),
            conflict,
            requests: counts.requests(),
            round_trips: counts.critical_path,
            requests_by_kind: kinds(&counts),
            version: -1,
            error: result.as_ref().err().map(ToString::to_string),
            error_kind: result.as_ref().err().map(error_kind),
            peak_rss_mib: (worker.kind == WorkerKind::CatalogColdRead)
                .then(|| memory::peak_rss() as f64 / (1024.0 * 1024.0)),
            end_unix_ms: Some(unix_ms()),
        });
    }
    Ok(())
}

/// The names of writer `writer`'s step `n`: the table created, and its name after the
/// rename.
pub(crate) fn step_names(
    writer: usize,
    n: i64,
) -> Result<(ObjectId, ObjectId), tarn_catalog::Error> {
    Ok((
        ObjectId::parse(&format!("w{writer}$t{n}"))?,
        ObjectId::parse(&format!("w{writer}$r{n}"))?,
    ))
}

/// Step `n` of a torture writer: create a table, rename it, and every fourth step drop
/// it. Safe to run again after a kill or a failure at any point, because the writer is
/// fenced before every run of a step after the first (a restart fences when it opens
/// the catalog, a failure fences before the retry): no manifest change an earlier
/// attempt left pending as a group-commit proposal can land after the step has looked.
async fn step(catalog: &Catalog, writer: usize, n: i64) -> Result<(), tarn_catalog::Error> {
    let (created, renamed) = step_names(writer, n)?;
    if !catalog.table_exists(&renamed).await? {
        let schema = Schema::new(vec![Field::new("id", DataType::Int64, false)]);
        match catalog
            .create_table(&created, &schema, Vec::new(), ObjectMetadata::default())
            .await
        {
            Ok(_) | Err(tarn_catalog::Error::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
        catalog.rename_table(&created, &renamed).await?;
    }
    if n % 4 == 3 {
        catalog
            .drop_table(&renamed, tarn_catalog::DropData::Keep)
            .await?;
    }
    Ok(())
}

/// A torture writer: its steps in order, each acknowledged in its log once done, with
/// failures retried and the steps already acknowledged skipped after a restart.
async fn exactly_once(location: StoreLocation, worker: &WorkerArgs) -> Result<(), BoxError> {
    let id = worker.id;
    let log_path = worker
        .ack_log
        .clone()
        .ok_or("a catalog torture writer needs --ack-log")?;
    let (done, mut log) = crate::levels::open_ack_log(&log_path)?;
    // The writer's id outlives its process: opening fences every earlier incarnation.
    let options = CatalogOptions {
        writer: Some(format!("catalog-torture-{id}")),
        ..CatalogOptions::default()
    };
    let catalog = loop {
        match Catalog::open_at(location.clone(), options.clone()).await {
            Ok(c) => break c,
            Err(e) => {
                eprintln!("catalog writer {id}: open failed, retrying: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let namespace = ObjectId::parse(&format!("w{id}"))?;
    while let Err(e) = catalog
        .create_namespace(
            &namespace,
            ObjectMetadata::default(),
            tarn_catalog::IfExists::Ignore,
        )
        .await
    {
        eprintln!("catalog writer {id}: namespace failed, retrying: {e}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for n in (0..worker.ops).filter(|n| !done.contains(n)) {
        while let Err(e) = step(&catalog, id, n).await {
            eprintln!("catalog writer {id}: step {n} failed, fencing and retrying: {e}");
            // What the failed attempt left pending lands before the fence or never.
            while let Err(e) = catalog.fence_writer().await {
                eprintln!("catalog writer {id}: fence failed, retrying: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        let ack = Ack {
            writer: id,
            n,
            txn_id: String::new(),
            version: -1,
            skipped: false,
        };
        writeln!(log, "{}", serde_json::to_string(&ack)?)?;
        log.sync_all()?;
    }
    Ok(())
}

/// Catalog writers with injected faults, killed and restarted at random.
pub(crate) async fn torture(torture: TortureArgs, ops: i64) -> Result<(), BoxError> {
    let common = &torture.common;
    std::fs::create_dir_all(&torture.ack_dir)?;
    // The catalog exists before the writers start, so they race on its contents.
    Catalog::open(&common.url, CatalogOptions::default())
        .await?
        .snapshot()
        .await?;
    let started = Instant::now();
    let spawn = |id: usize, restart: u64| -> Result<tokio::process::Child, BoxError> {
        let worker = WorkerArgs {
            kind: WorkerKind::CatalogExactlyOnce,
            id,
            ops,
            fault_rate: torture.fault_rate,
            fault_seed: torture.seed * 1000 + id as u64 * 100 + restart,
            ack_log: Some(torture.ack_dir.join(format!("writer-{id}.jsonl"))),
            op: None,
            run: String::new(),
            entries: 0,
            start_at_ms: 0,
        };
        let mut command = worker_command(common, &worker)?;
        command.stdout(Stdio::null());
        Ok(command.spawn()?)
    };
    let kills = kill_loop(&torture, spawn).await?;
    println!(
        "{}",
        serde_json::json!({
            "writers": torture.writers,
            "steps_per_writer": ops,
            "fault_rate": torture.fault_rate,
            "kills": kills,
            "seconds": started.elapsed().as_secs_f64(),
        })
    );
    Ok(())
}
