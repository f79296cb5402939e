//! Time travel in SQL: `tarn_table('url')` is the table at `url` as of now,
//! `tarn_table('url', 3)` as of version 3 and `tarn_table('url', '2024-05-01T12:00:00Z')`
//! (or a `TIMESTAMP` literal) as of the newest version committed by then. DataFusion's
//! SQL has no `VERSION AS OF`, so a table function stands in for it.

use std::sync::Arc;

use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::logical_expr::Expr;
use tarn::Table;

use crate::factory::{AsOf, parse_timestamp};
use crate::to_datafusion;
use crate::wait::wait;

/// The name of the time-travel table function.
pub const TARN_TABLE: &str = "tarn_table";

/// The `tarn_table(url [, version | timestamp])` table function; [`crate::register`]
/// installs it.
#[derive(Debug, Default)]
pub struct TarnTableFunction;

impl TableFunctionImpl for TarnTableFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let (url, as_of) = arguments(args.exprs())?;
        // DataFusion asks for a table function's table without waiting, but opening one
        // reads the log.
        let table = wait(TARN_TABLE, async {
            let mut table = Table::open(&url).await?;
            as_of.load(&mut table).await?;
            Ok::<_, tarn::Error>(table)
        })?
        .map_err(to_datafusion)?;
        Ok(Arc::new(as_of.provider(table)))
    }
}

/// The URL and point in time a call names.
fn arguments(exprs: &[Expr]) -> Result<(String, AsOf)> {
    let constant = |e: &Expr| match e {
        Expr::Literal(value, _) => Some(value.clone()),
        _ => None,
    };
    let (url, when) = match exprs {
        [url] => (constant(url), None),
        [url, when] => (constant(url), Some(constant(when))),
        _ => return usage(),
    };
    let url = match url {
        Some(ScalarValue::Utf8(Some(u)) | ScalarValue::Utf8View(Some(u))) => u,
        _ => return usage(),
    };
    let as_of = match when {
        None => AsOf::Latest,
        Some(Some(ScalarValue::Int64(Some(v)))) => AsOf::Version(v),
        Some(Some(ScalarValue::Utf8(Some(t)) | ScalarValue::Utf8View(Some(t)))) => {
            AsOf::Timestamp(parse_timestamp(&t)?)
        }
        Some(Some(ScalarValue::TimestampNanosecond(Some(ns), _))) => {
            AsOf::Timestamp(ns.div_euclid(1_000_000))
        }
        Some(Some(ScalarValue::TimestampMicrosecond(Some(us), _))) => {
            AsOf::Timestamp(us.div_euclid(1000))
        }
        Some(Some(ScalarValue::TimestampMillisecond(Some(ms), _))) => AsOf::Timestamp(ms),
        Some(Some(ScalarValue::TimestampSecond(Some(s), _))) => match s.checked_mul(1000) {
            Some(ms) => AsOf::Timestamp(ms),
            None => return usage(),
        },
        _ => return usage(),
    };
    Ok((url, as_of))
}

fn usage<T>() -> Result<T> {
    plan_err!(
        "{TARN_TABLE} takes a table URL, and a version number or a time: \
         {TARN_TABLE}('s3://bucket/t', 3) or {TARN_TABLE}('/data/t', '2024-05-01T12:00:00Z')"
    )
}
