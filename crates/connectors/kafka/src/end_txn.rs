//! Ending a Kafka transaction that another producer opened, by speaking Kafka's wire
//! protocol for this one step.
//!
//! librdkafka commits or aborts a transaction only from the producer that opened it, but
//! the sink's committer runs after the checkpoint is stored (in the coordinator, on Spark
//! in the driver, after a restart in another process). What the transaction coordinator
//! needs is the transactional id, the producer id and the producer epoch, which the writer
//! records in the checkpoint when it prepares the transaction. So this module asks a
//! bootstrap server for the id's coordinator (`FindCoordinator` v1, key type 1 =
//! transaction) and sends it `EndTxn` v1 (commit or abort) itself, over plain TCP (the
//! connector's librdkafka has no TLS or SASL either).
//!
//! Both requests use the non-flexible encodings: request header v1 (`api_key` int16,
//! `api_version` int16, `correlation_id` int32, `client_id` nullable string), response
//! header v0 (`correlation_id`), each message prefixed by its int32 size.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// A transaction prepared by a writer (its records flushed and acknowledged, not yet
/// ended): what the coordinator needs to end it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PreparedTxn {
    /// The producer's `transactional.id`.
    pub transactional_id: String,
    /// The producer id the coordinator gave it (`InitProducerId`).
    pub producer_id: i64,
    /// The producer's epoch; a later producer with the same id has a higher one.
    pub producer_epoch: i16,
}

const FIND_COORDINATOR: i16 = 10;
const END_TXN: i16 = 26;
const CLIENT_ID: &str = "ferry-committer";
/// Connection failures in a row after which ending a transaction gives up.
const MAX_DROPPED: u32 = 6;
/// How long one connection may wait for an answer.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// The name of a Kafka error code (the ones these two requests answer).
fn error_name(code: i16) -> &'static str {
    match code {
        7 => "REQUEST_TIMED_OUT",
        14 => "COORDINATOR_LOAD_IN_PROGRESS",
        15 => "COORDINATOR_NOT_AVAILABLE",
        16 => "NOT_COORDINATOR",
        35 => "UNSUPPORTED_VERSION",
        47 => "INVALID_PRODUCER_EPOCH",
        48 => "INVALID_TXN_STATE",
        49 => "INVALID_PRODUCER_ID_MAPPING",
        51 => "CONCURRENT_TRANSACTIONS",
        53 => "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        90 => "PRODUCER_FENCED",
        _ => "UNKNOWN",
    }
}

/// Errors after which the same request may succeed: the coordinator moves or is busy
/// completing an earlier step of the transaction.
fn retriable(code: i16) -> bool {
    matches!(code, 7 | 14 | 15 | 16 | 51)
}

/// Ends `txn` (commits it, or aborts it when `commit` is false) through its transaction
/// coordinator, found from `servers` (`host:port[,host:port…]`). Retries while the
/// coordinator is moving or busy, for up to `timeout`. Ending a transaction twice the same
/// way answers success from Kafka (the coordinator keeps its last outcome), so a committer
/// run again after a crash may call this again.
pub fn end_transaction(
    servers: &str,
    txn: &PreparedTxn,
    commit: bool,
    timeout: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let mut backoff = Duration::from_millis(20);
    // Connection failures in a row: the coordinator may be restarting, but Tansu also
    // closes the connection instead of answering PRODUCER_FENCED.
    let mut dropped = 0;
    loop {
        let attempt = find_coordinator(servers, &txn.transactional_id)
            .and_then(|addr| send_end_txn(&addr, txn, commit));
        let error = match attempt {
            Ok(0) => return Ok(()),
            Ok(code) if retriable(code) => {
                dropped = 0;
                format!("{} ({code})", error_name(code))
            }
            Ok(code) => {
                return Err(format!(
                    "EndTxn ({}) for transactional.id {} (producer id {}, epoch {}): {} ({code})",
                    if commit { "commit" } else { "abort" },
                    txn.transactional_id,
                    txn.producer_id,
                    txn.producer_epoch,
                    error_name(code)
                ))
            }
            // Connection trouble: the coordinator may be restarting.
            Err(e) => {
                dropped += 1;
                if dropped >= MAX_DROPPED {
                    return Err(format!(
                        "EndTxn ({}) for transactional.id {} (producer id {}, epoch {}): {e} ({dropped} times in a row; a broker that closes the connection instead of answering may have fenced the producer)",
                        if commit { "commit" } else { "abort" },
                        txn.transactional_id,
                        txn.producer_id,
                        txn.producer_epoch,
                    ));
                }
                e
            }
        };
        if Instant::now() + backoff > deadline {
            return Err(format!(
                "EndTxn ({}) for transactional.id {}: still failing after {:?}: {error}",
                if commit { "commit" } else { "abort" },
                txn.transactional_id,
                timeout
            ));
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

/// The `host:port` of the transaction coordinator of `transactional_id`, asked of the
/// first bootstrap server that answers.
fn find_coordinator(servers: &str, transactional_id: &str) -> Result<String, String> {
    let mut last = String::from("no bootstrap server given");
    for server in servers.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let mut body = Vec::new();
        put_string(&mut body, transactional_id);
        body.push(1); // key_type: transaction
        let reply = match call(server, FIND_COORDINATOR, 1, &body) {
            Ok(r) => r,
            Err(e) => {
                last = e;
                continue;
            }
        };
        let mut r = Reader::new(&reply);
        let parsed = (|| {
            let _throttle = r.i32()?;
            let code = r.i16()?;
            let message = r.nullable_string()?;
            let _node = r.i32()?;
            let host = r.string()?;
            let port = r.i32()?;
            Some((code, message, host, port))
        })();
        match parsed {
            Some((0, _, host, port)) => return Ok(format!("{host}:{port}")),
            Some((code, message, _, _)) => {
                last = format!(
                    "FindCoordinator at {server}: {} ({code}){}",
                    error_name(code),
                    message.map(|m| format!(": {m}")).unwrap_or_default()
                )
            }
            None => last = format!("FindCoordinator at {server}: a reply too short to read"),
        }
    }
    Err(last)
}

/// Sends `EndTxn` v1 to the coordinator at `addr`; its error code.
fn send_end_txn(addr: &str, txn: &PreparedTxn, commit: bool) -> Result<i16, String> {
    let mut body = Vec::new();
    put_string(&mut body, &txn.transactional_id);
    body.extend_from_slice(&txn.producer_id.to_be_bytes());
    body.extend_from_slice(&txn.producer_epoch.to_be_bytes());
    body.push(u8::from(commit));
    let reply = call(addr, END_TXN, 1, &body)?;
    let mut r = Reader::new(&reply);
    let _throttle = r
        .i32()
        .ok_or_else(|| format!("EndTxn at {addr}: a reply too short to read"))?;
    r.i16()
        .ok_or_else(|| format!("EndTxn at {addr}: a reply too short to read"))
}

/// One request to `addr`; the response body (after the correlation id).
fn call(addr: &str, api_key: i16, version: i16, body: &[u8]) -> Result<Vec<u8>, String> {
    let fail = |what: &str, e: std::io::Error| format!("{what} {addr}: {e}");
    let sock = addr
        .to_socket_addrs()
        .map_err(|e| fail("resolving", e))?
        .next()
        .ok_or_else(|| format!("resolving {addr}: no address"))?;
    let mut stream =
        TcpStream::connect_timeout(&sock, IO_TIMEOUT).map_err(|e| fail("connecting to", e))?;
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .and_then(|_| stream.set_write_timeout(Some(IO_TIMEOUT)))
        .map_err(|e| fail("connecting to", e))?;
    let correlation: i32 = 1;
    let mut msg = Vec::with_capacity(body.len() + 32);
    msg.extend_from_slice(&api_key.to_be_bytes());
    msg.extend_from_slice(&version.to_be_bytes());
    msg.extend_from_slice(&correlation.to_be_bytes());
    put_string(&mut msg, CLIENT_ID);
    msg.extend_from_slice(body);
    let size = i32::try_from(msg.len()).map_err(|_| format!("a request to {addr} too large"))?;
    stream
        .write_all(&size.to_be_bytes())
        .and_then(|_| stream.write_all(&msg))
        .map_err(|e| fail("writing to", e))?;
    let mut len = [0u8; 4];
    stream
        .read_exact(&mut len)
        .map_err(|e| fail("reading from", e))?;
    let len = i32::from_be_bytes(len);
    if !(4..=1 << 20).contains(&len) {
        return Err(format!("{addr} answered a message of {len} bytes"));
    }
    let mut reply = vec![0u8; len as usize];
    stream
        .read_exact(&mut reply)
        .map_err(|e| fail("reading from", e))?;
    let got = i32::from_be_bytes([reply[0], reply[1], reply[2], reply[3]]);
    if got != correlation {
        return Err(format!(
            "{addr} answered correlation id {got}, not {correlation}"
        ));
    }
    reply.drain(..4);
    Ok(reply)
}

/// A Kafka `STRING`: int16 length, UTF-8 bytes.
fn put_string(out: &mut Vec<u8>, s: &str) {
    let len = s.len().min(i16::MAX as usize);
    out.extend_from_slice(&(len as i16).to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..len]);
}

/// Reads big-endian fields from a response body.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buf.len() < n {
            return None;
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Some(head)
    }
    fn i16(&mut self) -> Option<i16> {
        self.take(2).map(|b| i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self) -> Option<i32> {
        self.take(4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn nullable_string(&mut self) -> Option<Option<String>> {
        let len = self.i16()?;
        if len < 0 {
            return Some(None);
        }
        let b = self.take(len as usize)?;
        Some(Some(String::from_utf8_lossy(b).into_owned()))
    }
    fn string(&mut self) -> Option<String> {
        self.nullable_string().map(Option::unwrap_or_default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_replies_read_as_the_protocol_writes_them() {
        let mut b = Vec::new();
        put_string(&mut b, "ab");
        assert_eq!(b, [0, 2, b'a', b'b']);
        let mut r = Reader::new(&[0, 0, 0, 5, 0xff, 0xff, 0, 1, b'h', 0, 0, 0x23, 0x84]);
        assert_eq!(r.i32(), Some(5));
        assert_eq!(r.nullable_string(), Some(None));
        assert_eq!(r.string().as_deref(), Some("h"));
        assert_eq!(r.i32(), Some(9092));
        assert_eq!(r.i16(), None);
    }

    #[test]
    fn an_unreachable_cluster_fails_within_the_timeout_naming_the_id() {
        let txn = PreparedTxn {
            transactional_id: "t-1".into(),
            producer_id: 1,
            producer_epoch: 0,
        };
        let started = Instant::now();
        let e = end_transaction("127.0.0.1:1", &txn, true, Duration::from_millis(300)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(e.contains("t-1") && e.contains("127.0.0.1:1"), "{e}");
    }
}
