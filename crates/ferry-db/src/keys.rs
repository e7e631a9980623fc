//! Row keys for the CDC sources' snapshot reconciliation: a snapshot chunk drops the rows
//! whose key the change stream touched while the chunk was read, since the stream has
//! already returned their newer state.

use std::collections::HashSet;

use arrow::array::BooleanArray;
use arrow::compute::filter_record_batch;
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, SortField};
use ferry_api::Result;

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
}
