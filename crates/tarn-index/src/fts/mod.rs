//! Full-text indices: a tantivy index over a string column, built in memory and stored as
//! one bundle object, searched through a `Directory` that reads byte ranges from the
//! object store (quickwit's split + hot-cache layout, simplified).
//!
//! Layout (inside the frame of [`crate::format`]):
//!
//! - **files**: tantivy's segment files, one after another (the index is merged into one
//!   segment before it is bundled);
//! - **hot cache**: the byte ranges of those files that opening the index and looking up
//!   a term read (footers, the term dictionary, the fast-field header), recorded at build
//!   time and packed end to end;
//! - **meta**: JSON: each file's byte range, `meta.json` inline, the hot cache's range,
//!   checksum and slices, the analyzer options and the document count.
//!
//! Opening fetches the meta (and usually the hot cache, in the same suffix GET); a search
//! then reads only the postings and positions of its terms and the addresses of its hits,
//! in 64 KiB blocks kept in a small cache. Documents are row addresses: the `address` fast
//! field maps a hit to its row.

mod builder;
mod bundle;
mod directory;
mod options;
mod query;
mod reader;

pub use builder::FullTextBuilder;
pub use options::{FullTextOptions, Tokenizer};
pub use query::TextQuery;
pub use reader::FullTextIndex;
