//! The `Assert` sink: checks rows against SeaTunnel's row and field rules and fails the
//! job when one is broken. It writes nothing.
//!
//! - **Field rules** (`field_rules`) are checked on every batch, column by column; the
//!   first broken rule fails the job with a [`FerryError::Data`] naming the field, the
//!   rule, the value and the row: `Assert: field 'age' rule MIN 32767 broken by value 12
//!   (row 3 of table fake)`. Rows are numbered per writer, from 1.
//! - **Row rules** (`row_rules`: `MIN_ROW`, `MAX_ROW`) count the rows of all writers:
//!   each writer returns its running count per table from `prepare_commit` (and keeps it
//!   in its snapshot, so counts survive a restore); the committer keeps each writer's
//!   latest count and checks the rules in `finish`, when a bounded job ends.
//! - **Catalog rules** (`catalog_table_rule`) are checked against the input schemas when
//!   the sink is created.
//! - Rules written directly under `rules` apply to every input table, each counted on its
//!   own; `tables_configs` gives rules per `table_path`.
//!
//! Differences from SeaTunnel: a field rule naming a field the table lacks, or an
//! `equals_to` that cannot be read as the field's type, fails when the sink is created
//! (SeaTunnel fails at the first row); row rules are checked once all writers are done
//! (SeaTunnel checks each writer's count when it closes).

pub mod check;
pub mod rules;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use ferry_api::types::same_type;
use ferry_api::{
    decode_state, encode_state, ChangeBatch, FerryError, JobContext, OptionSpec, Options,
    PluginLocation, Result, Sink, SinkCommitter, SinkDelivery, SinkFactory, SinkWriter, TableId,
    TableSchema, WriterContext,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::check::BoundRules;
use crate::rules::{describe_columns, find_table, parse_rules, CatalogRule, Scope, TableRules};

const COMPONENT: &str = "Assert";

ferry_api::declare_options! {
    /// The `Assert` sink's options.
    struct AssertOptions => SPECS {
        /// row_rules, field_rules, catalog_table_rule, tables_configs and table-names; see docs/connectors/Assert.md
        rules: Map<String, Value> = "rules", required;
        /// SeaTunnel's writer replicas per table; accepted for compatibility, Ferry uses the sink's parallelism.
        _replica: i64 = "multi_table_sink_replica", default 1;
    }
}

/// Creates `Assert` sinks.
#[derive(Debug, Clone, Copy, Default)]
pub struct AssertSinkFactory;

impl SinkFactory for AssertSinkFactory {
    fn name(&self) -> &'static str {
        "Assert"
    }

    fn description(&self) -> &'static str {
        "Checks rows against row-count, field and schema rules; fails the job when one is broken"
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
        let rules_block = AssertOptions::read(options)?.rules;
        options.finish(SPECS)?;
        let loc = options.location().clone();
        let parsed = parse_rules(&rules_block, &loc)?;
        let routes = match parsed.scope {
            Scope::EachTable(t) => Routes::Each(Arc::new(t)),
            Scope::PerTable(list) => {
                Routes::PerTable(list.into_iter().map(|(p, t)| (p, Arc::new(t))).collect())
            }
        };
        let shared = Shared {
            routes,
            table_names: parsed.table_names,
            input: input.iter().map(|t| t.name.to_string()).collect(),
            location: loc,
        };

        // Bind the field rules to every known input table now, so that a rule naming a
        // missing field or an equals_to of the wrong type fails before any data flows.
        let mut bound = HashMap::new();
        for t in input {
            if let Some(rules) = shared.rules_for(&t.name) {
                if let Some(c) = &rules.catalog {
                    check_catalog(c, t)?;
                }
                let b = BoundRules::bind(rules.clone(), &t.name, t.schema.clone())
                    .map_err(|e| shared.location.error(&e.path, e.message))?;
                bound.insert(
                    t.name.clone(),
                    Cached {
                        schema: t.schema.clone(),
                        bound: Some(Arc::new(b)),
                    },
                );
            }
        }
        if let Routes::PerTable(list) = &shared.routes {
            for (i, (path, rules)) in list.iter().enumerate() {
                if input.is_empty()
                    || find_table(input.iter().map(|t| (&*t.name, ())), path).is_some()
                {
                    continue;
                }
                let names = shared.input.join(", ");
                if rules.catalog.is_some() {
                    return Err(shared.location.error(
                        &format!("rules.tables_configs[{i}].table_path"),
                        format!("catalog_table_rule needs table {path}, which is not an input of this sink (inputs: {names})"),
                    ));
                }
                tracing::warn!("{}: rules.tables_configs[{i}]: table {path} is not an input of this sink (inputs: {names}); it will count 0 rows", shared.location.describe());
            }
        }
        Ok(Arc::new(AssertSink {
            shared: Arc::new(shared),
            bound,
        }))
    }
}

/// Which rules apply to which table.
#[derive(Debug)]
enum Routes {
    /// The same rules for every table.
    Each(Arc<TableRules>),
    /// Rules by `table_path`.
    PerTable(Vec<(String, Arc<TableRules>)>),
}

/// What the sink, its writers and its committer share.
#[derive(Debug)]
struct Shared {
    routes: Routes,
    table_names: Option<Vec<String>>,
    /// Names of the input tables known at creation.
    input: Vec<String>,
    location: PluginLocation,
}

impl Shared {
    fn rules_for(&self, table: &str) -> Option<&Arc<TableRules>> {
        match &self.routes {
            Routes::Each(r) => Some(r),
            Routes::PerTable(list) => find_table(list.iter().map(|(p, r)| (p.as_str(), r)), table),
        }
    }

    /// Checks the row rules and `table-names` against the final row counts.
    fn check_counts(&self, totals: &BTreeMap<String, u64>) -> Result<()> {
        let count_of = |table: &str| {
            find_table(totals.iter().map(|(t, n)| (t.as_str(), *n)), table).unwrap_or(0)
        };
        match &self.routes {
            Routes::Each(rules) if !rules.row_rules.is_empty() => {
                // Every input table, and any other table that sent rows.
                let mut tables: Vec<&str> = self.input.iter().map(String::as_str).collect();
                tables.extend(
                    totals
                        .keys()
                        .map(String::as_str)
                        .filter(|t| !self.input.iter().any(|i| i == t)),
                );
                if tables.is_empty() {
                    tables.push("(none: no rows arrived)");
                }
                for t in tables {
                    let n = count_of(t);
                    if let Some(rule) = rules.row_rules.iter().find(|r| !r.passes(n)) {
                        return Err(row_rule_error(&rule.describe(), n, t));
                    }
                }
            }
            Routes::Each(_) => {}
            Routes::PerTable(list) => {
                for (t, rules) in list {
                    let n = count_of(t);
                    if let Some(rule) = rules.row_rules.iter().find(|r| !r.passes(n)) {
                        return Err(row_rule_error(&rule.describe(), n, t));
                    }
                }
            }
        }
        if let Some(expected) = &self.table_names {
            let seen: BTreeSet<&str> = totals
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(t, _)| t.as_str())
                .collect();
            let want: BTreeSet<&str> = expected.iter().map(String::as_str).collect();
            if seen != want {
                let list = |s: &BTreeSet<&str>| s.iter().copied().collect::<Vec<_>>().join(", ");
                return Err(FerryError::data(
                    COMPONENT,
                    format!(
                        "rule table-names [{}] broken by the tables that had rows: [{}]",
                        list(&want),
                        list(&seen)
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn row_rule_error(rule: &str, count: u64, table: &str) -> FerryError {
    let rows = if count == 1 { "row" } else { "rows" };
    FerryError::data(
        COMPONENT,
        format!("row rule {rule} broken by {count} {rows} (table {table})"),
    )
}

/// Checks `catalog_table_rule` against a table's schema and catalog information, as
/// SeaTunnel's `AssertCatalogTableRule` does: keys and columns compared as collections (any
/// order), the table identifier by catalog name and path.
fn check_catalog(rule: &CatalogRule, table: &TableSchema) -> Result<()> {
    let fail = |what: &str, msg: String| {
        Err(FerryError::data(
            COMPONENT,
            format!("{}.{what}: {msg}", rule.path),
        ))
    };
    if let Some(r) = &rule.primary_key {
        let Some(pk) = &table.catalog.primary_key else {
            return fail(
                "primary_key_rule",
                format!("table {} has no primary key", table.name),
            );
        };
        if r.name.as_ref().is_some_and(|n| *n != pk.name) {
            return fail(
                "primary_key_rule",
                format!(
                    "table {} has primary key '{}', the rule expects '{}'",
                    table.name,
                    pk.name,
                    r.name.as_deref().unwrap_or_default()
                ),
            );
        }
        if !r.columns.is_empty() && !same_collection(&r.columns, &pk.columns) {
            return fail(
                "primary_key_rule",
                format!(
                    "table {}'s primary key has columns ({}), the rule expects ({})",
                    table.name,
                    pk.columns.join(", "),
                    r.columns.join(", ")
                ),
            );
        }
    }
    if let Some(keys) = &rule.constraint_keys {
        let have = &table.catalog.constraint_keys;
        if have.is_empty() {
            return fail(
                "constraint_key_rule",
                format!("table {} has no constraint keys", table.name),
            );
        }
        if !keys.is_empty() && !same_collection(keys, have) {
            let show = |ks: &[ferry_api::ConstraintKey]| {
                ks.iter()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            return fail(
                "constraint_key_rule",
                format!(
                    "table {} has constraint keys [{}], the rule expects [{}]",
                    table.name,
                    show(have),
                    show(keys)
                ),
            );
        }
    }
    if let Some(cols) = &rule.columns {
        let fields = table.schema.fields();
        // The same columns in any order, as SeaTunnel compares them as collections.
        let mut unmatched: Vec<&arrow::datatypes::Field> =
            fields.iter().map(|f| f.as_ref()).collect();
        let mut all = cols.len() == fields.len();
        for c in cols {
            match unmatched.iter().position(|f| {
                f.name() == &c.name
                    && same_type(f.data_type(), &c.data_type)
                    && c.nullable.is_none_or(|n| n == f.is_nullable())
            }) {
                Some(i) => {
                    unmatched.swap_remove(i);
                }
                None => all = false,
            }
        }
        if !all {
            return fail(
                "column_rule",
                format!(
                    "table {} has columns ({}), the rule expects ({})",
                    table.name,
                    describe_columns(fields.iter().map(|f| (f.name().as_str(), f.data_type()))),
                    describe_columns(cols.iter().map(|c| (c.name.as_str(), &c.data_type)))
                ),
            );
        }
    }
    if let Some(r) = &rule.table {
        // A table no catalog describes is identified by its name alone.
        let (catalog, path) = match &table.catalog.id {
            Some(id) => (Some(id.catalog.as_str()), id.path()),
            None => (None, table.name.to_string()),
        };
        let expected = TableId::from_path(r.catalog.clone().unwrap_or_default(), &r.table);
        let catalog_differs = match (r.catalog.as_deref(), catalog) {
            (Some(want), Some(have)) => want != have,
            _ => false,
        };
        if catalog_differs || expected.path() != path {
            let shown = |c: Option<&str>, p: &str| match c {
                Some(c) => format!("{p} in catalog {c}"),
                None => p.to_string(),
            };
            return fail(
                "table_identifier_rule",
                format!(
                    "the table is {}, the rule expects {}",
                    shown(catalog, &path),
                    shown(r.catalog.as_deref(), &r.table)
                ),
            );
        }
    }
    Ok(())
}

/// The same items regardless of order, counting repeats (Apache Commons'
/// `isEqualCollection`, which SeaTunnel's rules use).
fn same_collection<T: PartialEq>(a: &[T], b: &[T]) -> bool {
    let count = |xs: &[T], x: &T| xs.iter().filter(|y| *y == x).count();
    a.len() == b.len() && a.iter().all(|x| count(a, x) == count(b, x))
}

/// Rules bound to one table's schema, cached by the writer.
#[derive(Debug, Clone)]
struct Cached {
    schema: SchemaRef,
    bound: Option<Arc<BoundRules>>,
}

/// A configured `Assert` sink.
#[derive(Debug)]
pub struct AssertSink {
    shared: Arc<Shared>,
    /// Rules bound to the input tables known at creation.
    bound: HashMap<Arc<str>, Cached>,
}

impl Sink for AssertSink {
    fn delivery(&self) -> SinkDelivery {
        SinkDelivery::AtLeastOnce
    }

    fn create_writer(
        &self,
        ctx: &WriterContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SinkWriter>> {
        let rows = match &restored {
            Some(state) => decode_state::<WriterState>(state, "an Assert writer")?.rows,
            None => BTreeMap::new(),
        };
        Ok(Box::new(AssertWriter {
            shared: self.shared.clone(),
            subtask: ctx.subtask,
            parallelism: ctx.parallelism,
            cache: self.bound.clone(),
            rows,
        }))
    }

    fn create_committer(&self) -> Result<Option<Box<dyn SinkCommitter>>> {
        Ok(Some(Box::new(AssertCommitter {
            shared: self.shared.clone(),
            latest: BTreeMap::new(),
        })))
    }
}

/// A writer's snapshot: rows received per table since the job started.
#[derive(Debug, Serialize, Deserialize)]
struct WriterState {
    rows: BTreeMap<String, u64>,
}

/// A writer's commit info: its running totals (not deltas), by subtask.
#[derive(Debug, Serialize, Deserialize)]
struct CommitInfo {
    subtask: u64,
    rows: BTreeMap<String, u64>,
}

/// Checks field rules on each batch and counts rows per table.
#[derive(Debug)]
pub struct AssertWriter {
    shared: Arc<Shared>,
    subtask: usize,
    parallelism: usize,
    cache: HashMap<Arc<str>, Cached>,
    /// Rows received per table since the job started (restored from snapshots).
    rows: BTreeMap<String, u64>,
}

impl AssertWriter {
    fn bound_for(&mut self, batch: &ChangeBatch) -> Result<Option<Arc<BoundRules>>> {
        let schema = batch.data.schema();
        if let Some(c) = self.cache.get(&*batch.table) {
            if Arc::ptr_eq(&c.schema, &schema) || *c.schema == *schema {
                return Ok(c.bound.clone());
            }
        }
        // A table not known at creation (or with a new schema): bind now.
        let bound = match self.shared.rules_for(&batch.table) {
            None => None,
            Some(rules) => Some(Arc::new(
                BoundRules::bind(rules.clone(), &batch.table, schema.clone())
                    .map_err(|e| self.shared.location.error(&e.path, e.message))?,
            )),
        };
        self.cache.insert(
            batch.table.clone(),
            Cached {
                schema,
                bound: bound.clone(),
            },
        );
        Ok(bound)
    }
}

impl SinkWriter for AssertWriter {
    fn write(&mut self, batch: &ChangeBatch) -> Result<()> {
        let n = batch.num_rows() as u64;
        let before = match self.rows.get_mut(&*batch.table) {
            Some(c) => {
                *c += n;
                *c - n
            }
            None => {
                self.rows.insert(batch.table.to_string(), n);
                0
            }
        };
        if n == 0 {
            return Ok(());
        }
        if let Some(bound) = self.bound_for(batch)? {
            if let Some(v) = bound.check(batch.data.columns()) {
                let writer = if self.parallelism > 1 {
                    format!(", writer {} of {}", self.subtask, self.parallelism)
                } else {
                    String::new()
                };
                return Err(FerryError::data(
                    COMPONENT,
                    format!(
                        "{} (row {} of table {}{writer})",
                        v.message,
                        before + v.row as u64 + 1,
                        batch.table
                    ),
                ));
            }
        }
        Ok(())
    }

    fn prepare_commit(&mut self, _checkpoint_id: u64) -> Result<Option<Value>> {
        // Running totals, not deltas: the committer keeps each writer's latest, so a
        // restart (counts restored from the snapshot) never counts a row twice.
        let info = CommitInfo {
            subtask: self.subtask as u64,
            rows: self.rows.clone(),
        };
        encode_state(&info, "an Assert commit").map(Some)
    }

    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Option<Value>> {
        let state = WriterState {
            rows: self.rows.clone(),
        };
        encode_state(&state, "an Assert writer").map(Some)
    }
}

/// Collects the writers' row counts and checks the row rules when the job ends.
#[derive(Debug)]
pub struct AssertCommitter {
    shared: Arc<Shared>,
    /// Per writer: the checkpoint of its latest count, and the count per table.
    latest: BTreeMap<u64, (u64, BTreeMap<String, u64>)>,
}

impl AssertCommitter {
    /// Rows per table over all writers, as committed so far.
    pub fn totals(&self) -> BTreeMap<String, u64> {
        let mut totals = BTreeMap::new();
        for (_, counts) in self.latest.values() {
            for (t, n) in counts {
                *totals.entry(t.clone()).or_insert(0) += n;
            }
        }
        totals
    }
}

impl SinkCommitter for AssertCommitter {
    fn commit(&mut self, checkpoint_id: u64, infos: Vec<Value>) -> Result<()> {
        for info in infos {
            let CommitInfo {
                subtask,
                rows: counts,
            } = decode_state(&info, "an Assert commit")?;
            if self
                .latest
                .get(&subtask)
                .is_none_or(|(cp, _)| checkpoint_id >= *cp)
            {
                self.latest.insert(subtask, (checkpoint_id, counts));
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        self.shared.check_counts(&self.totals())
    }
}

#[cfg(test)]
mod tests;
