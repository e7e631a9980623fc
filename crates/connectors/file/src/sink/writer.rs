//! One subtask's writer: renders rows in the configured format, groups them by
//! partition directory, rolls files, and stages them for the committer.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, StringArray, UInt32Array};
use arrow::datatypes::DataType;
use ferry_api::value::{array_value_to_json, RowStyle};
use ferry_api::{encode_state, FerryError, Result, SinkWriter};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

/// Largest dictionary page of a Parquet column chunk before it falls back to plain
/// encoding (see where the writer properties are built).
#[cfg(not(test))]
const DICTIONARY_PAGE_LIMIT: usize = 128 << 10;
/// Below the test row groups' size, so that a unit test sees the fallback.
#[cfg(test)]
const DICTIONARY_PAGE_LIMIT: usize = 16 << 10;

/// A Parquet row group ends once its encoded columns reach this size (or at the writer's
/// 1,048,576-row default, whichever comes first). Without it a wide table's row group held
/// a million rows of encoded pages in memory per open file.
#[cfg(not(test))]
const PARQUET_ROW_GROUP_BYTES: usize = 64 << 20;
/// Small enough that a unit test's file has several row groups.
#[cfg(test)]
const PARQUET_ROW_GROUP_BYTES: usize = 64 << 10;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::lzo::LzopWriter;
use crate::read::{Format, COMPONENT};
use crate::text::Enc;

use super::commit::CommitInfo;
use super::config::*;
use super::formats::*;
use super::STAGING_DIR;

/// A writer's snapshot: the checkpoint its files were last prepared for, from which a
/// restored writer numbers its files and cleans up what a crash left staged.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct WriterState {
    pub(super) checkpoint: u64,
}

/// One subtask's writer. Keeps, per input table, its open files by partition directory.
pub(super) struct FileWriter {
    pub(super) cfg: Arc<SinkConfig>,
    pub(super) subtask: usize,
    pub(super) attempt: String,
    /// Names this writer's files until the next prepared commit; above every
    /// checkpoint id already prepared.
    pub(super) seq: u64,
    pub(super) last_checkpoint: Option<u64>,
    /// Per table: open files by partition directory.
    pub(super) open: Vec<HashMap<String, OpenOut>>,
    /// Per table: files opened so far per partition directory in this checkpoint.
    pub(super) rolls: Vec<HashMap<String, u32>>,
    /// Per output directory (`cfg.roots`): whether this checkpoint staged a file there.
    pub(super) staged_roots: Vec<bool>,
    /// Files closed since the last prepared commit: (staged, final).
    pub(super) done: Vec<(PathBuf, PathBuf)>,
    pub(super) line: String,
}

impl FileWriter {
    pub(super) fn subtask_dir(&self, root: &Path) -> PathBuf {
        root.join(STAGING_DIR)
            .join(&self.cfg.job_id)
            .join(self.subtask.to_string())
    }

    pub(super) fn stage_dir(&self, root: &Path) -> PathBuf {
        self.subtask_dir(root)
            .join(&self.attempt)
            .join(self.seq.to_string())
    }

    /// Removes what earlier attempts of this subtask staged after the checkpoint this
    /// writer restarts from: those rows were never committed and will be written again.
    /// Staged files of checkpoints up to it may still await their (repeated) commit.
    pub(super) fn clean_stale_staging(&self, restored_cp: Option<u64>) -> Result<()> {
        for root in &self.cfg.roots {
            let dir = self.subtask_dir(root);
            let Ok(attempts) = std::fs::read_dir(&dir) else {
                continue;
            };
            for a in attempts.flatten() {
                let Ok(seqs) = std::fs::read_dir(a.path()) else {
                    continue;
                };
                for s in seqs.flatten() {
                    let seq = s.file_name().to_string_lossy().parse::<u64>().ok();
                    if restored_cp.is_none() || seq.is_none_or(|n| Some(n) > restored_cp) {
                        let p = s.path();
                        std::fs::remove_dir_all(&p).map_err(|e| io_err(&p, e))?;
                    }
                }
                let _ = std::fs::remove_dir(a.path()); // only when empty
            }
        }
        Ok(())
    }

    pub(super) fn file_name(&self, table: &TableConfig, roll: u32) -> String {
        let mut tid = format!(
            "T_{}_{}_{}_{}",
            self.cfg.job_id, self.attempt, self.subtask, self.seq
        );
        if let Some(tag) = &table.tag {
            tid.push('_');
            tid.push_str(tag);
        }
        let mut name = table.name_expression.clone();
        if !name.contains("${transactionId}") {
            name = format!("${{transactionId}}_{name}");
        }
        if name.contains("${now}") {
            let now = chrono::Local::now()
                .format(&self.cfg.time_format)
                .to_string();
            name = name.replace("${now}", &now);
        }
        if name.contains("${uuid}") {
            name = name.replace("${uuid}", &uuid::Uuid::new_v4().to_string());
        }
        name = name.replace("${transactionId}", &tid);
        if roll > 0 {
            name.push_str(&format!("_{roll}"));
        }
        name.push_str(&table.extension);
        name
    }

    pub(super) fn open_file(&mut self, t: usize, part: &str) -> Result<OpenOut> {
        let cfg = self.cfg.clone();
        let table = &cfg.tables[t];
        let roll = *self.rolls[t].get(part).unwrap_or(&0);
        let name = self.file_name(table, roll);
        self.rolls[t].insert(part.to_string(), roll + 1);
        let target = table.root.join(part).join(&name);
        let staged = if cfg.transactional {
            if let Some(r) = cfg.roots.iter().position(|r| *r == table.root) {
                self.staged_roots[r] = true;
            }
            self.stage_dir(&table.root).join(part).join(&name)
        } else {
            target.clone()
        };
        if let Some(parent) = staged.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
        }
        let file = BufWriter::with_capacity(
            1 << 20,
            File::create(&staged).map_err(|e| io_err(&staged, e))?,
        );
        let out = match cfg.format {
            Format::Parquet => {
                let props = WriterProperties::builder()
                    .set_compression(cfg.parquet_codec)
                    // A column falls back from dictionary to plain encoding once its
                    // dictionary outgrows this. The parquet crate's 1 MiB kept interning
                    // nearly unique columns for 100k+ values per row group: 128 KiB wrote
                    // the Jdbc benchmark's 16 columns in a fifth less time and 3 % smaller,
                    // while columns of few values stay dictionary-encoded
                    // (bench/results/parquet-dictionary.md).
                    .set_dictionary_page_size_limit(DICTIONARY_PAGE_LIMIT)
                    .build();
                Out::Parquet(Box::new(
                    ArrowWriter::try_new(file, table.write_schema.clone(), Some(props))
                        .map_err(|e| io_err(&staged, e))?,
                ))
            }
            _ => {
                let mut t = match cfg.text_codec {
                    TextCodec::None => TextOut::Plain(file),
                    TextCodec::Lzo => {
                        TextOut::Lzo(LzopWriter::new(file).map_err(|e| io_err(&staged, e))?)
                    }
                };
                if cfg.header && cfg.format != Format::Json {
                    let names: Vec<&str> = table
                        .write_schema
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect();
                    let line = format!("{}{}", names.join(&cfg.field_delimiter), cfg.row_delimiter);
                    t.write_all(&self.encode(&line))
                        .map_err(|e| io_err(&staged, e))?;
                }
                Out::Text(t)
            }
        };
        Ok(OpenOut {
            out,
            rows: 0,
            staged,
            target,
        })
    }

    pub(super) fn encode<'a>(&self, s: &'a str) -> std::borrow::Cow<'a, [u8]> {
        match self.cfg.encoding {
            None => std::borrow::Cow::Borrowed(s.as_bytes()),
            Some(enc) => match enc.encode(s).0 {
                std::borrow::Cow::Borrowed(b) => std::borrow::Cow::Borrowed(b),
                std::borrow::Cow::Owned(b) => std::borrow::Cow::Owned(b),
            },
        }
    }

    /// Renders `batch` as text, csv or json lines into `self.line`.
    pub(super) fn render(&mut self, batch: &RecordBatch) -> Result<()> {
        let cfg = self.cfg.clone();
        let line = &mut self.line;
        line.clear();
        if cfg.format == Format::Json {
            if let Some(w) = ferry_formats::json_rows::JsonRowWriter::new(batch) {
                // Straight from the columns into the line buffer's bytes, checked once.
                let mut bytes = std::mem::take(line).into_bytes();
                for i in 0..batch.num_rows() {
                    w.write(i, &mut bytes);
                    bytes.extend_from_slice(cfg.row_delimiter.as_bytes());
                }
                *line = String::from_utf8(bytes)
                    .map_err(|e| FerryError::internal(format!("json rows are not UTF-8: {e}")))?;
                return Ok(());
            }
            for i in 0..batch.num_rows() {
                let mut m = Map::new();
                for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
                    m.insert(
                        f.name().clone(),
                        array_value_to_json(c.as_ref(), i, RowStyle::Named),
                    );
                }
                line.push_str(&Value::Object(m).to_string());
                line.push_str(&cfg.row_delimiter);
            }
            return Ok(());
        }
        let encs = batch
            .columns()
            .iter()
            .map(|c| Enc::new(c.as_ref()))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| FerryError::data(COMPONENT, e))?;
        let csv = cfg.format == Format::Csv;
        for i in 0..batch.num_rows() {
            for (n, e) in encs.iter().enumerate() {
                if n > 0 {
                    line.push_str(&cfg.field_delimiter);
                }
                let start = line.len();
                e.write(i, 0, line)
                    .map_err(|e| FerryError::data(COMPONENT, e))?;
                if csv {
                    let v = &line[start..];
                    if v.contains(cfg.field_delimiter.as_str()) || v.contains(['"', '\n', '\r']) {
                        let quoted = format!("\"{}\"", v.replace('"', "\"\""));
                        line.truncate(start);
                        line.push_str(&quoted);
                    }
                }
            }
            line.push_str(&cfg.row_delimiter);
        }
        Ok(())
    }

    pub(super) fn write_part(&mut self, t: usize, part: &str, batch: &RecordBatch) -> Result<()> {
        let mut offset = 0;
        while offset < batch.num_rows() {
            let room = match self.open[t].get(part) {
                _ if self.cfg.single_file => usize::MAX,
                Some(o) => (self.cfg.batch_size.saturating_sub(o.rows)).max(1) as usize,
                None => self.cfg.batch_size as usize,
            };
            let n = room.min(batch.num_rows() - offset);
            self.write_slice(t, part, &batch.slice(offset, n))?;
            offset += n;
        }
        Ok(())
    }

    pub(super) fn write_slice(&mut self, t: usize, part: &str, batch: &RecordBatch) -> Result<()> {
        let mut out = match self.open[t].remove(part) {
            Some(o) => o,
            None => self.open_file(t, part)?,
        };
        let res = match &mut out.out {
            Out::Parquet(w) => w
                .write(batch)
                .and_then(|()| {
                    // Row groups by size, as Spark's parquet.block.size: the writer holds
                    // a row group's encoded columns in memory until it ends.
                    if w.in_progress_size() >= PARQUET_ROW_GROUP_BYTES {
                        w.flush()
                    } else {
                        Ok(())
                    }
                })
                .map_err(|e| io_err(&out.staged, e)),
            Out::Text(t) => {
                self.render(batch)?;
                let bytes = self.encode(&self.line).into_owned();
                t.write_all(&bytes).map_err(|e| io_err(&out.staged, e))
            }
        };
        out.rows += batch.num_rows() as u64;
        res?;
        if !self.cfg.single_file && out.rows >= self.cfg.batch_size {
            self.close_out(out)?;
        } else {
            self.open[t].insert(part.to_string(), out);
        }
        Ok(())
    }

    pub(super) fn close_out(&mut self, o: OpenOut) -> Result<()> {
        match o.out {
            Out::Parquet(w) => {
                w.close().map_err(|e| io_err(&o.staged, e))?;
            }
            Out::Text(t) => t.finish().map_err(|e| io_err(&o.staged, e))?,
        }
        self.done.push((o.staged, o.target));
        Ok(())
    }

    /// Closes every open file of every table.
    pub(super) fn close_all(&mut self) -> Result<()> {
        for t in 0..self.open.len() {
            let open: Vec<OpenOut> = self.open[t].drain().map(|(_, o)| o).collect();
            for o in open {
                self.close_out(o)?;
            }
        }
        Ok(())
    }

    /// The partition directory of each group of rows of table `t`, with the rows' indices.
    pub(super) fn partition_groups(
        &self,
        t: usize,
        batch: &RecordBatch,
    ) -> Result<Vec<(String, UInt32Array)>> {
        let cols: Vec<ArrayRef> = self.cfg.tables[t]
            .partition_cols
            .iter()
            .map(|i| {
                let c = batch.column(*i);
                if c.data_type() == &DataType::Utf8 {
                    Ok(c.clone())
                } else {
                    arrow::compute::cast(c, &DataType::Utf8)
                }
            })
            .collect::<std::result::Result<_, _>>()?;
        let strs: Vec<&StringArray> = cols
            .iter()
            .filter_map(|c| c.as_any().downcast_ref::<StringArray>())
            .collect();
        let mut groups: HashMap<String, Vec<u32>> = HashMap::new();
        let mut order: Vec<String> = Vec::new();
        let mut key = String::new();
        for r in 0..batch.num_rows() {
            key.clear();
            for (n, s) in strs.iter().enumerate() {
                if n > 0 {
                    key.push('\u{0}');
                }
                key.push_str(if s.is_null(r) { "null" } else { s.value(r) });
            }
            match groups.get_mut(&key) {
                Some(v) => v.push(r as u32),
                None => {
                    groups.insert(key.clone(), vec![r as u32]);
                    order.push(key.clone());
                }
            }
        }
        let mut out = Vec::with_capacity(order.len());
        for k in order {
            let values: Vec<&str> = k.split('\u{0}').collect();
            let dir = self.partition_dir(t, &values);
            if let Some(rows) = groups.remove(&k) {
                out.push((dir, UInt32Array::from(rows)));
            }
        }
        Ok(out)
    }

    pub(super) fn partition_dir(&self, t: usize, values: &[&str]) -> String {
        let names = &self.cfg.partition_names;
        let expression = &self.cfg.tables[t].partition_expression;
        if expression == DEFAULT_PARTITION_DIR_EXPRESSION {
            return names
                .iter()
                .zip(values)
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("/");
        }
        let mut dir = expression.clone();
        // Highest index first so that ${k1} does not eat the start of ${k10}.
        for (i, (k, v)) in names.iter().zip(values).enumerate().rev() {
            dir = dir
                .replace(&format!("${{k{i}}}"), k)
                .replace(&format!("${{v{i}}}"), v);
        }
        dir.trim_matches('/').to_string()
    }

    /// The index of the table `batch` belongs to.
    pub(super) fn table_of(&self, batch: &ferry_api::ChangeBatch) -> Result<usize> {
        // A single input table takes every batch, whatever the stream calls it.
        if self.cfg.tables.len() == 1 {
            return Ok(0);
        }
        self.cfg.by_name.get(&batch.table).copied().ok_or_else(|| {
            FerryError::internal(format!(
                "LocalFile sink got rows of table '{}', which is not among its input tables ({})",
                batch.table,
                self.cfg
                    .tables
                    .iter()
                    .map(|t| t.name.as_ref())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
    }
}

impl SinkWriter for FileWriter {
    fn write(&mut self, batch: &ferry_api::ChangeBatch) -> Result<()> {
        let t = self.table_of(batch)?;
        let cfg = self.cfg.clone();
        let table = &cfg.tables[t];
        let data = batch.data.project(&table.write_cols)?;
        let data = if data.schema().fields() != table.write_schema.fields() {
            data.with_schema(table.write_schema.clone())?
        } else {
            data
        };
        if table.partition_cols.is_empty() {
            return self.write_part(t, "", &data);
        }
        for (dir, rows) in self.partition_groups(t, &batch.data)? {
            let part = arrow::compute::take_record_batch(&data, &rows)?;
            self.write_part(t, &dir, &part)?;
        }
        Ok(())
    }

    fn prepare_commit(&mut self, checkpoint_id: u64) -> Result<Option<Value>> {
        self.close_all()?;
        let files = std::mem::take(&mut self.done);
        let stage_dirs: Vec<String> = self
            .cfg
            .roots
            .iter()
            .zip(&self.staged_roots)
            .filter(|(_, staged)| **staged)
            .map(|(root, _)| self.stage_dir(root).to_string_lossy().into_owned())
            .collect();
        self.staged_roots.iter_mut().for_each(|s| *s = false);
        self.rolls.iter_mut().for_each(HashMap::clear);
        self.seq = (self.seq + 1).max(checkpoint_id + 1);
        self.last_checkpoint = Some(checkpoint_id);
        if !self.cfg.transactional || files.is_empty() {
            return Ok(None);
        }
        let info = CommitInfo {
            stage_dirs: Some(stage_dirs),
            stage_dir: None,
            files: files
                .iter()
                .map(|(s, t)| {
                    (
                        s.to_string_lossy().into_owned(),
                        t.to_string_lossy().into_owned(),
                    )
                })
                .collect(),
        };
        encode_state(&info, "a LocalFile commit").map(Some)
    }

    fn snapshot(&mut self, checkpoint_id: u64) -> Result<Option<Value>> {
        let state = WriterState {
            checkpoint: self.last_checkpoint.unwrap_or(checkpoint_id),
        };
        encode_state(&state, "a LocalFile writer").map(Some)
    }

    fn abort(&mut self) -> Result<()> {
        for open in &mut self.open {
            for (_, o) in open.drain() {
                drop(o.out);
                let _ = std::fs::remove_file(&o.staged);
            }
        }
        for (staged, _) in self.done.drain(..) {
            let _ = std::fs::remove_file(&staged);
        }
        if self.cfg.transactional {
            for root in &self.cfg.roots {
                let _ = std::fs::remove_dir_all(self.stage_dir(root));
            }
        }
        self.staged_roots.iter_mut().for_each(|s| *s = false);
        Ok(())
    }

    fn close(&mut self) -> Result<()> {
        // Anything not prepared is not committed: close the files so none stays open.
        self.close_all()
    }
}
