//! The certificate: the receiver makes a self-signed one for `localhost` at start and writes it
//! where the sender reads it, so the sender verifies the receiver as any QUIC client would.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The name the certificate is for, and the server name the sender asks for.
pub const SERVER_NAME: &str = "localhost";

pub fn server_config(cert_out: &Path) -> anyhow::Result<quinn::ServerConfig> {
    let cert = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_string()]).context("making a certificate")?;
    let der = cert.cert.der().clone();
    write_ours(cert_out, &der).with_context(|| format!("writing the certificate to {}", cert_out.display()))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der()));
    quinn::ServerConfig::with_single_cert(vec![der], key).context("the server's TLS configuration")
}

pub fn client_config(cert: &Path) -> anyhow::Result<quinn::ClientConfig> {
    let der = std::fs::read(cert).with_context(|| format!("reading the receiver's certificate {}", cert.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(der)).with_context(|| format!("{} is not a DER certificate", cert.display()))?;
    quinn::ClientConfig::with_root_certificates(Arc::new(roots)).context("the client's TLS configuration")
}

/// Writes a new file, 0644 (a certificate is public). An earlier file there is replaced only when
/// it is a regular file of ours: never a link, and never someone else's.
fn write_ours(path: &Path, der: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if !meta.is_file() || meta.uid() != me {
            return Err(std::io::Error::other(format!(
                "{} exists and is not a regular file of ours: not replacing it",
                path.display()
            )));
        }
        std::fs::remove_file(path)?;
    }
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o644).open(path)?;
    f.write_all(der)
}
