//! Store options from Python: a `dict[str, str]` of `object_store` keys (`endpoint`,
//! `access_key_id`, `allow_http`, ...), over the `AWS_*` environment as in Rust.

use std::collections::HashMap;

use tarn::StoreOptions;

/// The store options a call's `storage_options` dict gives (none when absent).
pub(crate) fn store_options(options: Option<HashMap<String, String>>) -> StoreOptions {
    options
        .unwrap_or_default()
        .into_iter()
        .fold(StoreOptions::new(), |o, (k, v)| o.with(k, v))
}
