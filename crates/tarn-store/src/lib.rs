//! Object stores for Tarn tables.
//!
//! Every byte Tarn reads or writes goes through an [`object_store::ObjectStore`]. This crate
//! opens one from a URL ([`open`]: memory, local files, S3, GCS, Azure Blob / ADLS Gen2) and provides composable wrappers, each an `ObjectStore`
//! itself:
//!
//! - [`CountingStore`] counts requests by kind, bytes, and the *critical path*: how many
//!   round trips an operation waited on one after another.
//! - [`LatencyStore`] sleeps per request following a named, seeded [`LatencyProfile`]
//!   (`s3-standard`, `s3-express`, `gcs-standard`, `azure-blob`) to replay a cloud's
//!   behaviour on one machine.
//! - [`HedgedStore`] sends a second copy of a small PUT that runs past the 90th
//!   percentile of those seen so far, and takes the first answer that settles it; cloud
//!   stores (S3, GCS, Azure) opened here are hedged.
//! - [`FaultStore`] injects seeded failures (before or after a request takes effect,
//!   5xx, 409, timeouts, truncated reads, slow listings) on paths matching a pattern.
//! - [`LocalStore`] is the local file system, with small ranged reads of cached data on
//!   a local disk done on the calling thread rather than tokio's blocking pool; [`open`]
//!   gives it for local paths.
//! - [`CacheStore`] keeps byte ranges of immutable objects (data files, deletion vectors,
//!   checkpoints, index objects) on local disk in fixed blocks, least recently used evicted
//!   first within a size bound, shared safely by processes; what can change is never cached.
//!
//! The [`conformance`] module is the suite of behaviours every store and wrapper must show,
//! put-if-absent among them; Tarn's tests run it against memory, local files, every wrapper
//! a real S3-compatible server (MinIO) and Azurite.
//!
//! This crate knows nothing of tables (beyond [`delta_objects`], which tells the cache which
//! paths of a Delta table never change).

mod azure;
mod cache;
mod clouds;
mod counting;
mod error;
mod fault;
mod fault_rules;
mod gate;
mod hedge;
mod latency;
mod local;
#[cfg(target_os = "linux")]
mod local_read;
mod location;
mod random;
mod redact;

pub mod conformance;

pub use cache::{CacheOptions, CacheStats, CacheStore, Cacheability, Classifier, delta_objects};
pub use counting::{CountingStore, RequestCounter, RequestCounts};
pub use error::{Error, Result, StoreOp};
pub use fault::{FaultControl, FaultStore};
pub use fault_rules::{Fault, FaultOp, FaultRule, InjectedFault, is_injected};
pub use gate::FaultGate;
pub use hedge::{HedgePolicy, HedgedStore};
pub use latency::{LatencyProfile, LatencyStore, OpLatency};
pub use local::{INLINE_BYTES, LocalStore};
pub use location::{ALLOWED_ROOTS, StoreLocation, StoreOptions, open, open_with_options};
pub use random::SplitMix64;
pub use redact::{REDACTED, is_secret_option, redact_url};

/// Re-export of the `object_store` crate this crate is built on, so users name one version.
pub use object_store;
