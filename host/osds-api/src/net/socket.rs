//! A plain TCP connection whose writes a caught-up live consumer lends to the hub (`live/hub.rs`), so a new
//! report reaches it with one write from the hub's loop instead of a task woken, polled and framed per
//! subscriber. The consumer's own writes (tungstenite's for a WebSocket, a detached SSE stream's) and the hub's
//! share the socket behind one lock and never split a frame: the hub writes only while the consumer waits for
//! reports with everything of its own flushed; a write that does not complete, or anything unexpected, hands
//! the socket back to the consumer, which goes on from the cursor the hub reached.
//!
//! An SSE stream also takes its connection from hyper once the response head is out ([`Tap::detach`]): hyper
//! keeps 16 KiB of buffers for the life of every HTTP/1 connection, more than the rest of a subscriber.

use crate::sources::{self, SourceFilter};
use crate::wire::Rendered;
use bytes::{Buf, Bytes};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// What a consumer's socket carries, and so how the hub frames a report for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A chunk of an HTTP/1.1 `text/event-stream` response.
    Sse,
    /// A WebSocket text message.
    Ws,
}

/// Reports written to lent sockets, per protocol (for the operator's metrics).
#[derive(Debug, Default)]
pub struct Written {
    pub sse: u64,
    pub ws: u64,
}

impl Written {
    fn count(&mut self, kind: Kind) {
        match kind {
            Kind::Sse => self.sse += 1,
            Kind::Ws => self.ws += 1,
        }
    }
}

/// How far an SSE stream has taken its connection from hyper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Detach {
    No,
    /// Asked for: hyper still has to flush the response head.
    Asked,
    /// hyper's part is over: it sees the end of its input and lets go; the stream writes for itself.
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The connection writes for itself.
    Off,
    /// Lent, but the consumer's writer may still hold unflushed bytes: the hub must not write yet.
    Waiting,
    /// The hub writes the reports after the cursor.
    Direct,
}

/// The shared half of a [`LiveSocket`]: its writer and who may use it.
pub struct Tap {
    state: Mutex<TapState>,
    registered: AtomicBool,
    /// The read half of a detached stream's connection, which hyper no longer reads: the stream watches it
    /// to learn at once that its client has gone ([`Tap::poll_peer_gone`]).
    read_side: Mutex<ReadSide>,
}

#[derive(Default)]
struct ReadSide {
    half: Option<OwnedReadHalf>,
    /// Whoever waits for the half to arrive.
    waker: Option<Waker>,
}

struct TapState {
    /// `None` once the connection is gone.
    writer: Option<OwnedWriteHalf>,
    mode: Mode,
    kind: Kind,
    /// The channels the consumer follows (none: all); the hub passes over the others' reports.
    filter: Option<SourceFilter>,
    /// The last report id on the socket (written, or partly written with the rest in `pending`).
    cursor: i64,
    /// The rest of a report the hub wrote in part: it goes out before any other byte.
    pending: Option<Bytes>,
    /// The connection's writer wrote since its last completed flush, so it may be inside a frame.
    dirty: bool,
    /// The consumer waiting for the socket back.
    waker: Option<Waker>,
    /// A write of the hub's failed: the connection's own next write meets the error and ends it.
    broken: bool,
    detach: Detach,
}

/// A plain TCP connection as the HTTP server sees it; its [`Tap`] is what live consumers and the hub use.
pub struct LiveSocket {
    /// Handed to the tap when hyper lets go of a detached stream's connection.
    read: Option<OwnedReadHalf>,
    tap: Arc<Tap>,
}

impl LiveSocket {
    pub fn new(stream: TcpStream) -> LiveSocket {
        let (read, write) = stream.into_split();
        let tap = Tap {
            state: Mutex::new(TapState {
                writer: Some(write),
                mode: Mode::Off,
                kind: Kind::Sse,
                filter: None,
                cursor: 0,
                pending: None,
                dirty: false,
                waker: None,
                broken: false,
                detach: Detach::No,
            }),
            registered: AtomicBool::new(false),
            read_side: Mutex::default(),
        };
        LiveSocket {
            read: Some(read),
            tap: Arc::new(tap),
        }
    }

    pub fn tap(&self) -> &Arc<Tap> {
        &self.tap
    }
}

fn not_connected() -> io::Error {
    io::Error::from(io::ErrorKind::NotConnected)
}

impl TapState {
    /// Writes what is left of a partly written report.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some(rest) = self.pending.as_mut() {
            let writer = self.writer.as_mut().ok_or_else(not_connected)?;
            let n = ready!(Pin::new(writer).poll_write(cx, rest))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            rest.advance(n);
            if rest.is_empty() {
                self.pending = None;
            }
        }
        Poll::Ready(Ok(()))
    }

    /// The connection's writer is about to write: the hub waits until it has flushed.
    fn own_write(&mut self) -> io::Result<Pin<&mut OwnedWriteHalf>> {
        if self.mode == Mode::Direct {
            self.mode = Mode::Waiting;
        }
        self.dirty = true;
        self.writer.as_mut().map(Pin::new).ok_or_else(not_connected)
    }

    fn flushed(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        let writer = self.writer.as_mut().ok_or_else(not_connected)?;
        ready!(Pin::new(writer).poll_flush(cx))?;
        self.dirty = false;
        Poll::Ready(Ok(()))
    }

    /// Gives the socket back to the consumer; the waker to wake once the lock is released.
    fn hand_back(&mut self) -> Option<Waker> {
        self.mode = Mode::Off;
        self.waker.take()
    }
}

impl Tap {
    fn lock(&self) -> MutexGuard<'_, TapState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// True the first time only: a connection joins the hub once, however many streams it serves.
    pub(crate) fn first_registration(&self) -> bool {
        !self.registered.swap(true, Ordering::AcqRel)
    }

    /// Whether the hub can drop it: only the hub still holds it, so the connection is gone.
    pub(crate) fn abandoned(self: &Arc<Tap>) -> bool {
        Arc::strong_count(self) == 1
    }

    /// Lends the socket to the hub for the reports after `cursor`; false if it is broken.
    pub(crate) fn lend(&self, kind: Kind, cursor: i64, filter: Option<&SourceFilter>) -> bool {
        let mut state = self.lock();
        if state.broken || state.writer.is_none() {
            return false;
        }
        state.kind = kind;
        state.filter = filter.cloned();
        state.cursor = cursor;
        state.mode = Mode::Waiting;
        true
    }

    /// Takes the socket back; the last report id on it.
    pub(crate) fn take_back(&self) -> i64 {
        let mut state = self.lock();
        state.mode = Mode::Off;
        state.waker = None;
        state.cursor
    }

    /// Ready once the hub gave the socket back. Meanwhile writes the rest of a partly written report, and lets
    /// the hub write when nothing of the consumer's own is unflushed (its writes end with a flush; tungstenite
    /// also flushes its reply to a close while reading it, and no report may follow that, so a flush alone
    /// never lets the hub in).
    pub(crate) fn poll_given_back(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.lock();
        if state.mode == Mode::Off {
            return Poll::Ready(());
        }
        match state.poll_pending(cx) {
            Poll::Ready(Ok(())) => {
                if state.mode == Mode::Waiting && !state.dirty {
                    state.mode = Mode::Direct;
                }
            }
            // The connection's own next write meets the error.
            Poll::Ready(Err(_)) => {
                state.mode = Mode::Off;
                return Poll::Ready(());
            }
            Poll::Pending => {}
        }
        if !state
            .waker
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            state.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Asks hyper to let go of the connection once it has flushed what it wrote (the response head).
    pub(crate) fn detach(&self) {
        let mut state = self.lock();
        if state.detach == Detach::No {
            state.detach = Detach::Asked;
        }
    }

    /// Ready with true once hyper let go, with false if the connection ended first.
    pub(crate) fn poll_detached(&self, cx: &mut Context<'_>) -> Poll<bool> {
        let mut state = self.lock();
        if state.detach == Detach::Done {
            return Poll::Ready(true);
        }
        if state.writer.is_none() {
            return Poll::Ready(false);
        }
        state.waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Ready once the client of a detached stream has closed its side of the connection (or the connection
    /// failed). Anything it sends meanwhile is read and ignored: a stream's client has nothing more to say.
    pub(crate) fn poll_peer_gone(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut side = self
            .read_side
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(half) = side.half.as_mut() else {
            side.waker = Some(cx.waker().clone());
            return Poll::Pending;
        };
        let mut scratch = [0u8; 512];
        loop {
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut *half).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(()),
                Poll::Ready(Ok(())) => continue,
                Poll::Ready(Err(_)) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Writes as the connection's writer (its bytes are never inside one of the hub's).
    pub(crate) fn poll_write_own(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut state = self.lock();
        ready!(state.poll_pending(cx))?;
        state.own_write()?.poll_write(cx, buf)
    }

    pub(crate) fn poll_flush_own(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.lock().flushed(cx)
    }

    /// Closes the connection (a detached stream that has ended).
    pub(crate) fn close(&self) {
        self.read_side
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .half = None;
        let waker = {
            let mut state = self.lock();
            state.writer = None;
            state.pending = None;
            state.hand_back()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Hands a lent socket back unasked; the waker to wake.
    pub(crate) fn give_back(&self) -> Option<Waker> {
        let mut state = self.lock();
        (state.mode != Mode::Off)
            .then(|| state.hand_back())
            .flatten()
    }

    /// Writes `reports` (in id order, the first following `previous`) that come after the socket's cursor,
    /// counting them in `written`. A socket that is not lent, or lent but not ready, or whose cursor is not
    /// where the reports continue, or that cannot take a whole report at once, goes back to its consumer: the
    /// waker to wake.
    pub(crate) fn deliver(
        &self,
        reports: &[Arc<Rendered>],
        mut previous: i64,
        written: &mut Written,
    ) -> Option<Waker> {
        let mut state = self.lock();
        if state.mode == Mode::Off {
            return None;
        }
        for report in reports {
            if report.id <= state.cursor {
                previous = report.id;
                continue;
            }
            if state.mode != Mode::Direct || state.cursor != previous {
                return state.hand_back();
            }
            if !sources::accepts(state.filter.as_ref(), &report.source) {
                // Not the consumer's: passed over, so the reports after it still continue the cursor.
                state.cursor = report.id;
                previous = report.id;
                continue;
            }
            let frame = match state.kind {
                Kind::Sse => report.sse_chunk(),
                Kind::Ws => report.ws_frame(),
            };
            let Some(writer) = state.writer.as_ref() else {
                return state.hand_back();
            };
            match writer.try_write(frame) {
                Ok(n) if n == frame.len() => {
                    state.cursor = report.id;
                    written.count(state.kind);
                }
                Ok(n) => {
                    state.pending = Some(frame.slice(n..));
                    state.cursor = report.id;
                    written.count(state.kind);
                    return state.hand_back();
                }
                // Full: the consumer's own writes wait for room and judge whether it is slow.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return state.hand_back(),
                // The connection's own next write finds out and ends it.
                Err(_) => {
                    state.broken = true;
                    return state.hand_back();
                }
            }
            previous = report.id;
        }
        None
    }
}

impl LiveSocket {
    /// Whether hyper's part is over: it reads the end of its input, and its writes go nowhere.
    fn detached(&self) -> bool {
        self.tap.lock().detach == Detach::Done
    }
}

impl AsyncRead for LiveSocket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.detached() {
            return Poll::Ready(Ok(()));
        }
        match self.read.as_mut() {
            Some(read) => Pin::new(read).poll_read(cx, buf),
            None => Poll::Ready(Ok(())),
        }
    }
}

impl AsyncWrite for LiveSocket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.detached() {
            return Poll::Ready(Ok(buf.len()));
        }
        self.tap.poll_write_own(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut state = self.tap.lock();
        if state.detach == Detach::Done {
            return Poll::Ready(Ok(bufs.iter().map(|b| b.len()).sum()));
        }
        ready!(state.poll_pending(cx))?;
        state.own_write()?.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let waker = {
            let mut state = self.tap.lock();
            if state.detach == Detach::Done {
                return Poll::Ready(Ok(()));
            }
            ready!(state.flushed(cx))?;
            if state.detach != Detach::Asked {
                return Poll::Ready(Ok(()));
            }
            // Everything hyper wrote (the response head) is out: the stream takes over, and hyper, polled
            // again, reads the end of its input and drops the connection with its buffers.
            state.detach = Detach::Done;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        cx.waker().wake_by_ref();
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut state = self.tap.lock();
        if state.detach == Detach::Done {
            return Poll::Ready(Ok(()));
        }
        ready!(state.poll_pending(cx))?;
        state.mode = Mode::Off;
        state.own_write()?.poll_shutdown(cx)
    }
}

impl Drop for LiveSocket {
    fn drop(&mut self) {
        let waker = {
            let mut state = self.tap.lock();
            if state.detach == Detach::Done {
                // The detached stream closes the socket when it ends, and watches its read side meanwhile.
                drop(state);
                let waker = {
                    let mut side = self
                        .tap
                        .read_side
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    side.half = self.read.take();
                    side.waker.take()
                };
                if let Some(waker) = waker {
                    waker.wake();
                }
                return;
            }
            // Closes the socket now: the hub may hold the tap until its next round.
            state.writer = None;
            state.pending = None;
            state.hand_back()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// Live streams write one small message at a time to peers that rarely send anything back: with Nagle's algorithm
/// a message that follows one still unacknowledged waits for the peer's delayed ACK (40 ms on Linux).
pub fn no_delay(stream: &TcpStream) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "cannot set TCP_NODELAY on a connection");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    fn report(id: i64, json: &str) -> Arc<Rendered> {
        let source = if id % 2 == 0 { "cea" } else { "sc" };
        Arc::new(Rendered::new(id, source.into(), json))
    }

    /// A connected pair over loopback: the server side as the HTTP server sees it, and the client.
    async fn pair() -> (LiveSocket, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (LiveSocket::new(server), client)
    }

    /// Lends like a waiting consumer: lent, then polled once (which lets the hub into a WebSocket).
    fn lend_and_wait(socket: &LiveSocket, kind: Kind, cursor: i64) -> bool {
        assert!(socket.tap.lend(kind, cursor, None));
        let waker = futures_util::task::noop_waker();
        socket
            .tap
            .poll_given_back(&mut Context::from_waker(&waker))
            .is_ready()
    }

    async fn read_exactly(client: &mut TcpStream, len: usize) -> Vec<u8> {
        let mut bytes = vec![0; len];
        client.read_exact(&mut bytes).await.unwrap();
        bytes
    }

    #[tokio::test]
    async fn the_hub_passes_over_reports_of_channels_a_consumer_does_not_follow() {
        let (socket, mut client) = pair().await;
        let known = ["sc".to_owned(), "cea".to_owned()];
        let mut params = crate::params::Params::parse(Some("source=sc")).unwrap();
        let only_sc = SourceFilter::from_params(&mut params, || known.to_vec()).unwrap();
        assert!(socket.tap.lend(Kind::Ws, 3, only_sc.as_ref()));
        let waker = futures_util::task::noop_waker();
        assert!(
            socket
                .tap
                .poll_given_back(&mut Context::from_waker(&waker))
                .is_pending()
        );
        // Even ids are `cea` reports: 4 and 6 are passed over, 5 and 7 written, and the cursor is past all.
        let reports = [4, 5, 6, 7].map(|id| report(id, &format!("{{\"n\":{id}}}")));
        let mut written = Written::default();
        assert!(socket.tap.deliver(&reports, 3, &mut written).is_none());
        assert_eq!(written.ws, 2);
        let expected = [reports[1].ws_frame().clone(), reports[3].ws_frame().clone()].concat();
        assert_eq!(read_exactly(&mut client, expected.len()).await, expected);
        assert_eq!(socket.tap.take_back(), 7);
    }

    #[tokio::test]
    async fn a_lent_websocket_gets_whole_frames_and_its_cursor_moves() {
        let (socket, mut client) = pair().await;
        let reports = [report(4, r#"{"a":1}"#), report(5, r#"{"b":2}"#)];
        assert!(!lend_and_wait(&socket, Kind::Ws, 3));
        let mut written = Written::default();
        assert!(socket.tap.deliver(&reports, 3, &mut written).is_none());
        assert_eq!((written.ws, written.sse), (2, 0));
        let expected = [reports[0].ws_frame().clone(), reports[1].ws_frame().clone()].concat();
        assert_eq!(read_exactly(&mut client, expected.len()).await, expected);
        // Delivered again (another shard's round, a late duplicate): nothing more is written.
        assert!(socket.tap.deliver(&reports, 3, &mut written).is_none());
        assert_eq!(written.ws, 2);
        assert_eq!(socket.tap.take_back(), 5);
        // Not lent: the hub leaves it alone.
        assert!(
            socket
                .tap
                .deliver(&[report(6, "{}")], 5, &mut Written::default())
                .is_none()
        );
        assert!(socket.tap.lend(Kind::Ws, 5, None));
        drop(socket);
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "nothing after the two frames: {rest:?}");
    }

    #[tokio::test]
    async fn hyper_lets_go_of_a_detached_stream_once_its_head_is_flushed() {
        let (mut socket, mut client) = pair().await;
        let tap = socket.tap.clone();
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        // hyper queues the head, the body asks to detach, hyper flushes.
        socket.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        tap.detach();
        assert!(tap.poll_detached(&mut cx).is_pending());
        socket.flush().await.unwrap();
        assert_eq!(tap.poll_detached(&mut cx), Poll::Ready(true));
        // hyper now reads the end of its input, and what it would still write goes nowhere.
        let mut buf = [0; 16];
        assert_eq!(socket.read(&mut buf).await.unwrap(), 0);
        assert_eq!(socket.write(b"0\r\n\r\n").await.unwrap(), 5);
        socket.shutdown().await.unwrap();
        drop(socket);
        // The connection stays open for the stream's own chunks and the hub's.
        let own = crate::wire::http_chunk(b"event: ready\n\n");
        assert_eq!(
            poll_fn(|cx| tap.poll_write_own(cx, &own)).await.unwrap(),
            own.len()
        );
        poll_fn(|cx| tap.poll_flush_own(cx)).await.unwrap();
        assert!(tap.lend(Kind::Sse, 0, None));
        assert!(tap.poll_given_back(&mut cx).is_pending());
        let first = [report(1, r#"{"a":1}"#)];
        assert!(tap.deliver(&first, 0, &mut Written::default()).is_none());
        assert_eq!(tap.take_back(), 1);
        tap.close();
        let mut all = Vec::new();
        client.read_to_end(&mut all).await.unwrap();
        let expected = [&b"HTTP/1.1 200 OK\r\n\r\n"[..], &own, first[0].sse_chunk()].concat();
        assert_eq!(all, expected);
        assert!(first[0].sse_chunk().starts_with(b"23\r\nevent: report\n"));
        assert!(first[0].sse_chunk().ends_with(b"\n\n\r\n"));
    }

    #[tokio::test]
    async fn a_gap_or_an_unflushed_write_hands_the_socket_back() {
        let (mut socket, _client) = pair().await;
        assert!(!lend_and_wait(&socket, Kind::Ws, 5));
        // The reports continue 6, not 5: the consumer reads 6 itself.
        assert!(
            socket
                .tap
                .deliver(&[report(7, "{}")], 6, &mut Written::default())
                .is_some()
        );
        assert_eq!(socket.tap.take_back(), 5);
        assert!(!lend_and_wait(&socket, Kind::Ws, 5));
        // tungstenite writing (a pong) without a flush yet: the hub must not write into its frame.
        socket.write_all(b"\x8a").await.unwrap();
        assert!(
            socket
                .tap
                .deliver(&[report(6, "{}")], 5, &mut Written::default())
                .is_some()
        );
        assert_eq!(socket.tap.take_back(), 5);
    }

    #[tokio::test]
    async fn the_rest_of_a_partly_written_report_goes_before_anything_else() {
        let (mut socket, mut client) = pair().await;
        // Far more than the socket buffers hold while the client reads nothing.
        let big = report(2, &format!("\"{}\"", "x".repeat(32 << 20)));
        assert!(!lend_and_wait(&socket, Kind::Ws, 1));
        let waker = socket
            .tap
            .deliver(std::slice::from_ref(&big), 1, &mut Written::default());
        assert!(waker.is_some(), "a full socket goes back to its consumer");
        // Counted as sent: the rest is on its way.
        assert_eq!(socket.tap.take_back(), 2);
        let reader = tokio::spawn(async move {
            let mut all = Vec::new();
            client.read_to_end(&mut all).await.unwrap();
            all
        });
        socket.write_all(b"after").await.unwrap();
        socket.shutdown().await.unwrap();
        drop(socket);
        let all = reader.await.unwrap();
        assert_eq!(all.len(), big.ws_frame().len() + 5);
        assert!(all.starts_with(big.ws_frame()) && all.ends_with(b"after"));
    }

    #[tokio::test]
    async fn a_socket_whose_peer_is_gone_is_not_lent_again() {
        let (socket, client) = pair().await;
        drop(client);
        assert!(!lend_and_wait(&socket, Kind::Ws, 1));
        // The first write may still be taken by the kernel; the reset comes back on a later one.
        let mut next = 2;
        while socket
            .tap
            .deliver(&[report(next, "{}")], next - 1, &mut Written::default())
            .is_none()
        {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            next += 1;
            assert!(next < 100, "writes to a closed peer keep succeeding");
        }
        socket.tap.take_back();
        assert!(!socket.tap.lend(Kind::Ws, next, None));
    }

    #[tokio::test]
    async fn a_consumer_waits_until_handed_back() {
        let (socket, _client) = pair().await;
        assert!(socket.tap.lend(Kind::Ws, 1, None));
        let tap = socket.tap.clone();
        let waiting = tokio::spawn(async move { poll_fn(|cx| tap.poll_given_back(cx)).await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        let tap = socket.tap.clone();
        if let Some(waker) = tap.deliver(&[report(3, "{}")], 2, &mut Written::default()) {
            waker.wake();
        }
        waiting.await.unwrap();
        assert_eq!(socket.tap.take_back(), 1);
    }
}
