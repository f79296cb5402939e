//! Listing and searching the catalog: children of a namespace in key order, page by
//! page, reading manifest pages in key order and stopping when the page of results is
//! full; full-text search over metadata and listing by type through the manifest's
//! indices.

use std::collections::BTreeSet;

use arrow::array::{Array, AsArray, RecordBatch};
use tarn::Snapshot;
use tarn::expr::{col, lit, text_match};
use tarn_index::fts::{FullTextOptions, TextQuery};

use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::manifest::{NAMESPACE, TABLE};
use crate::names::ObjectId;
use crate::options::ObjectType;
use crate::pages::Page;

/// A page of a listing, and the token of the next one.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    /// The ids, in order.
    pub ids: Vec<ObjectId>,
    /// Pass to the next call for the next page; `None` at the end.
    pub next: Option<String>,
}

impl Catalog {
    /// The namespaces directly in `parent`, `limit` at a time.
    ///
    /// Fails with [`Error::InvalidPageToken`] for a token of another listing.
    pub async fn list_namespaces(
        &self,
        parent: &ObjectId,
        limit: usize,
        token: Option<&str>,
    ) -> Result<Listing> {
        self.list(parent, NAMESPACE, limit, token).await
    }

    /// The tables directly in `namespace`, `limit` at a time.
    ///
    /// Fails with [`Error::InvalidPageToken`] for a token of another listing.
    pub async fn list_tables(
        &self,
        namespace: &ObjectId,
        limit: usize,
        token: Option<&str>,
    ) -> Result<Listing> {
        self.list(namespace, TABLE, limit, token).await
    }

    /// Children of `parent` of one kind, in key order: pages are read in key order and
    /// reading stops once the page of results is full.
    async fn list(
        &self,
        parent: &ObjectId,
        kind: &'static str,
        limit: usize,
        token: Option<&str>,
    ) -> Result<Listing> {
        if limit == 0 {
            return Err(Error::InvalidArgument {
                name: "limit",
                reason: "a listing page holds at least one id".into(),
            });
        }
        let (from, to) = parent.child_range();
        let after = match token {
            Some(token) => Some(decode_token(token, parent, kind)?),
            None => None,
        };
        let snapshot = self.snapshot().await?;
        let layout = self.inner.manifest.layout()?;
        let start = after.clone().unwrap_or_else(|| from.clone());
        let wanted = |key: &str, object_type: &str| {
            key >= start.as_str()
                && after.as_deref() != Some(key)
                && key < to.as_str()
                && object_type == kind
                && parent.is_child_key(key)
        };
        let (small, base): (Vec<Page>, Vec<Page>) = self
            .inner
            .pages
            .pages(&snapshot)
            .into_iter()
            .filter(|p| p.overlaps(&start, &to))
            .partition(|p| p.is_small(layout));
        // Small pages (new keys) may fall anywhere in the range: read them all at once,
        // then the base pages, which do not overlap, in key order until the page of
        // results is full.
        let mut found: BTreeSet<String> = BTreeSet::new();
        let reads = small
            .iter()
            .map(|p| self.inner.pages.rows(&snapshot, &p.add));
        for rows in futures::future::try_join_all(reads).await? {
            found.extend(
                rows.iter()
                    .filter(|r| wanted(&r.object_id, &r.object_type))
                    .map(|r| r.object_id.clone()),
            );
        }
        let mut ids = Vec::new();
        for (i, page) in base.iter().enumerate() {
            let rows = self.inner.pages.rows(&snapshot, &page.add).await?;
            found.extend(
                rows.iter()
                    .filter(|r| wanted(&r.object_id, &r.object_type))
                    .map(|r| r.object_id.clone()),
            );
            // Keys below the next base page's lower bound are complete.
            let bound = base.get(i + 1).map(|p| p.min.clone());
            while let Some(key) = found.first().cloned() {
                if bound.as_ref().is_some_and(|b| key.as_str() >= b.as_str()) {
                    break;
                }
                if ids.len() == limit {
                    return Ok(Listing {
                        next: ids
                            .last()
                            .map(|l: &ObjectId| encode_token(&l.key(), parent, kind)),
                        ids,
                    });
                }
                found.pop_first();
                ids.push(ObjectId::parse(&key)?);
            }
        }
        // Without base pages, or past the last one: what is left, in order.
        for key in found {
            if ids.len() == limit {
                return Ok(Listing {
                    next: ids
                        .last()
                        .map(|l: &ObjectId| encode_token(&l.key(), parent, kind)),
                    ids,
                });
            }
            ids.push(ObjectId::parse(&key)?);
        }
        Ok(Listing { ids, next: None })
    }

    /// Objects whose metadata (properties, description) matches a full-text query, up to
    /// `limit`, through the manifest's full-text index; a manifest without one (a catalog
    /// opened without indices) is scanned and matched with the index's default analyzer,
    /// so the answer is the same.
    ///
    /// Fails with [`Error::Table`] for a malformed query, and when the manifest
    /// cannot be read.
    pub async fn search(&self, query: &str, limit: usize) -> Result<Vec<(ObjectId, String)>> {
        let snapshot = self.snapshot().await?;
        let found = snapshot
            .scan()
            .select(["object_id", "object_type"])
            .filter(text_match("metadata", query))
            .collect()
            .await;
        let mut out = match found {
            Ok(batches) => pairs(&batches)?,
            Err(tarn::Error::TextMatchWithoutIndex { .. }) => {
                search_by_scan(&snapshot, query).await?
            }
            Err(e) => return Err(e.into()),
        };
        out.sort();
        out.truncate(limit);
        Ok(out)
    }

    /// Every object of one kind, through the Bitmap index on `object_type` when the
    /// catalog has it.
    ///
    /// Fails when the manifest cannot be read.
    pub async fn list_by_type(&self, kind: ObjectType) -> Result<Vec<ObjectId>> {
        let snapshot = self.snapshot().await?;
        let batches = snapshot
            .scan()
            .select(["object_id", "object_type"])
            .filter(col("object_type").eq(lit(kind.name())))
            .collect()
            .await?;
        let mut ids: Vec<ObjectId> = pairs(&batches)?.into_iter().map(|(id, _)| id).collect();
        ids.sort();
        Ok(ids)
    }
}

/// `search` without a full-text index: every object's metadata, matched as the index's
/// default analyzer would.
async fn search_by_scan(snapshot: &Snapshot, query: &str) -> Result<Vec<(ObjectId, String)>> {
    let parsed = TextQuery::parse(query).map_err(|e| {
        Error::Table(tarn::Error::InvalidArgument {
            name: "text_match",
            reason: e.to_string(),
        })
    })?;
    let analyzer = FullTextOptions::default().analyzer();
    let batches = snapshot
        .scan()
        .select(["object_id", "object_type", "metadata"])
        .collect()
        .await?;
    let mut out = Vec::new();
    for batch in &batches {
        let (ids, types) = (
            batch.column(0).as_string::<i32>(),
            batch.column(1).as_string::<i32>(),
        );
        let metadata = batch.column(2).as_string::<i32>();
        for i in 0..batch.num_rows() {
            if metadata.is_valid(i) && parsed.matches(&analyzer, metadata.value(i)) {
                out.push((ObjectId::parse(ids.value(i))?, types.value(i).to_string()));
            }
        }
    }
    Ok(out)
}

fn pairs(batches: &[RecordBatch]) -> Result<Vec<(ObjectId, String)>> {
    let mut out = Vec::new();
    for batch in batches {
        let ids = batch.column(0).as_string::<i32>();
        let types = batch.column(1).as_string::<i32>();
        for i in 0..batch.num_rows() {
            out.push((ObjectId::parse(ids.value(i))?, types.value(i).to_string()));
        }
    }
    Ok(out)
}

/// A page token: the listing it belongs to and the last key of the page before.
fn encode_token(last: &str, parent: &ObjectId, kind: &str) -> String {
    let text = serde_json::json!({"parent": parent.key(), "kind": kind, "after": last}).to_string();
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_token(token: &str, parent: &ObjectId, kind: &str) -> Result<String> {
    let invalid = |reason: &str| Error::InvalidPageToken {
        reason: reason.to_string(),
    };
    if !token.len().is_multiple_of(2) {
        return Err(invalid("not a token this catalog issued"));
    }
    let bytes: Option<Vec<u8>> = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(token.get(i..i + 2)?, 16).ok())
        .collect();
    let value: serde_json::Value = bytes
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| invalid("not a token this catalog issued"))?;
    if value["parent"] != parent.key().as_str() || value["kind"] != kind {
        return Err(invalid("the token belongs to another listing"));
    }
    value["after"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| invalid("not a token this catalog issued"))
}
