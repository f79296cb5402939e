//! `tarn`: the command line for people who run Tarn tables. It describes a table, lists
//! its history and files, scans it, runs SQL over tables and catalogs, and maintains it
//! (optimize, vacuum, checkpoint, log cleanup, restore, indices) and catalogs.
//!
//! Output is a readable table, or JSON with `--json`; the exit code says what failed
//! ([`error::CliError::exit_code`]).

mod args;
mod catalog;
mod error;
mod output;
mod progress;
mod sql;
mod table;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::args::{Cli, Command, StoreArgs};
use crate::error::{CliError, Result};

/// How long the process waits, after its command, for the work its commits started.
const BACKGROUND_LIMIT: Duration = Duration::from_secs(60);

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("tarn: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let outcome = runtime.block_on(async {
        let outcome = run(cli).await;
        // A commit may leave a checkpoint (and the log cleanup after it) running; the
        // process exiting would drop it half done.
        tarn::settle_background_work(BACKGROUND_LIMIT).await;
        outcome
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tarn: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Runs one command.
async fn run(cli: Cli) -> Result<()> {
    let options = store_options(&cli.store)?;
    let out = output::Output::new(cli.json);
    match cli.command {
        Command::Describe { table, version } => {
            table::describe(&out, &table, &options, version).await
        }
        Command::History { table, limit } => table::history(&out, &table, &options, limit).await,
        Command::Files { table, version } => table::files(&out, &table, &options, version).await,
        Command::Scan(scan) => table::scan(&out, &options, scan).await,
        Command::Sql(query) => sql::run(&out, &options, query).await,
        Command::Optimize {
            table,
            target_size,
            sort_by,
            filter,
        } => table::optimize(&out, &table, &options, target_size, sort_by, filter).await,
        Command::Vacuum {
            table,
            retention_hours,
            dry_run,
            no_enforce_retention,
        } => {
            table::vacuum(
                &out,
                &table,
                &options,
                retention_hours,
                dry_run,
                !no_enforce_retention,
            )
            .await
        }
        Command::Checkpoint { table } => table::checkpoint(&out, &table, &options).await,
        Command::Cleanup {
            table,
            retention_hours,
            dry_run,
            no_enforce_retention,
        } => {
            table::cleanup(
                &out,
                &table,
                &options,
                retention_hours,
                dry_run,
                !no_enforce_retention,
            )
            .await
        }
        Command::Restore {
            table,
            to_version,
            to_timestamp,
        } => table::restore(&out, &table, &options, to_version, to_timestamp).await,
        Command::Index(command) => table::index(&out, &options, command).await,
        Command::Catalog(command) => catalog::run(&out, &options, command).await,
    }
}

/// The store options the flags give, on top of the environment's `AWS_*` variables.
fn store_options(args: &StoreArgs) -> Result<tarn::StoreOptions> {
    let mut options = tarn::StoreOptions::new();
    if let Some(endpoint) = &args.endpoint {
        options = options.with_endpoint(endpoint);
    }
    if let Some(region) = &args.region {
        options = options.with_region(region);
    }
    if args.allow_http {
        options = options.with_allow_http(true);
    }
    for pair in &args.options {
        let (key, value) = split_pair("--store-option", pair)?;
        options = options.with(key, value);
    }
    Ok(options)
}

/// `key=value` split at its first `=`.
///
/// Fails with [`CliError::Usage`] naming `flag` when there is no `=` or no key.
pub(crate) fn split_pair<'a>(flag: &str, pair: &'a str) -> Result<(&'a str, &'a str)> {
    match pair.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.trim(), value)),
        _ => Err(CliError::Usage(format!(
            "{flag} takes KEY=VALUE, not {pair:?}"
        ))),
    }
}
