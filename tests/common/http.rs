//! A small HTTP/1.1 client for the tests that talk to `ferry serve` and to chromedriver:
//! one request per connection, the body read to the end.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A response: status and body.
#[derive(Debug)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The body as text.
    pub body: String,
}

impl Reply {
    /// The body as JSON (panics with the body when it is none).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// Sends `method path` to `addr` (host:port) with `body` and extra `headers`.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    body: &[u8],
    headers: &[(&str, &str)],
) -> std::io::Result<Reply> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    // A server may answer (413) before it reads a large body: a failed write is no error.
    let _ = s.write_all(body);
    // Read the head, then the body by its Content-Length (chromedriver keeps the
    // connection open whatever the request says), else to the end.
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(p) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::Error::other(format!(
                "no response head in {:?}",
                String::from_utf8_lossy(&raw)
            )));
        }
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).to_string();
    let length = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse::<usize>().ok())
            .flatten()
    });
    let mut body_raw = raw[head_end + 4..].to_vec();
    match length {
        Some(n) => {
            while body_raw.len() < n {
                let k = s.read(&mut buf)?;
                if k == 0 {
                    break;
                }
                body_raw.extend_from_slice(&buf[..k]);
            }
            body_raw.truncate(n);
        }
        None => {
            s.read_to_end(&mut body_raw)?;
        }
    }
    let body = String::from_utf8_lossy(&body_raw).to_string();
    let head = head.as_str();
    let body = body.as_str();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line in {head:?}")))?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        unchunk(body)
    } else {
        body.to_string()
    };
    Ok(Reply { status, body })
}

/// `GET path`, which must get an answer.
pub fn get(addr: &str, path: &str) -> Reply {
    request(addr, "GET", path, b"", &[]).unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

/// `POST path` with `body`, which must get an answer.
pub fn post(addr: &str, path: &str, body: &str) -> Reply {
    request(addr, "POST", path, body.as_bytes(), &[]).unwrap_or_else(|e| panic!("POST {path}: {e}"))
}

fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}
