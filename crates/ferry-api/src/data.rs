//! What flows between operators: Arrow record batches tagged with their table and,
//! for change data, a row kind per row.

use std::sync::Arc;

use arrow::array::{Array, BooleanArray, UInt8Array};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use crate::catalog::CatalogInfo;

/// The kind of change a row carries, as SeaTunnel's `RowKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum RowKind {
    /// `+I`: a new row.
    Insert = 0,
    /// `-U`: the row as it was before an update.
    UpdateBefore = 1,
    /// `+U`: the row as it is after an update.
    UpdateAfter = 2,
    /// `-D`: a deleted row.
    Delete = 3,
}

impl RowKind {
    /// All kinds, in code order.
    pub const ALL: [RowKind; 4] = [
        RowKind::Insert,
        RowKind::UpdateBefore,
        RowKind::UpdateAfter,
        RowKind::Delete,
    ];

    /// The short form SeaTunnel prints: `+I`, `-U`, `+U`, `-D`.
    pub fn short(self) -> &'static str {
        match self {
            RowKind::Insert => "+I",
            RowKind::UpdateBefore => "-U",
            RowKind::UpdateAfter => "+U",
            RowKind::Delete => "-D",
        }
    }

    /// The name used in job files: `INSERT`, `UPDATE_BEFORE`, `UPDATE_AFTER`, `DELETE`.
    pub fn name(self) -> &'static str {
        match self {
            RowKind::Insert => "INSERT",
            RowKind::UpdateBefore => "UPDATE_BEFORE",
            RowKind::UpdateAfter => "UPDATE_AFTER",
            RowKind::Delete => "DELETE",
        }
    }

    /// Parses a job-file name (case-insensitive) or short form.
    pub fn parse(s: &str) -> Option<RowKind> {
        let u = s.trim().to_ascii_uppercase();
        RowKind::ALL
            .into_iter()
            .find(|k| k.name() == u || k.short() == u)
    }

    /// The kind with the given code, as stored in a kinds column.
    pub fn from_code(c: u8) -> Option<RowKind> {
        RowKind::ALL.get(c as usize).copied()
    }
}

/// One table that a source produces or a transform emits: its routing name, its Arrow
/// schema, and what its catalog says about it (id, keys, column details).
#[derive(Debug, Clone, PartialEq)]
pub struct TableSchema {
    /// Table identifier (`plugin_output` name, or `database.table` for multi-table sources).
    pub name: Arc<str>,
    /// Column names and types.
    pub schema: SchemaRef,
    /// Its catalog id, primary and constraint keys and column details; empty when no
    /// catalog describes it.
    pub catalog: Arc<CatalogInfo>,
}

impl TableSchema {
    /// A table named `name` with `schema` and nothing known about keys.
    pub fn new(name: impl Into<Arc<str>>, schema: SchemaRef) -> Self {
        TableSchema {
            name: name.into(),
            schema,
            catalog: Arc::default(),
        }
    }

    /// The same table with this catalog information.
    pub fn with_catalog(mut self, catalog: CatalogInfo) -> Self {
        self.catalog = Arc::new(catalog);
        self
    }

    /// A table derived from this one by a transform: named `name`, with columns `schema`,
    /// keeping the keys and column details whose columns `schema` still has.
    pub fn derive(&self, name: impl Into<Arc<str>>, schema: SchemaRef) -> TableSchema {
        let catalog = if self.catalog.is_empty() {
            self.catalog.clone()
        } else {
            Arc::new(self.catalog.restricted_to(&schema))
        };
        TableSchema {
            name: name.into(),
            schema,
            catalog,
        }
    }

    /// The primary key's columns, empty when it has none.
    pub fn primary_key_columns(&self) -> &[String] {
        self.catalog
            .primary_key
            .as_ref()
            .map_or(&[], |k| k.columns.as_slice())
    }
}

/// A batch of rows of one table. `kinds` is `None` when every row is an insert, the
/// common case, so that append-only data pays nothing for change-data support.
#[derive(Debug, Clone)]
pub struct ChangeBatch {
    /// The table these rows belong to.
    pub table: Arc<str>,
    /// The rows.
    pub data: RecordBatch,
    /// One [`RowKind`] code per row, or `None` for all inserts.
    pub kinds: Option<UInt8Array>,
    /// Columns some rows leave unchanged without holding their value, or `None` (nearly
    /// always): see [`Unchanged`].
    pub unchanged: Option<Arc<Unchanged>>,
}

/// Columns that some rows of a batch leave unchanged without carrying their value: a
/// PostgreSQL update that does not send an unchanged out-of-line (TOASTed) value, when the
/// table's replica identity does not send the old row either; or a change written before
/// the column was added (a restored CDC job), where the column has a default the target
/// gives it. Those rows hold NULL (or a placeholder where the column cannot be NULL) in such
/// a column, which is not the column's value: a sink must keep what the target holds
/// there (the Jdbc sink updates the other columns only), and any other sink or transform
/// must refuse the batch ([`ChangeBatch::refuse_unchanged`]) rather than write NULL.
#[derive(Debug, Clone, PartialEq)]
pub struct Unchanged {
    /// Per column (by index in the batch's data) the rows that leave it unchanged; only
    /// columns with at least one such row are listed.
    pub columns: Vec<(usize, BooleanArray)>,
}

impl Unchanged {
    /// The marks of a batch of `rows` rows from, per column, the indexes of the rows that
    /// leave it unchanged; `None` when no row does.
    pub fn from_rows(
        rows: usize,
        marked: impl IntoIterator<Item = (usize, Vec<usize>)>,
    ) -> Option<Unchanged> {
        let columns: Vec<(usize, BooleanArray)> = marked
            .into_iter()
            .filter(|(_, at)| !at.is_empty())
            .map(|(c, at)| {
                let mut marks = vec![false; rows];
                for r in at {
                    if let Some(m) = marks.get_mut(r) {
                        *m = true;
                    }
                }
                (c, BooleanArray::from(marks))
            })
            .collect();
        (!columns.is_empty()).then_some(Unchanged { columns })
    }

    /// The marks of `columns` that hold at least one row; `None` when none does.
    fn of_marked(
        columns: impl IntoIterator<Item = (usize, BooleanArray)>,
    ) -> Option<Arc<Unchanged>> {
        let columns: Vec<(usize, BooleanArray)> = columns
            .into_iter()
            .filter(|(_, rows)| rows.true_count() > 0)
            .collect();
        (!columns.is_empty()).then(|| Arc::new(Unchanged { columns }))
    }

    /// Whether row `i` leaves column `column` unchanged.
    pub fn is_unchanged(&self, column: usize, i: usize) -> bool {
        self.columns
            .iter()
            .any(|(c, rows)| *c == column && rows.value(i))
    }

    /// Whether row `i` leaves any column unchanged.
    pub fn any_in_row(&self, i: usize) -> bool {
        self.columns.iter().any(|(_, rows)| rows.value(i))
    }

    /// The same marks for the rows `mask` keeps; `None` when none of them has one.
    fn filter(&self, mask: &BooleanArray) -> crate::Result<Option<Arc<Unchanged>>> {
        let mut columns = Vec::new();
        for (c, rows) in &self.columns {
            let f = arrow::compute::filter(rows, mask)?;
            if let Some(f) = f.as_any().downcast_ref::<BooleanArray>() {
                columns.push((*c, f.clone()));
            }
        }
        Ok(Unchanged::of_marked(columns))
    }

    /// The same marks for rows `offset..offset + len`; `None` when none of them has one.
    fn slice(&self, offset: usize, len: usize) -> Option<Arc<Unchanged>> {
        Unchanged::of_marked(
            self.columns
                .iter()
                .map(|(c, rows)| (*c, rows.slice(offset, len))),
        )
    }
}

impl ChangeBatch {
    /// An insert-only batch.
    pub fn inserts(table: Arc<str>, data: RecordBatch) -> Self {
        ChangeBatch {
            table,
            data,
            kinds: None,
            unchanged: None,
        }
    }

    /// A batch with explicit row kinds; kinds that are all inserts are dropped.
    pub fn with_kinds(table: Arc<str>, data: RecordBatch, kinds: UInt8Array) -> Self {
        debug_assert_eq!(kinds.len(), data.num_rows());
        let all_inserts =
            kinds.null_count() == 0 && kinds.values().iter().all(|k| *k == RowKind::Insert as u8);
        ChangeBatch {
            table,
            data,
            kinds: if all_inserts { None } else { Some(kinds) },
            unchanged: None,
        }
    }

    /// The same batch, its rows marked as leaving columns unchanged (see [`Unchanged`]);
    /// marks without a row are dropped.
    pub fn with_unchanged(mut self, unchanged: Unchanged) -> Self {
        self.unchanged = Unchanged::of_marked(unchanged.columns);
        self
    }

    /// An error when some rows leave a column unchanged without its value (see
    /// [`Unchanged`]): for whatever cannot keep the target's value there (`who`, a sink or
    /// transform), so that NULL is never written in its place.
    pub fn refuse_unchanged(&self, who: &str) -> crate::Result<()> {
        let Some(u) = &self.unchanged else {
            return Ok(());
        };
        let names: Vec<&str> = u
            .columns
            .iter()
            .filter_map(|(c, _)| {
                self.data
                    .schema_ref()
                    .fields()
                    .get(*c)
                    .map(|f| f.name().as_str())
            })
            .collect();
        Err(crate::FerryError::config(format!(
            "{who} got updates of {} that leave column(s) {} unchanged without their values \
             (PostgreSQL does not send an unchanged TOASTed value unless the old row is sent), \
             and it can only write them as NULL; only the Jdbc sink (by primary key, without \
             `query`) keeps the target's value. Let the server send old rows: ALTER TABLE … \
             REPLICA IDENTITY FULL",
            self.table,
            names.join(", ")
        )))
    }

    /// Rows `offset..offset + len`, in data, kinds and marks alike.
    pub fn slice(&self, offset: usize, len: usize) -> Self {
        ChangeBatch {
            table: self.table.clone(),
            data: self.data.slice(offset, len),
            kinds: self.kinds.as_ref().map(|k| k.slice(offset, len)),
            unchanged: self.unchanged.as_ref().and_then(|u| u.slice(offset, len)),
        }
    }

    /// Number of rows.
    pub fn num_rows(&self) -> usize {
        self.data.num_rows()
    }

    /// The kind of row `i`.
    pub fn kind(&self, i: usize) -> RowKind {
        match &self.kinds {
            None => RowKind::Insert,
            Some(k) => RowKind::from_code(k.value(i)).unwrap_or(RowKind::Insert),
        }
    }

    /// The same rows with new data columns (same row count), keeping table and kinds.
    pub fn with_data(&self, data: RecordBatch) -> Self {
        ChangeBatch {
            table: self.table.clone(),
            data,
            kinds: self.kinds.clone(),
            unchanged: self.unchanged.clone(),
        }
    }

    /// Keeps the rows where `mask` is true, in data and kinds alike.
    pub fn filter(&self, mask: &arrow::array::BooleanArray) -> crate::Result<Self> {
        let data = arrow::compute::filter_record_batch(&self.data, mask)?;
        let kinds = match &self.kinds {
            None => None,
            Some(k) => {
                let f = arrow::compute::filter(k, mask)?;
                f.as_any().downcast_ref::<UInt8Array>().cloned()
            }
        };
        let unchanged = match &self.unchanged {
            None => None,
            Some(u) => u.filter(mask)?,
        };
        Ok(ChangeBatch {
            table: self.table.clone(),
            data,
            kinds,
            unchanged,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BooleanArray, Int32Array};
    use arrow::datatypes::{DataType, Field, Schema};

    #[test]
    fn row_kinds_parse_both_spellings() {
        assert_eq!(RowKind::parse("insert"), Some(RowKind::Insert));
        assert_eq!(RowKind::parse("-D"), Some(RowKind::Delete));
        assert_eq!(RowKind::parse("UPDATE_AFTER"), Some(RowKind::UpdateAfter));
        assert_eq!(RowKind::parse("upsert"), None);
    }

    #[test]
    fn filter_keeps_kinds_aligned_with_rows() {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int32, true)]));
        let data =
            RecordBatch::try_new(schema, vec![Arc::new(Int32Array::from(vec![1, 2, 3]))]).unwrap();
        let b = ChangeBatch::with_kinds("t".into(), data, UInt8Array::from(vec![0, 3, 2]));
        let f = b
            .filter(&BooleanArray::from(vec![false, true, true]))
            .unwrap();
        assert_eq!(f.num_rows(), 2);
        assert_eq!(f.kind(0), RowKind::Delete);
        assert_eq!(f.kind(1), RowKind::UpdateAfter);
    }

    #[test]
    fn unchanged_marks_follow_filter_and_slice_and_are_refused_by_name() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("big", DataType::Int32, true),
        ]));
        let data = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(vec![1, 2, 3])),
                Arc::new(Int32Array::from(vec![None, Some(5), None])),
            ],
        )
        .unwrap();
        let b = ChangeBatch::with_kinds("t".into(), data, UInt8Array::from(vec![2, 2, 2]))
            .with_unchanged(Unchanged {
                columns: vec![(1, BooleanArray::from(vec![false, false, true]))],
            });
        let u = b.unchanged.clone().unwrap();
        assert!(u.is_unchanged(1, 2) && !u.is_unchanged(1, 0) && !u.is_unchanged(0, 2));
        assert!(u.any_in_row(2) && !u.any_in_row(1));
        let e = b
            .refuse_unchanged("sink `LocalFile`")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("LocalFile") && e.contains("big") && e.contains("REPLICA IDENTITY FULL"),
            "{e}"
        );
        // Rows without marks leave none behind.
        let kept = b
            .filter(&BooleanArray::from(vec![true, true, false]))
            .unwrap();
        assert!(kept.unchanged.is_none());
        assert!(kept.refuse_unchanged("x").is_ok());
        assert!(b.slice(0, 2).unchanged.is_none());
        let last = b.slice(1, 2);
        assert_eq!(
            last.unchanged.unwrap().columns[0].1,
            BooleanArray::from(vec![false, true])
        );
        let kept = b
            .filter(&BooleanArray::from(vec![false, true, true]))
            .unwrap();
        assert!(kept.unchanged.unwrap().is_unchanged(1, 1));
        // Marks on no row are no marks.
        let none = ChangeBatch::inserts("t".into(), b.data.clone()).with_unchanged(Unchanged {
            columns: vec![(1, BooleanArray::from(vec![false, false, false]))],
        });
        assert!(none.unchanged.is_none());
    }

    #[test]
    fn all_insert_kinds_are_dropped() {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int32, true)]));
        let data = RecordBatch::try_new(schema, vec![Arc::new(Int32Array::from(vec![1]))]).unwrap();
        assert!(
            ChangeBatch::with_kinds("t".into(), data, UInt8Array::from(vec![0]))
                .kinds
                .is_none()
        );
    }
}
