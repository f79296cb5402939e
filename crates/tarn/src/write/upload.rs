//! Uploading encoded data files: whole when small, in parts when large, from the
//! chunks they were encoded into.

use bytes::Bytes;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};

use crate::error::{Error, Result};

/// Files uploaded at once.
pub(super) const UPLOAD_CONCURRENCY: usize = 8;
/// Above this size a file is uploaded in parts.
const MULTIPART_THRESHOLD: usize = 32 * 1024 * 1024;
/// Size of each part of a multipart upload.
const PART_SIZE: usize = 16 * 1024 * 1024;

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
            .map_err(Error::store("put", path))?;
        return Ok(());
    }
    let upload = store
        .put_multipart(path)
        .await
        .map_err(Error::store("put_multipart", path))?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
    for chunk in &bytes {
        writer.put(chunk.clone());
    }
    writer
        .finish()
        .await
        .map_err(Error::store("put_multipart", path))?;
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
    pub(super) fn into_payload(mut self) -> PutPayload {
        if !self.current.is_empty() {
            self.chunks.push(Bytes::from(self.current));
        }
        self.chunks.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
