//! Prometheus' text format (0.0.4) of jobs' counters: what `/metrics` of `ferry serve`
//! and of `ferry run --metrics-listen` answer. SeaTunnel's metric names
//! (`SourceReceivedCount`, `SinkWriteCount`, …) where it has them, `ferry_…` for the rest.
//! Labels are job ids and names, plugin and table names: never an option's value.

use std::fmt::Write;

use ferry_engine::Metrics;

use super::jobs::{now_ms, Rates, Vertex};

/// One job, as the exporter sees it.
pub struct Exported<'a> {
    /// Its id.
    pub id: &'a str,
    /// Its name.
    pub name: &'a str,
    /// SeaTunnel's status name.
    pub status: &'a str,
    /// Its plugins.
    pub vertices: &'a [Vertex],
    /// Its counters.
    pub metrics: &'a Metrics,
    /// Its rates.
    pub rates: &'a Rates,
    /// When it started (ms since the epoch).
    pub started_ms: u64,
}

/// A label value with `\`, `"` and newlines escaped.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    lines: Vec<String>,
}

/// The exposition of `jobs`, with `job_count` by status when `counts` is given.
pub fn render(jobs: &[Exported<'_>], counts: Option<&[(&str, usize)]>) -> String {
    let mut fams: Vec<Family> = Vec::new();
    let mut fam = |name: &'static str, kind: &'static str, help: &'static str| {
        fams.push(Family {
            name,
            kind,
            help,
            lines: Vec::new(),
        });
        fams.len() - 1
    };
    let src_count = fam(
        "SourceReceivedCount",
        "counter",
        "Rows read by a source, per table.",
    );
    let src_bytes = fam(
        "SourceReceivedBytes",
        "counter",
        "Bytes read by a source (Arrow memory size), per table.",
    );
    let src_qps = fam(
        "SourceReceivedQPS",
        "gauge",
        "Rows per second read by a source, per table, over the last second.",
    );
    let src_bps = fam(
        "SourceReceivedBytesPerSeconds",
        "gauge",
        "Bytes per second read by a source, per table.",
    );
    let sink_count = fam("SinkWriteCount", "counter", "Rows written by a sink.");
    let sink_bytes = fam(
        "SinkWriteBytes",
        "counter",
        "Bytes written by a sink (Arrow memory size).",
    );
    let sink_qps = fam(
        "SinkWriteQPS",
        "gauge",
        "Rows per second written by a sink, over the last second.",
    );
    let sink_bps = fam(
        "SinkWriteBytesPerSeconds",
        "gauge",
        "Bytes per second written by a sink.",
    );
    let wait = fam(
        "ferry_sink_backpressure_seconds_total",
        "counter",
        "Time readers waited for a sink's full input channel (the sink holds the sources back).",
    );
    let ck_done = fam(
        "ferry_checkpoints_total",
        "counter",
        "Checkpoints completed.",
    );
    let ck_failed = fam(
        "ferry_checkpoint_failures_total",
        "counter",
        "Checkpoints that failed.",
    );
    let ck_id = fam(
        "ferry_checkpoint_last_id",
        "gauge",
        "Id of the latest completed checkpoint.",
    );
    let ck_dur = fam(
        "ferry_checkpoint_last_duration_seconds",
        "gauge",
        "Duration of the latest completed checkpoint, from trigger to commit.",
    );
    let ck_size = fam(
        "ferry_checkpoint_last_size_bytes",
        "gauge",
        "Size of the latest completed checkpoint's state.",
    );
    let ck_age = fam(
        "ferry_checkpoint_last_age_seconds",
        "gauge",
        "Time since the latest completed checkpoint.",
    );
    let uptime = fam(
        "ferry_job_uptime_seconds",
        "gauge",
        "Time since the job started.",
    );
    let status = fam(
        "ferry_job_status",
        "gauge",
        "1 for the job's status (SeaTunnel's names).",
    );
    let figure = fam(
        "ferry_source_figure",
        "gauge",
        "A source reader's own figure (label figure: lag_messages is Kafka's consumer lag, lag_rows FakeSource's rows still to generate).",
    );
    let job_count = fam(
        "job_count",
        "gauge",
        "Jobs of this server by status, as SeaTunnel's job_count.",
    );
    let now = now_ms();
    for j in jobs {
        let job = format!("job_id=\"{}\",job_name=\"{}\"", esc(j.id), esc(j.name));
        let read = j.metrics.read_flows();
        let written = j.metrics.written_flows();
        for v in j.vertices {
            // A source's counters are per stream; a sink's cover the tables it reads.
            let table = if v.kind == "sink" {
                v.tables.join(",")
            } else {
                v.key.clone()
            };
            let labels = format!(
                "{job},plugin=\"{}\",vertex=\"{}\",table=\"{}\"",
                esc(&v.plugin),
                esc(&v.name),
                esc(&table)
            );
            let mut put = |f: usize, value: String| {
                let name = fams[f].name;
                fams[f].lines.push(format!("{name}{{{labels}}} {value}"));
            };
            match v.kind {
                "source" => {
                    let c = read.get(&v.key).copied().unwrap_or_default();
                    let (qps, bps) = j.rates.read.get(&v.key).copied().unwrap_or((0.0, 0.0));
                    put(src_count, c.rows.to_string());
                    put(src_bytes, c.bytes.to_string());
                    put(src_qps, format!("{qps:.3}"));
                    put(src_bps, format!("{bps:.3}"));
                }
                "sink" => {
                    let c = written.get(&v.key).copied().unwrap_or_default();
                    let (qps, bps) = j.rates.written.get(&v.key).copied().unwrap_or((0.0, 0.0));
                    put(sink_count, c.rows.to_string());
                    put(sink_bytes, c.bytes.to_string());
                    put(sink_qps, format!("{qps:.3}"));
                    put(sink_bps, format!("{bps:.3}"));
                    put(wait, format!("{:.6}", c.wait_ns as f64 / 1e9));
                }
                _ => {}
            }
        }
        for (stream, subtask, name, value) in j.metrics.figures() {
            let Some(v) = j
                .vertices
                .iter()
                .find(|v| v.kind == "source" && v.key == stream)
            else {
                continue;
            };
            fams[figure].lines.push(format!(
                "ferry_source_figure{{{job},plugin=\"{}\",vertex=\"{}\",table=\"{}\",subtask=\"{subtask}\",figure=\"{}\"}} {value}",
                esc(&v.plugin),
                esc(&v.name),
                esc(&stream),
                esc(name)
            ));
        }
        let ck = j.metrics.checkpoints();
        let mut put = |f: usize, value: String| {
            let name = fams[f].name;
            fams[f].lines.push(format!("{name}{{{job}}} {value}"));
        };
        put(ck_done, ck.completed.to_string());
        put(ck_failed, ck.failed.to_string());
        if let Some(last) = ck.history.back() {
            put(ck_id, last.id.to_string());
            put(ck_dur, format!("{:.6}", last.duration.as_secs_f64()));
            put(ck_size, last.bytes.to_string());
            put(
                ck_age,
                format!("{:.3}", now.saturating_sub(last.completed_ms) as f64 / 1e3),
            );
        }
        put(
            uptime,
            format!("{:.3}", now.saturating_sub(j.started_ms) as f64 / 1e3),
        );
        fams[status].lines.push(format!(
            "ferry_job_status{{{job},status=\"{}\"}} 1",
            esc(j.status)
        ));
    }
    for (name, n) in counts.unwrap_or(&[]) {
        fams[job_count]
            .lines
            .push(format!("job_count{{type=\"{}\"}} {n}", esc(name)));
    }
    let mut out = String::new();
    for f in &fams {
        if f.lines.is_empty() {
            continue;
        }
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind);
        for l in &f.lines {
            let _ = writeln!(out, "{l}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_counts_shown() {
        let m = Metrics::default();
        m.source_flow("fake").add(10, 100);
        let v = vec![Vertex {
            id: 1,
            kind: "source",
            name: "Source[0]-FakeSource".into(),
            plugin: "FakeSource".into(),
            key: "fake".into(),
            tables: vec!["fake".into()],
            inputs: vec![],
            output: "fake".into(),
            parallelism: 1,
        }];
        let text = render(
            &[Exported {
                id: "a\"b",
                name: "n\\m",
                status: "RUNNING",
                vertices: &v,
                metrics: &m,
                rates: &Rates::default(),
                started_ms: now_ms(),
            }],
            Some(&[("running", 1)]),
        );
        assert!(text.contains("SourceReceivedCount{job_id=\"a\\\"b\",job_name=\"n\\\\m\",plugin=\"FakeSource\",vertex=\"Source[0]-FakeSource\",table=\"fake\"} 10"), "{text}");
        assert!(text.contains("# TYPE SourceReceivedCount counter"));
        assert!(text.contains("job_count{type=\"running\"} 1"));
        assert!(
            !text.contains("SinkWriteCount"),
            "no sink, no sink family: {text}"
        );
    }
}
