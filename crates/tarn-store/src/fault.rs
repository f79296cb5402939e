//! `FaultStore`: seeded failures for tests (the rules it follows are `fault_rules`).
//!
//! Rules say which requests fail (kind of request, a glob on the path, a probability, an
//! optional limit, a number of matching requests to let through first) and how: before
//! the request takes effect, after it took effect (a lost acknowledgement: the object is
//! there but the caller saw an error), as a 5xx or 409, as a timeout, as a truncated GET
//! or a slow LIST. Two rules change what the caller sees without an error: a request held
//! at a gate until the test opens it (`Fault::Hold`, to stop a writer at an exact point),
//! and listings that leave out matching entries (`Fault::HideFromList`, a LIST that has
//! not caught up). A seed makes a run replayable. With no rules, or disabled, the store is
//! transparent; it passes the conformance suite so.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

use crate::fault_rules::{Fault, FaultOp, FaultRule, InjectedFault};
use crate::gate::FaultGate;
use crate::random::SplitMix64;

#[derive(Debug)]
struct Shared {
    rules: Mutex<Vec<(FaultRule, u64, u64)>>,
    rng: Mutex<SplitMix64>,
    enabled: AtomicBool,
    injected: AtomicU64,
    gate: FaultGate,
}

/// A handle to change a [`FaultStore`]'s rules while it is in use.
#[derive(Debug, Clone)]
pub struct FaultControl {
    shared: Arc<Shared>,
}

impl FaultControl {
    /// Adds a rule; rules are tried in the order added, the first that fires wins.
    pub fn add_rule(&self, rule: FaultRule) {
        self.lock_rules().push((rule, 0, 0));
    }

    /// Removes every rule.
    pub fn clear(&self) {
        self.lock_rules().clear();
    }

    /// Turns injection on or off without touching the rules.
    pub fn set_enabled(&self, enabled: bool) {
        self.shared.enabled.store(enabled, Ordering::SeqCst);
    }

    /// The gate [`Fault::Hold`] requests wait on.
    pub fn gate(&self) -> FaultGate {
        self.shared.gate.clone()
    }

    /// How many faults have been injected.
    pub fn injected(&self) -> u64 {
        self.shared.injected.load(Ordering::SeqCst)
    }

    fn lock_rules(&self) -> std::sync::MutexGuard<'_, Vec<(FaultRule, u64, u64)>> {
        // A poisoned lock only means a panic elsewhere; the rules are intact.
        self.shared.rules.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The fault for a request of `op` on `path`, if a rule fires; listing rules that
    /// hide entries are left to [`FaultControl::hidden`].
    fn decide(&self, op: FaultOp, path: &str) -> Option<Fault> {
        self.decide_among(op, path, |fault| fault != Fault::HideFromList)
    }

    /// Whether a listed entry at `path` is hidden by a [`Fault::HideFromList`] rule.
    fn hidden(&self, path: &str) -> bool {
        self.decide_among(FaultOp::List, path, |fault| fault == Fault::HideFromList)
            .is_some()
    }

    fn decide_among(&self, op: FaultOp, path: &str, kind: impl Fn(Fault) -> bool) -> Option<Fault> {
        if !self.shared.enabled.load(Ordering::SeqCst) {
            return None;
        }
        let mut rules = self.lock_rules();
        for (rule, fired, seen) in rules.iter_mut() {
            if !kind(rule.fault)
                || !rule.applies(op, path)
                || rule.limit.is_some_and(|l| *fired >= l)
            {
                continue;
            }
            *seen += 1;
            if *seen <= rule.skip {
                continue;
            }
            let draw = self
                .shared
                .rng
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .unit();
            if draw <= rule.probability {
                *fired += 1;
                self.shared.injected.fetch_add(1, Ordering::SeqCst);
                return Some(rule.fault);
            }
        }
        None
    }
}

/// An [`ObjectStore`] that injects failures following seeded [`FaultRule`]s.
#[derive(Debug)]
pub struct FaultStore<T = Arc<dyn ObjectStore>> {
    inner: T,
    control: FaultControl,
}

impl<T: ObjectStore> FaultStore<T> {
    /// Wraps `inner` with no rules; `seed` fixes which requests probabilistic rules hit.
    pub fn new(inner: T, seed: u64) -> Self {
        Self {
            inner,
            control: FaultControl {
                shared: Arc::new(Shared {
                    rules: Mutex::new(Vec::new()),
                    rng: Mutex::new(SplitMix64(seed)),
                    enabled: AtomicBool::new(true),
                    injected: AtomicU64::new(0),
                    gate: FaultGate::new(),
                }),
            },
        }
    }

    /// Adds a rule.
    #[must_use]
    pub fn with_rule(self, rule: FaultRule) -> Self {
        self.control.add_rule(rule);
        self
    }

    /// A handle on the rules.
    pub fn control(&self) -> FaultControl {
        self.control.clone()
    }

    /// The wrapped store.
    pub fn inner(&self) -> &T {
        &self.inner
    }
}

impl<T: ObjectStore> fmt::Display for FaultStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultStore({})", self.inner)
    }
}

fn injected(fault: Fault, path: &Path) -> object_store::Error {
    object_store::Error::Generic {
        store: "FaultStore",
        source: Box::new(InjectedFault {
            fault,
            path: path.to_string(),
        }),
    }
}

/// Applies a fault that acts before the request (or as a delay, or a wait at the gate);
/// `Ok` lets it through.
async fn before(fault: Option<Fault>, path: &Path, gate: &FaultGate) -> Result<()> {
    match fault {
        None | Some(Fault::FailAfter | Fault::TruncatedGet | Fault::HideFromList) => Ok(()),
        Some(Fault::Hold) => {
            gate.pass().await;
            Ok(())
        }
        Some(Fault::SlowList(delay)) => {
            tokio::time::sleep(delay).await;
            Ok(())
        }
        Some(Fault::Timeout(delay)) => {
            tokio::time::sleep(delay).await;
            Err(injected(Fault::Timeout(delay), path))
        }
        Some(other) => Err(injected(other, path)),
    }
}

/// A listing that first applies `fault` (a delay, a wait at the gate, or an error in
/// place of the entries), then leaves out the entries [`Fault::HideFromList`] rules hide.
fn faulty_list(
    control: &FaultControl,
    fault: Option<Fault>,
    path: Path,
    inner: BoxStream<'static, Result<ObjectMeta>>,
) -> BoxStream<'static, Result<ObjectMeta>> {
    let gate = control.gate();
    let filter = control.clone();
    futures::stream::once(async move { before(fault, &path, &gate).await.map(|()| inner) })
        .map(|r| match r {
            Ok(stream) => stream,
            Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
        })
        .flatten()
        .filter(move |entry| {
            let shown = !matches!(entry, Ok(meta) if filter.hidden(meta.location.as_ref()));
            futures::future::ready(shown)
        })
        .boxed()
}

fn truncate(bytes: Bytes) -> Bytes {
    bytes.slice(..bytes.len() / 2)
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<T: ObjectStore> ObjectStore for FaultStore<T> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let fault = self.control.decide(FaultOp::Put, location.as_ref());
        before(fault, location, &self.control.shared.gate).await?;
        let result = self.inner.put_opts(location, payload, opts).await;
        match fault {
            Some(Fault::FailAfter) => Err(injected(Fault::FailAfter, location)),
            _ => result,
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        let fault = self.control.decide(FaultOp::Put, location.as_ref());
        before(fault, location, &self.control.shared.gate).await?;
        let upload = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(FaultUpload {
            inner: upload,
            path: location.clone(),
            fail_after: fault == Some(Fault::FailAfter),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let fault = self.control.decide(FaultOp::Get, location.as_ref());
        if fault == Some(Fault::FailAfter) {
            return Err(injected(Fault::FailAfter, location));
        }
        before(fault, location, &self.control.shared.gate).await?;
        let head = options.head;
        let result = self.inner.get_opts(location, options).await?;
        if fault != Some(Fault::TruncatedGet) || head {
            return Ok(result);
        }
        let (meta, range) = (result.meta.clone(), result.range.clone());
        let attributes = result.attributes.clone();
        let short = truncate(result.bytes().await?);
        Ok(GetResult {
            payload: GetResultPayload::Stream(
                futures::stream::once(async move { Ok(short) }).boxed(),
            ),
            meta,
            range,
            attributes,
        })
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let fault = self.control.decide(FaultOp::Get, location.as_ref());
        if fault == Some(Fault::FailAfter) {
            return Err(injected(Fault::FailAfter, location));
        }
        before(fault, location, &self.control.shared.gate).await?;
        let parts = self.inner.get_ranges(location, ranges).await?;
        Ok(match fault {
            Some(Fault::TruncatedGet) => parts.into_iter().map(truncate).collect(),
            _ => parts,
        })
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let control = self.control.clone();
        // Decide per location before it reaches the store; failing ones are held back.
        let (tx, rx) = futures::channel::mpsc::unbounded::<Result<Path>>();
        let filtered = locations
            .filter_map(move |location| {
                let control = control.clone();
                let tx = tx.clone();
                async move {
                    let path = match location {
                        Ok(p) => p,
                        Err(e) => return Some(Err(e)),
                    };
                    match control.decide(FaultOp::Delete, path.as_ref()) {
                        Some(Fault::FailAfter) => {
                            let _ = tx.unbounded_send(Err(injected(Fault::FailAfter, &path)));
                            Some(Ok(path))
                        }
                        Some(fault) => match before(Some(fault), &path, &control.shared.gate).await
                        {
                            Ok(()) => Some(Ok(path)),
                            Err(e) => {
                                let _ = tx.unbounded_send(Err(e));
                                None
                            }
                        },
                        None => Some(Ok(path)),
                    }
                }
            })
            .boxed();
        let deleted = self.inner.delete_stream(filtered);
        // Results of the store first, then the injected failures.
        deleted.chain(rx).boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let path = prefix.cloned().unwrap_or(Path::ROOT);
        let fault = self.control.decide(FaultOp::List, path.as_ref());
        faulty_list(&self.control, fault, path, self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let path = prefix.cloned().unwrap_or(Path::ROOT);
        let fault = self.control.decide(FaultOp::List, path.as_ref());
        faulty_list(
            &self.control,
            fault,
            path,
            self.inner.list_with_offset(prefix, offset),
        )
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let path = prefix.cloned().unwrap_or(Path::ROOT);
        let fault = self.control.decide(FaultOp::List, path.as_ref());
        before(fault, &path, &self.control.shared.gate).await?;
        let mut listed = self.inner.list_with_delimiter(prefix).await?;
        listed
            .objects
            .retain(|meta| !self.control.hidden(meta.location.as_ref()));
        Ok(listed)
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        let fault = self.control.decide(FaultOp::Put, to.as_ref());
        before(fault, to, &self.control.shared.gate).await?;
        let result = self.inner.copy_opts(from, to, options).await;
        match fault {
            Some(Fault::FailAfter) => Err(injected(Fault::FailAfter, to)),
            _ => result,
        }
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        let fault = self.control.decide(FaultOp::Put, to.as_ref());
        before(fault, to, &self.control.shared.gate).await?;
        let result = self.inner.rename_opts(from, to, options).await;
        match fault {
            Some(Fault::FailAfter) => Err(injected(Fault::FailAfter, to)),
            _ => result,
        }
    }
}

#[derive(Debug)]
struct FaultUpload {
    inner: Box<dyn MultipartUpload>,
    path: Path,
    fail_after: bool,
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl MultipartUpload for FaultUpload {
    fn put_part(&mut self, data: PutPayload) -> object_store::UploadPart {
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        let result = self.inner.complete().await;
        if self.fail_after {
            return Err(injected(Fault::FailAfter, &self.path));
        }
        result
    }

    async fn abort(&mut self) -> Result<()> {
        self.inner.abort().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault_rules::is_injected;
    use object_store::memory::InMemory;
    use object_store::{ObjectStoreExt, PutMode};

    #[tokio::test]
    async fn a_lost_acknowledgement_leaves_the_object_in_place() {
        let store = FaultStore::new(InMemory::new(), 1).with_rule(
            FaultRule::new(FaultOp::Put, Fault::FailAfter)
                .with_glob("*.json")
                .with_limit(1),
        );
        let path = Path::from("t/_delta_log/00000000000000000000.json");
        let err = store
            .put_opts(&path, "x".into(), PutOptions::from(PutMode::Create))
            .await
            .unwrap_err();
        assert!(is_injected(&err), "{err}");
        assert_eq!(
            store
                .get(&path)
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap()
                .as_ref(),
            b"x"
        );
        // The limit is spent: the next create fails only because the object exists.
        let again = store
            .put_opts(&path, "y".into(), PutOptions::from(PutMode::Create))
            .await;
        assert!(matches!(
            again,
            Err(object_store::Error::AlreadyExists { .. })
        ));
        assert_eq!(store.control().injected(), 1);
    }

    #[tokio::test]
    async fn a_skipping_rule_fails_only_the_requests_after_the_skipped_ones() {
        let store = FaultStore::new(InMemory::new(), 3).with_rule(
            FaultRule::new(FaultOp::Put, Fault::FailBefore)
                .with_glob("*.json")
                .with_skip(1)
                .with_limit(1),
        );
        let put = |name: &str| {
            let path = Path::from(format!("t/_delta_log/{name}.json"));
            let store = &store;
            async move { store.put(&path, "x".into()).await }
        };
        // Not matching: neither skipped nor failed.
        store
            .put(&Path::from("t/a.parquet"), "x".into())
            .await
            .unwrap();
        put("0").await.unwrap();
        assert!(is_injected(&put("1").await.unwrap_err()));
        put("2").await.unwrap();
        assert_eq!(store.control().injected(), 1);
    }

    #[tokio::test]
    async fn failures_before_leave_nothing_and_truncated_reads_are_short() {
        let store = FaultStore::new(InMemory::new(), 2);
        let control = store.control();
        control.add_rule(FaultRule::new(FaultOp::Put, Fault::ServerError).with_limit(1));
        let path = Path::from("a");
        assert!(store.put(&path, "0123456789".into()).await.is_err());
        assert!(matches!(
            store.head(&path).await,
            Err(object_store::Error::NotFound { .. })
        ));
        store.put(&path, "0123456789".into()).await.unwrap();
        control.add_rule(FaultRule::new(FaultOp::Get, Fault::TruncatedGet).with_limit(1));
        let short = store.get(&path).await.unwrap().bytes().await;
        assert!(short.map(|b| b.len() < 10).unwrap_or(true));
        control.set_enabled(false);
        control.add_rule(FaultRule::new(FaultOp::Any, Fault::FailBefore));
        assert_eq!(
            store.get(&path).await.unwrap().bytes().await.unwrap().len(),
            10
        );
    }

    #[tokio::test]
    async fn the_same_seed_fails_the_same_requests() {
        let run = |seed| async move {
            let store = FaultStore::new(InMemory::new(), seed)
                .with_rule(FaultRule::new(FaultOp::Put, Fault::FailBefore).with_probability(0.3));
            let mut failed = Vec::new();
            for i in 0..40 {
                if store
                    .put(&Path::from(format!("k{i}")), "v".into())
                    .await
                    .is_err()
                {
                    failed.push(i);
                }
            }
            failed
        };
        let (a, b, c) = (run(9).await, run(9).await, run(10).await);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(!a.is_empty() && a.len() < 40);
    }
}
