//! A Kafka partition's log as the broker stores it, read over Kafka's wire protocol
//! (`Fetch` v4, `read_uncommitted`): record batches (v2) with their producer ids and
//! transactional flags, and the transaction markers (control batches) that end them.
//!
//! From these it works out what a `read_committed` consumer must see: a transactional
//! batch's records count once the marker for its producer says COMMIT, never when it says
//! ABORT. The tests need this because the broker they run against (Tansu) hands
//! `read_committed` consumers aborted records too: what it stores is right, what it serves
//! is not, so the tests check what it stores. Uncompressed batches only (the sinks under
//! test do not compress).

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A partition's records by what became of them.
#[derive(Debug, Default)]
pub struct LogView {
    /// Values of transactional records whose transaction committed, in log order.
    pub committed: Vec<Vec<u8>>,
    /// Values of transactional records whose transaction aborted.
    pub aborted: Vec<Vec<u8>>,
    /// Values of transactional records with no marker yet (an open transaction).
    pub open: Vec<Vec<u8>>,
    /// Values of records written outside transactions.
    pub plain: Vec<Vec<u8>>,
    /// COMMIT markers seen.
    pub commits: usize,
    /// ABORT markers seen.
    pub aborts: usize,
}

impl LogView {
    /// What a `read_committed` consumer must see: plain records and committed ones.
    pub fn visible(&self) -> impl Iterator<Item = &Vec<u8>> {
        self.plain.iter().chain(self.committed.iter())
    }
}

/// The view of every partition `0..partitions` of `topic`, put together.
pub fn topic_view(addr: &str, topic: &str, partitions: i32) -> LogView {
    let mut all = LogView::default();
    for p in 0..partitions {
        let v = partition_view(addr, topic, p);
        all.committed.extend(v.committed);
        all.aborted.extend(v.aborted);
        all.open.extend(v.open);
        all.plain.extend(v.plain);
        all.commits += v.commits;
        all.aborts += v.aborts;
    }
    all
}

/// The view of one partition, read from its start until a fetch returns nothing more.
pub fn partition_view(addr: &str, topic: &str, partition: i32) -> LogView {
    let mut stream = TcpStream::connect(addr).expect("the Kafka broker");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut view = LogView::default();
    let mut pending: HashMap<i64, Vec<Vec<u8>>> = HashMap::new();
    let mut offset = 0i64;
    let mut correlation = 0;
    loop {
        correlation += 1;
        let records = fetch(&mut stream, correlation, topic, partition, offset);
        let mut r = Buf(&records);
        let mut progressed = false;
        while r.0.len() >= 12 {
            let base = r.i64();
            let len = r.i32() as usize;
            if r.0.len() < len {
                break; // a partial batch at the end of the response
            }
            let mut b = Buf(&r.0[..len]);
            r.0 = &r.0[len..];
            let _leader_epoch = b.i32();
            let magic = b.i8();
            assert_eq!(magic, 2, "record batch v2 only");
            let _crc = b.i32();
            let attributes = b.i16();
            let last_delta = b.i32();
            let _base_ts = b.i64();
            let _max_ts = b.i64();
            let producer = b.i64();
            let _epoch = b.i16();
            let _base_seq = b.i32();
            let count = b.i32();
            assert_eq!(attributes & 7, 0, "compressed batches are not read here");
            let transactional = attributes & 0x10 != 0;
            let control = attributes & 0x20 != 0;
            let next = base + i64::from(last_delta) + 1;
            if next <= offset {
                continue; // a batch before the fetch offset, sent again
            }
            progressed = true;
            offset = next;
            for _ in 0..count {
                let rec_len = b.varint() as usize;
                let mut rec = Buf(&b.0[..rec_len]);
                b.0 = &b.0[rec_len..];
                let _attrs = rec.i8();
                let _ts = rec.varint();
                let _off = rec.varint();
                let key = rec.bytes();
                let value = rec.bytes();
                if control {
                    // Control record key: version int16, type int16 (0 ABORT, 1 COMMIT).
                    let key = key.expect("a control record has a key");
                    let kind = i16::from_be_bytes([key[2], key[3]]);
                    let records = pending.remove(&producer).unwrap_or_default();
                    if kind == 1 {
                        view.commits += 1;
                        view.committed.extend(records);
                    } else {
                        view.aborts += 1;
                        view.aborted.extend(records);
                    }
                } else {
                    let value = value.unwrap_or_default();
                    if transactional {
                        pending.entry(producer).or_default().push(value);
                    } else {
                        view.plain.push(value);
                    }
                }
            }
        }
        if !progressed {
            break;
        }
    }
    view.open = pending.into_values().flatten().collect();
    view
}

/// One `Fetch` v4 of `topic`/`partition` from `offset`; the partition's record bytes.
fn fetch(
    stream: &mut TcpStream,
    correlation: i32,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Vec<u8> {
    let mut msg = Vec::new();
    msg.extend_from_slice(&1i16.to_be_bytes()); // Fetch
    msg.extend_from_slice(&4i16.to_be_bytes());
    msg.extend_from_slice(&correlation.to_be_bytes());
    put_string(&mut msg, "ferry-test");
    msg.extend_from_slice(&(-1i32).to_be_bytes()); // replica id
    msg.extend_from_slice(&100i32.to_be_bytes()); // max wait ms
    msg.extend_from_slice(&0i32.to_be_bytes()); // min bytes
    msg.extend_from_slice(&(64i32 << 20).to_be_bytes()); // max bytes
    msg.push(0); // read_uncommitted: every record, and the markers
    msg.extend_from_slice(&1i32.to_be_bytes());
    put_string(&mut msg, topic);
    msg.extend_from_slice(&1i32.to_be_bytes());
    msg.extend_from_slice(&partition.to_be_bytes());
    msg.extend_from_slice(&offset.to_be_bytes());
    msg.extend_from_slice(&(64i32 << 20).to_be_bytes());
    stream
        .write_all(&(msg.len() as i32).to_be_bytes())
        .and_then(|_| stream.write_all(&msg))
        .unwrap();
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).unwrap();
    let mut reply = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut reply).unwrap();
    let mut r = Buf(&reply);
    assert_eq!(r.i32(), correlation);
    let _throttle = r.i32();
    let topics = r.i32();
    let mut out = Vec::new();
    for _ in 0..topics {
        let _name = r.string();
        let partitions = r.i32();
        for _ in 0..partitions {
            let _p = r.i32();
            let error = r.i16();
            assert!(error == 0 || error == 1, "Fetch error {error}"); // 1: offset out of range
            let _hw = r.i64();
            let _lso = r.i64();
            let aborted = r.i32();
            for _ in 0..aborted.max(0) {
                r.i64();
                r.i64();
            }
            let n = r.i32();
            if n > 0 {
                out.extend_from_slice(&r.0[..n as usize]);
                r.0 = &r.0[n as usize..];
            }
        }
    }
    out
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

struct Buf<'a>(&'a [u8]);

impl Buf<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let (h, t) = self.0.split_at(n);
        self.0 = t;
        h
    }
    fn i8(&mut self) -> i8 {
        self.take(1)[0] as i8
    }
    fn i16(&mut self) -> i16 {
        let b = self.take(2);
        i16::from_be_bytes([b[0], b[1]])
    }
    fn i32(&mut self) -> i32 {
        let b = self.take(4);
        i32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
    fn i64(&mut self) -> i64 {
        let b = self.take(8);
        i64::from_be_bytes(b.try_into().unwrap())
    }
    fn string(&mut self) -> String {
        let n = self.i16();
        String::from_utf8_lossy(self.take(n.max(0) as usize)).into_owned()
    }
    /// A zig-zag varint.
    fn varint(&mut self) -> i64 {
        let mut v: u64 = 0;
        let mut shift = 0;
        loop {
            let b = self.take(1)[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        ((v >> 1) as i64) ^ -((v & 1) as i64)
    }
    /// Varint-length bytes; -1 is null.
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.varint();
        (n >= 0).then(|| self.take(n as usize).to_vec())
    }
}
