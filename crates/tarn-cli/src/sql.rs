//! `tarn sql`: one SQL statement through DataFusion, with Tarn tables and catalogs
//! registered by name, its rows streamed out as the other commands write rows.

use std::sync::Arc;

use datafusion::prelude::SessionContext;
use tarn::StoreOptions;
use tarn_catalog::{Catalog, CatalogOptions};
use tarn_datafusion::{TarnCatalogProvider, TarnTableProvider};

use crate::args::SqlArgs;
use crate::error::Result;
use crate::output::{Output, write_batches};
use crate::split_pair;

/// Registers the tables and catalogs `args` names and runs its statement.
///
/// Fails as opening the tables and catalogs does, as DataFusion planning and running the
/// statement does, and when the output cannot be written.
pub(crate) async fn run(out: &Output, options: &StoreOptions, args: SqlArgs) -> Result<()> {
    let ctx = SessionContext::new();
    tarn_datafusion::register(&ctx);
    for pair in &args.tables {
        let (name, url) = split_pair("--table", pair)?;
        let table = tarn::Table::open_with_options(url, options).await?;
        ctx.register_table(name, Arc::new(TarnTableProvider::new(table)))?;
    }
    for pair in &args.catalogs {
        let (name, url) = split_pair("--catalog", pair)?;
        crate::catalog::ensure_exists(url, options).await?;
        let catalog = Catalog::open(
            url,
            CatalogOptions {
                store: options.clone(),
                ..CatalogOptions::default()
            },
        )
        .await?;
        let provider = TarnCatalogProvider::new(catalog).await?;
        ctx.register_catalog(name, Arc::new(provider));
    }
    let frame = ctx.sql(&args.query).await?;
    let schema = Arc::new(frame.schema().as_arrow().clone());
    let stream = frame.execute_stream().await?;
    write_batches(
        schema,
        stream,
        out.row_format(args.format),
        args.output.as_deref(),
    )
    .await?;
    Ok(())
}
