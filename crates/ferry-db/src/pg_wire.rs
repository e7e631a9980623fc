//! Bulk `COPY` straight on a PostgreSQL connection's socket.
//!
//! tokio-postgres handles every message the server sends in its connection task: a binary
//! `COPY … TO STDOUT` sends a message per row, and each one was parsed, queued to the
//! client and handed out on its own, which cost Ferry's I/O thread more CPU than decoding
//! the rows did. For the length of one `COPY`, a connection made by [`connect_pg_lendable`]
//! lends its socket out of the driver ([`PgSocket::lend`]): the rows are then read in
//! large blocks and their message frames stripped in one pass, or written with a frame
//! per block. Afterwards the socket goes back to the driver, which finds the connection
//! exactly where it left it (idle, after `ReadyForQuery`), so queries go on through the
//! `tokio_postgres::Client` as before.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

/// The socket under a lendable connection: TCP behind a read buffer (see
/// [`crate::conn`]'s `PG_READ_BUFFER`).
pub(crate) type Socket = tokio::io::BufReader<tokio::net::TcpStream>;

/// Where the socket is: with the driver, lent out, or lost (dropped while lent, as when a
/// `COPY` failed half way; the driver then sees the connection closed).
struct Slot {
    socket: Option<Socket>,
    lost: bool,
    /// The driver's tasks waiting for the socket to come back.
    waiting: Vec<Waker>,
}

fn lock(slot: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    // A panic while holding the lock leaves a usable slot: every update is one assignment.
    slot.lock().unwrap_or_else(|e| e.into_inner())
}

impl Slot {
    fn wait(&mut self, cx: &Context<'_>) {
        if !self.waiting.iter().any(|w| w.will_wake(cx.waker())) {
            self.waiting.push(cx.waker().clone());
        }
    }
}

/// The socket as the driver sees it: reads and writes wait while it is lent out.
pub(crate) struct SharedSocket(Arc<Mutex<Slot>>);

impl SharedSocket {
    /// The socket for the driver, and the handle that lends it out.
    pub(crate) fn new(socket: Socket) -> (SharedSocket, PgSocket) {
        let slot = Arc::new(Mutex::new(Slot {
            socket: Some(socket),
            lost: false,
            waiting: Vec::new(),
        }));
        (SharedSocket(slot.clone()), PgSocket(slot))
    }
}

fn lost() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "the connection was given up during a COPY",
    )
}

impl AsyncRead for SharedSocket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let slot = &mut *lock(&self.0);
        match slot.socket.as_mut() {
            Some(s) => Pin::new(s).poll_read(cx, buf),
            // End of stream: the driver closes the connection.
            None if slot.lost => Poll::Ready(Ok(())),
            None => {
                slot.wait(cx);
                Poll::Pending
            }
        }
    }
}

impl AsyncWrite for SharedSocket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let slot = &mut *lock(&self.0);
        match slot.socket.as_mut() {
            Some(s) => Pin::new(s).poll_write(cx, buf),
            None if slot.lost => Poll::Ready(Err(lost())),
            None => {
                slot.wait(cx);
                Poll::Pending
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let slot = &mut *lock(&self.0);
        match slot.socket.as_mut() {
            Some(s) => Pin::new(s).poll_flush(cx),
            // Nothing is buffered here: writes wait for the socket before taking bytes.
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let slot = &mut *lock(&self.0);
        match slot.socket.as_mut() {
            Some(s) => Pin::new(s).poll_shutdown(cx),
            None if slot.lost => Poll::Ready(Ok(())),
            None => {
                slot.wait(cx);
                Poll::Pending
            }
        }
    }
}

/// Lends a connection's socket out of the driver, for one `COPY` at a time.
pub struct PgSocket(Arc<Mutex<Slot>>);

impl PgSocket {
    /// Takes the socket from `client`'s driver, once an empty query has made the round
    /// trip: the driver may still await answers to what it sent on its own (a dropped
    /// statement's `Close`), and those come before that query's. No statement may be sent
    /// through `client` until the socket is back (one sent waits for it). `None` if the
    /// socket is lent out already, or the connection failed (the driver's next statement
    /// reports how).
    pub async fn lend(&self, client: &tokio_postgres::Client) -> Option<LentSocket> {
        // Lent already: the empty query would wait for the socket itself.
        lock(&self.0).socket.as_ref()?;
        client.batch_execute("").await.ok()?;
        let socket = lock(&self.0).socket.take()?;
        Some(LentSocket {
            socket: Some(socket),
            slot: self.0.clone(),
            buf: WireBuffer::default(),
            bulk: false,
        })
    }
}

/// A connection's socket, lent out of the driver ([`PgSocket::lend`]). Give it back with
/// [`LentSocket::give_back`] once the server is idle again; dropped without that, the
/// connection is closed (its `Client` reports `is_closed`).
pub struct LentSocket {
    socket: Option<Socket>,
    slot: Arc<Mutex<Slot>>,
    buf: WireBuffer,
    /// Whether the socket's low water mark is [`BULK_LOW_WATER`] (during a COPY out).
    bulk: bool,
}

impl Drop for LentSocket {
    fn drop(&mut self) {
        let mut slot = lock(&self.slot);
        if self.socket.take().is_some() {
            // Dropping the socket closes it; the driver reads its end next.
            slot.lost = true;
        }
        for w in slot.waiting.drain(..) {
            w.wake();
        }
    }
}

/// What went wrong on a lent socket.
#[derive(Debug)]
pub enum WireError {
    /// The server refused: its message as `pg_error_text` words it, and its SQLSTATE.
    Server { text: String, code: String },
    /// The connection failed (or the server broke the protocol): the connection is lost.
    Io(String),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Server { text, .. } | WireError::Io(text) => f.write_str(text),
        }
    }
}

impl From<io::Error> for WireError {
    fn from(e: io::Error) -> WireError {
        WireError::Io(format!("error communicating with the server: {e}"))
    }
}

/// Bytes asked of the socket a read at least (it gives what it holds, up to the space).
const READ_SPACE: usize = 256 << 10;

/// During a `COPY … TO STDOUT` the socket reports itself readable only once it holds this
/// much (`SO_RCVLOWAT`). The server sends 8 KiB at a time, and a reader faster than it
/// was woken for nearly each of them (35,000 wake-ups for a 400 MB COPY).
const BULK_LOW_WATER: i32 = 128 << 10;

/// How long a bulk read waits for [`BULK_LOW_WATER`] bytes before it takes what there is:
/// the end of a COPY is smaller, and nothing more comes after it.
const BULK_WAIT: std::time::Duration = std::time::Duration::from_millis(2);

/// Sets the socket's `SO_RCVLOWAT`. Lowering it wakes a reader if the socket holds that
/// much already (Linux signals readiness on the change).
fn set_low_water(socket: &Socket, bytes: i32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = socket.get_ref().as_raw_fd();
    // SAFETY: `fd` is an open socket owned by `socket` for the whole call, and the option
    // value is a live `c_int` of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&bytes as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Bytes read from the socket and not yet consumed: `data[start..end]`.
#[derive(Default)]
struct WireBuffer {
    data: Vec<u8>,
    start: usize,
    end: usize,
}

impl WireBuffer {
    /// The next whole message, as its type byte and the range of its body in `data`, if
    /// one is buffered.
    fn message(&mut self) -> Result<Option<(u8, usize, usize)>, WireError> {
        let have = &self.data[self.start..self.end];
        if have.len() < 5 {
            return Ok(None);
        }
        let len = i32::from_be_bytes([have[1], have[2], have[3], have[4]]);
        if len < 4 {
            return Err(WireError::Io(format!(
                "the server sent a message of length {len}"
            )));
        }
        let total = 1 + len as usize;
        if have.len() < total {
            return Ok(None);
        }
        let t = have[0];
        let body = (self.start + 5, self.start + total);
        self.start += total;
        Ok(Some((t, body.0, body.1)))
    }

    /// Reads what the socket has (at least one byte; an end of stream is an error).
    async fn fill(&mut self, socket: &mut Socket) -> Result<(), WireError> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        // A message longer than the space left: make room for all of it.
        let need = match self.data.get(self.start + 1..self.start + 5) {
            Some(l) if self.end - self.start >= 5 => {
                1 + i32::from_be_bytes([l[0], l[1], l[2], l[3]]).max(4) as usize
            }
            _ => 0,
        };
        if self.data.len() - self.end < READ_SPACE.max(need.saturating_sub(self.end - self.start)) {
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            let want = (self.end + READ_SPACE).max(need);
            if self.data.len() < want {
                self.data.resize(want, 0);
            }
        }
        let n = socket.read(&mut self.data[self.end..]).await?;
        if n == 0 {
            return Err(WireError::Io("the server closed the connection".into()));
        }
        self.end += n;
        Ok(())
    }
}

/// The text of an `ErrorResponse` body as `pg_error_text` words a server error (one
/// function words both), and its SQLSTATE.
fn server_error(body: &[u8]) -> WireError {
    let (mut severity, mut message, mut detail, mut table, mut constraint, mut code) =
        ("ERROR", "", None, None, None, "");
    for field in body.split(|&b| b == 0) {
        let Some((&kind, value)) = field.split_first() else {
            continue;
        };
        let value = std::str::from_utf8(value).unwrap_or("(not UTF-8)");
        match kind {
            b'S' => severity = value,
            b'M' => message = value,
            b'D' => detail = Some(value),
            b't' => table = Some(value),
            b'n' => constraint = Some(value),
            b'C' => code = value,
            _ => {}
        }
    }
    WireError::Server {
        text: crate::conn::server_error_text(severity, message, detail, table, constraint),
        code: code.to_string(),
    }
}

/// The lent socket, unless it is gone.
fn open(socket: &mut Option<Socket>) -> Result<&mut Socket, WireError> {
    socket
        .as_mut()
        .ok_or_else(|| WireError::Io("the connection is closed".into()))
}

impl LentSocket {
    /// Puts the socket back under the driver. Only once the server is idle (every
    /// statement sent here answered with `ReadyForQuery`); otherwise drop it instead.
    pub fn give_back(mut self) {
        if let Err(e) = self.bulk_reads(false) {
            // The driver would wait for bytes that never come: close the connection.
            tracing::debug!("PostgreSQL socket: {e}");
            return;
        }
        let mut slot = lock(&self.slot);
        slot.socket = self.socket.take();
        for w in slot.waiting.drain(..) {
            w.wake();
        }
    }

    /// Turns [`BULK_LOW_WATER`] on or off.
    fn bulk_reads(&mut self, on: bool) -> Result<(), WireError> {
        if self.bulk != on {
            if let Some(socket) = &self.socket {
                set_low_water(socket, if on { BULK_LOW_WATER } else { 1 })?;
            }
            self.bulk = on;
        }
        Ok(())
    }

    /// Reads more of a COPY's data: at least [`BULK_LOW_WATER`] bytes, or what has come
    /// within [`BULK_WAIT`].
    async fn fill_bulk(&mut self) -> Result<(), WireError> {
        self.bulk_reads(true)?;
        let socket = open(&mut self.socket)?;
        match tokio::time::timeout(BULK_WAIT, self.buf.fill(socket)).await {
            Ok(r) => r,
            // Reading is cancel safe: nothing was taken from the socket.
            Err(_) => {
                self.bulk_reads(false)?;
                self.buf.fill(open(&mut self.socket)?).await
            }
        }
    }

    /// Sends `sql` as a simple query.
    async fn query(&mut self, sql: &str) -> Result<(), WireError> {
        if sql.contains('\0') {
            return Err(WireError::Io("a statement holds a NUL character".into()));
        }
        let len = 4 + sql.len() + 1;
        let len =
            i32::try_from(len).map_err(|_| WireError::Io("a statement is too long".into()))?;
        let mut msg = Vec::with_capacity(len as usize + 1);
        msg.push(b'Q');
        msg.extend_from_slice(&len.to_be_bytes());
        msg.extend_from_slice(sql.as_bytes());
        msg.push(0);
        let socket = open(&mut self.socket)?;
        socket.write_all(&msg).await?;
        socket.flush().await?;
        Ok(())
    }

    /// Reads messages up to `ReadyForQuery`, returning the first error the server sent,
    /// or the row count of the last `COPY n` command tag.
    async fn until_ready(&mut self, mut error: Option<WireError>) -> Result<u64, WireError> {
        let mut rows = 0;
        loop {
            while let Some((t, a, b)) = self.buf.message()? {
                let body = &self.buf.data[a..b];
                match t {
                    b'Z' => return error.map_or(Ok(rows), Err),
                    b'E' if error.is_none() => error = Some(server_error(body)),
                    b'C' => {
                        let tag = body.strip_suffix(&[0]).unwrap_or(body);
                        rows = std::str::from_utf8(tag)
                            .ok()
                            .and_then(|t| t.strip_prefix("COPY "))
                            .and_then(|n| n.parse().ok())
                            .unwrap_or(rows);
                    }
                    _ => {}
                }
            }
            self.buf.fill(open(&mut self.socket)?).await?;
        }
    }

    /// Waits for the answer that starts a `COPY` (`want`: `H` out, `G` in); an error or
    /// any other answer is read through to `ReadyForQuery` and returned as an error.
    async fn copy_start(&mut self, want: u8) -> Result<(), WireError> {
        loop {
            while let Some((t, a, b)) = self.buf.message()? {
                match t {
                    t if t == want => return Ok(()),
                    // Notices and parameter changes may come at any time.
                    b'N' | b'S' | b'A' => {}
                    b'E' => {
                        let e = server_error(&self.buf.data[a..b]);
                        return self.until_ready(Some(e)).await.map(|_| ());
                    }
                    other => {
                        let e = WireError::Server {
                            text: format!(
                                "the statement is not a COPY (the server answered '{}')",
                                other as char
                            ),
                            code: String::new(),
                        };
                        return self.until_ready(Some(e)).await.map(|_| ());
                    }
                }
            }
            self.buf.fill(open(&mut self.socket)?).await?;
        }
    }

    /// Starts `COPY … TO STDOUT`; read its data with [`LentSocket::copy_out_data`].
    pub async fn copy_out(&mut self, sql: &str) -> Result<(), WireError> {
        self.query(sql).await?;
        self.copy_start(b'H').await
    }

    /// Appends the `COPY`'s data to `out` (the server's messages stripped) until `out`
    /// holds at least `min` bytes (true) or the `COPY` has ended and the server is idle
    /// again (false).
    pub async fn copy_out_data(
        &mut self,
        out: &mut bytes::BytesMut,
        min: usize,
    ) -> Result<bool, WireError> {
        loop {
            while let Some((t, a, b)) = self.buf.message()? {
                match t {
                    b'd' => {
                        out.extend_from_slice(&self.buf.data[a..b]);
                        if out.len() >= min {
                            return Ok(true);
                        }
                    }
                    b'c' | b'C' | b'N' | b'S' | b'A' => {}
                    b'Z' => {
                        self.bulk_reads(false)?;
                        return Ok(false);
                    }
                    b'E' => {
                        self.bulk_reads(false)?;
                        let e = server_error(&self.buf.data[a..b]);
                        return self.until_ready(Some(e)).await.map(|_| false);
                    }
                    other => {
                        return Err(WireError::Io(format!(
                            "the server sent message '{}' during a COPY",
                            other as char
                        )))
                    }
                }
            }
            self.fill_bulk().await?;
        }
    }

    /// Starts `COPY … FROM STDIN`; send data with [`LentSocket::copy_in_data`] and end it
    /// with [`LentSocket::copy_in_done`].
    pub async fn copy_in(&mut self, sql: &str) -> Result<(), WireError> {
        self.query(sql).await?;
        self.copy_start(b'G').await
    }

    /// Sends `data` as the next part of the `COPY`'s stream (any split of it will do: the
    /// server joins the parts).
    pub async fn copy_in_data(&mut self, mut data: &[u8]) -> Result<(), WireError> {
        // A message holds at most 1 GiB; blocks are far smaller, but stay correct.
        const MAX: usize = 1 << 30;
        while !data.is_empty() {
            let (part, rest) = data.split_at(data.len().min(MAX));
            let mut head = [b'd', 0, 0, 0, 0];
            head[1..].copy_from_slice(&(4 + part.len() as i32).to_be_bytes());
            let socket = open(&mut self.socket)?;
            // The frame and the block in one system call (with no Nagle delay, a frame
            // written alone would leave as a packet of its own).
            let (mut head, mut body): (&[u8], &[u8]) = (&head, part);
            while !head.is_empty() {
                let n = socket
                    .write_vectored(&[io::IoSlice::new(head), io::IoSlice::new(body)])
                    .await?;
                if n == 0 {
                    return Err(io::Error::from(io::ErrorKind::WriteZero).into());
                }
                if n < head.len() {
                    head = &head[n..];
                } else {
                    body = &body[n - head.len()..];
                    head = &[];
                }
            }
            socket.write_all(body).await?;
            data = rest;
        }
        Ok(())
    }

    /// Abandons the `COPY` (`CopyFail`): the server drops its rows and reports the COPY
    /// failed, and the connection goes on. Gives the socket back when the server is idle
    /// again; drops it (closing the connection) when that cannot be known.
    pub async fn copy_in_fail(mut self, why: &str) {
        let mut msg = vec![b'f', 0, 0, 0, 0];
        msg.extend_from_slice(why.replace('\0', " ").as_bytes());
        msg.push(0);
        let len = (msg.len() - 1) as i32;
        msg[1..5].copy_from_slice(&len.to_be_bytes());
        let sent = match open(&mut self.socket) {
            Ok(socket) => socket.write_all(&msg).await.is_ok() && socket.flush().await.is_ok(),
            Err(_) => false,
        };
        if sent
            && matches!(
                self.until_ready(None).await,
                Ok(_) | Err(WireError::Server { .. })
            )
        {
            self.give_back();
        }
    }

    /// Ends the `COPY` and returns the rows the server took, or the error it reports for
    /// the stream (a row it refused, say).
    pub async fn copy_in_done(&mut self) -> Result<u64, WireError> {
        let socket = open(&mut self.socket)?;
        socket.write_all(&[b'c', 0, 0, 0, 4]).await?;
        socket.flush().await?;
        self.until_ready(None).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::{connect_pg_lendable, ConnInfo};
    use ferry_api::Options;

    /// The local PostgreSQL server every test run has (see `.ci/run`).
    fn local() -> ConnInfo {
        ConnInfo::from_options(&mut Options::from_json(
            "Jdbc",
            serde_json::json!({"url": "jdbc:postgresql://127.0.0.1:5432/test", "user": "postgres"}),
        ))
        .unwrap()
    }

    /// A lendable connection to [`local`] with a temporary table made by `ddl`.
    async fn with_table(ddl: &str) -> (tokio_postgres::Client, PgSocket) {
        let (client, socket) = connect_pg_lendable(&local(), "test").await.unwrap();
        let sql = format!("CREATE TEMP TABLE {ddl}");
        client.batch_execute(&sql).await.unwrap();
        (client, socket.expect("a TCP connection lends its socket"))
    }

    async fn count(c: &tokio_postgres::Client, sql: &str) -> i64 {
        c.query_one(sql, &[]).await.unwrap().get(0)
    }

    #[test]
    fn a_lent_socket_copies_out_and_in_and_the_driver_goes_on_after_it() {
        ferry_api::io::handle().unwrap().block_on(async {
            let (client, socket) = with_table("wire_t (id int8 PRIMARY KEY, name text)").await;

            // In: two blocks, the split falling inside a row.
            let mut lent = socket.lend(&client).await.unwrap();
            assert!(socket.lend(&client).await.is_none(), "lent twice");
            lent.copy_in("COPY wire_t FROM STDIN (FORMAT csv)")
                .await
                .unwrap();
            let csv: String = (1..=3000).map(|i| format!("{i},name {i}\n")).collect();
            let (a, b) = csv.as_bytes().split_at(1001);
            lent.copy_in_data(a).await.unwrap();
            lent.copy_in_data(b).await.unwrap();
            assert_eq!(lent.copy_in_done().await.unwrap(), 3000);
            lent.give_back();
            assert_eq!(count(&client, "SELECT count(*) FROM wire_t").await, 3000);

            // Out: every row's text, in small and large pieces.
            for min in [1, 64 << 10] {
                let mut lent = socket.lend(&client).await.unwrap();
                lent.copy_out(
                    "COPY (SELECT id, name FROM wire_t ORDER BY id) TO STDOUT (FORMAT csv)",
                )
                .await
                .unwrap();
                let mut all = Vec::new();
                let mut out = bytes::BytesMut::new();
                while lent.copy_out_data(&mut out, min).await.unwrap() {
                    all.extend_from_slice(&out.split());
                }
                all.extend_from_slice(&out);
                lent.give_back();
                assert_eq!(String::from_utf8(all).unwrap(), csv);
            }
            // A COPY of many bulk reads; then the driver's small answers still arrive
            // (the socket's low water mark is back at one byte).
            let mut lent = socket.lend(&client).await.unwrap();
            lent.copy_out("COPY (SELECT generate_series(1, 300000)) TO STDOUT")
                .await
                .unwrap();
            let (mut sum, mut rest, mut out) = (0u64, Vec::new(), bytes::BytesMut::new());
            loop {
                let more = lent.copy_out_data(&mut out, 1 << 20).await.unwrap();
                rest.extend_from_slice(&out.split());
                let end = rest.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                for line in rest[..end].split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                    sum += std::str::from_utf8(line).unwrap().parse::<u64>().unwrap();
                }
                rest.drain(..end);
                if !more {
                    break;
                }
            }
            lent.give_back();
            assert_eq!(sum, 300000 * 300001 / 2);
            let seven = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                count(&client, "SELECT 7::int8"),
            );
            assert_eq!(seven.await.expect("the driver waits for its answer"), 7);
        });
    }

    #[test]
    fn server_errors_leave_the_connection_usable_and_a_dropped_copy_closes_it() {
        ferry_api::io::handle().unwrap().block_on(async {
            let (client, socket) = with_table("wire_e (id int8 PRIMARY KEY)").await;
            // Refused at the start: no such table, and a statement that is not a COPY.
            let mut lent = socket.lend(&client).await.unwrap();
            let e = lent
                .copy_in("COPY wire_missing FROM STDIN")
                .await
                .unwrap_err();
            assert!(
                matches!(&e, WireError::Server { code, .. } if code == "42P01"),
                "{e}"
            );
            let e = lent.copy_out("SELECT 1").await.unwrap_err();
            assert!(e.to_string().contains("not a COPY"), "{e}");
            // Refused at the end: a duplicate key, named with its table and constraint.
            lent.copy_in("COPY wire_e FROM STDIN").await.unwrap();
            lent.copy_in_data(b"1\n2\n1\n").await.unwrap();
            let e = lent.copy_in_done().await.unwrap_err();
            assert!(
                matches!(&e, WireError::Server { code, .. } if code == "23505"),
                "{e}"
            );
            assert!(
                e.to_string()
                    .contains("[table wire_e, constraint wire_e_pkey]"),
                "{e}"
            );
            lent.give_back();
            assert_eq!(count(&client, "SELECT count(*) FROM wire_e").await, 0);

            // Abandoned: the rows are gone, the connection goes on.
            let mut lent = socket.lend(&client).await.unwrap();
            lent.copy_in("COPY wire_e FROM STDIN").await.unwrap();
            lent.copy_in_data(b"5\n6\n").await.unwrap();
            lent.copy_in_fail("the job stopped").await;
            assert_eq!(count(&client, "SELECT count(*) FROM wire_e").await, 0);

            // Given up half way through a COPY: the driver finds the connection closed.
            let mut lent = socket.lend(&client).await.unwrap();
            lent.copy_out("COPY (SELECT generate_series(1, 1000000)) TO STDOUT")
                .await
                .unwrap();
            let mut out = bytes::BytesMut::new();
            assert!(lent.copy_out_data(&mut out, 1000).await.unwrap());
            drop(lent);
            assert!(client.query_one("SELECT 1", &[]).await.is_err());
            assert!(client.is_closed());
            assert!(socket.lend(&client).await.is_none());
        });
    }

    #[test]
    fn messages_are_split_on_their_length_and_wait_for_their_whole_body() {
        let mut b = WireBuffer {
            data: vec![b'd', 0, 0, 0, 7, 1, 2, 3, b'Z', 0, 0, 0, 5],
            start: 0,
            end: 13,
        };
        assert_eq!(b.message().unwrap(), Some((b'd', 5, 8)));
        // 'Z' says 5 bytes follow its type but only 4 are here.
        assert_eq!(b.message().unwrap(), None);
        b.data.push(b'I');
        b.end += 1;
        assert_eq!(b.message().unwrap(), Some((b'Z', 13, 14)));
        assert_eq!(b.message().unwrap(), None);
        let mut bad = WireBuffer {
            data: vec![b'd', 0, 0, 0, 2],
            start: 0,
            end: 5,
        };
        assert!(bad.message().is_err());
    }

    #[test]
    fn server_errors_read_as_the_driver_words_them() {
        let body = b"SERROR\0C23505\0Mduplicate key value violates unique constraint \"t_pkey\"\0DKey (id)=(1) already exists.\0tt\0nt_pkey\0\0";
        match server_error(body) {
            WireError::Server { text, code } => {
                assert_eq!(code, "23505");
                assert_eq!(text, "ERROR: duplicate key value violates unique constraint \"t_pkey\" (Key (id)=(1) already exists.) [table t, constraint t_pkey]");
            }
            other => panic!("{other:?}"),
        }
    }
}
