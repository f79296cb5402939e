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

mod directory;
mod query;

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::DataType;
use bytes::Bytes;
use object_store::ObjectStore;
use object_store::path::Path;
use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};
use tantivy::collector::{DocSetCollector, TopDocs};
use tantivy::directory::{Directory, RamDirectory};
use tantivy::query::{AllQuery, BooleanQuery, EmptyQuery, Occur, PhraseQuery, Query, TermQuery};
use tantivy::schema::{FAST, Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{
    LowerCaser, RawTokenizer, RemoveLongFilter, SimpleTokenizer, TextAnalyzer, WhitespaceTokenizer,
};
use tantivy::{
    Index, IndexReader, IndexSettings, IndexWriter, ReloadPolicy, TantivyDocument, Term,
};

pub use query::TextQuery;

use crate::format::{self, IndexKind, ObjectInfo, ObjectWriter};
use crate::{Error, Result};
use directory::{Blocks, BundleDirectory, Source};

const TEXT_FIELD: &str = "text";
const ADDRESS_FIELD: &str = "address";
const TOKENIZER: &str = "tarn";
const META_JSON: &str = "meta.json";
/// Memory tantivy's writer may use before it flushes a segment.
const WRITER_MEMORY: usize = 64 * 1024 * 1024;

/// How text is split into tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tokenizer {
    /// Runs of letters and digits (the default).
    #[default]
    Simple,
    /// Runs of non-whitespace characters.
    Whitespace,
    /// The whole value is one token.
    Raw,
}

/// How a full-text index analyzes text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FullTextOptions {
    /// How text splits into tokens.
    pub tokenizer: Tokenizer,
    /// Whether tokens are lowercased (default yes).
    pub lowercase: bool,
    /// Tokens longer than this many bytes are dropped (default 40).
    pub max_token_len: usize,
}

impl Default for FullTextOptions {
    fn default() -> Self {
        Self {
            tokenizer: Tokenizer::Simple,
            lowercase: true,
            max_token_len: 40,
        }
    }
}

impl FullTextOptions {
    /// The analyzer these options describe: the same for indexing, for queries and for
    /// matching rows no index covers.
    pub fn analyzer(&self) -> TextAnalyzer {
        let limit = RemoveLongFilter::limit(self.max_token_len.max(1));
        match (self.tokenizer, self.lowercase) {
            (Tokenizer::Simple, true) => TextAnalyzer::builder(SimpleTokenizer::default())
                .filter(limit)
                .filter(LowerCaser)
                .build(),
            (Tokenizer::Simple, false) => TextAnalyzer::builder(SimpleTokenizer::default())
                .filter(limit)
                .build(),
            (Tokenizer::Whitespace, true) => TextAnalyzer::builder(WhitespaceTokenizer::default())
                .filter(limit)
                .filter(LowerCaser)
                .build(),
            (Tokenizer::Whitespace, false) => TextAnalyzer::builder(WhitespaceTokenizer::default())
                .filter(limit)
                .build(),
            (Tokenizer::Raw, true) => TextAnalyzer::builder(RawTokenizer::default())
                .filter(LowerCaser)
                .build(),
            (Tokenizer::Raw, false) => TextAnalyzer::builder(RawTokenizer::default()).build(),
        }
    }
}

fn schema() -> (Schema, Field, Field) {
    let mut builder = Schema::builder();
    let indexing = TextFieldIndexing::default()
        .set_tokenizer(TOKENIZER)
        .set_index_option(IndexRecordOption::WithFreqsAndPositions);
    let text = builder.add_text_field(
        TEXT_FIELD,
        TextOptions::default().set_indexing_options(indexing),
    );
    let address = builder.add_u64_field(ADDRESS_FIELD, FAST);
    (builder.build(), text, address)
}

fn engine(path: &str) -> impl Fn(tantivy::TantivyError) -> Error + '_ {
    move |e| Error::FullText {
        path: path.to_string(),
        reason: e.to_string(),
    }
}

/// Builds a full-text index from string arrays and their row addresses.
pub struct FullTextBuilder {
    options: FullTextOptions,
    index: Index,
    /// The index's files as tantivy wrote them, footers included.
    files: RamDirectory,
    writer: IndexWriter<TantivyDocument>,
    text: Field,
    address: Field,
    rows: u64,
}

impl std::fmt::Debug for FullTextBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FullTextBuilder")
            .field("options", &self.options)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl FullTextBuilder {
    /// A builder analyzing text as `options` say.
    ///
    /// Fails with [`Error::FullText`] when tantivy cannot start a writer.
    pub fn new(options: FullTextOptions) -> Result<Self> {
        let (schema, text, address) = schema();
        let files = RamDirectory::create();
        let index =
            Index::create(files.clone(), schema, IndexSettings::default()).map_err(engine(""))?;
        index.tokenizers().register(TOKENIZER, options.analyzer());
        let writer = index
            .writer_with_num_threads(1, WRITER_MEMORY)
            .map_err(engine(""))?;
        Ok(Self {
            options,
            index,
            files,
            writer,
            text,
            address,
            rows: 0,
        })
    }

    /// Adds the strings of `values` with their row addresses; nulls are skipped.
    ///
    /// Fails with [`Error::UnsupportedType`] for arrays that are not strings and
    /// [`Error::InvalidInput`] when the lengths differ.
    pub fn push(&mut self, values: &ArrayRef, addresses: &[u64]) -> Result<()> {
        if values.len() != addresses.len() {
            return Err(Error::InvalidInput {
                reason: format!("{} values with {} addresses", values.len(), addresses.len()),
            });
        }
        let text = |i: usize| -> Option<&str> {
            match values.data_type() {
                DataType::Utf8 => Some(values.as_string::<i32>().value(i)),
                DataType::LargeUtf8 => Some(values.as_string::<i64>().value(i)),
                DataType::Utf8View => Some(values.as_string_view().value(i)),
                _ => None,
            }
        };
        if !matches!(
            values.data_type(),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ) {
            return Err(Error::UnsupportedType {
                kind: "full-text",
                data_type: values.data_type().to_string(),
            });
        }
        for (i, address) in addresses.iter().enumerate() {
            if values.is_null(i) {
                continue;
            }
            let mut doc = TantivyDocument::default();
            doc.add_text(self.text, text(i).unwrap_or_default());
            doc.add_u64(self.address, *address);
            self.writer.add_document(doc).map_err(engine(""))?;
            self.rows += 1;
        }
        Ok(())
    }

    /// Commits, merges into one segment and bundles the files with their hot cache: CPU
    /// work, to run off the async threads.
    ///
    /// Fails with [`Error::FullText`] when tantivy fails.
    pub fn finish(mut self) -> Result<(Bytes, ObjectInfo)> {
        self.writer.commit().map_err(engine(""))?;
        let segments = self.index.searchable_segment_ids().map_err(engine(""))?;
        if segments.len() > 1 {
            self.writer.merge(&segments).wait().map_err(engine(""))?;
        }
        self.writer.wait_merging_threads().map_err(engine(""))?;
        let meta_json = self
            .files
            .atomic_read(std::path::Path::new(META_JSON))
            .map_err(|e| Error::FullText {
                path: String::new(),
                reason: e.to_string(),
            })?;
        let metas = self.index.load_metas().map_err(engine(""))?;
        let mut names: Vec<PathBuf> = metas
            .list_segment_files()
            .into_iter()
            .filter(|p| self.files.exists(p).unwrap_or(false))
            .collect();
        names.sort();
        let mut writer = ObjectWriter::default();
        let mut files = BTreeMap::new();
        for name in &names {
            let bytes = self
                .files
                .open_read(name)
                .and_then(|f| {
                    f.read_bytes()
                        .map_err(|e| tantivy::directory::error::OpenReadError::IoError {
                            io_error: Arc::new(e),
                            filepath: name.clone(),
                        })
                })
                .map_err(|e| Error::FullText {
                    path: String::new(),
                    reason: e.to_string(),
                })?;
            let (range, crc) = writer.part(bytes.as_slice());
            files.insert(
                name.to_string_lossy().into_owned(),
                FileEntry {
                    start: range.start,
                    len: range.end - range.start,
                    crc,
                },
            );
        }
        let files_bytes = writer.snapshot();
        let meta_text = String::from_utf8_lossy(&meta_json).into_owned();
        let hot_ranges = record_hot_ranges(&files_bytes, &files, &meta_text, &self.options)?;
        // The hot cache: the recorded ranges, merged and packed end to end.
        let mut slices = Vec::new();
        let mut blob = Vec::new();
        for range in hot_ranges {
            slices.push((range.start, range.end - range.start));
            blob.extend_from_slice(&files_bytes[range.start as usize..range.end as usize]);
        }
        let (hot_range, hot_crc) = writer.part(&blob);
        let meta = BundleMeta {
            version: 1,
            files,
            meta_json: meta_text,
            hot: HotCache {
                start: hot_range.start,
                len: hot_range.end - hot_range.start,
                crc: hot_crc,
                slices,
            },
            options: self.options,
            docs: self.rows,
        };
        let meta = serde_json::to_vec(&meta).map_err(|e| Error::FullText {
            path: String::new(),
            reason: format!("encoding the bundle meta: {e}"),
        })?;
        let bytes = writer.finish(&meta, IndexKind::FullText);
        let info = ObjectInfo {
            size: bytes.len() as u64,
            rows: self.rows,
        };
        Ok((bytes, info))
    }

    /// Builds the index on a blocking thread and uploads it to `path`.
    ///
    /// Fails as [`finish`](Self::finish) does, and with [`Error::Store`] when the upload
    /// fails.
    pub async fn write(self, store: &dyn ObjectStore, path: &Path) -> Result<ObjectInfo> {
        let (bytes, info) = tokio::task::spawn_blocking(move || self.finish())
            .await
            .map_err(|source| Error::TaskFailed {
                task: "full-text build",
                source,
            })??;
        format::put(store, path, bytes).await?;
        Ok(info)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct FileEntry {
    start: u64,
    len: u64,
    crc: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct HotCache {
    start: u64,
    len: u64,
    crc: u32,
    /// `(start in the bundle, length)` of each packed slice, in order.
    slices: Vec<(u64, u64)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct BundleMeta {
    version: u32,
    files: BTreeMap<String, FileEntry>,
    meta_json: String,
    hot: HotCache,
    options: FullTextOptions,
    docs: u64,
}

fn file_ranges(files: &BTreeMap<String, FileEntry>) -> HashMap<PathBuf, Range<u64>> {
    files
        .iter()
        .map(|(name, f)| (PathBuf::from(name), f.start..f.start + f.len))
        .collect()
}

/// Opens the bundle in memory, does what opening and a term lookup do, and returns the
/// byte ranges that read, merged.
fn record_hot_ranges(
    bundle: &Bytes,
    files: &BTreeMap<String, FileEntry>,
    meta_json: &str,
    options: &FullTextOptions,
) -> Result<Vec<Range<u64>>> {
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let directory = BundleDirectory::new(
        Source::Memory {
            bytes: bundle.clone(),
            recorded: Arc::clone(&recorded),
        },
        file_ranges(files),
        HashMap::from([(PathBuf::from(META_JSON), meta_json.as_bytes().to_vec())]),
    );
    let opened = Opened::open(directory, options, "")?;
    let searcher = opened.reader.searcher();
    for segment in searcher.segment_readers() {
        let inverted = segment.inverted_index(opened.text).map_err(engine(""))?;
        // A lookup touches the term dictionary's index blocks.
        let _ = inverted.terms().get(b"tarn").map_err(|e| Error::FullText {
            path: String::new(),
            reason: e.to_string(),
        })?;
        let _ = segment
            .fast_fields()
            .u64(ADDRESS_FIELD)
            .map_err(engine(""))?;
    }
    let mut ranges = std::mem::take(&mut *recorded.lock().unwrap_or_else(|p| p.into_inner()));
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::new();
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    Ok(merged)
}

/// A tantivy index opened over a bundle.
struct Opened {
    reader: IndexReader,
    text: Field,
    analyzer: TextAnalyzer,
}

impl Opened {
    fn open(directory: BundleDirectory, options: &FullTextOptions, path: &str) -> Result<Self> {
        let index = Index::open(directory).map_err(engine(path))?;
        index.tokenizers().register(TOKENIZER, options.analyzer());
        let (schema, _, _) = schema();
        let field = |name: &str| index.schema().get_field(name).map_err(engine(path));
        let text = field(TEXT_FIELD)?;
        field(ADDRESS_FIELD)?;
        if index.schema().num_fields() != schema.num_fields() {
            return Err(Error::corrupt(
                &path,
                "the bundle's schema is not a Tarn full-text schema",
            ));
        }
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(engine(path))?;
        Ok(Self {
            reader,
            text,
            analyzer: options.analyzer(),
        })
    }

    /// The tantivy query of a text query, analyzed like the indexed text.
    fn query(&self, query: &TextQuery) -> Box<dyn Query> {
        match query {
            TextQuery::Term(t) | TextQuery::Phrase(t) => {
                let tokens = query::analyze(&self.analyzer, t);
                let terms: Vec<Term> = tokens
                    .iter()
                    .map(|t| Term::from_field_text(self.text, t))
                    .collect();
                match terms.len() {
                    0 => Box::new(EmptyQuery),
                    1 => Box::new(TermQuery::new(
                        terms
                            .into_iter()
                            .next()
                            .unwrap_or_else(|| Term::from_field_text(self.text, "")),
                        IndexRecordOption::WithFreqs,
                    )),
                    _ => Box::new(PhraseQuery::new(terms)),
                }
            }
            TextQuery::And(parts) => {
                let mut clauses: Vec<(Occur, Box<dyn Query>)> = parts
                    .iter()
                    .map(|p| match p {
                        TextQuery::Not(inner) => (Occur::MustNot, self.query(inner)),
                        other => (Occur::Must, self.query(other)),
                    })
                    .collect();
                if clauses.iter().all(|(o, _)| *o == Occur::MustNot) {
                    clauses.push((Occur::Must, Box::new(AllQuery)));
                }
                Box::new(BooleanQuery::new(clauses))
            }
            TextQuery::Or(parts) => Box::new(BooleanQuery::new(
                parts
                    .iter()
                    .map(|p| (Occur::Should, self.query(p)))
                    .collect(),
            )),
            TextQuery::Not(inner) => Box::new(BooleanQuery::new(vec![
                (Occur::Must, Box::new(AllQuery)),
                (Occur::MustNot, self.query(inner)),
            ])),
        }
    }
}

/// An opened full-text index.
#[derive(Clone)]
pub struct FullTextIndex {
    inner: Arc<Opened>,
    path: String,
    options: FullTextOptions,
    docs: u64,
    size: u64,
}

impl std::fmt::Debug for FullTextIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FullTextIndex")
            .field("path", &self.path)
            .field("docs", &self.docs)
            .finish_non_exhaustive()
    }
}

impl FullTextIndex {
    /// Opens the full-text index at `path`: the meta and the hot cache, usually in one
    /// suffix GET.
    ///
    /// Fails with [`Error::NotFound`] when the object is missing, [`Error::Corrupt`] when
    /// it is truncated or damaged (the hot cache's checksum is checked),
    /// [`Error::UnsupportedVersion`] for a newer format and [`Error::FullText`] when
    /// tantivy cannot open the bundle.
    pub async fn open(store: Arc<dyn ObjectStore>, path: &Path) -> Result<Self> {
        let object = format::open(store.as_ref(), path, IndexKind::FullText).await?;
        let meta: BundleMeta = serde_json::from_slice(&object.meta)
            .map_err(|e| Error::corrupt(path, format!("the bundle meta does not decode: {e}")))?;
        if meta.version != 1 {
            return Err(Error::UnsupportedVersion {
                path: path.to_string(),
                version: meta.version as u16,
                supported: 1,
            });
        }
        let hot_part = (meta.hot.start..meta.hot.start + meta.hot.len, meta.hot.crc);
        let hot_blob = object
            .parts(store.as_ref(), std::slice::from_ref(&hot_part))
            .await?
            .pop()
            .unwrap_or_default();
        let mut hot = Vec::with_capacity(meta.hot.slices.len());
        let mut at = 0usize;
        for (start, len) in &meta.hot.slices {
            let end = at + *len as usize;
            if end > hot_blob.len() {
                return Err(Error::corrupt(
                    path,
                    "the hot cache is shorter than its slices",
                ));
            }
            hot.push((*start, hot_blob.slice(at..end)));
            at = end;
        }
        for f in meta.files.values() {
            if f.start + f.len > object.size {
                return Err(Error::corrupt(
                    path,
                    "a bundled file lies outside the object",
                ));
            }
        }
        let directory = BundleDirectory::new(
            Source::Store {
                store,
                path: path.clone(),
                size: object.size,
                runtime: tokio::runtime::Handle::current(),
                hot,
                blocks: Mutex::new(Blocks::default()),
            },
            file_ranges(&meta.files),
            HashMap::from([(PathBuf::from(META_JSON), meta.meta_json.into_bytes())]),
        );
        let options = meta.options;
        let name = path.to_string();
        let opened = tokio::task::spawn_blocking(move || Opened::open(directory, &options, &name))
            .await
            .map_err(|source| Error::TaskFailed {
                task: "full-text open",
                source,
            })??;
        Ok(Self {
            inner: Arc::new(opened),
            path: path.to_string(),
            options,
            docs: meta.docs,
            size: object.size,
        })
    }

    /// The analyzer options the index was built with.
    pub fn options(&self) -> &FullTextOptions {
        &self.options
    }

    /// Documents (non-null values) indexed.
    pub fn docs(&self) -> u64 {
        self.docs
    }

    /// The object's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The row addresses of every document the query matches.
    ///
    /// Fails with [`Error::FullText`] when tantivy fails, which includes store reads that
    /// fail during the search.
    pub async fn search(&self, query: &TextQuery) -> Result<RoaringTreemap> {
        let inner = Arc::clone(&self.inner);
        let query = query.clone();
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let searcher = inner.reader.searcher();
            let tantivy_query = inner.query(&query);
            let docs = searcher
                .search(tantivy_query.as_ref(), &DocSetCollector)
                .map_err(engine(&path))?;
            let mut columns = HashMap::new();
            let mut out = RoaringTreemap::new();
            for doc in docs {
                let column = match columns.get(&doc.segment_ord) {
                    Some(c) => c,
                    None => {
                        let c = searcher
                            .segment_reader(doc.segment_ord)
                            .fast_fields()
                            .u64(ADDRESS_FIELD)
                            .map_err(engine(&path))?;
                        columns.entry(doc.segment_ord).or_insert(c)
                    }
                };
                if let Some(address) = column.first(doc.doc_id) {
                    out.insert(address);
                }
            }
            Ok(out)
        })
        .await
        .map_err(|source| Error::TaskFailed {
            task: "full-text search",
            source,
        })?
    }

    /// The `limit` best-scoring matches (BM25), best first, as `(row address, score)`.
    ///
    /// Fails with [`Error::FullText`] when tantivy fails.
    pub async fn search_scored(&self, query: &TextQuery, limit: usize) -> Result<Vec<(u64, f32)>> {
        let inner = Arc::clone(&self.inner);
        let query = query.clone();
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let searcher = inner.reader.searcher();
            let tantivy_query = inner.query(&query);
            let top = searcher
                .search(
                    tantivy_query.as_ref(),
                    &TopDocs::with_limit(limit.max(1)).order_by_score(),
                )
                .map_err(engine(&path))?;
            let mut out = Vec::with_capacity(top.len());
            for (score, doc) in top {
                let column = searcher
                    .segment_reader(doc.segment_ord)
                    .fast_fields()
                    .u64(ADDRESS_FIELD)
                    .map_err(engine(&path))?;
                if let Some(address) = column.first(doc.doc_id) {
                    out.push((address, score));
                }
            }
            Ok(out)
        })
        .await
        .map_err(|source| Error::TaskFailed {
            task: "full-text search",
            source,
        })?
    }
}
