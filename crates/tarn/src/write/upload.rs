//! Uploading encoded data files: whole when small; when large, in parts that go up while
//! the rest of the file is still being encoded, from the chunks it is encoded into.

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use tokio::task::JoinHandle;

use crate::error::{Error, Result};

/// Files uploaded at once.
pub(super) const UPLOAD_CONCURRENCY: usize = 8;
/// Above this size a file is uploaded in parts.
const MULTIPART_THRESHOLD: usize = 32 * 1024 * 1024;
/// Size of each part of a multipart upload.
const PART_SIZE: usize = 16 * 1024 * 1024;
/// Parts of one streamed file in flight at once.
const PARTS_IN_FLIGHT: usize = 2;
/// Encoded chunks waiting for a streamed file's upload: with the part being assembled and
/// the parts in flight, what bounds the memory of a file however large it grows.
const CHUNKS_QUEUED: usize = 4;

/// A stream of what a channel receives.
pub(super) fn tokio_stream_from<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> futures::stream::BoxStream<'static, T> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed()
}

pub(super) async fn upload(store: &dyn ObjectStore, path: &Path, bytes: PutPayload) -> Result<()> {
    if bytes.content_length() <= MULTIPART_THRESHOLD {
        store
            .put(path, bytes)
            .await
            .map_err(Error::store(tarn_store::StoreOp::Put, path))?;
        return Ok(());
    }
    let upload = store
        .put_multipart(path)
        .await
        .map_err(Error::store(tarn_store::StoreOp::PutMultipart, path))?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
    for chunk in &bytes {
        writer.put(chunk.clone());
    }
    writer
        .finish()
        .await
        .map_err(Error::store(tarn_store::StoreOp::PutMultipart, path))?;
    Ok(())
}

/// Bytes of a file being encoded, in chunks: growing it never copies what is written
/// (a `Vec` doubling copies the whole file so far, and briefly holds it twice).
#[derive(Default)]
pub(super) struct ChunkedBuffer {
    chunks: Vec<Bytes>,
    current: Vec<u8>,
}

/// Size of each chunk of a [`ChunkedBuffer`].
const BUFFER_CHUNK: usize = 4 * 1024 * 1024;

impl std::io::Write for ChunkedBuffer {
    fn write(&mut self, mut data: &[u8]) -> std::io::Result<usize> {
        let written = data.len();
        while !data.is_empty() {
            if self.current.len() == self.current.capacity() {
                if !self.current.is_empty() {
                    self.chunks
                        .push(Bytes::from(std::mem::take(&mut self.current)));
                }
                self.current = Vec::with_capacity(BUFFER_CHUNK);
            }
            let room = self.current.capacity() - self.current.len();
            let (now, rest) = data.split_at(room.min(data.len()));
            self.current.extend_from_slice(now);
            data = rest;
        }
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl ChunkedBuffer {
    pub(super) fn into_payload(self) -> PutPayload {
        self.into_chunks().into_iter().collect()
    }

    fn into_chunks(mut self) -> Vec<Bytes> {
        if !self.current.is_empty() {
            self.chunks.push(Bytes::from(self.current));
        }
        self.chunks
    }

    /// Bytes in full chunks.
    fn full_len(&self) -> usize {
        self.chunks.iter().map(Bytes::len).sum()
    }
}

/// What a finished data file's bytes became.
pub(super) enum Body {
    /// The whole file, to upload.
    Bytes(PutPayload),
    /// A multipart upload already under way on its own task: awaiting it completes the
    /// file or reports why not.
    Uploading(JoinHandle<Result<()>>),
}

impl Body {
    /// Uploads the file, or waits for its upload to complete.
    ///
    /// Fails with [`Error::Store`] when the upload fails.
    pub(super) async fn upload_to(self, store: &dyn ObjectStore, path: &Path) -> Result<()> {
        match self {
            Body::Bytes(bytes) => upload(store, path, bytes).await,
            Body::Uploading(task) => task.await.map_err(|source| Error::TaskFailed {
                task: "uploading a data file",
                source,
            })?,
        }
    }
}

enum Part {
    Chunk(Bytes),
    Finish,
}

/// Where a data file is encoded to: chunks in memory and, once the file passes the
/// multipart threshold (and a destination is given), a multipart upload on a task of its
/// own that takes the chunks as they fill, so a large file uploads while it encodes and
/// never sits in memory whole. Written from a blocking thread.
pub(super) struct FileSink {
    buffer: ChunkedBuffer,
    len: u64,
    destination: Option<(Arc<dyn ObjectStore>, Path)>,
    streaming: Option<(tokio::sync::mpsc::Sender<Part>, JoinHandle<Result<()>>)>,
}

impl FileSink {
    /// A sink that streams to `destination` when the file grows large, or only buffers.
    pub(super) fn new(destination: Option<(Arc<dyn ObjectStore>, Path)>) -> Self {
        Self {
            buffer: ChunkedBuffer::default(),
            len: 0,
            destination,
            streaming: None,
        }
    }

    /// Bytes written so far.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    fn start_streaming(&mut self) {
        // Outside a runtime (never in Tarn's own writes) the file stays in memory.
        let (Some((store, path)), Ok(runtime)) = (
            self.destination.take(),
            tokio::runtime::Handle::try_current(),
        ) else {
            return;
        };
        let (tx, rx) = tokio::sync::mpsc::channel(CHUNKS_QUEUED);
        let task = runtime.spawn(stream_upload(store, path, rx));
        self.streaming = Some((tx, task));
    }

    fn send_full_chunks(&mut self) -> std::io::Result<()> {
        let Some((tx, _)) = &self.streaming else {
            return Ok(());
        };
        for chunk in std::mem::take(&mut self.buffer.chunks) {
            tx.blocking_send(Part::Chunk(chunk))
                .map_err(|_| std::io::Error::other("the data file's upload failed"))?;
        }
        Ok(())
    }

    /// Ends the file: its whole bytes, or its upload once the last chunks are handed over.
    pub(super) fn finish(mut self) -> Body {
        match self.streaming.take() {
            None => Body::Bytes(std::mem::take(&mut self.buffer).into_payload()),
            Some((tx, task)) => {
                // A failed send means the upload failed; awaiting it says why.
                for chunk in std::mem::take(&mut self.buffer).into_chunks() {
                    if tx.blocking_send(Part::Chunk(chunk)).is_err() {
                        break;
                    }
                }
                let _ = tx.blocking_send(Part::Finish);
                Body::Uploading(task)
            }
        }
    }

    /// Why writing failed, when it was the upload (rather than the encoder): the store's
    /// error, waited for on this blocking thread.
    pub(super) fn upload_error(&mut self) -> Option<Error> {
        let (tx, task) = self.streaming.take()?;
        drop(tx);
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        match runtime.block_on(task) {
            Ok(Err(e)) => Some(e),
            _ => None,
        }
    }
}

impl std::io::Write for FileSink {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let written = std::io::Write::write(&mut self.buffer, data)?;
        self.len += written as u64;
        if self.streaming.is_none()
            && self.destination.is_some()
            && self.buffer.full_len() >= MULTIPART_THRESHOLD
        {
            self.start_streaming();
        }
        self.send_full_chunks()?;
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The multipart upload of a streamed file: parts go up as chunks arrive, a couple at
/// once; it completes on `Finish` and is aborted if the encoder stops without it.
async fn stream_upload(
    store: Arc<dyn ObjectStore>,
    path: Path,
    mut rx: tokio::sync::mpsc::Receiver<Part>,
) -> Result<()> {
    let upload = store
        .put_multipart(&path)
        .await
        .map_err(Error::store(tarn_store::StoreOp::PutMultipart, &path))?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
    let outcome = loop {
        match rx.recv().await {
            Some(Part::Chunk(chunk)) => {
                if let Err(e) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                    break Err(Error::store(tarn_store::StoreOp::PutMultipart, &path)(e));
                }
                writer.put(chunk);
            }
            Some(Part::Finish) => {
                return writer
                    .finish()
                    .await
                    .map(|_| ())
                    .map_err(Error::store(tarn_store::StoreOp::PutMultipart, &path));
            }
            None => {
                break Err(Error::InvalidArgument {
                    name: "write",
                    reason: format!("encoding {path} stopped before the file was complete"),
                });
            }
        }
    };
    // Nothing half-written stays behind (S3 keeps incomplete uploads' parts otherwise).
    let _ = writer.abort().await;
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_file_streams_its_parts_before_it_is_finished() {
        use std::io::Write;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let inner: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let counting = Arc::new(tarn_store::CountingStore::new(Arc::clone(&inner)));
        let counter = counting.counter();
        let path = Path::from("t/big.parquet");
        let data: Vec<u8> = (0..(MULTIPART_THRESHOLD + 3 * PART_SIZE + 5))
            .map(|i| (i % 253) as u8)
            .collect();
        let store: Arc<dyn ObjectStore> = counting;
        let (written, body) = runtime.block_on({
            let (path, data) = (path.clone(), data.clone());
            async move {
                tokio::task::spawn_blocking(move || {
                    let mut sink = FileSink::new(Some((store, path)));
                    for piece in data.chunks(1 << 20) {
                        sink.write_all(piece).unwrap();
                    }
                    // Every byte is written and the file not finished: parts are already
                    // going up.
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                    while counter.counts().multipart_requests < 3 {
                        assert!(std::time::Instant::now() < deadline, "no part went up");
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
                    (sink.len(), sink.finish())
                })
                .await
                .unwrap()
            }
        });
        assert_eq!(written, data.len() as u64);
        let Body::Uploading(task) = body else {
            panic!("a file past the threshold streams");
        };
        runtime.block_on(async {
            task.await.unwrap().unwrap();
            let stored = inner.get(&path).await.unwrap().bytes().await.unwrap();
            assert_eq!(stored.as_ref(), data.as_slice());
        });
    }

    #[test]
    fn a_chunked_buffer_keeps_every_byte_in_order() {
        use std::io::Write;
        let data: Vec<u8> = (0..(BUFFER_CHUNK * 2 + 12_345))
            .map(|i| (i % 251) as u8)
            .collect();
        let mut buffer = ChunkedBuffer::default();
        for piece in data.chunks(1_000_003) {
            buffer.write_all(piece).unwrap();
        }
        let payload = buffer.into_payload();
        assert_eq!(payload.content_length(), data.len());
        let joined: Vec<u8> = payload.iter().flat_map(|b| b.to_vec()).collect();
        assert_eq!(joined, data);
        assert!(payload.iter().all(|b| b.len() <= BUFFER_CHUNK));
    }
}
