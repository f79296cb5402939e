//! `tarn catalog`: list, describe, create namespaces in and drop from a Tarn catalog.
//! Commands that read or drop refuse a URL that holds no catalog rather than create one.

use serde_json::json;
use tarn::StoreOptions;
use tarn_catalog::{
    Catalog, CatalogOptions, Detail, DropBehavior, DropData, IfExists, ObjectId, ObjectMetadata,
};

use crate::args::CatalogCommand;
use crate::error::{CliError, Result};
use crate::output::Output;
use crate::split_pair;

/// Listed per catalog call.
const PAGE: usize = 1000;

/// Fails with [`tarn::Error::TableNotFound`] (as a table error) when `url` holds no
/// catalog: no `__manifest` table.
pub(crate) async fn ensure_exists(url: &str, options: &StoreOptions) -> Result<()> {
    let manifest = format!("{}/__manifest", url.trim_end_matches('/'));
    match tarn::Table::open_with_options(&manifest, options).await {
        Ok(_) => Ok(()),
        Err(tarn::Error::TableNotFound { .. }) => {
            Err(CliError::Table(tarn::Error::TableNotFound {
                url: url.to_string(),
                reason: "no Tarn catalog here (no __manifest table)".into(),
            }))
        }
        Err(e) => Err(e.into()),
    }
}

async fn open(url: &str, options: &StoreOptions) -> Result<Catalog> {
    Ok(Catalog::open(
        url,
        CatalogOptions {
            store: options.clone(),
            ..CatalogOptions::default()
        },
    )
    .await?)
}

/// An id as the command line takes it: names joined by dots (`sales.eu`), or by the
/// catalog's own `$` when a name holds a dot.
fn id_of(text: &str) -> Result<ObjectId> {
    if text.contains('$') {
        return Ok(ObjectId::parse(text)?);
    }
    if text.is_empty() {
        return Ok(ObjectId::root());
    }
    Ok(ObjectId::new(text.split('.'))?)
}

/// An id as the command line prints it: names joined by dots.
fn id_text(id: &ObjectId) -> String {
    id.names().join(".")
}

/// Runs a catalog command.
pub(crate) async fn run(
    out: &Output,
    options: &StoreOptions,
    command: CatalogCommand,
) -> Result<()> {
    match command {
        CatalogCommand::List { catalog, namespace } => {
            ensure_exists(&catalog, options).await?;
            let catalog = open(&catalog, options).await?;
            let parent = match namespace {
                Some(text) => id_of(&text)?,
                None => ObjectId::root(),
            };
            let namespaces = all(&catalog, &parent, true).await?;
            let tables = all(&catalog, &parent, false).await?;
            let names = |ids: &[ObjectId]| ids.iter().map(id_text).collect::<Vec<_>>();
            let mut rows: Vec<Vec<String>> = namespaces
                .iter()
                .map(|id| vec!["namespace".to_string(), id_text(id)])
                .collect();
            rows.extend(
                tables
                    .iter()
                    .map(|id| vec!["table".to_string(), id_text(id)]),
            );
            out.rows(
                &json!({ "namespaces": names(&namespaces), "tables": names(&tables) }),
                &["type", "id"],
                &rows,
            )
        }
        CatalogCommand::Describe { catalog, id } => {
            ensure_exists(&catalog, options).await?;
            let catalog = open(&catalog, options).await?;
            let id = id_of(&id)?;
            if catalog.table_exists(&id).await? {
                let t = catalog.describe_table(&id, Detail::WithVersion).await?;
                out.record(
                    &json!({
                        "type": "table",
                        "id": id_text(&t.id),
                        "location": t.location,
                        "url": t.url,
                        "version": t.version,
                        "properties": t.metadata.properties,
                        "description": t.metadata.description,
                        "declared": t.metadata.declared,
                    }),
                    &[
                        ("table", id_text(&t.id)),
                        ("url", t.url.clone()),
                        (
                            "version",
                            t.version
                                .map_or("declared, no data yet".into(), |v| v.to_string()),
                        ),
                        (
                            "description",
                            t.metadata.description.clone().unwrap_or_else(|| "-".into()),
                        ),
                        ("properties", properties_text(&t.metadata)),
                    ],
                )
            } else {
                let n = catalog.describe_namespace(&id).await?;
                out.record(
                    &json!({
                        "type": "namespace",
                        "id": id_text(&n.id),
                        "properties": n.metadata.properties,
                        "description": n.metadata.description,
                        "created_at_us": n.created_at,
                        "updated_at_us": n.updated_at,
                    }),
                    &[
                        ("namespace", id_text(&n.id)),
                        (
                            "description",
                            n.metadata.description.clone().unwrap_or_else(|| "-".into()),
                        ),
                        ("properties", properties_text(&n.metadata)),
                    ],
                )
            }
        }
        CatalogCommand::CreateNamespace {
            catalog,
            id,
            description,
            properties,
        } => {
            let catalog = open(&catalog, options).await?;
            let id = id_of(&id)?;
            let mut metadata = ObjectMetadata {
                description,
                ..ObjectMetadata::default()
            };
            for pair in &properties {
                let (key, value) = split_pair("--property", pair)?;
                metadata
                    .properties
                    .insert(key.to_string(), value.to_string());
            }
            catalog
                .create_namespace(&id, metadata, IfExists::Fail)
                .await?;
            out.record(
                &json!({ "created": id_text(&id) }),
                &[("created", id_text(&id))],
            )
        }
        CatalogCommand::Drop {
            catalog,
            id,
            cascade,
            purge,
        } => {
            ensure_exists(&catalog, options).await?;
            let catalog = open(&catalog, options).await?;
            let id = id_of(&id)?;
            let kind = if catalog.table_exists(&id).await? {
                let data = if purge {
                    DropData::Purge
                } else {
                    DropData::Keep
                };
                catalog.drop_table(&id, data).await?;
                "table"
            } else {
                let behavior = if cascade {
                    DropBehavior::Cascade
                } else {
                    DropBehavior::Restrict
                };
                catalog.drop_namespace(&id, behavior).await?;
                "namespace"
            };
            out.record(
                &json!({ "dropped": id_text(&id), "type": kind }),
                &[("dropped", format!("{kind} {}", id_text(&id)))],
            )
        }
    }
}

/// Every namespace (or table) directly in `parent`, page by page.
async fn all(catalog: &Catalog, parent: &ObjectId, namespaces: bool) -> Result<Vec<ObjectId>> {
    let mut ids = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = if namespaces {
            catalog
                .list_namespaces(parent, PAGE, token.as_deref())
                .await?
        } else {
            catalog.list_tables(parent, PAGE, token.as_deref()).await?
        };
        ids.extend(page.ids);
        match page.next {
            Some(next) => token = Some(next),
            None => return Ok(ids),
        }
    }
}

fn properties_text(metadata: &ObjectMetadata) -> String {
    if metadata.properties.is_empty() {
        return "-".into();
    }
    metadata
        .properties
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("\n")
}
