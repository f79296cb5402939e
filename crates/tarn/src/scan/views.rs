//! Strings and binaries read as views (`Scan::with_string_views`): which types become
//! views, the reader settings that decode a file's columns straight into them, the cast
//! for columns that arrive otherwise (partition values, predicate columns, columns a file
//! lacks), and dropping the decoded pages views no longer need.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, GenericByteViewArray};
use arrow::datatypes::ByteViewType;
use arrow::datatypes::{DataType, Field, FieldRef, Schema};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::file::metadata::PageIndexPolicy;

use crate::error::{Error, Result};
use crate::reader::DataFileErrors;

/// The view type a string or binary type is read as; `None` for other types.
fn view_of(ty: &DataType) -> Option<DataType> {
    match ty {
        DataType::Utf8 | DataType::LargeUtf8 => Some(DataType::Utf8View),
        DataType::Binary | DataType::LargeBinary => Some(DataType::BinaryView),
        _ => None,
    }
}

/// Whether `ty` is a string or binary view.
pub(super) fn is_view(ty: &DataType) -> bool {
    matches!(ty, DataType::Utf8View | DataType::BinaryView)
}

/// The field as a view, when it is a string or binary column; as it is otherwise.
pub(super) fn as_view(field: &Field) -> Field {
    match view_of(field.data_type()) {
        Some(view) => field.clone().with_data_type(view),
        None => field.clone(),
    }
}

/// `column` cast to `ty`, unless it has that type already.
pub(super) fn to_type(column: ArrayRef, ty: &DataType) -> Result<ArrayRef> {
    if column.data_type() == ty {
        return Ok(column);
    }
    arrow::compute::cast(&column, ty).map_err(Error::arrow(format!("reading a column as {ty}")))
}

/// `column` without data buffers, when every one of its values is inline (12 bytes or
/// fewer) and so none points into them; as it is otherwise. No bytes are copied.
///
/// The Parquet decoder hands out views into whole decoded pages or dictionaries, which
/// every batch keeps alive even when no view points into them. A consumer that keeps
/// the batches (a Polars frame) would hold those pages beside the data: for a column of
/// short strings, more than the views. Out-of-line values are left where they are: a
/// dictionary is shared by every batch of its column chunk, and copying each batch's
/// values out of it would repeat them.
pub(super) fn compact(column: ArrayRef) -> ArrayRef {
    fn compacted<T: ByteViewType + ?Sized>(array: &GenericByteViewArray<T>) -> Option<ArrayRef> {
        let unused = !array.data_buffers().is_empty() && array.total_buffer_bytes_used() == 0;
        // `gc` keeps inline-only views as they are and drops the buffers.
        unused.then(|| Arc::new(array.gc()) as ArrayRef)
    }
    let compacted = match column.data_type() {
        DataType::Utf8View => compacted(column.as_string_view()),
        DataType::BinaryView => compacted(column.as_binary_view()),
        _ => None,
    };
    compacted.unwrap_or(column)
}

/// A data file's reader `metadata` with the top-level columns at `roots` decoded as
/// `Utf8View` or `BinaryView`, those of them that are strings or binaries.
///
/// Fails with [`Error::Parquet`] when the reader refuses the schema.
pub(super) fn with_views(
    metadata: &ArrowReaderMetadata,
    errors: &DataFileErrors,
    roots: &[usize],
) -> Result<ArrowReaderMetadata> {
    let schema = metadata.schema();
    let fields: Vec<FieldRef> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| match roots.contains(&i) {
            true => Arc::new(as_view(f)),
            false => Arc::clone(f),
        })
        .collect();
    let schema = Schema::new_with_metadata(fields, schema.metadata().clone());
    let options = ArrowReaderOptions::new()
        .with_offset_index_policy(PageIndexPolicy::Optional)
        .with_schema(Arc::new(schema));
    ArrowReaderMetadata::try_new(Arc::clone(metadata.metadata()), options)
        .map_err(|e| errors.error(e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BinaryArray, Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::DataType as ArrowType;
    use futures::TryStreamExt;
    use parquet::arrow::{ArrowWriter, ParquetRecordBatchStreamBuilder};

    use crate::cache::Caches;
    use crate::reader::open_data_file;
    use crate::reader::tests::{memory_table, put_add};

    /// The columns at the view roots decode straight into views; the others, and a root
    /// that is no string or binary, as written.
    #[tokio::test]
    async fn view_roots_decode_as_views_and_the_rest_as_written() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", ArrowType::Int64, false),
            Field::new("name", ArrowType::Utf8, true),
            Field::new("blob", ArrowType::Binary, true),
            Field::new("tag", ArrowType::Utf8, false),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(0..100)),
            Arc::new(StringArray::from_iter(
                (0..100).map(|i| (i % 3 != 0).then(|| format!("name {i}"))),
            )),
            Arc::new(BinaryArray::from_iter_values(
                (0..100u8).map(|i| vec![i; usize::from(i % 20)]),
            )),
            Arc::new(StringArray::from_iter_values(
                (0..100).map(|i| format!("t{i}")),
            )),
        ];
        let batch = RecordBatch::try_new(Arc::clone(&schema), columns).unwrap();
        let mut writer = ArrowWriter::try_new(Vec::new(), Arc::clone(&schema), None).unwrap();
        writer.write(&batch).unwrap();
        let bytes = writer.into_inner().unwrap();

        let (store, location) = memory_table();
        let add = put_add(&store, "part-0.parquet", bytes).await;
        let file = open_data_file(&location, &add, &Caches::default())
            .await
            .unwrap();
        // `id` is no string: asked for as a view, it stays as written.
        let metadata = with_views(&file.metadata, &file.errors, &[0, 1, 2]).unwrap();
        let read: Vec<RecordBatch> =
            ParquetRecordBatchStreamBuilder::new_with_metadata(file.reader.clone(), metadata)
                .build()
                .unwrap()
                .try_collect()
                .await
                .unwrap();
        let types: Vec<ArrowType> = read[0]
            .schema()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        assert_eq!(
            types,
            [
                ArrowType::Int64,
                ArrowType::Utf8View,
                ArrowType::BinaryView,
                ArrowType::Utf8
            ]
        );
        // The decoder's views of short names keep its page; compacted, they hold no bytes.
        let names = read[0].column(1);
        assert!(!names.as_string_view().data_buffers().is_empty());
        let compacted = compact(Arc::clone(names));
        assert!(compacted.as_string_view().data_buffers().is_empty());
        assert_eq!(compacted.as_string_view(), names.as_string_view());

        let read = arrow::compute::concat_batches(&read[0].schema(), &read).unwrap();
        for (i, column) in read.columns().iter().enumerate() {
            let plain = arrow::compute::cast(column, batch.column(i).data_type()).unwrap();
            assert_eq!(plain.to_data(), batch.column(i).to_data(), "column {i}");
        }
    }

    /// Views that point into their buffers keep them, however few bytes they use (the
    /// buffer may be a dictionary other batches share); views that are all inline let
    /// them go, values unchanged.
    #[test]
    fn compacting_drops_buffers_only_views_that_are_all_inline() {
        use arrow::array::{BooleanArray, StringViewArray, StringViewBuilder};
        use arrow::buffer::Buffer;

        let held = |a: &ArrayRef| -> usize {
            a.as_string_view()
                .data_buffers()
                .iter()
                .map(Buffer::len)
                .sum()
        };
        let long: ArrayRef =
            Arc::new(StringViewArray::from_iter_values((0..1000).map(|i| {
                format!("a value longer than twelve bytes, number {i}")
            })));
        assert!(Arc::ptr_eq(&compact(Arc::clone(&long)), &long));
        let every_tenth = BooleanArray::from_iter((0..1000).map(|i| Some(i % 10 == 0)));
        let few = arrow::compute::filter(&long, &every_tenth).unwrap();
        assert!(Arc::ptr_eq(&compact(Arc::clone(&few)), &few));

        let mut inline = StringViewBuilder::new();
        inline.append_block(Buffer::from(vec![b'x'; 4096]));
        for i in 0..100 {
            inline.append_option((i % 7 != 0).then(|| format!("short {i}")));
        }
        let inline: ArrayRef = Arc::new(inline.finish());
        assert_eq!(held(&inline), 4096);
        let compacted = compact(Arc::clone(&inline));
        assert_eq!(held(&compacted), 0);
        assert_eq!(compacted.as_string_view(), inline.as_string_view());
        // The views themselves are the same memory: nothing was copied.
        assert_eq!(
            compacted.as_string_view().views().as_ptr(),
            inline.as_string_view().views().as_ptr()
        );
    }
}
