//! Appends and overwrites whose input is a stream of batches: each batch is conformed as
//! it arrives (identity values drawn, columns checked, `replace_where` checked) and handed
//! to the encoders (runs of consecutive rows, one encoder per core), and files upload as
//! they finish, so memory holds a couple of batches and the files being encoded, never
//! the whole input.

use std::sync::Arc;

use arrow::array::{RecordBatch, RecordBatchReader};
use arrow::error::ArrowError;
use futures::StreamExt;
use futures::stream::BoxStream;

use super::{
    Checks, FileWriteOptions, SchemaMode, StatsColumns, StreamWriter, WrittenFiles,
    ensure_rows_match, fill_identity, prepare_batches,
};
use crate::error::{Error, Result};
use crate::expr::Expr;
use crate::indexing::{BuiltSegments, InlineSegments};
use crate::protocol::properties::DEFAULT_TARGET_FILE_SIZE;
use crate::protocol::{Metadata, StructType};
use crate::snapshot::{PartitionColumn, Snapshot};

/// A write's input as a stream of batches, errors already Tarn's.
pub(crate) type BatchStream = BoxStream<'static, Result<RecordBatch>>;

/// What a write (or a MERGE) takes in: batches already in memory, or a stream of them.
pub(crate) enum Input {
    /// Batches in memory.
    Batches(Vec<RecordBatch>),
    /// Batches as they arrive.
    Stream(BatchStream),
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Input::Batches(b) => write!(f, "{} batches", b.len()),
            Input::Stream(_) => f.write_str("a stream of batches"),
        }
    }
}

/// `stream` with its errors as [`Error::InputStream`].
pub(crate) fn from_stream<S, E>(stream: S) -> BatchStream
where
    S: futures::Stream<Item = std::result::Result<RecordBatch, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    stream
        .map(|item| {
            item.map_err(|e| Error::InputStream {
                source: Arc::new(e),
            })
        })
        // Fused, as `from_reader`: a caller's stream need not allow a poll after its end.
        .fuse()
        .boxed()
}

/// The batches of a blocking `reader`, read on a blocking thread (started when the
/// write first asks for a batch) a couple of batches ahead of the writer. A reader that
/// panics fails the write with [`Error::InputStream`]; it never looks like the end.
pub(crate) fn from_reader<R>(reader: R) -> BatchStream
where
    R: RecordBatchReader + Send + 'static,
{
    type Reading = (
        tokio::sync::mpsc::Receiver<std::result::Result<RecordBatch, ArrowError>>,
        tokio::task::JoinHandle<()>,
    );
    enum State<R> {
        Idle(R),
        Reading(Reading),
        Done,
    }
    let start = |reader: R| -> Reading {
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        let thread = tokio::task::spawn_blocking(move || {
            for item in reader {
                let failed = item.is_err();
                // The writer stopped (an error, or dropped), or the reader failed: stop.
                if tx.blocking_send(item).is_err() || failed {
                    break;
                }
            }
        });
        (rx, thread)
    };
    futures::stream::unfold(State::Idle(reader), move |state| async move {
        let (mut rx, thread) = match state {
            State::Idle(reader) => start(reader),
            State::Reading(reading) => reading,
            State::Done => return None,
        };
        match rx.recv().await {
            Some(item) => {
                let item = item.map_err(|e| Error::InputStream {
                    source: Arc::new(e),
                });
                Some((item, State::Reading((rx, thread))))
            }
            // The channel closed: the reader ended, or its thread panicked.
            None => match thread.await {
                Ok(()) => None,
                Err(e) => {
                    let e = ArrowError::ExternalError(Box::new(std::io::Error::other(format!(
                        "the RecordBatchReader panicked: {e}"
                    ))));
                    let item = Err(Error::InputStream {
                        source: Arc::new(e),
                    });
                    Some((item, State::Done))
                }
            },
        }
    })
    // Fused: a write that asks again after the end (an empty input) gets the end again.
    .fuse()
    .boxed()
}

/// Conforms the batches after the first as the first was conformed: identity values drawn
/// after the marks the earlier batches moved, no new columns, rows inside `replace_where`.
pub(crate) struct Conformer {
    /// The schema files are written under, with the identity marks moved so far.
    schema: StructType,
    partition_columns: Vec<PartitionColumn>,
    mode: SchemaMode,
    replace_where: Option<Expr>,
    marks_moved: bool,
}

impl Conformer {
    /// A conformer for the batches after the first, which was written under `schema`.
    pub(crate) fn new(
        schema: StructType,
        partition_columns: &[PartitionColumn],
        mode: SchemaMode,
        replace_where: Option<Expr>,
    ) -> Self {
        Self {
            schema,
            partition_columns: partition_columns.to_vec(),
            mode,
            replace_where,
            marks_moved: false,
        }
    }

    /// `batch` conformed to the write's schema.
    ///
    /// Fails with [`Error::SchemaMismatch`] for a batch with columns the first did not
    /// bring or that does not fit, and [`Error::InvalidArgument`] for rows outside
    /// `replace_where`.
    fn conform(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        let (filled, marked) = fill_identity(&self.schema, &[batch])?;
        if let Some(marked) = marked {
            self.schema = marked;
            self.marks_moved = true;
        }
        let (conformed, evolved) =
            prepare_batches(&self.schema, &self.partition_columns, &filled, self.mode)?;
        if evolved.is_some() {
            return Err(Error::SchemaMismatch {
                reason: "a batch of the stream brings columns its first batch did not; \
                         a streamed write takes its schema from its first batch"
                    .into(),
            });
        }
        if let Some(predicate) = &self.replace_where {
            ensure_rows_match(&conformed, predicate)?;
        }
        Ok(conformed)
    }

    /// The metadata to commit once the stream has ended: `evolved` (the first batch's
    /// change, if any), with the identity marks the later batches moved.
    pub(crate) fn final_metadata(
        &self,
        snapshot: &Snapshot,
        evolved: Option<(StructType, Metadata)>,
    ) -> Option<(StructType, Metadata)> {
        if !self.marks_moved {
            return evolved;
        }
        let mut metadata = match evolved {
            Some((_, metadata)) => metadata,
            None => snapshot.metadata().clone(),
        };
        metadata.schema_string = self.schema.to_json();
        Some((self.schema.clone(), metadata))
    }
}

/// Writes the conformed `first` batches, then every batch of `rest` as it arrives, as data
/// files; then builds the inline index segments over them, a run of files at a time.
///
/// Fails with the stream's own error ([`Error::InputStream`]), as [`Conformer`] does for
/// a batch, and when encoding or an upload fails. Files already uploaded are left for
/// `vacuum`; nothing is committed.
pub(crate) async fn write_stream(
    snapshot: &Snapshot,
    schema: &StructType,
    first: Vec<RecordBatch>,
    mut rest: BatchStream,
    conformer: &mut Conformer,
    options: &FileWriteOptions,
    inline: &InlineSegments,
) -> Result<(WrittenFiles, Option<BuiltSegments>)> {
    // The indexed columns are not kept as files encode: a long stream would hold them all.
    let options = &FileWriteOptions {
        capture: Vec::new(),
        ..options.clone()
    };
    let mut writer = StreamWriter::start(
        snapshot.location(),
        schema,
        snapshot.partition_columns(),
        options,
        true,
    );
    for batch in first {
        writer.send(batch).await?;
    }
    while let Some(batch) = rest.next().await {
        for conformed in conformer.conform(batch?)? {
            writer.send(conformed).await?;
        }
    }
    let files = writer.finish().await?;
    if inline.is_empty() || files.adds.is_empty() {
        return Ok((files, None));
    }
    // Nothing was captured: the indexed columns are read back a run of files at a time.
    let built = inline.build_in_runs(snapshot, &files.adds).await?;
    Ok((files, Some(built)))
}

/// Writes every batch of `first` and `rest` as the data files of a table being created
/// (`snapshot` holds its protocol and metadata, no files and no indices), each batch
/// conformed as an append conforms it. Returns the files and, when identity columns drew
/// values, the metadata with their high-water marks moved.
///
/// Fails as [`write_stream`] does. Files already uploaded are left for `vacuum`.
pub(crate) async fn write_new_table(
    snapshot: &Snapshot,
    first: Option<RecordBatch>,
    rest: BatchStream,
    now_ms: i64,
) -> Result<(WrittenFiles, Option<Metadata>)> {
    let first: Vec<RecordBatch> = first.into_iter().collect();
    let (first, marked) = fill_identity(snapshot.schema(), &first)?;
    let schema = marked.clone().unwrap_or_else(|| snapshot.schema().clone());
    let partitions = snapshot.partition_columns();
    let (first, _) = prepare_batches(&schema, partitions, &first, SchemaMode::Strict)?;
    let options = FileWriteOptions {
        target_file_size: snapshot
            .properties()
            .target_file_size()
            .unwrap_or(DEFAULT_TARGET_FILE_SIZE),
        stats_columns: StatsColumns::of(snapshot)?,
        writer_properties: None,
        compression: snapshot.properties().data_compression()?,
        modification_time: now_ms,
        capture: Vec::new(),
        file_per_batch: false,
        change_data: false,
        hidden: Vec::new(),
        checks: Checks::of(snapshot.metadata(), &schema)?,
    };
    let mut conformer = Conformer::new(schema.clone(), partitions, SchemaMode::Strict, None);
    let (written, _) = write_stream(
        snapshot,
        &schema,
        first,
        rest,
        &mut conformer,
        &options,
        &InlineSegments::of(snapshot)?,
    )
    .await?;
    let marked = marked.map(|schema| {
        let mut metadata = snapshot.metadata().clone();
        metadata.schema_string = schema.to_json();
        (schema, metadata)
    });
    let metadata = conformer
        .final_metadata(snapshot, marked)
        .map(|(_, metadata)| metadata);
    Ok((written, metadata))
}
