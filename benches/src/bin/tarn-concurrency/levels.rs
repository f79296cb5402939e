//! The coordinator's plumbing, shared by the table and catalog modes: the store a worker
//! sees (faults, latency, counting), starting worker processes and collecting their
//! records, the JSON lines, and the kill loop of the torture runs.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use object_store::ObjectStore;
use tarn::StoreLocation;
use tarn_bench::catalog::Rng;
use tarn_bench::concurrency::{LevelSummary, OpRecord};
use tarn_store::{
    CountingStore, Fault, FaultOp, FaultRule, FaultStore, HedgePolicy, HedgedStore, LatencyProfile,
    LatencyStore, RequestCounter, RequestCounts,
};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::{Common, TortureArgs, WorkerArgs};

/// Errors of the coordinator and its workers.
pub(crate) type BoxError = Box<dyn std::error::Error>;

/// Opens an exactly-once writer's acknowledgement log for appending, with the step
/// numbers it already holds (a restarted writer skips them).
///
/// Fails when the log cannot be opened.
pub(crate) fn open_ack_log(
    path: &std::path::Path,
) -> Result<(std::collections::BTreeSet<i64>, std::fs::File), BoxError> {
    let done = std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<tarn_bench::concurrency::Ack>(l).ok())
        .map(|a| a.n)
        .collect();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    Ok((done, log))
}

/// The location as a worker sees it: faults, then latency, then counting, then (over a
/// replayed profile) the hedging an S3 store does.
pub(crate) fn worker_location(
    common: &Common,
    fault_rate: f64,
    fault_seed: u64,
    seed: u64,
) -> Result<(StoreLocation, RequestCounter), BoxError> {
    let location = tarn_store::open(&common.url)?;
    let mut store: Arc<dyn ObjectStore> = Arc::clone(location.store());
    if fault_rate > 0.0 {
        // Half the faults lose the acknowledgement of a PUT that landed.
        let half = fault_rate / 2.0;
        let faulty = FaultStore::new(store, fault_seed)
            .with_rule(FaultRule::new(FaultOp::Put, Fault::FailAfter).with_probability(half))
            .with_rule(
                FaultRule::new(FaultOp::Put, Fault::FailBefore)
                    .with_probability(half / (1.0 - half)),
            );
        store = Arc::new(faulty);
    }
    let profile = LatencyProfile::by_name(&common.profile)?;
    let replayed = profile.name != "none";
    if replayed {
        store = Arc::new(LatencyStore::new(store, profile, seed));
    }
    let counting = CountingStore::new(store);
    let counter = counting.counter();
    let mut store: Arc<dyn ObjectStore> = Arc::new(counting);
    if replayed && !common.no_hedge {
        store = Arc::new(HedgedStore::new(store, HedgePolicy::default()));
    }
    Ok((location.with_store(store), counter))
}

/// Prints a record as a JSON line for the coordinator.
pub(crate) fn print_record(record: &OpRecord) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", serde_json::to_string(record).unwrap_or_default());
    let _ = out.flush();
}

/// The command starting one worker process.
pub(crate) fn worker_command(common: &Common, worker: &WorkerArgs) -> Result<Command, BoxError> {
    let mut command = Command::new(std::env::current_exe()?);
    command
        .arg("worker")
        .args(["--url", &common.url, "--profile", &common.profile])
        .args(common.no_hedge.then_some("--no-hedge"))
        .args(["--kind", worker.kind.name()])
        .args([
            "--id",
            &worker.id.to_string(),
            "--ops",
            &worker.ops.to_string(),
        ])
        .args(["--fault-rate", &worker.fault_rate.to_string()])
        .args(["--fault-seed", &worker.fault_seed.to_string()])
        .args([
            "--run",
            &worker.run,
            "--entries",
            &worker.entries.to_string(),
        ])
        .args(["--start-at-ms", &worker.start_at_ms.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    if let Some(op) = worker.op {
        command.args(["--op", op.name()]);
    }
    if let Some(log) = &worker.ack_log {
        command.arg("--ack-log").arg(log);
    }
    // The default retry policy of every table and catalog in the worker reads it.
    if common.no_group_commit {
        command.env("TARN_GROUP_COMMIT", "off");
    }
    Ok(command)
}

/// Runs `workers` worker processes at once (numbered from 0, otherwise as `template`)
/// and collects their records.
pub(crate) async fn run_level(
    common: &Common,
    template: &WorkerArgs,
    workers: usize,
) -> Result<(Vec<OpRecord>, Duration), BoxError> {
    let started = Instant::now();
    let mut children: Vec<Child> = Vec::new();
    for id in 0..workers {
        let mut worker = template.clone();
        worker.id = id;
        children.push(worker_command(common, &worker)?.spawn()?);
    }
    let readers = children.iter_mut().map(|child| {
        let stdout = child.stdout.take();
        async move {
            let mut records = Vec::new();
            if let Some(stdout) = stdout {
                let mut lines = BufReader::new(stdout).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Ok(record) = serde_json::from_str::<OpRecord>(&line) {
                        records.push(record);
                    }
                }
            }
            records
        }
    });
    let records: Vec<OpRecord> = futures::future::join_all(readers)
        .await
        .into_iter()
        .flatten()
        .collect();
    for child in &mut children {
        let status = child.wait().await?;
        if !status.success() {
            return Err(format!("a {} worker exited with {status}", template.kind.name()).into());
        }
    }
    Ok((records, started.elapsed()))
}

/// Milliseconds since the Unix epoch: the clock the coordinator and its workers share.
pub(crate) fn unix_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// When the timed operations of a level of `workers` begin: late enough for every worker
/// process to have started and opened what it acts on, so their start-up is not timed.
pub(crate) fn common_start(workers: usize) -> u64 {
    unix_ms() as u64 + 3_000 + 40 * workers as u64
}

/// Sleeps until the common start (a worker that is late does not wait).
pub(crate) async fn wait_for_start(start_at_ms: u64) {
    let wait = start_at_ms as f64 - unix_ms();
    if wait > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(wait / 1e3)).await;
    }
}

/// The span of a level's timed operations: from the common start to the last end
/// (`wall`, start-up included, when no record has an end).
pub(crate) fn timed_span(records: &[OpRecord], start_at_ms: u64, wall: Duration) -> Duration {
    records
        .iter()
        .filter_map(|r| r.end_unix_ms)
        .max_by(f64::total_cmp)
        .map_or(wall, |end| {
            Duration::from_secs_f64(((end - start_at_ms as f64) / 1e3).max(1e-3))
        })
}

/// Where summaries go as JSON lines, if anywhere.
pub(crate) fn json_sink(common: &Common) -> Result<Option<std::fs::File>, BoxError> {
    Ok(match &common.json {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)?,
        ),
        None => None,
    })
}

/// Appends a summary with extra fields (profile, layout, ...) as one JSON line.
pub(crate) fn write_summary(
    sink: Option<&mut std::fs::File>,
    summary: &LevelSummary,
    extra: &[(&str, serde_json::Value)],
) -> Result<(), BoxError> {
    if let Some(file) = sink {
        let mut value = serde_json::to_value(summary)?;
        if let Some(map) = value.as_object_mut() {
            for (k, v) in extra {
                map.insert((*k).to_string(), v.clone());
            }
        }
        writeln!(file, "{value}")?;
    }
    Ok(())
}

/// Runs writers to the end while killing one at random now and then (SIGKILL: no chance
/// to finish anything) and starting it again. `spawn(id, restart)` starts writer `id`.
/// Returns the kills made.
pub(crate) async fn kill_loop(
    torture: &TortureArgs,
    spawn: impl Fn(usize, u64) -> Result<Child, BoxError>,
) -> Result<usize, BoxError> {
    let writers = torture.writers;
    let mut rng = Rng::new(torture.seed);
    let mut children: Vec<Option<Child>> = (0..writers)
        .map(|id| spawn(id, 0).map(Some))
        .collect::<Result<_, _>>()?;
    let mut restarts = vec![0u64; writers];
    let mut kills = 0usize;
    loop {
        // Reap finished writers.
        for slot in children.iter_mut() {
            if let Some(child) = slot
                && let Some(status) = child.try_wait()?
            {
                if !status.success() {
                    return Err(format!("a writer exited with {status}").into());
                }
                *slot = None;
            }
        }
        let running: Vec<usize> = (0..writers).filter(|i| children[*i].is_some()).collect();
        if running.is_empty() {
            return Ok(kills);
        }
        let span = torture.kill_max_ms.saturating_sub(torture.kill_min_ms) + 1;
        let wait = torture.kill_min_ms + rng.next_u64() % span;
        tokio::time::sleep(Duration::from_millis(wait)).await;
        if kills < torture.max_kills {
            let victim = running[rng.below(running.len())];
            if let Some(child) = children[victim].as_mut()
                && child.try_wait()?.is_none()
            {
                child.kill().await?;
                kills += 1;
                restarts[victim] += 1;
                children[victim] = Some(spawn(victim, restarts[victim])?);
            }
        }
    }
}

/// An operation's requests by kind, for its record.
pub(crate) fn kinds(counts: &RequestCounts) -> BTreeMap<String, u64> {
    counts
        .by_kind()
        .into_iter()
        .map(|(kind, n)| (kind.to_string(), n))
        .collect()
}
