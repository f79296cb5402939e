//! A data write fed batch by batch: one encoder on a blocking thread takes the batches as
//! a caller produces them (a copy-on-write rewrite streaming a file), and files upload as
//! they finish.

use arrow::array::RecordBatch;
use futures::FutureExt;
use tarn_store::StoreLocation;

use super::files::{Destination, EncodedFile, FileWriteOptions, WrittenFiles, encode, upload_all};
use super::upload::UPLOAD_CONCURRENCY;
use crate::error::{Error, Result};
use crate::protocol::StructType;
use crate::snapshot::PartitionColumn;

/// A data write fed batch by batch, for a caller that produces rows as it goes (a
/// copy-on-write rewrite streaming a file): one encoder on a blocking thread takes the
/// batches as they come and files upload as they finish, so memory holds a couple of
/// batches and the file being encoded. Dropping it unfinished stops the uploads.
pub(crate) struct StreamWriter {
    tx: tokio::sync::mpsc::Sender<RecordBatch>,
    /// The encoder and uploads; taken when a failed send reports their error.
    done: Option<futures::future::BoxFuture<'static, Result<WrittenFiles>>>,
}

impl StreamWriter {
    /// Starts a write of conformed batches in the table's schema.
    pub(crate) fn start(
        location: &StoreLocation,
        schema: &StructType,
        partition_columns: &[PartitionColumn],
        options: &FileWriteOptions,
    ) -> StreamWriter {
        let (tx, mut batches) = tokio::sync::mpsc::channel::<RecordBatch>(2);
        let (files_tx, files_rx) =
            tokio::sync::mpsc::channel::<Result<EncodedFile>>(UPLOAD_CONCURRENCY);
        let (schema, partition_columns) = (schema.clone(), partition_columns.to_vec());
        let options = options.clone();
        let now = options.modification_time;
        let destination = Destination::of(location);
        let encoder = tokio::task::spawn_blocking(move || {
            let rows = std::iter::from_fn(|| batches.blocking_recv());
            let result = encode(
                &schema,
                &partition_columns,
                rows,
                &options,
                Some(&destination),
                &files_tx,
            );
            if let Err(e) = result {
                let _ = files_tx.blocking_send(Err(e));
            }
        });
        let location = location.clone();
        let done = crate::tasks::spawn("writing data files", async move {
            upload_all(&location, now, files_rx, vec![encoder], None).await
        });
        StreamWriter {
            tx,
            done: Some(done.boxed()),
        }
    }

    /// Hands the encoder a batch, waiting while it is a couple of batches behind.
    ///
    /// Fails with the write's error when encoding or uploading has failed.
    pub(crate) async fn send(&mut self, batch: RecordBatch) -> Result<()> {
        if self.tx.send(batch).await.is_ok() {
            return Ok(());
        }
        // The encoder stopped taking batches, which only an error makes it do.
        Err(match self.done.take() {
            Some(done) => done.await.err().unwrap_or_else(stopped_early),
            None => stopped_early(),
        })
    }

    /// Ends the input and waits for the last files to upload.
    ///
    /// Fails when encoding or an upload failed.
    pub(crate) async fn finish(self) -> Result<WrittenFiles> {
        let StreamWriter { tx, done } = self;
        drop(tx);
        match done {
            Some(done) => done.await,
            None => Err(stopped_early()),
        }
    }
}

fn stopped_early() -> Error {
    Error::InvalidArgument {
        name: "write",
        reason: "the data file encoder stopped before its input ended".into(),
    }
}
