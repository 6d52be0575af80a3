//! What the HTTP server accepts: plain TCP connections as [`LiveSocket`]s (Nagle off), whose writes live
//! consumers can lend to the hub, and what a request knows of its connection ([`Peer`]).

use crate::socket::{LiveSocket, Tap, no_delay};
use crate::tls::TlsListener;
use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

/// A request's connection: the client's address, and for a plain TCP connection the socket's [`Tap`].
#[derive(Clone)]
pub struct Peer {
    pub addr: SocketAddr,
    pub tap: Option<Arc<Tap>>,
}

/// Plain TCP connections, each a [`LiveSocket`].
pub struct LiveListener(pub TcpListener);

impl Listener for LiveListener {
    type Io = LiveSocket;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (LiveSocket, SocketAddr) {
        // axum's accept loop: it waits out errors such as running out of file descriptors.
        let (stream, addr) = Listener::accept(&mut self.0).await;
        no_delay(&stream);
        (LiveSocket::new(stream), addr)
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

impl Connected<IncomingStream<'_, LiveListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, LiveListener>) -> Peer {
        Peer {
            addr: *stream.remote_addr(),
            tap: Some(stream.io().tap().clone()),
        }
    }
}

impl Connected<IncomingStream<'_, TlsListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Peer {
        Peer {
            addr: *stream.remote_addr(),
            tap: None,
        }
    }
}
