//! The cloud object stores: Amazon S3, Google Cloud Storage and Azure Blob Storage / ADLS
//! Gen2, each built with `object_store`'s builder from its cloud's usual environment
//! variables, then the options given.
//!
//! Every cloud store is hedged ([`HedgedStore`]): each service has a latency tail, and a
//! put-if-absent is safe to send twice on each (S3 `If-None-Match: *`, GCS
//! `x-goog-if-generation-match: 0`, Azure `If-None-Match: *`: the second copy is refused).

use std::str::FromStr;
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use url::Url;

use crate::azure::{AzureStore, EMULATOR_ACCOUNT, EMULATOR_KEY};
use crate::error::{Error, Result};
use crate::hedge::{HedgePolicy, HedgedStore};
use crate::location::{ALLOWED_ROOTS, StoreLocation, StoreOptions, invalid};
use crate::redact::redact_url;

/// A cloud a table URL can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cloud {
    /// `s3://`, `s3a://`.
    S3,
    /// `gs://`.
    Gcs,
    /// `az://`, `azure://`, `adl://`, `abfs://`, `abfss://`.
    Azure,
}

impl Cloud {
    /// The cloud of a URL scheme, if it names one.
    pub(crate) fn of_scheme(scheme: &str) -> Option<Self> {
        match scheme {
            "s3" | "s3a" => Some(Self::S3),
            "gs" => Some(Self::Gcs),
            "az" | "azure" | "adl" | "abfs" | "abfss" => Some(Self::Azure),
            _ => None,
        }
    }

    /// The scheme of the URLs Tarn normalises this cloud's locations to.
    fn scheme(self) -> &'static str {
        match self {
            Self::S3 => "s3",
            Self::Gcs => "gs",
            Self::Azure => "az",
        }
    }

    /// What the URL's authority names: a bucket, or a container.
    fn bucket_word(self) -> &'static str {
        match self {
            Self::S3 | Self::Gcs => "bucket",
            Self::Azure => "container",
        }
    }
}

/// The bucket (S3, GCS) or container (Azure) a cloud URL names: the host, or for
/// `abfs[s]://container@account.dfs.core.windows.net/` the user part.
pub(crate) fn bucket_of(cloud: Cloud, url: &Url) -> Option<String> {
    let name = match container_in_user(cloud, url) {
        Some(container) => container,
        None => url.host_str()?,
    };
    (!name.is_empty()).then(|| name.to_string())
}

/// The container of an `abfs[s]://container@account...` URL.
fn container_in_user(cloud: Cloud, url: &Url) -> Option<&str> {
    let hadoop_form = cloud == Cloud::Azure && matches!(url.scheme(), "abfs" | "abfss");
    (hadoop_form && !url.username().is_empty()).then(|| url.username())
}

/// Opens the cloud store `url` names, with the environment and then `options`.
pub(crate) fn open_cloud(
    raw: &str,
    url: &Url,
    cloud: Cloud,
    options: &StoreOptions,
) -> Result<StoreLocation> {
    let bucket = bucket_of(cloud, url).ok_or_else(|| {
        let word = cloud.bucket_word();
        invalid(
            raw,
            &format!(
                "a {} URL needs a {word}: {}://{word}/prefix",
                url.scheme(),
                url.scheme()
            ),
        )
    })?;
    let root = crate::location::url_root(raw, url)?;
    let options = options.iter().filter(|(k, _)| *k != ALLOWED_ROOTS);
    let store = match cloud {
        Cloud::S3 => build_s3(raw, &bucket, options)?,
        Cloud::Gcs => build_gcs(raw, &bucket, options)?,
        Cloud::Azure => build_azure(raw, url, options)?,
    };
    let normalised = format!("{}://{bucket}/{root}", cloud.scheme());
    let url = Url::parse(&normalised).map_err(|e| invalid(raw, &e.to_string()))?;
    let store = HedgedStore::new(store, HedgePolicy::default());
    Ok(StoreLocation::new(url, Arc::new(store), root))
}

fn build_s3<'a>(
    raw: &str,
    bucket: &str,
    options: impl Iterator<Item = (&'a str, &'a str)>,
) -> Result<Arc<dyn ObjectStore>> {
    let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
    if bucket.ends_with("--x-s3") {
        builder = builder.with_s3_express(true);
    }
    for (key, value) in options {
        let key = if key == "allow_http" {
            "aws_allow_http"
        } else {
            key
        };
        builder = builder.with_config(parse_key::<AmazonS3ConfigKey>(raw, key)?, value);
    }
    let store = builder.build().map_err(|source| build_error(raw, source))?;
    Ok(Arc::new(store))
}

fn build_gcs<'a>(
    raw: &str,
    bucket: &str,
    options: impl Iterator<Item = (&'a str, &'a str)>,
) -> Result<Arc<dyn ObjectStore>> {
    let mut builder = GoogleCloudStorageBuilder::from_env().with_bucket_name(bucket);
    for (key, value) in options {
        // `endpoint` is the one name every cloud takes for "send requests here".
        let key = if key == "endpoint" { "base_url" } else { key };
        builder = builder.with_config(parse_key::<GoogleConfigKey>(raw, key)?, value);
    }
    let store = builder.build().map_err(|source| build_error(raw, source))?;
    Ok(Arc::new(store))
}

fn build_azure<'a>(
    raw: &str,
    url: &Url,
    options: impl Iterator<Item = (&'a str, &'a str)>,
) -> Result<Arc<dyn ObjectStore>> {
    // The builder reads container and account from every URL form object_store knows
    // (`abfss://container@account.dfs.core.windows.net/` among them). It is given no
    // password, which its errors would print.
    let container_at = container_in_user(Cloud::Azure, url)
        .map(|container| format!("{container}@"))
        .unwrap_or_default();
    let host = url.host_str().unwrap_or_default();
    let mut builder = MicrosoftAzureBuilder::from_env()
        .with_url(format!("{}://{container_at}{host}", url.scheme()));
    for (key, value) in options {
        builder = builder.with_config(parse_key::<AzureConfigKey>(raw, key)?, value);
    }
    // Read as object_store reads a boolean option.
    let emulator = builder
        .get_config_value(&AzureConfigKey::UseEmulator)
        .is_some_and(|v| {
            matches!(
                v.to_ascii_lowercase().as_str(),
                "1" | "true" | "on" | "yes" | "y"
            )
        });
    let endpoint = builder.get_config_value(&AzureConfigKey::Endpoint);
    let (true, Some(endpoint)) = (emulator, endpoint) else {
        let store = builder.build().map_err(|source| build_error(raw, source))?;
        return Ok(Arc::new(AzureStore::new(store, emulator)));
    };
    // Azurite at an address of its own: see `azure`.
    // The account the URL names (`abfss://container@account.dfs...`) wins, as in `build`.
    let from_url = container_in_user(Cloud::Azure, url)
        .and_then(|_| url.host_str()?.split('.').next().map(str::to_string));
    let account = from_url
        .or_else(|| builder.get_config_value(&AzureConfigKey::AccountName))
        .unwrap_or_else(|| EMULATOR_ACCOUNT.to_string());
    let has_credential = [
        AzureConfigKey::AccessKey,
        AzureConfigKey::SasKey,
        AzureConfigKey::Token,
    ]
    .iter()
    .any(|key| builder.get_config_value(key).is_some());
    if !has_credential {
        builder = builder.with_access_key(EMULATOR_KEY);
    }
    let store = builder
        .with_use_emulator(false)
        .with_account(&account)
        .with_endpoint(format!("{}/{account}", endpoint.trim_end_matches('/')))
        .with_allow_http(true)
        .build()
        .map_err(|source| build_error(raw, source))?;
    Ok(Arc::new(AzureStore::new(store, true)))
}

fn parse_key<K: FromStr>(raw: &str, key: &str) -> Result<K> {
    K::from_str(key).map_err(|_| Error::UnknownOption {
        key: key.to_string(),
        url: redact_url(raw),
    })
}

fn build_error(raw: &str, source: object_store::Error) -> Error {
    Error::Build {
        url: redact_url(raw),
        source,
    }
}
