//! A data write fed batch by batch: encoders on blocking threads take the batches as a
//! caller produces them (a streamed append, a copy-on-write rewrite streaming a file), and
//! files upload as they finish.

use std::sync::Arc;

use arrow::array::RecordBatch;
use futures::FutureExt;
use tarn_store::StoreLocation;

use super::files::{
    Destination, EncodedFile, FileWriteOptions, WAITING_BUDGET, WrittenFiles, encode, upload_all,
};
use super::lanes::{LANE_PARTITIONS, Lanes};
use super::upload::UPLOAD_CONCURRENCY;
use crate::error::{Error, Result};
use crate::protocol::StructType;
use crate::snapshot::PartitionColumn;

/// Arrow bytes a parallel stream hands one encoder before the next takes over: big
/// enough that files stay large, small enough that a long stream keeps every core busy.
/// A run is queued whole while the stream moves on to the next (that is what lets the
/// encoders overlap), so on many cores runs shrink to keep [`IN_FLIGHT_BYTES`] in all,
/// down to [`MIN_RUN_BYTES`].
const RUN_BYTES: usize = 64 * 1024 * 1024;
const MIN_RUN_BYTES: usize = 16 * 1024 * 1024;
const IN_FLIGHT_BYTES: usize = 256 * 1024 * 1024;
/// Batches go to an encoder in groups of about this many rows (or [`SEND_BYTES`]): one
/// thread hand-off per small batch costs as much as encoding it.
const SEND_ROWS: usize = 64 * 1024;
const SEND_BYTES: usize = 8 * 1024 * 1024;
/// Groups a run's queue holds: a whole run of rows of a byte or more.
const RUN_GROUPS: usize = RUN_BYTES / SEND_ROWS;

/// A data write fed batch by batch: encoders on blocking threads take the batches as
/// they come and files upload as they finish. In parallel mode the stream is cut into
/// runs of consecutive rows ([`RUN_BYTES`] of Arrow data each), each run encoded into
/// files of its own while the next runs go to other encoders, one per core; files keep
/// consecutive rows, so their statistics stay as tight as the input's order makes them.
/// A partitioned table's stream goes instead to one encoder per core for the whole
/// stream, each taking the partitions [`Lanes`] assigns it, so each partition's rows end
/// in one file (per target size) however the input spreads them.
/// Memory holds the queued runs (at most one per core), the file being encoded per
/// encoder and partitions' waiting rows (within [`WAITING_BUDGET`]); a single encoder, or
/// a lane, is kept a couple of groups behind. Dropping it
/// unfinished stops the uploads.
pub(crate) struct StreamWriter {
    /// The run being fed.
    run: Option<Run>,
    /// In parallel mode on a partitioned table: one run per core for the whole stream,
    /// each taking the partitions [`Lanes`] gives it, so a partition's rows meet in one
    /// file; started by the first batch.
    lanes: Option<(Lanes, Vec<Run>)>,
    /// Whether the stream goes to lanes rather than runs.
    by_lane: bool,
    /// Encoders at once: the cores.
    cores: usize,
    /// Arrow bytes per run, in parallel mode.
    run_bytes: Option<usize>,
    encoder: Arc<RunEncoder>,
    /// Taken by `finish`, so the uploads end once the last encoder does.
    files: Option<tokio::sync::mpsc::Sender<Result<EncodedFile>>>,
    /// One encoder per core at most.
    slots: Arc<tokio::sync::Semaphore>,
    encoders: Vec<tokio::task::JoinHandle<()>>,
    /// The uploads; taken when a failed send reports their error.
    done: Option<futures::future::BoxFuture<'static, Result<WrittenFiles>>>,
}

/// A run of consecutive rows on its way to one encoder.
struct Run {
    tx: tokio::sync::mpsc::Sender<Vec<RecordBatch>>,
    /// Arrow bytes handed to the run, pending ones included.
    bytes: usize,
    /// Batches not sent yet, and their rows and bytes.
    pending: Vec<RecordBatch>,
    pending_rows: usize,
    pending_bytes: usize,
}

impl Run {
    /// Sends the pending batches to the run's encoder; `false` when it stopped taking
    /// them, which only an error makes it do.
    async fn flush(&mut self) -> bool {
        if self.pending.is_empty() {
            return true;
        }
        let batches = std::mem::take(&mut self.pending);
        (self.pending_rows, self.pending_bytes) = (0, 0);
        self.tx.send(batches).await.is_ok()
    }
}

/// What every run's encoder shares.
struct RunEncoder {
    schema: StructType,
    partition_columns: Vec<PartitionColumn>,
    options: FileWriteOptions,
    destination: Destination,
}

impl StreamWriter {
    /// Starts a write of conformed batches in the table's schema; `parallel` cuts the
    /// stream into runs encoded on every core (a long append), otherwise one encoder
    /// takes it all (a file rewritten as it streams, beside other files' rewrites).
    pub(crate) fn start(
        location: &StoreLocation,
        schema: &StructType,
        partition_columns: &[PartitionColumn],
        options: &FileWriteOptions,
        parallel: bool,
    ) -> StreamWriter {
        let (files_tx, files_rx) =
            tokio::sync::mpsc::channel::<Result<EncodedFile>>(UPLOAD_CONCURRENCY);
        let now = options.modification_time;
        let uploads = location.clone();
        let done = crate::tasks::spawn("writing data files", async move {
            upload_all(&uploads, now, files_rx, Vec::new(), None).await
        });
        let cores = crate::tasks::cores();
        let parallel = parallel && cores > 1 && !options.file_per_batch;
        StreamWriter {
            run: None,
            lanes: None,
            by_lane: parallel && !partition_columns.is_empty(),
            cores,
            run_bytes: parallel
                .then_some((IN_FLIGHT_BYTES / cores).clamp(MIN_RUN_BYTES, RUN_BYTES)),
            encoder: Arc::new(RunEncoder {
                schema: schema.clone(),
                partition_columns: partition_columns.to_vec(),
                options: options.clone(),
                destination: Destination::of(location),
            }),
            files: Some(files_tx),
            slots: Arc::new(tokio::sync::Semaphore::new(if parallel {
                cores
            } else {
                1
            })),
            encoders: Vec::new(),
            done: Some(done.boxed()),
        }
    }

    /// Hands an encoder a batch, in groups of about [`SEND_ROWS`] rows, waiting while
    /// every encoder is busy when a run starts (or, with one encoder, while it is a
    /// couple of groups behind).
    ///
    /// Fails with the write's error when encoding or uploading has failed.
    pub(crate) async fn send(&mut self, batch: RecordBatch) -> Result<()> {
        if self.by_lane && self.lanes.is_none() {
            self.start_lanes(&batch).await?;
        }
        if self.by_lane {
            return self.send_to_lanes(batch).await;
        }
        let full = match (&self.run, self.run_bytes) {
            (None, _) => true,
            (Some(run), Some(limit)) => run.bytes >= limit,
            (Some(_), None) => false,
        };
        if full {
            self.end_run().await?;
            self.start_run().await?;
        }
        let size = slice_bytes(&batch);
        let Some(run) = self.run.as_mut() else {
            return Err(stopped_early());
        };
        run.bytes += size;
        run.pending_rows += batch.num_rows();
        run.pending_bytes += size;
        run.pending.push(batch);
        if run.pending_rows >= SEND_ROWS || run.pending_bytes >= SEND_BYTES {
            self.flush().await?;
        }
        Ok(())
    }

    /// Starts one lane per core, unless the stream's first batch, `batch`, spans too few
    /// partitions for lanes to pay: input that arrives a partition or a few at a time
    /// (sorted by them, or a daily append) goes in runs, which then meet few partitions
    /// each, and one partition's rows still use every core.
    ///
    /// Fails when `batch` lacks a partition column.
    async fn start_lanes(&mut self, batch: &RecordBatch) -> Result<()> {
        let cores = self.cores;
        let splitter = Lanes::new(cores, &self.encoder.partition_columns, batch)?;
        if splitter.partitions_in(batch)? < LANE_PARTITIONS * cores {
            self.by_lane = false;
            return Ok(());
        }
        let mut runs = Vec::with_capacity(cores);
        for _ in 0..cores {
            runs.push(self.start_encoder(2, WAITING_BUDGET / cores).await?);
        }
        self.lanes = Some((splitter, runs));
        Ok(())
    }

    /// Hands each lane its rows of `batch`.
    async fn send_to_lanes(&mut self, batch: RecordBatch) -> Result<()> {
        let Some((splitter, runs)) = self.lanes.as_mut() else {
            return Err(stopped_early());
        };
        let mut sent = true;
        for (lane, rows) in splitter.split(&batch)? {
            let Some(run) = runs.get_mut(lane) else {
                return Err(stopped_early());
            };
            let size = slice_bytes(&rows);
            run.bytes += size;
            run.pending_rows += rows.num_rows();
            run.pending_bytes += size;
            run.pending.push(rows);
            if run.pending_rows >= SEND_ROWS || run.pending_bytes >= SEND_BYTES {
                sent &= run.flush().await;
            }
        }
        match sent {
            true => Ok(()),
            false => Err(self.failure().await),
        }
    }

    /// Sends the current run's pending batches to its encoder.
    async fn flush(&mut self) -> Result<()> {
        let Some(run) = self.run.as_mut() else {
            return Ok(());
        };
        if run.flush().await {
            return Ok(());
        }
        Err(self.failure().await)
    }

    /// Sends what the current run (or every lane) holds and ends its input, so its
    /// encoder finishes it.
    async fn end_run(&mut self) -> Result<()> {
        self.flush().await?;
        self.run = None;
        if let Some((_, mut runs)) = self.lanes.take() {
            let mut sent = true;
            for run in &mut runs {
                sent &= run.flush().await;
            }
            // Every lane's input ends before a failure is awaited: a lane still open
            // would keep its encoder, and so the uploads, waiting.
            drop(runs);
            if !sent {
                return Err(self.failure().await);
            }
        }
        Ok(())
    }

    /// Starts the next run on an encoder of its own once one is free.
    async fn start_run(&mut self) -> Result<()> {
        // In parallel mode a run queues whole (its size bounds it, and one run per core
        // is in flight); a single encoder is kept a couple of groups behind.
        let queue = if self.run_bytes.is_some() {
            RUN_GROUPS
        } else {
            2
        };
        let budget = WAITING_BUDGET / self.cores;
        self.run = Some(self.start_encoder(queue, budget).await?);
        Ok(())
    }

    /// A run on an encoder of its own, once one is free, queueing at most `queue` groups
    /// and holding at most `budget` bytes of partitions' waiting rows.
    async fn start_encoder(&mut self, queue: usize, budget: usize) -> Result<Run> {
        let slot = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .map_err(|_| stopped_early())?;
        let Some(files) = self.files.clone() else {
            return Err(stopped_early());
        };
        let (tx, mut batches) = tokio::sync::mpsc::channel::<Vec<RecordBatch>>(queue);
        let encoder = Arc::clone(&self.encoder);
        self.encoders.push(tokio::task::spawn_blocking(move || {
            let _slot = slot;
            let rows = std::iter::from_fn(|| batches.blocking_recv()).flatten();
            let result = encode(
                &encoder.schema,
                &encoder.partition_columns,
                rows,
                &encoder.options,
                Some(&encoder.destination),
                &files,
                budget,
            );
            if let Err(e) = result {
                let _ = files.blocking_send(Err(e));
            }
        }));
        Ok(Run {
            tx,
            bytes: 0,
            pending: Vec::new(),
            pending_rows: 0,
            pending_bytes: 0,
        })
    }

    /// The error that stopped an encoder: the uploads' result holds it.
    async fn failure(&mut self) -> Error {
        self.run = None;
        self.lanes = None;
        self.files = None;
        match self.done.take() {
            Some(done) => done.await.err().unwrap_or_else(stopped_early),
            None => stopped_early(),
        }
    }

    /// Ends the input and waits for the last files to upload.
    ///
    /// Fails when encoding or an upload failed.
    pub(crate) async fn finish(mut self) -> Result<WrittenFiles> {
        self.end_run().await?;
        self.files = None;
        let written = match self.done.take() {
            Some(done) => done.await?,
            None => return Err(stopped_early()),
        };
        // A panicked encoder sent no error: its files are missing, so the write fails.
        for encoder in std::mem::take(&mut self.encoders) {
            encoder.await.map_err(|source| Error::TaskFailed {
                task: "encoding data files",
                source,
            })?;
        }
        Ok(written)
    }
}

/// The Arrow bytes `batch`'s rows take (a slice counts its rows, not its buffers).
fn slice_bytes(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0))
        .sum()
}

fn stopped_early() -> Error {
    Error::InvalidArgument {
        name: "write",
        reason: "the data file encoder stopped before its input ended".into(),
    }
}
