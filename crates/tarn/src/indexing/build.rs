//! Building segments: an index object over the indexed column of a set of data files,
//! from values captured while writing them (inline) or read back from them (creation,
//! catch-up, merges). Building runs on a blocking thread.

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::DataType as ArrowType;
use futures::{FutureExt, StreamExt, TryStreamExt};
use object_store::{ObjectStoreExt, PutPayload};
use tarn_index::fts::FullTextBuilder;
use tarn_index::{BTreeBuilder, BTreeOptions, BitmapBuilder, row_address};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::index::IndexKind;
use crate::index::meta::{
    INDEX_FORMAT, IndexDefinition, IndexSegment, segment_domain, segment_object,
};
use crate::paths;
use crate::protocol::Add;
use crate::scan::read_file_rows_of;
use crate::snapshot::Snapshot;

/// Files read at once when reading an indexed column back.
const READ_CONCURRENCY: usize = 8;

/// The indexed column of one data file: its live values and their row positions.
#[derive(Debug, Clone)]
pub(crate) struct FileColumn {
    pub(crate) add: Add,
    pub(crate) values: ArrayRef,
    pub(crate) positions: Vec<u64>,
}

enum Builder {
    BTree(BTreeBuilder),
    Bitmap(BitmapBuilder),
    FullText(Box<FullTextBuilder>),
}

impl Builder {
    fn new(def: &IndexDefinition, data_type: &ArrowType) -> tarn_index::Result<Self> {
        Ok(match def.kind {
            IndexKind::BTree => Builder::BTree(BTreeBuilder::new(
                data_type,
                BTreeOptions {
                    page_rows: def
                        .options
                        .page_rows
                        .unwrap_or(BTreeOptions::default().page_rows),
                },
            )?),
            IndexKind::Bitmap => Builder::Bitmap(BitmapBuilder::new(data_type)?),
            IndexKind::FullText => Builder::FullText(Box::new(FullTextBuilder::new(
                def.options.full_text.unwrap_or_default(),
            )?)),
        })
    }

    fn push(&mut self, values: ArrayRef, addresses: &[u64]) -> tarn_index::Result<()> {
        match self {
            Builder::BTree(b) => b.push(values, addresses),
            Builder::Bitmap(b) => b.push(values, addresses),
            Builder::FullText(b) => b.push(&values, addresses),
        }
    }

    fn finish(self) -> tarn_index::Result<(bytes::Bytes, tarn_index::ObjectInfo)> {
        match self {
            Builder::BTree(b) => b.finish(),
            Builder::Bitmap(b) => b.finish(),
            Builder::FullText(b) => b.finish(),
        }
    }
}

/// Checks that a kind can index values of `data_type`.
pub(crate) fn check_type(kind: IndexKind, column: &str, data_type: &ArrowType) -> Result<()> {
    let ok = match kind {
        IndexKind::BTree | IndexKind::Bitmap => tarn_index::is_scalar_type(data_type),
        IndexKind::FullText => matches!(data_type, ArrowType::Utf8 | ArrowType::LargeUtf8),
    };
    if ok {
        Ok(())
    } else {
        Err(Error::UnsupportedIndexType {
            column: column.to_string(),
            kind: kind.name().into(),
            data_type: data_type.to_string(),
        })
    }
}

/// Builds the segment of index `name` over `files` and uploads its object; returns the
/// segment's domain and record, or nothing when there are no files.
///
/// Fails with [`Error::Index`] when building fails, and [`Error::Store`] when the upload
/// does.
pub(crate) async fn build_segment(
    snapshot: &Snapshot,
    name: &str,
    def: &IndexDefinition,
    files: Vec<FileColumn>,
) -> Result<Option<(String, IndexSegment)>> {
    if files.is_empty() {
        return Ok(None);
    }
    let data_type = snapshot
        .arrow_schema()
        .field_with_name(&def.column)
        .map(|f| f.data_type().clone())
        .map_err(|_| Error::UnknownColumn {
            column: def.column.clone(),
            available: snapshot.schema().field_names(),
        })?;
    let paths: Vec<String> = files.iter().map(|f| f.add.path.clone()).collect();
    let def_for_build = def.clone();
    let wrap = |source| Error::Index {
        index: name.to_string(),
        source: Box::new(source),
    };
    let (bytes, info) = tokio::task::spawn_blocking(move || {
        let mut builder = Builder::new(&def_for_build, &data_type)?;
        for (ordinal, file) in files.into_iter().enumerate() {
            let addresses: Vec<u64> = file
                .positions
                .iter()
                .map(|p| row_address(ordinal as u32, *p as u32))
                .collect();
            builder.push(file.values, &addresses)?;
        }
        builder.finish()
    })
    .await
    .map_err(|source| Error::TaskFailed {
        task: "building an index segment",
        source,
    })?
    .map_err(wrap)?;
    let id = Uuid::new_v4().simple().to_string();
    let object = segment_object(name, &id, def.kind);
    let location = snapshot.location();
    let path = paths::join_relative(location.root(), &object)?;
    location
        .store()
        .put(&path, PutPayload::from_bytes(bytes))
        .await
        .map_err(Error::store(tarn_store::StoreOp::Put, &path))?;
    let segment = IndexSegment {
        index: def.id.clone(),
        object,
        files: paths,
        rows: info.rows,
        size: info.size,
        format: INDEX_FORMAT,
    };
    Ok(Some((segment_domain(name, &id), segment)))
}

/// Reads the indexed column of `files` back (live rows only, with their positions).
///
/// Fails as reading the files does.
pub(crate) async fn read_column(
    snapshot: &Snapshot,
    column: &str,
    files: Vec<Add>,
) -> Result<Vec<FileColumn>> {
    let scan = snapshot.scan().select([column.to_string()]);
    let scan = &scan;
    futures::stream::iter(files)
        .map(|add| {
            async move {
                let rows = read_file_rows_of(scan, &add, None, 1).await?;
                Ok::<_, Error>(FileColumn {
                    add,
                    values: Arc::clone(rows.batch.column(0)),
                    positions: rows.positions,
                })
            }
            .boxed()
        })
        .buffered(READ_CONCURRENCY)
        .try_collect()
        .await
}
