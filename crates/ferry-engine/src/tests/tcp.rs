//! A source built on the I/O runtime ([`ferry_api::io`]): it reads numbered lines from a
//! TCP server the test runs, which replays its log from any offset (as a broker would).
//! It proves that such a reader is woken by data rather than by a timer, that
//! checkpoints complete while it waits, and that a restore resumes exactly.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::Ordering;
use std::sync::Condvar;
use std::time::Instant;

use ferry_api::io::{Fetched, Fetcher, Readiness};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use super::*;

/// Numbers the test appends, served to every client from the offset it asks for.
#[derive(Default)]
struct Log {
    lines: Mutex<Vec<i64>>,
    grew: Condvar,
}

impl Log {
    fn push(&self, n: i64) {
        self.lines.lock().unwrap().push(n);
        self.grew.notify_all();
    }
}

/// Serves `log` on a loopback port: a client sends `FROM <offset>` and gets every line
/// from there on, as the log grows. Connection threads end when their client goes.
fn serve(log: Arc<Log>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let log = log.clone();
            std::thread::spawn(move || {
                let mut request = String::new();
                if BufReader::new(&conn).read_line(&mut request).is_err() {
                    return;
                }
                let mut next: usize = request
                    .trim()
                    .strip_prefix("FROM ")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                loop {
                    let lines = log.lines.lock().unwrap();
                    let (lines, _) = log
                        .grew
                        .wait_timeout_while(lines, Duration::from_millis(200), |l| l.len() <= next)
                        .unwrap();
                    let out: String = lines[next.min(lines.len())..]
                        .iter()
                        .map(|n| format!("{n}\n"))
                        .collect();
                    next = next.max(lines.len());
                    drop(lines);
                    if conn.write_all(out.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

struct LinesFactory;
impl SourceFactory for LinesFactory {
    fn name(&self) -> &'static str {
        "Lines"
    }
    fn description(&self) -> &'static str {
        "numbered lines from a TCP server"
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[]
    }
    fn create(&self, o: &mut Options, _job: &JobContext) -> Result<Box<dyn Source>> {
        let addr = o
            .string("addr")?
            .ok_or_else(|| FerryError::config("addr is required"))?;
        Ok(Box::new(Lines { addr }))
    }
}

#[derive(Debug)]
struct Lines {
    addr: String,
}

impl Source for Lines {
    fn boundedness(&self) -> Boundedness {
        Boundedness::Unbounded
    }
    fn tables(&self) -> Vec<TableSchema> {
        vec![TableSchema::new(
            "lines",
            Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)])),
        )]
    }
    fn create_enumerator(
        &self,
        _ctx: &EnumeratorContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SplitEnumerator>> {
        let pending = if restored.is_some() {
            Vec::new()
        } else {
            vec![(
                0,
                Split {
                    id: "log".into(),
                    state: json!({"offset": 0}),
                },
            )]
        };
        Ok(Box::new(LinesEnum(pending)))
    }
    fn create_reader(&self, _ctx: &ReaderContext) -> Result<Box<dyn SourceReader>> {
        Ok(Box::new(LinesReader {
            addr: self.addr.clone(),
            offset: None,
            fetcher: None,
            readiness: Readiness::new(),
        }))
    }
}

struct LinesEnum(Vec<(usize, Split)>);
impl SplitEnumerator for LinesEnum {
    fn discover(&mut self) -> Result<Vec<(usize, Split)>> {
        Ok(std::mem::take(&mut self.0))
    }
    fn is_exhausted(&self) -> bool {
        self.0.is_empty()
    }
    fn add_splits_back(&mut self, splits: Vec<Split>, reader: usize) {
        self.0.extend(splits.into_iter().map(|s| (reader, s)));
    }
    fn snapshot(&mut self, _id: u64) -> Result<Value> {
        Ok(json!(self.0.len()))
    }
}

struct LinesReader {
    addr: String,
    /// Lines emitted so far: the split's state.
    offset: Option<u64>,
    fetcher: Option<Fetcher<i64>>,
    /// Offered to the engine when the reader is created, raised by its fetcher.
    readiness: Readiness,
}

impl SourceReader for LinesReader {
    fn add_splits(&mut self, splits: Vec<Split>) -> Result<()> {
        for s in splits {
            let offset = s.state["offset"].as_u64().unwrap_or(0);
            self.offset = Some(offset);
            let addr = self.addr.clone();
            let fetcher = Fetcher::spawn(1024, &self.readiness, move |tx| async move {
                let conn = match tokio::net::TcpStream::connect(&addr).await {
                    Ok(c) => c,
                    Err(e) => {
                        tx.send(Err(FerryError::external("Lines", format!("{addr}: {e}"))))
                            .await;
                        return;
                    }
                };
                let (read, mut write) = conn.into_split();
                if write
                    .write_all(format!("FROM {offset}\n").as_bytes())
                    .await
                    .is_err()
                {
                    return;
                }
                let mut lines = tokio::io::BufReader::new(read).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let item = line
                        .parse::<i64>()
                        .map_err(|e| FerryError::data("Lines", format!("{line:?}: {e}")));
                    if !tx.send(item).await {
                        return;
                    }
                }
            })?;
            self.fetcher = Some(fetcher);
        }
        Ok(())
    }
    fn no_more_splits(&mut self) {}
    fn poll_next(&mut self) -> Result<ReadStatus> {
        let (Some(fetcher), Some(offset)) = (&mut self.fetcher, &mut self.offset) else {
            return Ok(ReadStatus::Idle(Duration::from_secs(10)));
        };
        let mut ids = Vec::new();
        while ids.len() < 1024 {
            match fetcher.try_next()? {
                Fetched::Item(id) => ids.push(id),
                Fetched::Empty | Fetched::Closed => break,
            }
        }
        if ids.is_empty() {
            // Far longer than any test waits: only the readiness signal can wake it in time.
            return Ok(ReadStatus::Idle(Duration::from_secs(10)));
        }
        *offset += ids.len() as u64;
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(ids))])?;
        Ok(ReadStatus::Batch(ChangeBatch::inserts(
            "lines".into(),
            batch,
        )))
    }
    fn readiness(&self) -> Option<Readiness> {
        Some(self.readiness.clone())
    }
    fn snapshot(&mut self, _id: u64) -> Result<Vec<Split>> {
        Ok(self
            .offset
            .map(|o| Split {
                id: "log".into(),
                state: json!({"offset": o}),
            })
            .into_iter()
            .collect())
    }
}

/// Requests a savepoint when dropped, also while a failed assertion unwinds, so that a
/// failing check ends the job instead of leaving the test waiting on it.
struct SavepointOnDrop(StopHandle);

impl Drop for SavepointOnDrop {
    fn drop(&mut self) {
        self.0.request_savepoint();
    }
}

/// Waits until `f` holds, for at most `limit`.
fn wait_for(limit: Duration, f: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    while !f() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

#[test]
fn an_async_source_is_woken_by_data_checkpoints_while_it_waits_and_resumes_exactly() {
    let log = Arc::new(Log::default());
    let addr = serve(log.clone());
    let sink = Collect::default();
    let text = format!(
        "env {{ job.mode = STREAMING, checkpoint.interval = 60000 }}\nsource {{ Lines {{ addr = \"{addr}\" }} }}\nsink {{ Collect {{}} }}"
    );
    let registry = || Registry::new().source(LinesFactory);
    let mut store = MemoryStore::default();

    // First run: lines pushed one at a time reach the sink long before the reader's
    // 10 s idle time would end.
    let p = plan_with(&text, &sink, registry());
    let stop = StopHandle::default();
    let (stop2, written, commits) = (stop.clone(), sink.written.clone(), sink.commits.clone());
    let log2 = log.clone();
    let pusher = std::thread::spawn(move || {
        let _stop = SavepointOnDrop(stop2);
        let mut latencies = Vec::new();
        for n in 0..7 {
            std::thread::sleep(Duration::from_millis(70));
            let start = Instant::now();
            log2.push(n);
            assert!(
                wait_for(Duration::from_secs(5), || written.load(Ordering::SeqCst)
                    > n as usize),
                "line {n} never reached the sink"
            );
            latencies.push(start.elapsed());
        }
        // No periodic checkpoint for a minute: the savepoint is a checkpoint taken while
        // the reader waits for data, and it must complete.
        assert!(commits.lock().unwrap().is_empty());
        latencies.sort();
        latencies
    });
    assert_eq!(
        run_job(&p, &mut store, stop).unwrap(),
        RunOutcome::Savepoint
    );
    let latencies = pusher.join().unwrap();
    // Polled, the reader would see a line up to 200 ms late (100 ms on average); woken by
    // its data, within a few milliseconds.
    assert!(
        latencies[3] < Duration::from_millis(60),
        "lines took {latencies:?} to reach the sink: the reader was not woken by its data"
    );
    assert_eq!(sorted(&sink.published), (0..7).collect::<Vec<_>>());

    // Lines appended while the job is down are read after the restore, from the offset
    // the savepoint holds: none lost, none read twice.
    for n in 7..10 {
        log.push(n);
    }
    let p = plan_with(&text, &sink, registry());
    let stop = StopHandle::default();
    let (stop2, written) = (stop.clone(), sink.written.clone());
    let log2 = log.clone();
    let t = std::thread::spawn(move || {
        let _stop = SavepointOnDrop(stop2);
        for n in 10..15 {
            log2.push(n);
        }
        // 7 rows reached the sink in the first run; 8 more (3 written while the job was
        // down, 5 now) must reach it in this one. The savepoint then publishes them.
        assert!(
            wait_for(Duration::from_secs(10), || written.load(Ordering::SeqCst)
                >= 15),
            "the restored reader did not read on from its offset"
        );
    });
    run_job(&p, &mut store, stop).unwrap();
    t.join().unwrap();
    assert_eq!(sorted(&sink.published), (0..15).collect::<Vec<_>>());
}
