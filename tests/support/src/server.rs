//! What the local servers of the tests (MinIO, Azurite, the fake GCS server) share:
//! finding programs, building Go ones with scratch caches, free ports, per-process data
//! folders, starting a server that stops when the test process ends, and plain HTTP/1.1
//! requests to it.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The first `name` on `PATH`.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Runs `go`, given its arguments, folder and variables by `configure`, with its module
/// and build caches in a scratch folder that is removed afterwards. The tests keep only
/// the built binary, and MinIO's caches alone take gigabytes a test machine's disk does
/// not spare. Scratch folders of processes that died mid-build are removed first. Fails
/// when Go is not installed or cannot be started; the caller judges the exit status.
pub fn run_go(configure: impl FnOnce(&mut Command)) -> Result<ExitStatus, String> {
    let go = find_on_path("go")
        .or_else(|| Some(PathBuf::from("/usr/local/go/bin/go")).filter(|p| p.exists()))
        .ok_or("Go is not installed (neither on PATH nor in /usr/local/go/bin)")?;
    let cache = crate::cache_dir();
    remove_left_by_dead(&cache, "go-scratch-");
    // One folder per call: two servers may be built at once by one test process.
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let scratch = cache.join(format!("go-scratch-{}-{call}", std::process::id()));
    // Module files are read-only by default, which `remove_dir_all` cannot delete.
    let flags = match std::env::var("GOFLAGS") {
        Ok(flags) if !flags.trim().is_empty() => format!("{flags} -modcacherw"),
        _ => "-modcacherw".to_string(),
    };
    let mut command = Command::new(go);
    command
        .env("GOCACHE", scratch.join("build"))
        .env("GOMODCACHE", scratch.join("mod"))
        .env("GOFLAGS", flags)
        .env("CGO_ENABLED", "0");
    configure(&mut command);
    let status = command.status().map_err(|e| format!("cannot run go: {e}"));
    if let Err(e) = std::fs::remove_dir_all(&scratch)
        && scratch.exists()
    {
        eprintln!(
            "could not remove Go's scratch caches {}: {e}",
            scratch.display()
        );
    }
    status
}

/// Removes the entries of `dir` whose name, less `prefix`, starts with the id of a process
/// that is gone (`<pid>`, then `.` or `-` and anything): what dead test processes left.
fn remove_left_by_dead(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.split(['.', '-']).next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if let Some(pid) = pid
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = std::fs::remove_dir_all(entry.path());
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// A TCP port free on 127.0.0.1 right now.
pub fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// A data folder for this process's server under `$TMPDIR/<base>`; folders of earlier,
/// finished processes are removed.
pub fn data_dir(base: &str) -> Result<PathBuf, String> {
    let base = std::env::temp_dir().join(base);
    std::fs::create_dir_all(&base).map_err(|e| format!("cannot create {}: {e}", base.display()))?;
    remove_left_by_dead(&base, "");
    let dir = base.join(std::process::id().to_string());
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Starts `program args...` with its output in `log`, watched by a shell that stops it
/// within a second of this process's exit, so no server outlives the tests, whatever way
/// they end.
pub fn spawn_watched<I, S>(
    program: &Path,
    args: I,
    log: &Path,
    envs: &[(&str, &str)],
) -> Result<(), String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let script = r#"
        log=$1; parent=$2; shift 2
        "$@" >"$log" 2>&1 &
        child=$!
        trap 'kill $child 2>/dev/null' EXIT INT TERM
        while kill -0 "$parent" 2>/dev/null && kill -0 $child 2>/dev/null; do sleep 1; done
    "#;
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg("sh")
        .arg(log)
        .arg(std::process::id().to_string())
        .arg(program)
        .args(args)
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(drop)
        .map_err(|e| format!("cannot start {}: {e}", program.display()))
}

/// Sends `request` (a whole HTTP/1.1 request, `Connection: close`) to `address`
/// (`host:port`) and returns the whole response.
pub fn http(address: &str, request: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(request.as_bytes())?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response)
}
