//! Optional TLS in the service itself (rustls), so `https://` and `wss://` work without a proxy in front.

use anyhow::Context;
use arc_swap::ArcSwap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A handshake that has not finished by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Finished handshakes waiting for the server to take them.
const ACCEPT_QUEUE: usize = 256;

/// Reads a PEM certificate chain and private key.
pub fn acceptor(cert: &Path, key: &Path) -> anyhow::Result<TlsAcceptor> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("read TLS certificate {}", cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("parse TLS certificate {}", cert.display()))?;
    anyhow::ensure!(!chain.is_empty(), "no certificate in {}", cert.display());
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("read TLS private key {}", key.display()))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("TLS certificate and key do not fit together")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The certificate the listener presents, from its files; read again on [`ServedCertificate::reload`] (SIGHUP),
/// so a renewed certificate is served without a restart. New connections get the new one; open ones keep theirs.
#[derive(Clone)]
pub struct ServedCertificate {
    cert: PathBuf,
    key: PathBuf,
    current: Arc<ArcSwap<TlsAcceptor>>,
}

impl ServedCertificate {
    pub fn load(cert: &Path, key: &Path) -> anyhow::Result<ServedCertificate> {
        Ok(ServedCertificate {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            current: Arc::new(ArcSwap::from_pointee(acceptor(cert, key)?)),
        })
    }

    /// Reads the files again; when they cannot be read or do not fit together, the certificate in service
    /// stays, and the error says why.
    pub fn reload(&self) -> anyhow::Result<()> {
        let acceptor = acceptor(&self.cert, &self.key)?;
        self.current.store(Arc::new(acceptor));
        Ok(())
    }

    pub fn cert_path(&self) -> &Path {
        &self.cert
    }
}

/// Accepts TCP connections and hands over those whose TLS handshake succeeded; a slow or failed handshake
/// never holds up the others.
pub struct TlsListener {
    accepted: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, certificate: ServedCertificate) -> std::io::Result<TlsListener> {
        let (handover, accepted) = mpsc::channel(ACCEPT_QUEUE);
        tokio::spawn(async move {
            loop {
                let (stream, peer) = crate::net::listener::accept_tcp(&tcp).await;
                if handover.is_closed() {
                    break;
                }
                crate::net::socket::no_delay(&stream);
                let acceptor = certificate.current.load_full();
                let handover = handover.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = handover.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { accepted })
    }
}

impl crate::net::listener::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;

    async fn accept(&mut self) -> (Self::Io, crate::net::listener::Peer) {
        match self.accepted.recv().await {
            Some((io, addr)) => (io, crate::net::listener::Peer { addr, tap: None }),
            None => std::future::pending().await,
        }
    }
}
