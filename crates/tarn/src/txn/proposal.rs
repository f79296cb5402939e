//! The group-commit wire format: a proposal's body (a header line with the writer's
//! `txnId`, base version, window, isolation level and read set, then its actions, one
//! JSON line each) and where proposals live. Pure encoding; the committer that carries
//! proposals is `group`, the reads of them `group_reads`.

use bytes::Bytes;
use object_store::path::Path;
use serde::{Deserialize, Serialize};

use super::IsolationLevel;
use super::conflict::ReadSet;
use crate::error::{Error, Result};
use crate::expr::Expr;
use crate::log::{log_dir, parse_commit};
use crate::protocol::Action;
use crate::protocol::names::{PROPOSALS_DIR, proposal_file_name};

/// The most bytes of proposals one commit carries.
pub(crate) const MAX_GROUP_BYTES: usize = 8 << 20;
/// A prepared commit waiting to be carried.
#[derive(Debug, Clone)]
pub(crate) struct Proposal {
    pub(crate) txn_id: String,
    pub(crate) base: i64,
    /// How many versions after `base` it may join.
    pub(crate) window: i64,
    pub(crate) isolation: IsolationLevel,
    pub(crate) operation: String,
    pub(crate) blind_append: bool,
    pub(crate) reads: ReadSet,
    pub(crate) actions: Vec<Action>,
}

/// A proposal's first line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Header {
    txn_id: String,
    base: i64,
    window: i64,
    isolation: String,
    operation: String,
    blind_append: bool,
    reads: WireReads,
}

/// A read set as written in a proposal.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireReads {
    whole_table: bool,
    predicates: Vec<Expr>,
    files: Vec<String>,
    app_ids: Vec<String>,
    domains: Vec<String>,
    meta_domains: Vec<String>,
    /// The application id holding the proposing writer's epoch (absent: no writer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    writer: Option<String>,
}

/// The wrapper key of a proposal's header line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct HeaderLine {
    tarn_proposal: Header,
}

impl Proposal {
    /// The proposal's body: its header, then its actions, one JSON line each.
    pub(crate) fn encode(&self) -> Result<Bytes> {
        let reads = &self.reads;
        let header = HeaderLine {
            tarn_proposal: Header {
                txn_id: self.txn_id.clone(),
                base: self.base,
                window: self.window,
                isolation: self.isolation.name().into(),
                operation: self.operation.clone(),
                blind_append: self.blind_append,
                reads: WireReads {
                    whole_table: reads.whole_table,
                    predicates: reads.predicates.clone(),
                    files: reads.files.iter().cloned().collect(),
                    app_ids: reads.app_ids.iter().cloned().collect(),
                    domains: reads.domains.iter().cloned().collect(),
                    meta_domains: reads.meta_domains.iter().cloned().collect(),
                    writer: reads.writer.clone(),
                },
            },
        };
        let serialize = |source| Error::Serialize {
            what: "a group-commit proposal".into(),
            source,
        };
        let mut body = serde_json::to_vec(&header).map_err(serialize)?;
        body.push(b'\n');
        for action in &self.actions {
            serde_json::to_writer(&mut body, action).map_err(serialize)?;
            body.push(b'\n');
        }
        Ok(Bytes::from(body))
    }

    /// Parses a proposal's body. Fails with [`Error::InvalidCommit`] (at version `base`)
    /// for a malformed one.
    pub(crate) fn decode(base: i64, bytes: &Bytes) -> Result<Self> {
        let split = bytes
            .iter()
            .position(|b| *b == b'\n')
            .unwrap_or(bytes.len());
        let invalid = |reason: String| Error::InvalidCommit {
            version: base,
            line: 1,
            reason,
        };
        let line: HeaderLine =
            serde_json::from_slice(&bytes[..split]).map_err(|e| invalid(e.to_string()))?;
        let h = line.tarn_proposal;
        let isolation = IsolationLevel::from_name(&h.isolation)
            .ok_or_else(|| invalid(format!("unknown isolation level {}", h.isolation)))?;
        let actions = parse_commit(base, &bytes.slice((split + 1).min(bytes.len())..))?;
        Ok(Self {
            txn_id: h.txn_id,
            base: h.base,
            window: h.window,
            isolation,
            operation: h.operation,
            blind_append: h.blind_append,
            reads: ReadSet {
                whole_table: h.reads.whole_table,
                predicates: h.reads.predicates,
                files: h.reads.files.into_iter().collect(),
                app_ids: h.reads.app_ids.into_iter().collect(),
                domains: h.reads.domains.into_iter().collect(),
                meta_domains: h.reads.meta_domains.into_iter().collect(),
                writer: h.reads.writer,
            },
            actions,
        })
    }

    /// Whether another writer can carry this work: no metadata or protocol change (it
    /// would conflict with every other member), and a body that reads back as written and
    /// that a committer would carry (at most 8 MiB). The committer unites its deletion
    /// vectors, inline or in files, with concurrent changes to the same files ([`admit`]).
    pub(crate) fn carriable(&self) -> Option<Bytes> {
        // Change files make a commit's readers ignore its other actions: a commit that
        // has them carries nothing, and is carried by no one.
        let plain = self.actions.iter().all(|a| {
            !matches!(
                a,
                Action::Metadata(_) | Action::Protocol(_) | Action::CommitInfo(_) | Action::Cdc(_)
            )
        });
        if !plain || self.actions.is_empty() {
            return None;
        }
        let body = self.encode().ok()?;
        // No committer would carry it.
        if body.len() > MAX_GROUP_BYTES {
            return None;
        }
        // Predicates holding NaN or the like do not survive JSON: such work commits alone.
        let back = Self::decode(self.base, &body).ok()?;
        (back.reads.predicates == self.reads.predicates && back.actions == self.actions)
            .then_some(body)
    }
}

/// Where a proposal of `base` by `txn_id` lives.
pub(crate) fn proposal_path(root: &Path, base: i64, stamp: i64, txn_id: &str) -> Path {
    log_dir(root)
        .join(PROPOSALS_DIR)
        .join(proposal_file_name(base, stamp, txn_id))
}
