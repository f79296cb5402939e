//! Waiting on Tarn from DataFusion's calls that do not wait (a table function's table, a
//! table registered in a schema): the call blocks its thread while the runtime's other
//! threads go on.

use std::future::Future;

use datafusion::common::{Result, plan_err};
use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `future` to its end from a call that cannot wait for it; `what` names the call in
/// the error given on a runtime with one thread, where blocking would stop everything.
pub(crate) fn wait<F: Future>(what: &str, future: F) -> Result<F::Output> {
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            Ok(tokio::task::block_in_place(|| handle.block_on(future)))
        }
        _ => plan_err!(
            "{what} reads or writes the table while the statement is planned, which needs a \
             multi-threaded Tokio runtime"
        ),
    }
}
