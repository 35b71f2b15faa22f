//! TLS with rustls: the listener's certificate (reloaded on SIGHUP, new
//! connections get the new pair) and the client side towards backends
//! (SNI the endpoint's host, verified against a given CA or the system's
//! roots). TLS 1.2 and 1.3 only, on the `ring` provider.

use std::path::Path;
use std::sync::{Arc, RwLock};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore, ServerConfig};

use crate::config::{Naming, TlsFiles};
use crate::error::{ConfigError, ConfigErrorKind};

/// TLS 1.3 first, then 1.2; nothing older.
static VERSIONS: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The listener's TLS settings: the pair read at start, swapped by
/// [`ServerTls::reload`].
#[derive(Debug)]
pub struct ServerTls {
    files: TlsFiles,
    naming: Naming,
    current: RwLock<Arc<ServerConfig>>,
}

impl ServerTls {
    /// Reads the pair in `files` now.
    ///
    /// # Errors
    /// A [`ConfigErrorKind::Tls`] error, one line starting with the
    /// certificate's flag (`--tls-cert: ` or `tls_cert: `), which is also
    /// its setting: an unreadable or non-PEM file, a key that does not
    /// match the certificate.
    pub(crate) fn load(files: &TlsFiles, naming: Naming) -> Result<Self, ConfigError> {
        let config = server_config(files, naming)?;
        Ok(ServerTls {
            files: files.clone(),
            naming,
            current: RwLock::new(Arc::new(config)),
        })
    }

    /// Reads the pair again: connections accepted from now on get it, open
    /// ones keep theirs. On an error the pair in use stays.
    ///
    /// # Errors
    /// As [`ServerTls::load`].
    pub(crate) fn reload(&self) -> Result<(), ConfigError> {
        let config = Arc::new(server_config(&self.files, self.naming)?);
        match self.current.write() {
            Ok(mut current) => *current = config,
            Err(poisoned) => *poisoned.into_inner() = config,
        }
        Ok(())
    }

    /// The settings for a connection accepted now.
    pub fn current(&self) -> Arc<ServerConfig> {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

fn server_config(files: &TlsFiles, naming: Naming) -> Result<ServerConfig, ConfigError> {
    let flag = naming.name("tls_cert");
    read_pair(files, naming)
        .map_err(|e| ConfigError::new(ConfigErrorKind::Tls, e).with_setting(flag))
}

fn read_pair(files: &TlsFiles, naming: Naming) -> Result<ServerConfig, String> {
    let flag = naming.name("tls_cert");
    let certs = read_certs(&files.cert).map_err(|e| format!("{flag}: {e}"))?;
    let key = loadring_discovery::read_file(&files.key)
        .map_err(rustls_pki_types::pem::Error::Io)
        .and_then(|pem| PrivateKeyDer::from_pem_slice(&pem))
        .map_err(|e| {
            format!(
                "{flag}: its key ({} {}): {}",
                naming.name("tls_key"),
                files.key.display(),
                pem_error(&e)
            )
        })?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(VERSIONS)
        .map_err(|e| format!("{flag}: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            // rustls says a mismatch with its enum's debug name.
            let why = match e {
                tokio_rustls::rustls::Error::InconsistentKeys(_) => {
                    "the key is not the certificate's".to_string()
                }
                other => other.to_string(),
            };
            format!(
                "{flag}: {} and its key ({} {}) do not go together: {why}",
                files.cert.display(),
                naming.name("tls_key"),
                files.key.display()
            )
        })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

fn pem_error(e: &rustls_pki_types::pem::Error) -> String {
    match e {
        rustls_pki_types::pem::Error::Io(io) => io.to_string(),
        rustls_pki_types::pem::Error::NoItemsFound => "no PEM item of the expected kind".into(),
        other => format!("not valid PEM: {other:?}"),
    }
}

/// Every certificate of a PEM file; at least one.
fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem =
        loadring_discovery::read_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {}", path.display(), pem_error(&e)))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

/// The client settings towards a cluster's backends: verified against the
/// certificates of `ca` (PEM), or the system's roots without it; ALPN
/// `h2` when `h2`, else `http/1.1`.
///
/// # Errors
/// One line: an unreadable or empty CA file, no system roots.
pub(crate) fn client_config(ca: Option<&Path>, h2: bool) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    match ca {
        Some(path) => {
            for cert in read_certs(path)? {
                roots
                    .add(cert)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(
                    "no system root certificates found: give a CA file (install ca-certificates)"
                        .into(),
                );
            }
        }
    }
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(VERSIONS)
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = if h2 {
        vec![b"h2".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(Arc::new(config))
}
