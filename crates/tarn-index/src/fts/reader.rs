//! Opening a full-text index bundle through a byte-range `Directory` and searching it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use object_store::ObjectStore;
use object_store::path::Path;
use roaring::RoaringTreemap;
use tantivy::collector::{DocSetCollector, TopDocs};
use tantivy::query::{AllQuery, BooleanQuery, EmptyQuery, Occur, PhraseQuery, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{Index, IndexReader, ReloadPolicy, Term};

use crate::format::{self, IndexKind};
use crate::{Error, Result};

use super::bundle::{BundleMeta, file_ranges};
use super::directory::{Blocks, BundleDirectory, Source};
use super::options::{
    ADDRESS_FIELD, FullTextOptions, META_JSON, TEXT_FIELD, TOKENIZER, engine, schema,
};
use super::query::{self, TextQuery};

/// A tantivy index opened over a bundle.
pub(super) struct Opened {
    pub(super) reader: IndexReader,
    pub(super) text: Field,
    pub(super) analyzer: TextAnalyzer,
}

impl Opened {
    pub(super) fn open(
        directory: BundleDirectory,
        options: &FullTextOptions,
        path: &str,
    ) -> Result<Self> {
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
