//! Tests of the reading fast paths: date patterns in CSV, JSON lines decoded straight into
//! columns, and large files split across readers.

use arrow::array::{Array, AsArray};
use arrow::datatypes::{Date32Type, Time64MicrosecondType, TimestampMicrosecondType};
use ferry_api::value::{format_date, format_time, format_timestamp};
use serde_json::json;

use crate::tests::{read_all, rows};

/// Dates, times and timestamps of a CSV, with their patterns, read through arrow-csv.
#[test]
fn csv_with_quoted_literal_patterns_reads_every_temporal_column() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.csv"),
        "1,2024-02-24T14:11:08,2024/02/24,14:11:08.120\n\
         2,2024-12-31T24:00:00,2024/02/30,00:00:00.000\n\
         3,,,\n",
    )
    .unwrap();
    let opts = json!({"path": dir.path(), "file_format_type": "csv",
        "datetime_format": "yyyy-MM-dd'T'HH:mm:ss", "date_format": "yyyy/MM/dd", "time_format": "HH:mm:ss.SSS",
        "schema": {"fields": {"id": "int", "ts": "timestamp", "d": "date", "t": "time"}}});
    let (_, b) = read_all(opts.clone()).unwrap();
    assert_eq!(rows(&b), 3);
    let ts = b[0].column(1).as_primitive::<TimestampMicrosecondType>();
    let d = b[0].column(2).as_primitive::<Date32Type>();
    let t = b[0].column(3).as_primitive::<Time64MicrosecondType>();
    assert_eq!(format_timestamp(ts.value(0)), "2024-02-24T14:11:08");
    // SMART resolving, as Java: 24:00 is the next midnight, 30 February the month's last day.
    assert_eq!(format_timestamp(ts.value(1)), "2025-01-01T00:00:00");
    assert_eq!(format_date(d.value(0)), "2024-02-24");
    assert_eq!(format_date(d.value(1)), "2024-02-29");
    assert_eq!(format_time(t.value(0)), "14:11:08.120000");
    assert_eq!(format_time(t.value(1)), "00:00:00");
    assert!(ts.is_null(2) && d.is_null(2) && t.is_null(2));

    // A value matching neither the pattern nor the lenient default names line and column.
    std::fs::write(
        dir.path().join("a.csv"),
        "1,2024-02-24T14:11:08,2024/02/24,14:11:08.120\n2,24.02.2024 14:11,2024/02/24,14:11:08.120\n",
    )
    .unwrap();
    let e = read_all(opts.clone()).unwrap_err().to_string();
    assert!(
        e.contains(
            "a.csv: line 2, column 2 ('ts'): value '24.02.2024 14:11' is not a valid timestamp"
        ),
        "{e}"
    );
    // A header skipped by skip_header_row_number counts in the line number.
    std::fs::write(
        dir.path().join("a.csv"),
        "id,ts,d,t\n1,2024-02-24T14:11:08,2024/02/24,x\n",
    )
    .unwrap();
    let mut o = opts;
    o["skip_header_row_number"] = json!(1);
    let e = read_all(o).unwrap_err().to_string();
    assert!(
        e.contains("line 2, column 4 ('t'): value 'x' is not a valid time"),
        "{e}"
    );
}

/// A value not in the pattern's form is still read when the lenient default reads it,
/// as before patterns were compiled.
#[test]
fn values_off_the_pattern_fall_back_to_the_default_forms() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.txt"),
        "2024-02-24 14:11:08\n2024-02-24T14:11:08\n",
    )
    .unwrap();
    let (_, b) = read_all(json!({"path": dir.path(), "file_format_type": "text",
        "datetime_format": "yyyyMMddHHmmss", "schema": {"fields": {"ts": "timestamp"}}}))
    .unwrap();
    let ts = b[0].column(0).as_primitive::<TimestampMicrosecondType>();
    assert_eq!(format_timestamp(ts.value(0)), "2024-02-24T14:11:08");
    assert_eq!(format_timestamp(ts.value(1)), "2024-02-24T14:11:08");
}

// ---- JSON lines straight into columns ----

/// Writes `lines` as a JSON file and reads it back with `fields`, in batches of `batch`.
fn read_json(
    lines: &[String],
    fields: serde_json::Value,
    batch: usize,
) -> ferry_api::Result<Vec<serde_json::Value>> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.json"), lines.join("\n") + "\n").unwrap();
    let (_, b) = read_all(
        json!({"path": dir.path(), "file_format_type": "json", "batch_size": batch,
        "schema": {"fields": fields}}),
    )?;
    Ok(crate::tests::as_json(&b))
}

/// Batches the decoder reads and batches it hands to the general path (a key in another
/// case, a number for a string column…) give the rows SeaTunnel's reading gives.
#[test]
fn json_lines_read_the_same_on_both_paths() {
    let fields = json!({"id": "bigint", "name": "string", "amount": "double", "ts": "timestamp",
        "ok": "boolean", "tags": "array<string>", "price": "decimal(10, 2)"});
    let mut lines = Vec::new();
    for i in 0..40 {
        lines.push(match i % 10 {
            // The general path's own cases: a key ignoring case, a string for a boolean,
            // a fractional number for an integer column.
            3 => format!(r#"{{"ID": {i}, "name": "n{i}", "ok": "TRUE"}}"#),
            7 => format!(r#"{{"id": {i}.0, "name": 5.50, "amount": "1.5"}}"#),
            _ => format!(
                r#"{{"id": {i}, "name": "n\"{i}", "amount": {i}.25, "ts": "2024-02-24T14:11:{:02}", "ok": true, "tags": ["a", "b"], "price": 1.005, "other": {{"x": [1]}}}}"#,
                i % 60
            ),
        });
    }
    let got = read_json(&lines, fields.clone(), 10).unwrap();
    assert_eq!(got.len(), 40);
    assert_eq!(
        got[0],
        json!({"id": 0, "name": "n\"0", "amount": 0.25, "ts": "2024-02-24T14:11:00", "ok": true, "tags": ["a", "b"], "price": 1.01})
    );
    assert_eq!(got[3]["id"], json!(3));
    assert_eq!(got[3]["ok"], json!(true));
    assert_eq!(got[7]["id"], json!(7));
    assert_eq!(got[7]["name"], json!("5.50"));
    assert_eq!(got[7]["amount"], json!(1.5));
    // One row per batch and everything in one batch give the same rows.
    assert_eq!(read_json(&lines, fields.clone(), 1).unwrap(), got);
    assert_eq!(read_json(&lines, fields, 1000).unwrap(), got);
}

/// Errors are those of the general path, with the line of the fault, whichever comes
/// first in the batch.
#[test]
fn json_errors_name_the_line_as_before() {
    let fields = json!({"id": "int", "ts": "timestamp"});
    let good = |i: usize| format!(r#"{{"id": {i}, "ts": "2024-01-01 00:00:00"}}"#);
    let mut lines: Vec<String> = (0..5).map(good).collect();
    lines[3] = r#"{"id": "x"}"#.into();
    let e = read_json(&lines, fields.clone(), 100)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("a.json: line 4: field 'id': value \"x\" does not fit type int"),
        "{e}"
    );
    // A syntax error later in the same batch is reported first, as the general path does.
    lines[4] = r#"{"id": 4,"#.into();
    let e = read_json(&lines, fields.clone(), 100)
        .unwrap_err()
        .to_string();
    assert!(e.contains("a.json: line 5, column 9: invalid JSON"), "{e}");
    let mut lines: Vec<String> = (0..5).map(good).collect();
    lines[1] = "[1, 2]".into();
    let e = read_json(&lines, fields.clone(), 100)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 2: expected a JSON object, found [1,2]"),
        "{e}"
    );
    lines[1] = r#"{"id": 1, "ts": "yesterday"}"#.into();
    let e = read_json(&lines, fields, 2).unwrap_err().to_string();
    assert!(
        e.contains("line 2: field 'ts': value \"yesterday\" does not fit type timestamp"),
        "{e}"
    );
}

// ---- large files split across readers ----

use arrow::datatypes::Int64Type;
use ferry_api::{
    EnumeratorContext, JobMode, Options, ReadStatus, ReaderContext, SourceFactory, SourceReader,
    Split,
};

use crate::source::SplitRule;
use crate::tests::job;
use crate::LocalFileSourceFactory;

/// The source of `opts`, and its splits as a batch enumerator with `parallelism` readers
/// hands them out (reader, split).
fn plan(
    opts: serde_json::Value,
    parallelism: usize,
) -> (std::sync::Arc<dyn ferry_api::Source>, Vec<(usize, Split)>) {
    let src = LocalFileSourceFactory
        .create(
            &mut Options::from_json("LocalFile", opts),
            &job(JobMode::Batch),
        )
        .unwrap();
    let mut en = src
        .create_enumerator(
            &EnumeratorContext {
                parallelism,
                job: job(JobMode::Batch),
            },
            None,
        )
        .unwrap();
    let splits = en.discover().unwrap();
    (std::sync::Arc::from(src), splits)
}

fn reader(
    src: &std::sync::Arc<dyn ferry_api::Source>,
    splits: Vec<Split>,
) -> Box<dyn SourceReader> {
    let mut r = src
        .create_reader(&ReaderContext {
            subtask: 0,
            parallelism: 1,
            job: job(JobMode::Batch),
        })
        .unwrap();
    r.add_splits(splits).unwrap();
    r.no_more_splits();
    r
}

/// The next batch's ids (column 0, bigint), or `None` at the end.
fn next_ids(r: &mut Box<dyn SourceReader>) -> ferry_api::Result<Option<Vec<i64>>> {
    Ok(match r.poll_next()? {
        ReadStatus::Batch(b) => Some(
            b.data
                .column(0)
                .as_primitive::<Int64Type>()
                .values()
                .to_vec(),
        ),
        _ => None,
    })
}

fn drain(r: &mut Box<dyn SourceReader>) -> Vec<i64> {
    let mut ids = Vec::new();
    while let Some(b) = next_ids(r).unwrap() {
        ids.extend(b);
    }
    ids
}

/// Lines of different lengths, so that cuts land inside lines.
fn numbered_lines(n: usize, line: impl Fn(usize) -> String) -> String {
    (0..n).map(|i| line(i) + "\n").collect()
}

#[test]
fn large_files_split_at_line_boundaries_and_every_line_is_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let pad = |i: usize| "x".repeat(i % 37);
    let cases = [
        (
            "a.json",
            "json",
            numbered_lines(500, |i| format!(r#"{{"id": {i}, "s": "{}"}}"#, pad(i))),
            json!({}),
        ),
        (
            "b.txt",
            "text",
            "h1\nh2\n".to_string() + &numbered_lines(500, |i| format!("{i}\u{1}{}", pad(i))),
            json!({"skip_header_row_number": 2}),
        ),
        (
            "c.csv",
            "csv",
            numbered_lines(500, |i| format!("{i},\"{}\"", pad(i))),
            json!({"enable_file_split": true}),
        ),
        (
            "d.csv",
            "csv",
            "s,id\n".to_string() + &numbered_lines(500, |i| format!("{},{i}", pad(i))),
            json!({"enable_file_split": true, "csv_use_header_line": true}),
        ),
    ];
    for (name, format, text, extra) in cases {
        let sub = dir.path().join(name.replace('.', "_"));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(name), &text).unwrap();
        let mut opts = json!({"path": sub, "file_format_type": format, "file_split_size": 1000, "batch_size": 7,
            "schema": {"fields": {"id": "bigint", "s": "string"}}});
        if format == "text" {
            opts["enable_file_split"] = json!(true);
        }
        for (k, v) in extra.as_object().unwrap() {
            opts[k] = v.clone();
        }
        let (src, splits) = plan(opts, 2);
        assert!(
            splits.len() >= 4 && splits.len() % 2 == 0,
            "{name}: {} splits",
            splits.len()
        );
        // Contiguous ranges, each starting at a line start.
        let bytes = text.as_bytes();
        let mut prev_end = None;
        for (i, (reader_no, s)) in splits.iter().enumerate() {
            assert_eq!(*reader_no, i % 2);
            let (start, end) = (
                s.state["start"].as_u64().unwrap() as usize,
                s.state["end"].as_u64().unwrap() as usize,
            );
            assert!(
                start < end && (start == 0 || bytes[start - 1] == b'\n'),
                "{name}: {start}"
            );
            if let Some(p) = prev_end {
                assert_eq!(p, start);
            }
            prev_end = Some(end);
        }
        assert_eq!(prev_end, Some(bytes.len()));
        // Each reader reads its own ranges; together they read every line once.
        let mut all = Vec::new();
        for r in 0..2 {
            let mine: Vec<Split> = splits
                .iter()
                .filter(|(n, _)| *n == r)
                .map(|(_, s)| s.clone())
                .collect();
            all.extend(drain(&mut reader(&src, mine)));
        }
        all.sort_unstable();
        assert_eq!(all, (0..500).collect::<Vec<_>>(), "{name}");
    }
}

/// A reader restored from a checkpoint taken inside a range goes on at the next line of
/// that range: no line is lost or read twice.
#[test]
fn a_restore_resumes_inside_a_range() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.json"),
        numbered_lines(300, |i| {
            format!(r#"{{"id": {i}, "s": "{}"}}"#, "y".repeat(i % 11))
        }),
    )
    .unwrap();
    let opts = json!({"path": dir.path(), "file_format_type": "json", "enable_file_split": true, "file_split_size": 2000,
        "batch_size": 5, "schema": {"fields": {"id": "bigint", "s": "string"}}});
    let (src, splits) = plan(opts, 2);
    let mine: Vec<Split> = splits
        .iter()
        .filter(|(n, _)| *n == 1)
        .map(|(_, s)| s.clone())
        .collect();
    let expected = drain(&mut reader(&src, mine.clone()));
    assert!(expected.len() > 20);
    let mut r = reader(&src, mine);
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.extend(next_ids(&mut r).unwrap().unwrap());
    }
    let snap = r.snapshot(1).unwrap();
    assert_eq!(snap[0].state["rows"], json!(15));
    assert!(snap[0].state["start"].as_u64().unwrap() > 0);
    next_ids(&mut r).unwrap(); // read after the checkpoint: lost with the crash
    let mut restored = reader(&src, snap);
    ids.extend(drain(&mut restored));
    assert_eq!(ids, expected);
}

/// Errors in a later range name the line of the file, counted from its start.
#[test]
fn errors_in_a_range_name_the_files_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = numbered_lines(400, |i| format!("{i}\u{1}s"));
    text = text.replace("\n377\u{1}s\n", "\nbad\u{1}s\n");
    std::fs::write(dir.path().join("a.txt"), text).unwrap();
    let opts = json!({"path": dir.path(), "file_format_type": "text", "enable_file_split": true, "file_split_size": 500,
        "schema": {"fields": {"id": "bigint", "s": "string"}}});
    let (src, splits) = plan(opts, 2);
    let last: Vec<Split> = vec![splits.last().unwrap().1.clone()];
    let mut r = reader(&src, last);
    let e = loop {
        match next_ids(&mut r) {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("no error"),
            Err(e) => break e.to_string(),
        }
    };
    assert!(e.contains("line 378, column 1 ('id'): value 'bad'"), "{e}");
}

/// Which files are split by default: text and json from 64 MiB with several readers,
/// csv only when asked; never compressed files.
#[test]
fn the_split_rule() {
    let auto = SplitRule {
        enabled: None,
        size: 128 << 20,
    };
    assert_eq!(auto.parts(crate::source::AUTO_SPLIT_MIN - 1, 2), 1);
    assert_eq!(auto.parts(crate::source::AUTO_SPLIT_MIN, 2), 2);
    assert_eq!(auto.parts(383 << 20, 2), 4);
    assert_eq!(auto.parts(383 << 20, 1), 1);
    let on = SplitRule {
        enabled: Some(true),
        size: 100,
    };
    assert_eq!(on.parts(1000, 3), 12);
    assert_eq!(on.parts(100, 3), 1);

    let dir = tempfile::tempdir().unwrap();
    let text = numbered_lines(200, |i| format!("{i},x"));
    std::fs::write(dir.path().join("a.csv"), &text).unwrap();
    let base = json!({"path": dir.path(), "file_format_type": "csv", "file_split_size": 100,
        "schema": {"fields": {"id": "bigint", "s": "string"}}});
    assert_eq!(
        plan(base.clone(), 2).1.len(),
        1,
        "csv is not split unless asked"
    );
    let mut off = base.clone();
    off["file_format_type"] = json!("text");
    off["field_delimiter"] = json!(",");
    off["enable_file_split"] = json!(false);
    assert_eq!(plan(off, 2).1.len(), 1);
    // An lzop file is read whole.
    let mut w = crate::lzo::LzopWriter::new(Vec::new()).unwrap();
    std::io::Write::write_all(&mut w, text.as_bytes()).unwrap();
    std::fs::write(dir.path().join("a.csv"), w.finish().unwrap()).unwrap();
    let mut on = base;
    on["enable_file_split"] = json!(true);
    let (src, splits) = plan(on, 2);
    assert_eq!(splits.len(), 1);
    let ids = drain(&mut reader(
        &src,
        splits.into_iter().map(|(_, s)| s).collect(),
    ));
    assert_eq!(ids.len(), 200);
}
