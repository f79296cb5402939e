//! The records `tarn-concurrency` workers print, and the summaries the coordinator makes
//! of them.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One operation a worker did, printed as a JSON line on its standard output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpRecord {
    /// The worker's number.
    pub worker: usize,
    /// `write`, `cold-read`, `warm-read`, or a catalog operation (`create-table`, ...).
    pub op: String,
    /// Whether it succeeded.
    pub ok: bool,
    /// Wall-clock time.
    pub latency_ms: f64,
    /// Commit attempts (1 without a lost race); 0 for reads.
    pub attempts: u32,
    /// Whether it failed with a conflict.
    pub conflict: bool,
    /// Object-store requests it made.
    pub requests: u64,
    /// Round trips it waited on one after another.
    pub round_trips: u64,
    /// Its requests by kind (`PUT`, `GET`, `LIST`, ...; see `RequestCounts::by_kind`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests_by_kind: BTreeMap<String, u64>,
    /// The version written or read.
    pub version: i64,
    /// The error, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The error's kind (its variant path, e.g. `Table/Conflict`), when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
    /// The worker process's peak resident memory after the operation, MiB, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_mib: Option<f64>,
    /// When it ended, milliseconds since the Unix epoch (to compute a level's span).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_unix_ms: Option<f64>,
}

/// One line of an exactly-once writer's acknowledgement log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ack {
    /// The writer.
    pub writer: usize,
    /// Its sequence number (the application transaction version).
    pub n: i64,
    /// The commit's txnId; empty when the write was skipped because an earlier attempt
    /// (whose acknowledgement was lost with the process) had committed it.
    pub txn_id: String,
    /// The version the write committed (or the version read when skipped).
    pub version: i64,
    /// Whether the write was skipped as already committed.
    pub skipped: bool,
}

/// Statistics of one mode at one concurrency level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelSummary {
    /// The mode.
    pub mode: String,
    /// Concurrent worker processes.
    pub workers: usize,
    /// Operations attempted.
    pub ops: usize,
    /// Operations that failed.
    pub errors: usize,
    /// Median latency of successful operations, ms.
    pub p50_ms: f64,
    /// 90th percentile, ms.
    pub p90_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Successful operations per second of wall time, all workers together.
    pub throughput: f64,
    /// Retries (attempts beyond the first) per successful operation.
    pub retries_per_op: f64,
    /// Conflicts per operation.
    pub conflicts_per_op: f64,
    /// Mean round trips per successful operation.
    pub round_trips_per_op: f64,
    /// Mean requests per successful operation.
    pub requests_per_op: f64,
    /// Mean requests of each kind per successful operation.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub requests_by_kind_per_op: BTreeMap<String, f64>,
    /// Failed operations by error kind.
    pub errors_by_kind: BTreeMap<String, usize>,
    /// The first error message of each kind, to say why.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub error_examples: BTreeMap<String, String>,
    /// The largest peak resident memory a worker reported, MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_mib: Option<f64>,
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[(((sorted.len() - 1) as f64) * q).round() as usize]
}

/// Summarises the records of one run of `workers` processes that took `wall` in all.
pub fn summarise(mode: &str, workers: usize, records: &[OpRecord], wall: Duration) -> LevelSummary {
    let ok: Vec<&OpRecord> = records.iter().filter(|r| r.ok).collect();
    let mut latencies: Vec<f64> = ok.iter().map(|r| r.latency_ms).collect();
    latencies.sort_by(f64::total_cmp);
    let per_ok = |f: &dyn Fn(&OpRecord) -> f64| {
        if ok.is_empty() {
            0.0
        } else {
            ok.iter().map(|r| f(r)).sum::<f64>() / ok.len() as f64
        }
    };
    LevelSummary {
        mode: mode.to_string(),
        workers,
        ops: records.len(),
        errors: records.len() - ok.len(),
        p50_ms: quantile(&latencies, 0.5),
        p90_ms: quantile(&latencies, 0.9),
        p99_ms: quantile(&latencies, 0.99),
        throughput: ok.len() as f64 / wall.as_secs_f64().max(1e-9),
        retries_per_op: per_ok(&|r| f64::from(r.attempts.saturating_sub(1))),
        conflicts_per_op: if records.is_empty() {
            0.0
        } else {
            records.iter().filter(|r| r.conflict).count() as f64 / records.len() as f64
        },
        round_trips_per_op: per_ok(&|r| r.round_trips as f64),
        requests_per_op: per_ok(&|r| r.requests as f64),
        requests_by_kind_per_op: ok
            .iter()
            .flat_map(|r| &r.requests_by_kind)
            .fold(BTreeMap::<String, u64>::new(), |mut kinds, (kind, n)| {
                *kinds.entry(kind.clone()).or_insert(0) += n;
                kinds
            })
            .into_iter()
            .map(|(kind, n)| (kind, n as f64 / ok.len() as f64))
            .collect(),
        errors_by_kind: records
            .iter()
            .filter(|r| !r.ok)
            .fold(BTreeMap::new(), |mut kinds, r| {
                let kind = r.error_kind.clone().unwrap_or_else(|| "unknown".into());
                *kinds.entry(kind).or_insert(0) += 1;
                kinds
            }),
        error_examples: records.iter().filter(|r| !r.ok).fold(
            BTreeMap::new(),
            |mut examples, r| {
                let kind = r.error_kind.clone().unwrap_or_else(|| "unknown".into());
                if let Some(message) = &r.error {
                    examples.entry(kind).or_insert_with(|| message.clone());
                }
                examples
            },
        ),
        peak_rss_mib: records
            .iter()
            .filter_map(|r| r.peak_rss_mib)
            .max_by(f64::total_cmp),
    }
}

/// The header of the results table.
pub fn table_header() -> String {
    format!(
        "{:<10} {:>7} {:>6} {:>6} {:>9} {:>9} {:>9} {:>10} {:>9} {:>10} {:>9} {:>9}",
        "mode",
        "workers",
        "ops",
        "errors",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "ops/s",
        "retries",
        "conflicts",
        "trips",
        "requests"
    )
}

/// One row of the results table (then the errors by kind, when there were any).
pub fn table_row(s: &LevelSummary) -> String {
    let mut row = format!(
        "{:<10} {:>7} {:>6} {:>6} {:>9.1} {:>9.1} {:>9.1} {:>10.1} {:>9.2} {:>10.3} {:>9.2} {:>9.1}",
        s.mode,
        s.workers,
        s.ops,
        s.errors,
        s.p50_ms,
        s.p90_ms,
        s.p99_ms,
        s.throughput,
        s.retries_per_op,
        s.conflicts_per_op,
        s.round_trips_per_op,
        s.requests_per_op
    );
    if let Some(mib) = s.peak_rss_mib {
        row.push_str(&format!("  peak {mib:.0} MiB"));
    }
    if !s.requests_by_kind_per_op.is_empty() {
        row.push(' ');
        for (kind, n) in &s.requests_by_kind_per_op {
            row.push_str(&format!(" {kind} {n:.1}"));
        }
    }
    for (kind, n) in &s.errors_by_kind {
        row.push_str(&format!("  {kind}: {n}"));
    }
    for (kind, message) in &s.error_examples {
        row.push_str(&format!("\n    first {kind}: {message}"));
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(latency_ms: f64, attempts: u32, ok: bool) -> OpRecord {
        OpRecord {
            worker: 0,
            op: "write".into(),
            ok,
            latency_ms,
            attempts,
            conflict: !ok,
            requests: 2,
            round_trips: 2,
            requests_by_kind: [("PUT".to_string(), 1), ("LIST".to_string(), 1)].into(),
            version: 1,
            error: (!ok).then(|| "conflict".into()),
            error_kind: (!ok).then(|| "Conflict".into()),
            peak_rss_mib: None,
            end_unix_ms: None,
        }
    }

    #[test]
    fn summaries_count_retries_conflicts_and_quantiles() {
        let records: Vec<OpRecord> = (1..=100)
            .map(|i| record(f64::from(i), if i % 10 == 0 { 3 } else { 1 }, i != 50))
            .collect();
        let s = summarise("write", 4, &records, Duration::from_secs(2));
        assert_eq!((s.ops, s.errors), (100, 1));
        assert_eq!(s.p50_ms, 51.0);
        assert_eq!(s.p99_ms, 99.0);
        assert!((s.throughput - 49.5).abs() < 1e-9);
        // Ten records took three attempts; one of them (50) failed and does not count.
        assert!((s.retries_per_op - 18.0 / 99.0).abs() < 1e-9);
        assert!((s.conflicts_per_op - 0.01).abs() < 1e-9);
        assert_eq!(s.round_trips_per_op, 2.0);
        assert_eq!(
            s.errors_by_kind,
            BTreeMap::from([("Conflict".to_string(), 1)])
        );
        assert_eq!(s.error_examples["Conflict"], "conflict");
        assert!(table_row(&s).contains("first Conflict: conflict"));
        // Each successful record made a PUT and a LIST.
        assert_eq!(
            s.requests_by_kind_per_op,
            BTreeMap::from([("LIST".to_string(), 1.0), ("PUT".to_string(), 1.0)])
        );
        assert!(table_row(&s).contains("  LIST 1.0 PUT 1.0"));
    }
}
