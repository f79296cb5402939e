//! The one tokio runtime of the process, and `run`: a future driven to its end with the
//! GIL released, cancelled when Ctrl-C (or any signal handler raising) interrupts it.

use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::ThreadId;
use std::time::Duration;

use pyo3::prelude::*;
use tokio::runtime::Runtime;

/// How often a running call checks for Ctrl-C.
const SIGNAL_POLL: Duration = Duration::from_millis(100);

/// The runtime and the process it was built in: a child forked by `multiprocessing`
/// inherits the parent's runtime without its threads, so it builds its own.
static RUNTIME: Mutex<Option<(u32, Arc<Runtime>)>> = Mutex::new(None);

/// The thread that imported the module: Python runs signal handlers only there.
static MAIN_THREAD: OnceLock<ThreadId> = OnceLock::new();

/// Records the importing thread as the one that checks for Ctrl-C.
pub(crate) fn set_main_thread() {
    let _ = MAIN_THREAD.set(std::thread::current().id());
}

/// The process's runtime, built on first use (and again in a forked child).
pub(crate) fn runtime() -> PyResult<Arc<Runtime>> {
    let mut slot = RUNTIME
        .lock()
        .map_err(|_| crate::errors::internal("the runtime's lock is poisoned"))?;
    let pid = std::process::id();
    if let Some((owner, rt)) = slot.as_ref()
        && *owner == pid
    {
        return Ok(rt.clone());
    }
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("tarn")
            .build()
            .map_err(|e| crate::errors::internal(format!("cannot start tokio: {e}")))?,
    );
    if let Some((_, old)) = slot.replace((pid, rt.clone())) {
        // The parent's runtime has no threads here; dropping it would wait on them.
        std::mem::forget(old);
    }
    Ok(rt)
}

/// Runs `future` on the runtime with the GIL released and returns its output. On the
/// main thread, every [`SIGNAL_POLL`] it takes the GIL for a moment to run Python's signal
/// handlers: when one raises (Ctrl-C's `KeyboardInterrupt`), the future is dropped, which
/// cancels its work, and the exception is returned. Other threads never see signals, so
/// they do not poll.
pub(crate) fn run<F, T>(py: Python<'_>, future: F) -> PyResult<T>
where
    F: Future<Output = PyResult<T>> + Send,
    T: Send,
{
    let rt = runtime()?;
    let polls = MAIN_THREAD.get() == Some(&std::thread::current().id());
    py.detach(|| {
        rt.block_on(async {
            tokio::pin!(future);
            if !polls {
                return future.await;
            }
            loop {
                tokio::select! {
                    out = &mut future => return out,
                    _ = tokio::time::sleep(SIGNAL_POLL) => {
                        Python::attach(|py| py.check_signals())?;
                    }
                }
            }
        })
    })
}

/// Waits up to `seconds` for work Tarn finishes after a call returns (checkpoints,
/// clearing group-commit proposals); `tarn` calls it at interpreter exit. Returns whether
/// all of it finished.
#[pyfunction]
pub(crate) fn settle_background_work(py: Python<'_>, seconds: f64) -> PyResult<bool> {
    let limit = Duration::try_from_secs_f64(seconds.max(0.0))
        .map_err(|e| crate::errors::InvalidArgument::new_err(format!("seconds {seconds}: {e}")))?;
    run(
        py,
        async move { Ok(tarn::settle_background_work(limit).await) },
    )
}
