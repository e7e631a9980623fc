//! Row keys for the CDC sources' snapshots: the reconciliation, by which a snapshot chunk
//! drops the rows whose key the change stream touched while the chunk was read (the stream
//! has already returned their newer state), and chunks cut by arithmetic on an integer key
//! spread evenly enough ([`EvenKeys`]).

use std::collections::HashSet;

use arrow::array::BooleanArray;
use arrow::compute::filter_record_batch;
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, SortField};
use ferry_api::Result;

use crate::relation::KeySpan;

/// The key (columns `key` of `batch`) of every row, row-encoded: equal keys, equal bytes.
/// Empty without key columns.
pub fn row_keys(batch: &RecordBatch, key: &[usize]) -> Result<Vec<Vec<u8>>> {
    if key.is_empty() {
        return Ok(Vec::new());
    }
    let fields: Vec<SortField> = key
        .iter()
        .map(|i| SortField::new(batch.column(*i).data_type().clone()))
        .collect();
    let conv = RowConverter::new(fields)?;
    let cols: Vec<_> = key.iter().map(|i| batch.column(*i).clone()).collect();
    let rows = conv.convert_columns(&cols)?;
    Ok(rows.iter().map(|r| r.as_ref().to_vec()).collect())
}

/// `batch` without the rows whose key (columns `key`) is in `touched`; unchanged when
/// nothing is touched or there is no key.
pub fn without_keys(
    batch: RecordBatch,
    key: &[usize],
    touched: &HashSet<Vec<u8>>,
) -> Result<RecordBatch> {
    if touched.is_empty() || key.is_empty() {
        return Ok(batch);
    }
    let keep: BooleanArray = row_keys(&batch, key)?
        .iter()
        .map(|k| Some(!touched.contains(k)))
        .collect();
    Ok(filter_record_batch(&batch, &keep)?)
}

/// An integer key spread evenly enough to cut snapshot chunks by arithmetic, `step` keys
/// each, instead of finding every `snapshot.split.size`-th key with a query: SeaTunnel's
/// even-distribution rule (`chunk-key.even-distribution.factor.lower-bound` ≤ keys per row
/// ≤ `upper-bound`; chunks of `factor × split size` keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvenKeys {
    /// The lowest key when the plan was made.
    pub lo: i128,
    /// The highest key when the plan was made: cuts stay below it, and a chunk after the
    /// last cut is read with a row limit (rows inserted past it since are read that way).
    pub hi: i128,
    /// Keys a chunk spans.
    pub step: i128,
}

impl EvenKeys {
    /// Whether a table read by `readers` snapshot readers, with key columns of types
    /// `key`, may be cut by arithmetic: several readers and one integer key column.
    pub fn applies(readers: usize, key: &[&DataType]) -> bool {
        readers > 1 && key.len() == 1 && key[0].is_integer()
    }

    /// [`EvenKeys::plan`] for a table's key span (`None` without one), with `factor` the
    /// lower and upper bound.
    pub fn plan_span(span: Option<KeySpan>, split: usize, factor: (f64, f64)) -> Option<EvenKeys> {
        let s = span?;
        EvenKeys::plan(s.rows, s.lo, s.hi, split, factor.0, factor.1)
    }

    /// The plan for a table of `count` rows with keys `lo..=hi`, or `None`: fewer rows
    /// than two chunks, or keys per row outside `[lower, upper]` (gaps so uneven that
    /// chunks of equal key ranges would hold very different numbers of rows).
    pub fn plan(
        count: i128,
        lo: i128,
        hi: i128,
        split: usize,
        lower: f64,
        upper: f64,
    ) -> Option<EvenKeys> {
        let split = split.max(1) as i128;
        if count <= split || hi < lo {
            return None;
        }
        let factor = (hi - lo + 1) as f64 / count as f64;
        if !(factor >= lower && factor <= upper) {
            return None;
        }
        let step = ((factor * split as f64) as i128).max(1);
        Some(EvenKeys { lo, hi, step })
    }

    /// Up to `n` cuts (the last key of each chunk), `step` apart from `after` (the key the
    /// next chunk starts after; `None`: before the lowest key), all below the highest key.
    pub fn cuts(&self, after: Option<i128>, n: usize) -> Vec<i128> {
        let mut at = after.unwrap_or(self.lo.saturating_sub(1));
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            at = at.saturating_add(self.step);
            if at >= self.hi {
                break;
            }
            out.push(at);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, StringArray};
    use std::sync::Arc;

    #[test]
    fn touched_keys_are_dropped_and_a_composite_key_is_compared_whole() {
        let batch = RecordBatch::try_from_iter([
            ("a", Arc::new(Int32Array::from(vec![1, 1, 2])) as _),
            ("b", Arc::new(StringArray::from(vec!["x", "y", "x"])) as _),
        ])
        .unwrap();
        let keys = row_keys(&batch, &[0, 1]).unwrap();
        assert_eq!(keys.len(), 3);
        assert_ne!(keys[0], keys[1]);
        let touched: HashSet<Vec<u8>> = [keys[1].clone()].into_iter().collect();
        let kept = without_keys(batch.clone(), &[0, 1], &touched).unwrap();
        let b = kept
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!((kept.num_rows(), b.value(0), b.value(1)), (2, "x", "x"));
        // No key, or nothing touched: every row stays.
        assert_eq!(
            without_keys(batch.clone(), &[], &touched)
                .unwrap()
                .num_rows(),
            3
        );
        assert_eq!(
            without_keys(batch, &[0, 1], &HashSet::new())
                .unwrap()
                .num_rows(),
            3
        );
    }

    #[test]
    fn even_keys_cut_equal_key_ranges_below_the_highest_key() {
        // 1000 rows with keys 1..=1000, chunks of 100: cuts 100, 200, ….
        let p = EvenKeys::plan(1000, 1, 1000, 100, 0.05, 100.0).unwrap();
        assert_eq!(p.step, 100);
        assert_eq!(p.cuts(None, 3), vec![100, 200, 300]);
        assert_eq!(p.cuts(Some(300), 4), vec![400, 500, 600, 700]);
        // Never at or past the highest key: the rest is read with a row limit.
        assert_eq!(p.cuts(Some(700), 8), vec![800, 900]);
        assert_eq!(p.cuts(Some(950), 8), Vec::<i128>::new());
        assert_eq!(p.cuts(Some(5000), 8), Vec::<i128>::new());
        // Half the keys missing: twice the keys a chunk.
        let p = EvenKeys::plan(500, 1, 1000, 100, 0.05, 100.0).unwrap();
        assert_eq!(p.cuts(Some(-10), 2), vec![190, 390]);
        // Keys per row past the upper bound, or under the lower; one chunk or less.
        assert_eq!(EvenKeys::plan(1000, 1, 1_000_000, 100, 0.05, 100.0), None);
        assert_eq!(EvenKeys::plan(1000, 1, 10, 100, 0.05, 100.0), None);
        assert_eq!(EvenKeys::plan(100, 1, 100, 100, 0.05, 100.0), None);
        // From a server's text; a missing or non-integer value is no plan, and an
        // estimate stands in for the count.
        let f = (0.05, 100.0);
        let row = |v: [Option<&str>; 3]| v.map(|x| x.map(str::to_string));
        let span = KeySpan::read(None, &row([Some("1000"), Some("1"), Some(" 1000")]));
        assert_eq!(
            EvenKeys::plan_span(span, 100, f),
            Some(EvenKeys {
                lo: 1,
                hi: 1000,
                step: 100
            })
        );
        let estimated = KeySpan::read(Some(1000), &row([None, Some("1"), Some("1000")]));
        assert_eq!(estimated, span);
        assert_eq!(
            KeySpan::read(None, &row([Some("1000"), None, Some("1000")])),
            None
        );
        assert_eq!(
            KeySpan::read(None, &row([Some("1000"), Some("a"), Some("1000")])),
            None
        );
        assert_eq!(EvenKeys::plan_span(None, 100, f), None);
        assert!(EvenKeys::applies(2, &[&DataType::UInt32]));
        assert!(!EvenKeys::applies(1, &[&DataType::Int64]));
        assert!(!EvenKeys::applies(2, &[&DataType::Utf8]));
        assert!(!EvenKeys::applies(2, &[&DataType::Int64, &DataType::Int64]));
        // Keys near the integer limits do not overflow.
        let p = EvenKeys::plan(
            1000,
            i64::MAX as i128 - 999,
            i64::MAX as i128,
            100,
            0.05,
            100.0,
        )
        .unwrap();
        assert_eq!(p.cuts(None, 1), vec![i64::MAX as i128 - 900]);
    }
}
