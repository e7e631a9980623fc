//! The configured source: splits like SeaTunnel's FakeSourceSplitEnumerator, reading like
//! its FakeSourceReader, with per-split progress so that checkpoints resume mid-split.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Array, ArrayRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use chrono::Datelike;
use ferry_api::{
    decode_state, encode_state, Boundedness, ChangeBatch, EnumeratorContext, FerryError, JobMode,
    ReadStatus, ReaderContext, Result, Source, SourceReader, Split, SplitEnumerator, TableSchema,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::{ColumnGen, TableConfig};
use crate::generate::generate;

/// Rows per batch, and per independently seeded block of a split.
pub const BATCH_ROWS: usize = 8192;

/// How long an idle reader asks to wait before it is polled again.
const IDLE: Duration = Duration::from_millis(100);

/// The configured FakeSource: one or more tables.
#[derive(Debug)]
pub struct FakeSource {
    pub(crate) tables: Arc<Vec<TableConfig>>,
    pub(crate) mode: JobMode,
}

/// A split's state: which table and piece, its size, and how far reading has got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SplitState {
    /// The table's name.
    table: String,
    /// SeaTunnel's split index; splits `i, i + P, i + 2P, …` belong to reader `i`.
    index: u64,
    /// Rows the split generates (ignored with explicit `rows`: each split yields them all).
    rows: u64,
    /// Rows already returned.
    emitted: u64,
    /// The year generated dates fall in unless templated: fixed when the split is made, so
    /// a split read again after a restart in a new year yields the same rows.
    year: i32,
}

impl SplitState {
    fn to_split(&self) -> Result<Split> {
        Split::typed(format!("{}_{}", self.table, self.index), self)
    }

    fn from_split(s: &Split) -> Result<Self> {
        s.read_state()
    }
}

impl Source for FakeSource {
    fn boundedness(&self) -> Boundedness {
        match self.mode {
            JobMode::Batch => Boundedness::Bounded,
            JobMode::Streaming => Boundedness::Unbounded,
        }
    }

    fn tables(&self) -> Vec<TableSchema> {
        self.tables
            .iter()
            .map(|t| {
                TableSchema::new(t.name.clone(), t.schema.clone()).with_catalog(t.catalog.clone())
            })
            .collect()
    }

    fn create_enumerator(
        &self,
        ctx: &EnumeratorContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SplitEnumerator>> {
        let parallelism = ctx.parallelism.max(1);
        let state = match restored {
            None | Some(Value::Null) => None,
            Some(v) => Some(decode_state::<EnumeratorState>(
                &v,
                "the FakeSource enumerator",
            )?),
        };
        Ok(Box::new(FakeEnumerator {
            tables: self.tables.clone(),
            parallelism,
            state: state.unwrap_or_default(),
        }))
    }

    fn create_reader(&self, _ctx: &ReaderContext) -> Result<Box<dyn SourceReader>> {
        let by_name = self
            .tables
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.to_string(), i))
            .collect();
        let interval = self
            .tables
            .iter()
            .map(|t| t.read_interval_ms)
            .min()
            .unwrap_or(1);
        Ok(Box::new(FakeReader {
            tables: self.tables.clone(),
            by_name,
            interval: Duration::from_millis(interval),
            bounded: self.mode == JobMode::Batch,
            splits: VecDeque::new(),
            current_started: false,
            last_start: None,
            no_more_splits: false,
        }))
    }
}

/// What the enumerator keeps in a checkpoint: whether splits were computed, and those not
/// yet handed to a reader.
#[derive(Debug, Default, Serialize, Deserialize)]
struct EnumeratorState {
    discovered: bool,
    pending: Vec<SplitState>,
}

struct FakeEnumerator {
    tables: Arc<Vec<TableConfig>>,
    parallelism: usize,
    state: EnumeratorState,
}

impl FakeEnumerator {
    /// SeaTunnel's split plan: each reader gets `row.num` rows of each table, cut into
    /// pieces of `ceil(row.num / split.num)` rows.
    fn plan(&self) -> Vec<SplitState> {
        let p = self.parallelism as u64;
        let year = chrono::Local::now().year();
        let mut out = Vec::new();
        for t in self.tables.iter() {
            let per_split = t.row_num.div_ceil(t.split_num).max(1);
            for reader in 0..p {
                let mut index = reader;
                let mut num = 0;
                while num < t.row_num {
                    let rows = per_split.min(t.row_num - num);
                    out.push(SplitState {
                        table: t.name.to_string(),
                        index,
                        rows,
                        emitted: 0,
                        year,
                    });
                    index += p;
                    num += per_split;
                }
            }
        }
        out
    }
}

impl SplitEnumerator for FakeEnumerator {
    fn discover(&mut self) -> Result<Vec<(usize, Split)>> {
        if !self.state.discovered {
            self.state.pending = self.plan();
            self.state.discovered = true;
        }
        let p = self.parallelism as u64;
        std::mem::take(&mut self.state.pending)
            .into_iter()
            .map(|s| Ok(((s.index % p) as usize, s.to_split()?)))
            .collect()
    }

    fn is_exhausted(&self) -> bool {
        self.state.discovered && self.state.pending.is_empty()
    }

    fn add_splits_back(&mut self, splits: Vec<Split>, _reader: usize) {
        for s in splits {
            match SplitState::from_split(&s) {
                Ok(st) => self.state.pending.push(st),
                // Only this source makes these splits; an unreadable one cannot be read
                // again either, so it is dropped rather than failing the job here.
                Err(e) => tracing::warn!("FakeSource: split given back is dropped: {e}"),
            }
        }
    }

    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Value> {
        encode_state(&self.state, "the FakeSource enumerator")
    }
}

struct FakeReader {
    tables: Arc<Vec<TableConfig>>,
    by_name: HashMap<String, usize>,
    interval: Duration,
    bounded: bool,
    /// Owned splits, the one being read first.
    splits: VecDeque<SplitState>,
    /// Whether the front split has started (its read interval has been waited out).
    current_started: bool,
    /// When the last split started, to space splits by the read interval.
    last_start: Option<Instant>,
    no_more_splits: bool,
}

/// Mixes the parts of a block's identity into one RNG seed (splitmix64 steps).
fn block_seed(seed: u64, table: &str, split: u64, block: u64) -> u64 {
    fn mix(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    // FNV-1a of the table name, so that tables of one source differ.
    let name = table.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    mix(mix(mix(mix(seed) ^ name) ^ split) ^ block)
}

/// The rows `[from, from + len)` of a split of `table`, generated block by block.
pub(crate) fn split_rows(
    table: &TableConfig,
    split: &SplitState,
    from: u64,
    len: usize,
) -> Result<ChangeBatch> {
    if let Some(fixed) = &table.rows {
        let data = fixed.data.slice(from as usize, len);
        let kinds = fixed.kinds.slice(from as usize, len);
        return Ok(ChangeBatch::with_kinds(table.name.clone(), data, kinds));
    }
    let block = from / BATCH_ROWS as u64;
    let block_start = block * BATCH_ROWS as u64;
    let block_len = (split.rows - block_start).min(BATCH_ROWS as u64) as usize;
    let skip = (from - block_start) as usize;
    let mut rng =
        ChaCha8Rng::seed_from_u64(block_seed(table.seed, &table.name, split.index, block));
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(table.columns.len());
    for (f, g) in table.schema.fields().iter().zip(&table.columns) {
        let a = match g {
            ColumnGen::Random { string_length } => generate(
                &mut rng,
                f.data_type(),
                block_len,
                &table.gen,
                *string_length,
                split.year,
            )
            .map_err(|e| FerryError::internal(format!("FakeSource: column '{}': {e}", f.name())))?,
            ColumnGen::Constant(one) => {
                let idx = arrow::array::UInt32Array::from(vec![0u32; block_len]);
                arrow::compute::take(one.as_ref(), &idx, None)?
            }
        };
        columns.push(if skip == 0 && len == a.len() {
            a
        } else {
            a.slice(skip, len)
        });
    }
    let data = RecordBatch::try_new_with_options(
        table.schema.clone(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(len)),
    )?;
    Ok(ChangeBatch::inserts(table.name.clone(), data))
}

impl FakeReader {
    fn total(&self, s: &SplitState, t: &TableConfig) -> u64 {
        match &t.rows {
            Some(r) => r.data.num_rows() as u64,
            None => s.rows,
        }
    }
}

impl SourceReader for FakeReader {
    /// `lag_rows`: rows of the splits it owns still to be returned.
    fn figures(&self) -> Vec<(&'static str, f64)> {
        let left: u64 = self
            .splits
            .iter()
            .filter_map(|s| {
                let t = &self.tables[*self.by_name.get(&s.table)?];
                Some(self.total(s, t).saturating_sub(s.emitted))
            })
            .sum();
        vec![("lag_rows", left as f64)]
    }

    fn add_splits(&mut self, splits: Vec<Split>) -> Result<()> {
        for s in splits {
            let st = SplitState::from_split(&s)?;
            if !self.by_name.contains_key(&st.table) {
                return Err(FerryError::internal(format!(
                    "FakeSource: split '{}' is for table '{}', which this job no longer defines",
                    s.id, st.table
                )));
            }
            self.splits.push_back(st);
        }
        Ok(())
    }

    fn no_more_splits(&mut self) {
        self.no_more_splits = true;
    }

    fn poll_next(&mut self) -> Result<ReadStatus> {
        loop {
            let Some(front) = self.splits.front() else {
                return Ok(if self.bounded && self.no_more_splits {
                    ReadStatus::Finished
                } else {
                    ReadStatus::Idle(IDLE)
                });
            };
            let t = &self.tables[self.by_name[&front.table]];
            let total = self.total(front, t);
            if !self.current_started {
                // SeaTunnel starts at most one split per read interval.
                if let Some(last) = self.last_start {
                    let next = last + self.interval;
                    let now = Instant::now();
                    if now < next {
                        return Ok(ReadStatus::Idle((next - now).min(IDLE)));
                    }
                }
                self.last_start = Some(Instant::now());
                self.current_started = true;
            }
            if front.emitted >= total {
                self.splits.pop_front();
                self.current_started = false;
                continue;
            }
            let from = front.emitted;
            let block_end = (from / BATCH_ROWS as u64 + 1) * BATCH_ROWS as u64;
            let len = (block_end.min(total) - from) as usize;
            let batch = split_rows(t, front, from, len)?;
            if let Some(f) = self.splits.front_mut() {
                f.emitted += len as u64;
                if f.emitted >= total {
                    self.splits.pop_front();
                    self.current_started = false;
                }
            }
            return Ok(ReadStatus::Batch(batch));
        }
    }

    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Vec<Split>> {
        self.splits.iter().map(SplitState::to_split).collect()
    }
}

#[cfg(test)]
pub(crate) fn arrays_equal(a: &dyn Array, b: &dyn Array) -> bool {
    a.to_data() == b.to_data()
}
