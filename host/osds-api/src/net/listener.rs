//! What the HTTP server accepts: plain TCP connections as [`LiveSocket`]s (Nagle off), whose writes live
//! consumers can lend to the hub, and what a request knows of its connection ([`Peer`]).

use crate::net::socket::{LiveSocket, Tap, no_delay};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};

/// A request's connection: the client's address, and for a plain TCP connection the socket's [`Tap`].
#[derive(Clone)]
pub struct Peer {
    pub addr: SocketAddr,
    pub tap: Option<Arc<Tap>>,
}

/// A source of accepted connections, for the server's loop (`server.rs`).
pub trait Listener: Send + 'static {
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// The next connection and what a request may know of it. Waits out accept errors itself.
    fn accept(&mut self) -> impl Future<Output = (Self::Io, Peer)> + Send;
}

/// Plain TCP connections, each a [`LiveSocket`].
pub struct LiveListener(pub TcpListener);

impl Listener for LiveListener {
    type Io = LiveSocket;

    async fn accept(&mut self) -> (LiveSocket, Peer) {
        let (stream, addr) = accept_tcp(&self.0).await;
        no_delay(&stream);
        let socket = LiveSocket::new(stream);
        let peer = Peer {
            addr,
            tap: Some(socket.tap().clone()),
        };
        (socket, peer)
    }
}

/// The next TCP connection. An error that says the process is out of descriptors (or memory) waits a moment
/// before the next try, so the loop does not spin while connections close; a connection that failed before it
/// was accepted is skipped.
pub async fn accept_tcp(listener: &TcpListener) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => {}
            Err(e) => {
                tracing::error!(error = %e, "accepting a connection failed; waiting 1 s before the next try");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
    }
}
