//! A small HTTP/1.1 server on std's sockets: one request per connection (`Connection:
//! close`), bodies by `Content-Length` up to a limit, a thread per connection up to a
//! bound. Enough for an operator's API, its page and Prometheus' scrapes, with no
//! framework to compile; every malformed request gets a 4xx, never a panic.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The largest request head (request line and headers).
const MAX_HEAD: usize = 16 * 1024;
/// Connections served at once; more get 503.
const MAX_CONNECTIONS: usize = 128;
/// How long a client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// One request.
#[derive(Debug)]
pub struct Request {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// Query parameters, percent-decoded.
    pub query: Vec<(String, String)>,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Request {
    /// A header's value (name in lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    /// A query parameter's value.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One response.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// A JSON response.
    pub fn json(status: u16, value: &serde_json::Value) -> Response {
        Response {
            status,
            content_type: "application/json",
            body: value.to_string().into_bytes(),
        }
    }
    /// SeaTunnel's error shape: `{"status": "fail", "message": …}`.
    pub fn error(status: u16, message: impl Into<String>) -> Response {
        Response::json(
            status,
            &serde_json::json!({"status": "fail", "message": message.into()}),
        )
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Payload Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// A listening server; the accept loop runs on its own thread until the process ends.
pub struct Server {
    /// The address it listens on (with the port the system chose for port 0).
    pub addr: SocketAddr,
}

/// Binds `addr` and serves every request with `handler` on a thread per connection.
pub fn start(
    addr: &str,
    max_body: usize,
    handler: Arc<dyn Fn(Request) -> Response + Send + Sync>,
) -> Result<Server, String> {
    let listener = TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let open = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("http-accept".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                    open.fetch_sub(1, Ordering::SeqCst);
                    let mut s = stream;
                    let _ = write_response(&mut s, &Response::error(503, "too many connections"));
                    continue;
                }
                let handler = handler.clone();
                let open2 = open.clone();
                let spawned = std::thread::Builder::new()
                    .name("http".into())
                    .spawn(move || {
                        serve_one(stream, max_body, handler.as_ref());
                        open2.fetch_sub(1, Ordering::SeqCst);
                    });
                if spawned.is_err() {
                    open.fetch_sub(1, Ordering::SeqCst);
                }
            }
        })
        .map_err(|e| format!("cannot start the HTTP server: {e}"))?;
    Ok(Server { addr: local })
}

fn serve_one(stream: TcpStream, max_body: usize, handler: &(dyn Fn(Request) -> Response + Sync)) {
    let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
    let _ = stream.set_write_timeout(Some(READ_TIMEOUT));
    let mut out = match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    };
    let response = match read_request(stream, max_body) {
        Ok(req) => {
            // A handler that panics answers 500; the server stays up.
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(req))) {
                Ok(r) => r,
                Err(_) => Response::error(500, "internal error while handling the request"),
            }
        }
        Err(r) => r,
    };
    let _ = write_response(&mut out, &response);
    let _ = out.flush();
    let _ = out.shutdown(std::net::Shutdown::Write);
    // Let the client read the response before the socket closes with unread input.
    let _ = out.set_read_timeout(Some(Duration::from_millis(200)));
    let mut sink = [0u8; 4096];
    for _ in 0..64 {
        match out.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
}

fn read_request(stream: TcpStream, max_body: usize) -> Result<Request, Response> {
    let mut reader = BufReader::new(stream);
    let mut head_len = 0usize;
    let mut line = String::new();
    let mut read_line = |reader: &mut BufReader<TcpStream>, line: &mut String| {
        line.clear();
        let n = reader
            .by_ref()
            .take((MAX_HEAD - head_len.min(MAX_HEAD)) as u64 + 1)
            .read_line(line)
            .map_err(|_| Response::error(400, "the request could not be read"))?;
        head_len += n;
        if head_len > MAX_HEAD {
            return Err(Response::error(431, "the request head exceeds 16 KiB"));
        }
        Ok::<usize, Response>(n)
    };
    if read_line(&mut reader, &mut line)? == 0 {
        return Err(Response::error(400, "empty request"));
    }
    let mut parts = line.trim_end().split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(Response::error(400, "malformed request line"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(Response::error(400, "only HTTP/1.x is served"));
    }
    let method = method.to_string();
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), parse_query(q)),
        None => (target.to_string(), Vec::new()),
    };
    let mut headers = Vec::new();
    loop {
        if read_line(&mut reader, &mut line)? == 0 {
            return Err(Response::error(400, "the request head ended early"));
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let Some((k, v)) = l.split_once(':') else {
            return Err(Response::error(400, format!("malformed header line '{l}'")));
        };
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    if header("transfer-encoding").is_some() {
        return Err(Response::error(
            411,
            "chunked request bodies are not accepted: send a Content-Length",
        ));
    }
    let length = match header("content-length") {
        None => 0,
        Some(v) => v
            .parse::<usize>()
            .map_err(|_| Response::error(400, format!("bad Content-Length '{v}'")))?,
    };
    if length > max_body {
        return Err(Response::error(
            413,
            format!("the request body has {length} bytes; at most {max_body} are accepted"),
        ));
    }
    let mut body = vec![0u8; length];
    reader
        .read_exact(&mut body)
        .map_err(|_| Response::error(400, "the request body is shorter than its Content-Length"))?;
    Ok(Request {
        method,
        path: percent_decode(&path),
        query,
        headers,
        body,
    })
}

fn write_response(out: &mut TcpStream, r: &Response) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len()
    );
    out.write_all(head.as_bytes())?;
    out.write_all(&r.body)
}

fn parse_query(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(p), String::new()),
        })
        .collect()
}

/// `%41` → `A`, `+` → space; invalid escapes stay as written.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding_keeps_invalid_escapes() {
        assert_eq!(percent_decode("a%20b+c"), "a b c");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("%4"), "%4");
        assert_eq!(
            parse_query("a=1&b&c=x%2Fy"),
            vec![
                ("a".into(), "1".into()),
                ("b".into(), String::new()),
                ("c".into(), "x/y".into())
            ]
        );
    }
}
