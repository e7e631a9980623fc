//! A small NATS client: the text protocol (INFO, CONNECT, PING/PONG, SUB, PUB, HPUB, MSG,
//! HMSG) over one TCP connection, and JetStream's JSON API on top of request/reply.
//!
//! Written here rather than taken from `async-nats` because that crate turns on features
//! of `serde`, `bytes` and `tokio` (through `tryhard`) that the rest of the workspace
//! leaves off, which recompiles Arrow and DataFusion; the part of the protocol a source
//! and a sink need is small and fully specified (docs.nats.io, "Client Protocol" and
//! "JetStream wire API").

use std::sync::Arc;
use std::time::Duration;

use ferry_api::{FerryError, Result};
use ferry_formats::Secret;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use crate::{Server, NAME};

/// A message the server delivered.
#[derive(Debug, Clone)]
pub struct Msg {
    /// The subject it was published to.
    pub subject: String,
    /// Its reply subject (a JetStream message's acknowledgement subject).
    pub reply: Option<String>,
    /// The status line of its headers (`408 Request Timeout`), empty for data.
    pub status: String,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// One connection to a NATS server with one inbox subscription for replies.
pub struct Client {
    read: BufReader<OwnedReadHalf>,
    write: Sender,
    /// The prefix of this connection's reply subjects (`_INBOX.<random>.`).
    inbox: String,
    next_reply: u64,
    server: Server,
}

/// How long one API request may wait for its reply.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

impl Client {
    /// Connects, logs in and subscribes to its inbox.
    pub async fn connect(server: &Server) -> Result<Client> {
        let fail = |e: &dyn std::fmt::Display| server.error("connecting to", e);
        let stream = tokio::time::timeout(REQUEST_TIMEOUT, TcpStream::connect(&server.addr))
            .await
            .map_err(|_| fail(&"timed out"))?
            .map_err(|e| fail(&e))?;
        stream.set_nodelay(true).map_err(|e| fail(&e))?;
        let (read, write) = stream.into_split();
        let mut c = Client {
            read: BufReader::with_capacity(1 << 16, read),
            write: Sender {
                write: Arc::new(Mutex::new(write)),
                server: server.clone(),
            },
            inbox: format!("_INBOX.{}.", random_token()),
            next_reply: 0,
            server: server.clone(),
        };
        let mut line = String::new();
        c.read_line(&mut line).await?;
        if !line.starts_with("INFO ") {
            return Err(fail(&format!("expected INFO, got {:?}", line.trim_end())));
        }
        let mut connect = json!({
            "verbose": false, "pedantic": false, "headers": true, "no_responders": true,
            "lang": "rust-ferry", "version": env!("CARGO_PKG_VERSION"), "protocol": 1,
        });
        if let Some(u) = &server.username {
            connect["user"] = json!(u);
        }
        if let Some(Secret(p)) = &server.password {
            connect["pass"] = json!(p);
        }
        if let Some(Secret(t)) = &server.token {
            connect["auth_token"] = json!(t);
        }
        let sub = format!("SUB {}* 1\r\n", c.inbox);
        c.send(format!("CONNECT {connect}\r\nPING\r\n{sub}").as_bytes())
            .await?;
        loop {
            line.clear();
            c.read_line(&mut line).await?;
            match line.trim_end() {
                "PONG" => break,
                "+OK" | "PING" => {}
                l if l.starts_with("INFO ") => {}
                l => return Err(fail(&format!("the server refused the login: {l}"))),
            }
        }
        Ok(c)
    }

    async fn read_line(&mut self, line: &mut String) -> Result<()> {
        match self.read.read_line(line).await {
            Ok(0) => Err(self
                .server
                .error("reading from", "the server closed the connection")),
            Ok(_) => Ok(()),
            Err(e) => Err(self.server.error("reading from", e)),
        }
    }

    async fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.write.send(bytes).await
    }

    /// A handle that sends on this connection from elsewhere (acknowledgements from a
    /// reader thread while the connection's task waits for messages).
    pub fn sender(&self) -> Sender {
        self.write.clone()
    }

    /// A reply subject no other request of this connection uses.
    pub fn new_reply(&mut self) -> String {
        self.next_reply += 1;
        format!("{}{}", self.inbox, self.next_reply)
    }

    /// Queues a message (with headers when `headers` is not empty); nothing is flushed.
    pub fn encode_publish(
        out: &mut Vec<u8>,
        subject: &str,
        reply: Option<&str>,
        headers: &[(&str, &str)],
        payload: &[u8],
    ) {
        let reply = reply.map(|r| format!(" {r}")).unwrap_or_default();
        if headers.is_empty() {
            out.extend_from_slice(format!("PUB {subject}{reply} {}\r\n", payload.len()).as_bytes());
        } else {
            let mut h = String::from("NATS/1.0\r\n");
            for (k, v) in headers {
                h.push_str(&format!("{k}: {v}\r\n"));
            }
            h.push_str("\r\n");
            out.extend_from_slice(
                format!(
                    "HPUB {subject}{reply} {} {}\r\n",
                    h.len(),
                    h.len() + payload.len()
                )
                .as_bytes(),
            );
            out.extend_from_slice(h.as_bytes());
        }
        out.extend_from_slice(payload);
        out.extend_from_slice(b"\r\n");
    }

    /// Sends what [`Client::encode_publish`] queued.
    pub async fn flush(&mut self, bytes: &[u8]) -> Result<()> {
        self.send(bytes).await
    }

    /// The next message for this connection, answering the server's PINGs on the way.
    pub async fn next_msg(&mut self) -> Result<Msg> {
        let mut line = String::new();
        loop {
            line.clear();
            self.read_line(&mut line).await?;
            let l = line.trim_end();
            let parts: Vec<&str> = l.split_whitespace().collect();
            match parts.first().copied() {
                Some("PING") => self.send(b"PONG\r\n").await?,
                Some("PONG") | Some("+OK") | Some("INFO") => {}
                Some("-ERR") => {
                    return Err(self
                        .server
                        .error("talking to", l.trim_start_matches("-ERR ")))
                }
                Some("MSG") if parts.len() >= 4 => {
                    let (reply, size) = match parts.len() {
                        4 => (None, parts[3]),
                        _ => (Some(parts[3].to_string()), parts[4]),
                    };
                    let size = parse_size(size, l)?;
                    let payload = self.read_exact(size).await?;
                    return Ok(Msg {
                        subject: parts[1].to_string(),
                        reply,
                        status: String::new(),
                        payload,
                    });
                }
                Some("HMSG") if parts.len() >= 5 => {
                    let (reply, hsize, tsize) = match parts.len() {
                        5 => (None, parts[3], parts[4]),
                        _ => (Some(parts[3].to_string()), parts[4], parts[5]),
                    };
                    let (hsize, tsize) = (parse_size(hsize, l)?, parse_size(tsize, l)?);
                    if hsize > tsize {
                        return Err(self
                            .server
                            .error("reading from", format!("bad frame {l:?}")));
                    }
                    let mut all = self.read_exact(tsize).await?;
                    let payload = all.split_off(hsize);
                    let head = String::from_utf8_lossy(&all);
                    let mut lines = head.split("\r\n");
                    // Only the status line matters here (`408 Request Timeout`).
                    let status = lines
                        .next()
                        .unwrap_or("")
                        .trim_start_matches("NATS/1.0")
                        .trim()
                        .to_string();
                    return Ok(Msg {
                        subject: parts[1].to_string(),
                        reply,
                        status,
                        payload,
                    });
                }
                _ => {
                    return Err(self
                        .server
                        .error("reading from", format!("unexpected protocol line {l:?}")))
                }
            }
        }
    }

    async fn read_exact(&mut self, size: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0; size + 2];
        self.read
            .read_exact(&mut buf)
            .await
            .map_err(|e| self.server.error("reading from", e))?;
        buf.truncate(size);
        Ok(buf)
    }

    /// Sends `payload` to `subject` and waits for the reply (JetStream's API).
    pub async fn request(&mut self, subject: &str, payload: &Value) -> Result<Value> {
        let reply = self.new_reply();
        let body = if payload.is_null() {
            Vec::new()
        } else {
            payload.to_string().into_bytes()
        };
        let mut out = Vec::new();
        Self::encode_publish(&mut out, subject, Some(&reply), &[], &body);
        self.flush(&out).await?;
        let wait = async {
            loop {
                let m = self.next_msg().await?;
                if m.subject == reply {
                    return Ok::<_, FerryError>(m);
                }
            }
        };
        let waited = tokio::time::timeout(REQUEST_TIMEOUT, wait).await;
        let m = waited.map_err(|_| {
            self.server
                .error(&format!("waiting for {subject} on"), "no reply")
        })??;
        if m.status.starts_with("503") {
            return Err(self.server.error(
                &format!("calling {subject} on"),
                "no responders: is JetStream enabled?",
            ));
        }
        let v: Value = serde_json::from_slice(&m.payload).map_err(|e| {
            self.server
                .error(&format!("reading the reply to {subject} from"), e)
        })?;
        api_result(&self.server, subject, v)
    }
}

/// The sending half of a [`Client`]'s connection, shared.
#[derive(Clone)]
pub struct Sender {
    write: Arc<Mutex<OwnedWriteHalf>>,
    server: Server,
}

impl Sender {
    /// Writes `bytes` (whole protocol lines) to the connection.
    pub async fn send(&self, bytes: &[u8]) -> Result<()> {
        let mut w = self.write.lock().await;
        w.write_all(bytes)
            .await
            .map_err(|e| self.server.error("writing to", e))?;
        w.flush()
            .await
            .map_err(|e| self.server.error("writing to", e))
    }
}

/// A JetStream API reply, or the error it holds.
pub fn api_result(server: &Server, what: &str, v: Value) -> Result<Value> {
    match v.get("error") {
        Some(e) => Err(server.error(
            &format!("{what} on"),
            format!(
                "{} (code {})",
                e["description"].as_str().unwrap_or("error"),
                e["err_code"].as_u64().or(e["code"].as_u64()).unwrap_or(0)
            ),
        )),
        None => Ok(v),
    }
}

fn parse_size(s: &str, line: &str) -> Result<usize> {
    s.parse()
        .map_err(|_| FerryError::external(NAME, format!("bad protocol line {line:?}")))
}

/// A token for inbox names: unique enough across the connections of one machine.
fn random_token() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    format!(
        "{:x}{:x}{:x}",
        std::process::id(),
        nanos,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The stream sequence of a JetStream message, from its acknowledgement subject
/// (`$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>`,
/// with a domain and an account hash before the stream on newer servers).
pub fn stream_sequence(reply: &str) -> Option<u64> {
    let t: Vec<&str> = reply.split('.').collect();
    if t.len() < 2 || t[0] != "$JS" || t[1] != "ACK" {
        return None;
    }
    match t.len() {
        9 => t[5].parse().ok(),
        n if n >= 12 => t[7].parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_sequences_come_from_both_forms_of_ack_subjects() {
        assert_eq!(
            stream_sequence("$JS.ACK.probe.d1.1.17.3.1796146554283370157.0"),
            Some(17)
        );
        assert_eq!(
            stream_sequence("$JS.ACK.hub.ACCHASH.probe.d1.1.42.3.1796146554283370157.0.tok"),
            Some(42)
        );
        assert_eq!(stream_sequence("_INBOX.x.1"), None);
    }
}
