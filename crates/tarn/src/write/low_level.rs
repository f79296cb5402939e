//! Writing data files inside a [`Transaction`], for operations Tarn does not ship: the
//! caller decides what each file holds and what the transaction removes and reads.

use arrow::array::RecordBatch;

use std::sync::Arc;

use super::files::encode_files;
use super::{Checks, FileWriteOptions, SchemaMode, StatsColumns, fill_identity, prepare_batches};
use crate::error::Result;
use crate::indexing::InlineSegments;
use crate::protocol::Add;
use crate::protocol::features::ensure_writable;
use crate::txn::Transaction;

impl Transaction {
    /// Writes each batch as its own data file (one per batch and partition, however large),
    /// with statistics, adds the files to the transaction with segments for the table's
    /// inline indices, and returns their `add` actions, in the order of the batches. The
    /// files upload while the segments are built. Nothing is committed until
    /// [`commit`](Transaction::commit); files of a transaction that never commits are
    /// orphans `vacuum` removes.
    ///
    /// Fails with [`crate::Error::SchemaMismatch`] when a batch does not fit the table,
    /// [`crate::Error::UnsupportedWriterFeature`] for tables Tarn cannot write, and
    /// [`crate::Error::Store`] / [`crate::Error::Index`] when a file or segment cannot be
    /// written.
    pub async fn write_files(&mut self, batches: Vec<RecordBatch>) -> Result<Vec<Add>> {
        let snapshot = self.snapshot().clone();
        ensure_writable(snapshot.protocol(), snapshot.metadata(), snapshot.schema())?;
        let (batches, marked) = fill_identity(snapshot.schema(), &batches)?;
        let (batches, _) = prepare_batches(
            marked.as_ref().unwrap_or(snapshot.schema()),
            snapshot.partition_columns(),
            &batches,
            SchemaMode::Strict,
        )?;
        // The identity values drawn move the high-water marks in this commit.
        if let Some(schema) = marked {
            let mut metadata = snapshot.metadata().clone();
            metadata.schema_string = schema.to_json();
            self.set_metadata(metadata);
        }
        let inline = InlineSegments::of(&snapshot)?;
        let capture = inline.columns();
        let encoded = encode_files(
            snapshot.location(),
            snapshot.schema(),
            snapshot.partition_columns(),
            batches,
            &FileWriteOptions {
                target_file_size: u64::MAX,
                stats_columns: StatsColumns::of(&snapshot)?,
                writer_properties: None,
                compression: snapshot.properties().data_compression()?,
                modification_time: self.now_ms(),
                capture: capture.clone(),
                file_per_batch: true,
                change_data: false,
                hidden: Vec::new(),
                checks: Checks::of(snapshot.metadata(), snapshot.schema())?,
            },
        )
        .await?;
        let written = encoded.written.clone();
        for add in &written.adds {
            self.add_file(add.clone());
        }
        // The files upload while their index segments are built and uploaded.
        let store = Arc::clone(snapshot.location().store());
        let (uploaded, indexed) = futures::join!(
            encoded.upload(store),
            inline.add_to(self, &snapshot, &written.adds, &capture, &written.captured)
        );
        uploaded?;
        indexed?;
        Ok(written.adds)
    }
}
