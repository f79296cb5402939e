//! Credentials never printed: store options, URLs and locations print with their secrets
//! replaced by `***`, keeping the names so a reader still sees what was set.

/// What stands for a secret in printed output.
pub const REDACTED: &str = "***";

/// Whether the store option `key` holds a secret (a secret key, a token, a password, a
/// SAS token, an account or service-account key). Key ids, regions and endpoints do not.
pub fn is_secret_option(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "secret",
        "token",
        "password",
        "sas",
        "account_key",
        "private_key",
        "credential",
        "master_key",
    ]
    .iter()
    .any(|word| key.contains(word))
        || key == "access_key"
        || key == "azure_storage_access_key"
        || key.ends_with("service_account_key")
}

/// `url` fit to print: user information (`s3://key:secret@bucket`) and the values of
/// query parameters (presigned URLs, SAS tokens) become `***`, names kept. Text that is
/// not a URL (a local path) comes back unchanged.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let (scheme, rest) = url.split_at(scheme_end + 3);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, rest) = rest.split_at(authority_end);
    // `abfs[s]://container@account...` names a container there, not a credential.
    let azure = matches!(scheme, "abfs://" | "abfss://");
    let authority = match authority.rfind('@') {
        Some(at) if azure && !authority[..at].contains(':') => authority.to_string(),
        Some(at) => format!("{REDACTED}@{}", &authority[at + 1..]),
        None => authority.to_string(),
    };
    let (path, query) = match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    };
    let mut out = format!("{scheme}{authority}{path}");
    if let Some(query) = query {
        let (query, fragment) = match query.split_once('#') {
            Some((q, f)) => (q, Some(f)),
            None => (query, None),
        };
        let params: Vec<String> = query
            .split('&')
            .map(|param| match param.split_once('=') {
                Some((name, _)) => format!("{name}={REDACTED}"),
                None => param.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
        if let Some(fragment) = fragment {
            out.push('#');
            out.push_str(fragment);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_user_information_and_query_values() {
        assert_eq!(redact_url("s3://AKID:s3cr3t@bucket/t"), "s3://***@bucket/t");
        assert_eq!(redact_url("s3://s3cr3t@bucket"), "s3://***@bucket");
        assert_eq!(
            redact_url("https://acct.blob.core.windows.net/c/t?sv=2024&sig=s3cr3t#x"),
            "https://acct.blob.core.windows.net/c/t?sv=***&sig=***#x"
        );
        assert_eq!(redact_url("s3://bucket/a@b/t"), "s3://bucket/a@b/t");
        assert_eq!(
            redact_url("abfss://container@acct.dfs.core.windows.net/t"),
            "abfss://container@acct.dfs.core.windows.net/t"
        );
        assert_eq!(
            redact_url("abfss://container:s3cr3t@acct.dfs.core.windows.net/t"),
            "abfss://***@acct.dfs.core.windows.net/t"
        );
        assert_eq!(redact_url("/data/tables/t"), "/data/tables/t");
    }

    #[test]
    fn secret_options_are_told_from_the_others() {
        for secret in [
            "secret_access_key",
            "aws_secret_access_key",
            "session_token",
            "token",
            "password",
            "azure_storage_sas_key",
            "access_key",
            "azure_storage_account_key",
            "google_service_account_key",
            "client_secret",
            "master_key",
            "azure_storage_master_key",
        ] {
            assert!(is_secret_option(secret), "{secret}");
        }
        for plain in [
            "access_key_id",
            "region",
            "endpoint",
            "allow_http",
            "bucket",
        ] {
            assert!(!is_secret_option(plain), "{plain}");
        }
    }
}
