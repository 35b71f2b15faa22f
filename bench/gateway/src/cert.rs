//! `cert --out DIR`: a certificate authority of its own and a certificate
//! for `localhost` and `127.0.0.1` signed by it, so that a proxy can serve
//! TLS to `drive` (`--tls-ca`) without openssl or any file from outside:
//! `DIR/ca.pem` (the authority's certificate, for the client),
//! `DIR/gateway.crt` and `DIR/gateway.key` (the proxy's, PEM).
//!
//! The authority's key is not kept: nothing else is ever signed by it.

use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

use crate::Flags;

pub fn main(flags: &Flags) -> Result<(), String> {
    let dir = Path::new(flags.required("out")?);
    write(dir)?;
    println!(
        "{}: ca.pem, gateway.crt, gateway.key (localhost, 127.0.0.1)",
        dir.display()
    );
    Ok(())
}

/// Writes `ca.pem`, `gateway.crt` and `gateway.key` into `dir`, creating it.
pub fn write(dir: &Path) -> Result<(), String> {
    let failed = |e: rcgen::Error| format!("making the certificates: {e}");
    let mut authority = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
    authority.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let authority = CertifiedIssuer::self_signed(authority, KeyPair::generate().map_err(failed)?)
        .map_err(failed)?;
    let key = KeyPair::generate().map_err(failed)?;
    let gateway = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .map_err(failed)?
        .signed_by(&key, &authority)
        .map_err(failed)?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for (name, pem) in [
        ("ca.pem", authority.pem()),
        ("gateway.crt", gateway.pem()),
        ("gateway.key", key.serialize_pem()),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, pem).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_writes_the_three_files_where_asked() {
        let dir = std::env::temp_dir().join(format!("cert-main-{}", std::process::id()));
        let args = ["--out".to_string(), dir.to_str().unwrap().to_string()];
        main(&Flags::parse(&args)).unwrap();
        for (name, begins) in [
            ("ca.pem", "-----BEGIN CERTIFICATE-----"),
            ("gateway.crt", "-----BEGIN CERTIFICATE-----"),
            ("gateway.key", "-----BEGIN PRIVATE KEY-----"),
        ] {
            let text = std::fs::read_to_string(dir.join(name)).unwrap();
            assert!(text.starts_with(begins), "{name}: {text}");
        }
        std::fs::remove_dir_all(dir).unwrap();
        let error = main(&Flags::parse(&[])).unwrap_err();
        assert!(error.starts_with("--out is required"), "{error}");
    }
}
