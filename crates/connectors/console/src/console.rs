//! The `Console` sink: prints every row to standard output in SeaTunnel's layout,
//! `subtaskIndex=0  rowIndex=1:  SeaTunnelRow#tableId=fake SeaTunnelRow#kind=INSERT : v1, v2`.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use ferry_api::{
    ChangeBatch, FerryError, JobContext, OptionSpec, Options, Result, RowKind, Sink, SinkDelivery,
    SinkFactory, SinkWriter, TableSchema, WriterContext,
};
use serde_json::Value;

use ferry_api::javatext::append_column;

const COMPONENT: &str = "Console";

ferry_api::declare_options! {
    /// The `Console` sink's options.
    struct ConsoleOptions => SPECS {
        /// Whether rows are printed at all.
        print: bool = "log.print.data", default true;
        /// Pause after each row, in milliseconds (rows are then printed one by one).
        delay_ms: u64 = "log.print.delay.ms", default 0;
        /// SeaTunnel's writer replicas per table; accepted for compatibility, Ferry uses the
        /// sink's parallelism.
        _replica: i64 = "multi_table_sink_replica", default 1;
    }
}

/// Creates `Console` sinks.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConsoleSinkFactory;

impl SinkFactory for ConsoleSinkFactory {
    fn name(&self) -> &'static str {
        "Console"
    }

    fn description(&self) -> &'static str {
        "Prints every row, with its table and row kind, to standard output"
    }

    fn options(&self) -> &'static [OptionSpec] {
        SPECS
    }

    fn create(
        &self,
        options: &mut Options,
        input: &[TableSchema],
        _job: &JobContext,
    ) -> Result<Arc<dyn Sink>> {
        let o = ConsoleOptions::read(options)?;
        options.finish(SPECS)?;
        Ok(Arc::new(ConsoleSink {
            print: o.print,
            delay: Duration::from_millis(o.delay_ms),
            input: input.to_vec(),
            out: Output::Stdout,
        }))
    }
}

/// A configured `Console` sink.
#[derive(Debug)]
pub struct ConsoleSink {
    print: bool,
    delay: Duration,
    input: Vec<TableSchema>,
    out: Output,
}

/// Where the rows go: standard output, or (in tests) a buffer the test reads back.
#[derive(Debug, Clone)]
enum Output {
    Stdout,
    #[cfg(test)]
    Buffer(Arc<std::sync::Mutex<Vec<u8>>>),
}

impl Output {
    fn write(&self, text: &str) -> std::io::Result<()> {
        match self {
            Output::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(text.as_bytes())?;
                out.flush()
            }
            #[cfg(test)]
            Output::Buffer(b) => {
                b.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .extend_from_slice(text.as_bytes());
                Ok(())
            }
        }
    }
}

/// A Console writer's state in a checkpoint: rows numbered so far, so that numbering
/// continues after a restore.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct WriterState {
    row_index: u64,
}

impl Sink for ConsoleSink {
    fn delivery(&self) -> SinkDelivery {
        SinkDelivery::AtLeastOnce
    }

    fn create_writer(
        &self,
        ctx: &WriterContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SinkWriter>> {
        // SeaTunnel logs each table's row type when a writer starts.
        for t in &self.input {
            let fields: Vec<String> = t
                .schema
                .fields()
                .iter()
                .map(|f| {
                    format!(
                        "{}<{}>",
                        f.name(),
                        ferry_api::types::type_name(f.data_type()).to_ascii_uppercase()
                    )
                })
                .collect();
            tracing::info!(
                "Console subtask {}: output rowType of {}: {}",
                ctx.subtask,
                t.name,
                fields.join(", ")
            );
        }
        // The row index continues after a restore, as the printed numbering would otherwise repeat.
        let row_index = match &restored {
            Some(v) => ferry_api::decode_state::<WriterState>(v, "a Console writer")?.row_index,
            None => 0,
        };
        Ok(Box::new(ConsoleWriter {
            subtask: ctx.subtask,
            print: self.print,
            delay: self.delay,
            out: self.out.clone(),
            row_index,
            lines: Vec::new(),
            text: String::new(),
        }))
    }
}

/// Prints the batches it is given.
#[derive(Debug)]
pub struct ConsoleWriter {
    subtask: usize,
    print: bool,
    delay: Duration,
    out: Output,
    row_index: u64,
    /// One line per row of the current batch, reused across batches.
    lines: Vec<String>,
    /// The rendered batch, reused across batches.
    text: String,
}

impl ConsoleWriter {
    /// Renders `batch` as the lines SeaTunnel prints, one per row, each ending in a
    /// newline, numbering rows after those already rendered. Column-wise: each column's
    /// type is matched once per batch.
    pub fn render(&mut self, batch: &ChangeBatch) -> &str {
        let n = batch.num_rows();
        self.lines.resize_with(n, String::new);
        self.lines.truncate(n);
        for (r, line) in self.lines.iter_mut().enumerate() {
            use std::fmt::Write as _;
            line.clear();
            self.row_index += 1;
            let kind = if batch.kinds.is_none() {
                RowKind::Insert
            } else {
                batch.kind(r)
            };
            let _ = write!(
                line,
                "subtaskIndex={}  rowIndex={}:  SeaTunnelRow#tableId={} SeaTunnelRow#kind={} : ",
                self.subtask,
                self.row_index,
                batch.table,
                kind.name()
            );
        }
        for (c, column) in batch.data.columns().iter().enumerate() {
            if c > 0 {
                self.lines.iter_mut().for_each(|l| l.push_str(", "));
            }
            append_column(column.as_ref(), &mut self.lines);
        }
        self.text.clear();
        for line in &self.lines {
            self.text.push_str(line);
            self.text.push('\n');
        }
        &self.text
    }
}

fn stdout_error(e: std::io::Error) -> FerryError {
    FerryError::external(COMPONENT, format!("cannot write to standard output: {e}"))
}

impl SinkWriter for ConsoleWriter {
    fn write(&mut self, batch: &ChangeBatch) -> Result<()> {
        let n = batch.num_rows();
        if !self.print {
            self.row_index += n as u64;
            if !self.delay.is_zero() {
                std::thread::sleep(self.delay.saturating_mul(n as u32));
            }
            return Ok(());
        }
        if self.delay.is_zero() {
            // One locked write per batch: no per-row flush.
            self.render(batch);
            return self.out.write(&self.text).map_err(stdout_error);
        }
        // With a delay, rows appear one at a time, as SeaTunnel sleeps after each row.
        self.render(batch);
        for line in self.text.split_inclusive('\n') {
            self.out.write(line).map_err(stdout_error)?;
            std::thread::sleep(self.delay);
        }
        Ok(())
    }

    fn prepare_commit(&mut self, _checkpoint_id: u64) -> Result<Option<Value>> {
        Ok(None)
    }

    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Option<Value>> {
        let state = WriterState {
            row_index: self.row_index,
        };
        Ok(Some(ferry_api::encode_state(&state, "a Console writer")?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, RecordBatch, UInt8Array};
    use arrow::datatypes::{Field, Schema};
    use ferry_api::types::parse_type;
    use ferry_api::value::json_to_array;
    use ferry_api::JobMode;
    use serde_json::json;

    fn batch(types: &[(&str, &str)], rows: &[Value]) -> RecordBatch {
        let fields: Vec<Field> = types
            .iter()
            .map(|(n, t)| Field::new(*n, parse_type(t).unwrap(), true))
            .collect();
        let columns: Vec<ArrayRef> = types
            .iter()
            .enumerate()
            .map(|(c, (_, t))| {
                let vals: Vec<&Value> = rows.iter().map(|r| &r[c]).collect();
                json_to_array(&vals, &parse_type(t).unwrap()).unwrap()
            })
            .collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    fn writer(subtask: usize, restored: Option<Value>) -> ConsoleWriter {
        let row_index = restored
            .as_ref()
            .and_then(|v| v.get("row_index"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        ConsoleWriter {
            subtask,
            print: true,
            delay: Duration::ZERO,
            out: Output::Stdout,
            row_index,
            lines: Vec::new(),
            text: String::new(),
        }
    }

    #[test]
    fn rows_print_in_seatunnels_layout_with_kinds_and_numbering() {
        let data = batch(
            &[
                ("name", "string"),
                ("age", "int"),
                ("tags", "array<int>"),
                ("m", "map<string, string>"),
            ],
            &[
                json!(["ab", 1, [1, 2], {"k": "v"}]),
                json!([null, null, null, null]),
            ],
        );
        let mut w = writer(1, None);
        let b = ChangeBatch::with_kinds("fake".into(), data.clone(), UInt8Array::from(vec![0, 3]));
        assert_eq!(
            w.render(&b),
            "subtaskIndex=1  rowIndex=1:  SeaTunnelRow#tableId=fake SeaTunnelRow#kind=INSERT : ab, 1, [1, 2], {\"k\":\"v\"}\n\
             subtaskIndex=1  rowIndex=2:  SeaTunnelRow#tableId=fake SeaTunnelRow#kind=DELETE : null, null, null, null\n"
        );
        // Numbering continues across batches; a smaller batch leaves no stale lines.
        let one = ChangeBatch::inserts("t2".into(), data.slice(0, 1));
        assert_eq!(
            w.render(&one),
            "subtaskIndex=1  rowIndex=3:  SeaTunnelRow#tableId=t2 SeaTunnelRow#kind=INSERT : ab, 1, [1, 2], {\"k\":\"v\"}\n"
        );
    }

    #[test]
    fn every_type_is_formatted() {
        let types = [
            ("c_null", "null"),
            ("c_string", "string"),
            ("c_boolean", "boolean"),
            ("c_tinyint", "tinyint"),
            ("c_smallint", "smallint"),
            ("c_int", "int"),
            ("c_bigint", "bigint"),
            ("c_float", "float"),
            ("c_double", "double"),
            ("c_decimal", "decimal(30, 8)"),
            ("c_date", "date"),
            ("c_timestamp", "timestamp"),
            ("c_time", "time"),
            ("c_bytes", "bytes"),
            ("c_array", "array<int>"),
            ("c_map", "map<date, string>"),
            (
                "c_map_nest",
                "map<string, {c_int = int, c_string = string}>",
            ),
            (
                "c_row",
                "{c_string = string, c_float = float, c_map = map<string, string>}",
            ),
        ];
        let row = json!([
            null, "AAA", false, 1, 1, 333, 323232, 3.1, 9.33333, 99999.99999999, "2012-12-21", "2012-12-21T12:34:56",
            "12:34:56", "bWlJWmo=", [0, 1, 2], {"2024-01-26": "v0"}, {"k1": [123, "BBB-BB"]}, ["AAA", 3.1, {"k0": "v0"}]
        ]);
        let mut w = writer(0, None);
        let text = w
            .render(&ChangeBatch::inserts("fake".into(), batch(&types, &[row])))
            .to_string();
        assert_eq!(
            text,
            "subtaskIndex=0  rowIndex=1:  SeaTunnelRow#tableId=fake SeaTunnelRow#kind=INSERT : \
             null, AAA, false, 1, 1, 333, 323232, 3.1, 9.33333, 99999.99999999, 2012-12-21, 2012-12-21T12:34:56, \
             12:34:56, [109, 105, 73, 90, 106], [0, 1, 2], {\"2024-01-26\":\"v0\"}, {\"k1\":[123,\"BBB-BB\"]}, \
             [AAA, 3.1, {\"k0\":\"v0\"}]\n"
        );
    }

    #[test]
    fn restored_writer_continues_numbering_and_options_are_checked() {
        let mut w = writer(0, Some(json!({"row_index": 41})));
        let data = batch(&[("a", "int")], &[json!([7])]);
        assert!(w
            .render(&ChangeBatch::inserts("t".into(), data))
            .contains("rowIndex=42:"));
        assert_eq!(w.snapshot(1).unwrap(), Some(json!({"row_index": 42})));

        let job = JobContext {
            mode: JobMode::Batch,
            ..Default::default()
        };
        let mut o = Options::from_json(
            "Console",
            json!({"log.print.data": false, "log": {"print": {"delay": {"ms": 0}}}}),
        );
        ConsoleSinkFactory.create(&mut o, &[], &job).unwrap();
        let mut o = Options::from_json("Console", json!({"log.print.dta": false}));
        let e = ConsoleSinkFactory
            .create(&mut o, &[], &job)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("option 'log.print.dta': unknown option (did you mean 'log.print.data'?"),
            "{e}"
        );
        let mut o = Options::from_json("Console", json!({"log.print.delay.ms": -1}));
        let e = ConsoleSinkFactory
            .create(&mut o, &[], &job)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("option 'log.print.delay.ms': must not be negative, found -1"),
            "{e}"
        );
    }

    #[test]
    fn silent_writer_counts_rows_without_printing() {
        let sink = ConsoleSink {
            print: false,
            delay: Duration::ZERO,
            input: vec![],
            out: Output::Stdout,
        };
        let ctx = WriterContext {
            subtask: 0,
            parallelism: 1,
            job: JobContext::default(),
            attempt: "a".into(),
        };
        let mut w = sink.create_writer(&ctx, None).unwrap();
        let data = batch(&[("a", "int")], &[json!([1]), json!([2])]);
        w.write(&ChangeBatch::inserts("t".into(), data)).unwrap();
        assert_eq!(w.snapshot(1).unwrap(), Some(json!({"row_index": 2})));
    }

    /// The printed lines read back as rows of the kit's `t (id bigint, name string)`.
    fn printed_rows(out: &std::sync::Mutex<Vec<u8>>) -> Result<Vec<ChangeBatch>> {
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        let (mut ids, mut names) = (Vec::new(), Vec::new());
        for line in text.lines() {
            let (head, values) = line.split_once(" : ").unwrap();
            assert!(
                head.contains("SeaTunnelRow#tableId=t SeaTunnelRow#kind=INSERT"),
                "{line}"
            );
            let (id, name) = values.split_once(", ").unwrap();
            ids.push(id.parse::<i64>().unwrap());
            names.push(name.to_string());
        }
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", arrow::datatypes::DataType::Int64, true),
            Field::new("name", arrow::datatypes::DataType::Utf8, true),
        ]));
        let data = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(arrow::array::Int64Array::from(ids)),
                Arc::new(arrow::array::StringArray::from(names)),
            ],
        )
        .unwrap();
        Ok(vec![ChangeBatch::inserts("t".into(), data)])
    }

    #[test]
    fn every_row_is_printed_at_least_once_through_crashes_and_restores() {
        let out = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (table, input) = ferry_connector_testkit::id_name_batches(8, 25, "row");
        let make = || -> Result<Arc<dyn Sink>> {
            Ok(Arc::new(ConsoleSink {
                print: true,
                delay: Duration::ZERO,
                input: vec![table.clone()],
                out: Output::Buffer(out.clone()),
            }))
        };
        ferry_connector_testkit::check_sink(
            SinkDelivery::AtLeastOnce,
            &make,
            2,
            ferry_connector_testkit::job(JobMode::Streaming),
            &input,
            &|| printed_rows(&out),
        )
        .unwrap();
    }
}
