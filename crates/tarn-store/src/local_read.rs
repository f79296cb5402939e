//! Large ranged reads of local files into buffers that are not zero-filled first, for
//! [`crate::LocalStore`].
//!
//! `LocalFileSystem` sizes each range's buffer with zeros and then reads over them. For a
//! full scan's column chunks (a few MiB each) that fill is a pass over fresh memory that
//! the read is about to overwrite: the profile of a scan on a warm page cache showed it
//! faulting in most of the process's pages
//! (`docs/results/2026-12-02-scan-fetch-profile.md`). Here each range is read straight
//! into its buffer's spare capacity, which grows by what each read returns.

use std::fs::File;
use std::io::ErrorKind;
use std::ops::Range;

use bytes::Bytes;
use rustix::buffer::spare_capacity;
use rustix::io::{Errno, pread};

/// Reads `len` bytes of `file` from `start` into a new buffer: `None` on a short read or
/// any error.
fn read_range(file: &File, start: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = Vec::with_capacity(len);
    while buf.len() < len {
        let offset = start + buf.len() as u64;
        match pread(file, spare_capacity(&mut buf), offset) {
            Ok(n) if n > 0 => {}
            Err(Errno::INTR) => {}
            _ => return None,
        }
    }
    // `with_capacity` gave exactly `len`, so no read went past the range.
    debug_assert_eq!(buf.len(), len);
    Some(buf)
}

/// Opens the file at `path` for reading. A missing file is `NotFound`, as
/// `LocalFileSystem` reports it; `None` when opening fails any other way, for the caller
/// to read through `LocalFileSystem`, whose error names the cause.
pub(crate) fn open(path: &std::path::Path) -> Option<object_store::Result<File>> {
    match File::open(path) {
        Ok(file) => Some(Ok(file)),
        Err(e) if e.kind() == ErrorKind::NotFound => Some(Err(object_store::Error::NotFound {
            path: path.to_string_lossy().to_string(),
            source: Box::new(e),
        })),
        Err(_) => None,
    }
}

/// Reads `ranges` of the file at `path`. A missing file is `NotFound`; `None` when
/// opening or reading fails any other way or comes up short (a range past the end), for
/// the caller to read through `LocalFileSystem`, whose error names the cause. Blocks:
/// call it on the blocking pool.
pub(crate) fn read_ranges(
    path: &std::path::Path,
    ranges: &[Range<u64>],
) -> Option<object_store::Result<Vec<Bytes>>> {
    let file = match open(path)? {
        Ok(file) => file,
        Err(e) => return Some(Err(e)),
    };
    ranges
        .iter()
        .map(|range| {
            let len = usize::try_from(range.end.checked_sub(range.start)?).ok()?;
            read_range(&file, range.start, len).map(Bytes::from)
        })
        .collect::<Option<Vec<_>>>()
        .map(Ok)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::single_range_in_vec_init)]
    use super::*;

    #[test]
    fn ranges_read_whole_and_short_or_missing_reads_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mib = 1usize << 20;
        let data: Vec<u8> = (0..3 * mib).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let got = read_ranges(&path, &[0..2 * mib as u64, 100..1100, 7..7])
            .unwrap()
            .unwrap();
        assert_eq!(got[0].as_ref(), &data[..2 * mib]);
        assert_eq!(got[1].as_ref(), &data[100..1100]);
        assert!(got[2].is_empty());
        let missing = read_ranges(&dir.path().join("missing"), &[0..4]).unwrap();
        assert!(matches!(missing, Err(object_store::Error::NotFound { .. })));
        // Short, and wholly past the end: left to the caller.
        let end = data.len() as u64;
        assert!(read_ranges(&path, &[end - 10..end + 10]).is_none());
        assert!(read_ranges(&path, &[end + 10..end + 20]).is_none());
        assert!(read_ranges(&path, &[0..10, end - mib as u64..end + 1]).is_none());
    }
}
