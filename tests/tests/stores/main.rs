//! The store conformance suite over memory, MinIO, Azurite and the fake GCS, the local
//! read cache for real, credentials never printed, and the bench on every cloud's URL.
//!
//! One test binary per theme, so each links once; `tests/README.md` maps features to
//! tests.

mod bench_urls;
mod cache_store;
mod credentials;
mod store_conformance;
