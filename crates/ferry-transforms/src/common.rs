//! What the transforms share: field look-up with helpful errors, the per-table plan
//! machinery (a transform applies to each of its input tables), zero-copy projections,
//! SeaTunnel's rule for placing output columns, and Java regex compatibility helpers.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{Field, FieldRef, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use ferry_api::declare::OptionValue;
use ferry_api::{
    ChangeBatch, FerryError, OptionKind, Options, Result, TableSchema, Transform, TransformInstance,
};
use serde_json::{Map, Value};

/// The field names of `schema`, comma-separated, for error hints.
pub(crate) fn field_list(schema: &Schema) -> String {
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// The error for field names (written in option `key`) that table `table` lacks.
pub(crate) fn missing_fields(
    options: &Options,
    key: &str,
    table: &TableSchema,
    missing: &[&str],
) -> FerryError {
    let what = if missing.len() == 1 {
        format!("field '{}' not found in table '{}'", missing[0], table.name)
    } else {
        let quoted: Vec<String> = missing.iter().map(|m| format!("'{m}'")).collect();
        format!(
            "fields {} not found in table '{}'",
            quoted.join(", "),
            table.name
        )
    };
    options.location().error_with_hint(
        key,
        what,
        format!("available fields: {}", field_list(&table.schema)),
    )
}

/// The index of field `name` (named in option `key`) in `table`; names are case-sensitive,
/// as in SeaTunnel.
pub(crate) fn find_field(
    options: &Options,
    key: &str,
    table: &TableSchema,
    name: &str,
) -> Result<usize> {
    table
        .schema
        .index_of(name)
        .map_err(|_| missing_fields(options, key, table, &[name]))
}

/// A `{ new = old }` mapping option, as [`string_map`] reads it.
#[derive(Debug, Clone)]
pub(crate) struct StringMap(pub Vec<(String, String)>);

impl OptionValue for StringMap {
    const KIND: OptionKind = OptionKind::Object;
    fn read(o: &mut Options, key: &str) -> Result<Option<Self>> {
        Ok(string_map(o, key)?.map(StringMap))
    }
}

/// A list of `{ … }` blocks option, as [`object_list`] reads it.
#[derive(Debug, Clone)]
pub(crate) struct Blocks(pub Vec<Map<String, Value>>);

impl OptionValue for Blocks {
    const KIND: OptionKind = OptionKind::List;
    fn read(o: &mut Options, key: &str) -> Result<Option<Self>> {
        Ok(object_list(o, key)?.map(Blocks))
    }
}

/// The `{ new = old }` style mapping in option `key`, in the order written. HOCON turns a
/// dotted key into nested blocks, so nested objects are flattened back into dotted names.
pub(crate) fn string_map(
    options: &mut Options,
    key: &str,
) -> Result<Option<Vec<(String, String)>>> {
    let Some(map) = options.object(key)? else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(map.len());
    flatten_map(options, key, "", &map, &mut out)?;
    Ok(Some(out))
}

fn flatten_map(
    options: &Options,
    key: &str,
    prefix: &str,
    map: &Map<String, Value>,
    out: &mut Vec<(String, String)>,
) -> Result<()> {
    for (k, v) in map {
        let name = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::String(s) => out.push((name, s.clone())),
            Value::Number(_) | Value::Bool(_) => out.push((name, v.to_string())),
            Value::Object(inner) => flatten_map(options, key, &name, inner, out)?,
            other => {
                return Err(options.error(
                    &format!("{key}.{name}"),
                    format!("expected a field name, found {other}"),
                ));
            }
        }
    }
    Ok(())
}

/// A list of `{ … }` blocks in option `key` (as `replacements_with_regex`), each as a map.
pub(crate) fn object_list(
    options: &mut Options,
    key: &str,
) -> Result<Option<Vec<Map<String, Value>>>> {
    let Some(items) = options.list(key)? else {
        return Ok(None);
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::Object(m) => Ok(m),
            other => Err(options.error(
                &format!("{key}[{i}]"),
                format!("expected a block {{ … }}, found {other}"),
            )),
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// Reads text entry `name` of block `i` of list option `key`, rejecting entries not in `known`.
pub(crate) fn block_string(
    options: &Options,
    key: &str,
    i: usize,
    block: &Map<String, Value>,
    name: &str,
) -> Result<Option<String>> {
    match block.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v @ (Value::Number(_) | Value::Bool(_))) => Ok(Some(v.to_string())),
        Some(other) => Err(options.error(
            &format!("{key}[{i}].{name}"),
            format!("expected text, found {other}"),
        )),
    }
}

/// Checks that block `i` of list option `key` holds only the entries in `known`.
pub(crate) fn check_block_keys(
    options: &Options,
    key: &str,
    i: usize,
    block: &Map<String, Value>,
    known: &[&str],
) -> Result<()> {
    match block.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => Err(options.location().error_with_hint(
            &format!("{key}[{i}].{k}"),
            "unknown entry",
            format!("valid entries: {}", known.join(", ")),
        )),
    }
}

/// A boolean entry of a list block (`true`/`false`, also as text).
pub(crate) fn block_bool(
    options: &Options,
    key: &str,
    i: usize,
    block: &Map<String, Value>,
    name: &str,
) -> Result<Option<bool>> {
    match block.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
        Some(other) => Err(options.error(
            &format!("{key}[{i}].{name}"),
            format!("expected true or false, found {other}"),
        )),
    }
}

/// Compiles a regular expression written in option `key`.
pub(crate) fn compile_regex(options: &Options, key: &str, pattern: &str) -> Result<regex::Regex> {
    regex::Regex::new(pattern)
        .map_err(|e| options.error(key, format!("invalid regular expression '{pattern}': {e}")))
}

/// A record batch of `rows` rows; works for zero columns too (a projection may keep none).
pub(crate) fn make_batch(
    schema: SchemaRef,
    columns: Vec<ArrayRef>,
    rows: usize,
) -> Result<RecordBatch> {
    let opts = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(RecordBatch::try_new_with_options(schema, columns, &opts)?)
}

/// The work a transform does on the batches of one input table.
pub(crate) trait TablePlan: Send + Sync + Debug {
    /// The table this plan emits, or `None` when it drops the table (TableFilter).
    fn output(&self) -> Option<TableSchema>;
    /// Transforms one batch of the table; `None` when no row remains.
    fn apply(&self, batch: ChangeBatch) -> Result<Option<ChangeBatch>>;
}

/// A transform made of one plan per input table, chosen by each batch's table name.
#[derive(Debug)]
pub(crate) struct PerTable {
    plugin: &'static str,
    outputs: Vec<TableSchema>,
    plans: Arc<HashMap<Arc<str>, Arc<dyn TablePlan>>>,
}

impl PerTable {
    /// The transform `plugin` with a plan for each input table. Output tables keep the input
    /// order; tables merged into one name appear once.
    pub(crate) fn new(plugin: &'static str, plans: Vec<(Arc<str>, Arc<dyn TablePlan>)>) -> Self {
        let mut outputs: Vec<TableSchema> = Vec::new();
        for (_, p) in &plans {
            if let Some(out) = p.output() {
                if !outputs.iter().any(|o| o.name == out.name) {
                    outputs.push(out);
                }
            }
        }
        PerTable {
            plugin,
            outputs,
            plans: Arc::new(plans.into_iter().collect()),
        }
    }
}

impl Transform for PerTable {
    fn output_tables(&self) -> Vec<TableSchema> {
        self.outputs.clone()
    }

    fn create_instance(&self) -> Result<Box<dyn TransformInstance>> {
        Ok(Box::new(PerTableInstance {
            plugin: self.plugin,
            plans: self.plans.clone(),
        }))
    }
}

struct PerTableInstance {
    plugin: &'static str,
    plans: Arc<HashMap<Arc<str>, Arc<dyn TablePlan>>>,
}

impl TransformInstance for PerTableInstance {
    fn transform(&mut self, batch: ChangeBatch) -> Result<Option<ChangeBatch>> {
        match self.plans.get(&batch.table) {
            Some(plan) => plan.apply(batch),
            None => {
                let mut known: Vec<&str> = self.plans.keys().map(|k| k.as_ref()).collect();
                known.sort_unstable();
                Err(FerryError::internal(format!(
                    "transform {} got a batch of table '{}', which is not among its input tables ({})",
                    self.plugin,
                    batch.table,
                    known.join(", ")
                )))
            }
        }
    }
}

/// Output columns that are input columns, possibly renamed, reordered, repeated or dropped,
/// under a possibly new table name: no data is copied, the arrays are shared.
#[derive(Debug)]
pub(crate) struct ProjectPlan {
    output: TableSchema,
    /// For each output column, the input column it is.
    indices: Vec<usize>,
}

impl ProjectPlan {
    /// Output column `j` is input column `indices[j]`, described by `output.schema.field(j)`.
    pub(crate) fn new(output: TableSchema, indices: Vec<usize>) -> Self {
        debug_assert_eq!(output.schema.fields().len(), indices.len());
        ProjectPlan { output, indices }
    }

    /// The identity, under table name `name` (TableRename, TableMerge, TableFilter).
    pub(crate) fn renamed_table(input: &TableSchema, name: Arc<str>) -> Self {
        let indices = (0..input.schema.fields().len()).collect();
        let mut output = input.derive(name.clone(), input.schema.clone());
        // The catalog id follows the rename, as SeaTunnel's TableRename renames the TablePath.
        if let Some(id) = &output.catalog.id {
            let mut catalog = (*output.catalog).clone();
            catalog.id = Some(ferry_api::TableId::from_path(id.catalog.clone(), &name));
            output = output.with_catalog(catalog);
        }
        ProjectPlan { output, indices }
    }

    /// Keeps the input columns `indices` under their own names (Filter).
    pub(crate) fn select(input: &TableSchema, indices: Vec<usize>) -> Self {
        let fields: Vec<FieldRef> = indices
            .iter()
            .map(|&i| input.schema.fields()[i].clone())
            .collect();
        let schema = Arc::new(Schema::new_with_metadata(
            fields,
            input.schema.metadata().clone(),
        ));
        ProjectPlan {
            output: input.derive(input.name.clone(), schema),
            indices,
        }
    }

    /// Keeps the input columns `(index, new name)` in that order (FieldMapper, FieldRename).
    pub(crate) fn select_renamed(input: &TableSchema, columns: &[(usize, String)]) -> Self {
        let fields: Vec<Field> = columns
            .iter()
            .map(|(i, name)| input.schema.field(*i).clone().with_name(name.as_str()))
            .collect();
        let schema = Arc::new(Schema::new_with_metadata(
            fields,
            input.schema.metadata().clone(),
        ));
        let indices = columns.iter().map(|(i, _)| *i).collect();
        // Keys follow their columns' new names; a key over a dropped column is dropped.
        let old_names: Vec<&str> = input
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        let renamed = input.catalog.renamed(&|c| {
            let i = old_names.iter().position(|n| *n == c)?;
            columns
                .iter()
                .find(|(j, _)| *j == i)
                .map(|(_, n)| n.clone())
        });
        let output = TableSchema::new(input.name.clone(), schema.clone())
            .with_catalog(renamed.restricted_to(&schema));
        ProjectPlan { output, indices }
    }
}

impl TablePlan for ProjectPlan {
    fn output(&self) -> Option<TableSchema> {
        Some(self.output.clone())
    }

    fn apply(&self, batch: ChangeBatch) -> Result<Option<ChangeBatch>> {
        let width = batch.data.num_columns();
        if let Some(bad) = self.indices.iter().find(|&&i| i >= width) {
            return Err(FerryError::internal(format!(
                "batch of table '{}' has {width} columns, but its schema has a column {bad}",
                batch.table
            )));
        }
        let columns: Vec<ArrayRef> = self
            .indices
            .iter()
            .map(|&i| batch.data.column(i).clone())
            .collect();
        let data = make_batch(self.output.schema.clone(), columns, batch.num_rows())?;
        Ok(Some(ChangeBatch {
            table: self.output.name.clone(),
            data,
            kinds: batch.kinds,
            // Transforms never see marked rows (the executor refuses them first).
            unchanged: None,
        }))
    }
}

/// Where computed output columns go, by SeaTunnel's rule for transforms that add fields
/// (Copy, Split, Replace, RowKindExtractor): an output named like an existing column takes
/// that column's place (and type); any other is appended, in order.
#[derive(Debug, Clone)]
pub(crate) struct Placement {
    /// The output schema.
    pub(crate) schema: SchemaRef,
    /// For each computed column, its index in the output.
    positions: Vec<usize>,
}

impl Placement {
    /// Places `outputs` into `input`.
    pub(crate) fn new(input: &Schema, outputs: Vec<Field>) -> Self {
        let mut fields: Vec<FieldRef> = input.fields().iter().cloned().collect();
        let mut positions = Vec::with_capacity(outputs.len());
        for out in outputs {
            match fields.iter().position(|f| f.name() == out.name()) {
                Some(i) => {
                    if fields[i].data_type() != out.data_type() {
                        fields[i] = Arc::new(
                            fields[i]
                                .as_ref()
                                .clone()
                                .with_data_type(out.data_type().clone()),
                        );
                    }
                    positions.push(i);
                }
                None => {
                    fields.push(Arc::new(out));
                    positions.push(fields.len() - 1);
                }
            }
        }
        Placement {
            schema: Arc::new(Schema::new_with_metadata(fields, input.metadata().clone())),
            positions,
        }
    }

    /// For each output column, the input column it is, given that computed column `k` is a
    /// copy of input column `sources[k]` (Copy: then the whole batch is a projection).
    pub(crate) fn as_projection(&self, input_width: usize, sources: &[usize]) -> Vec<usize> {
        let mut indices: Vec<usize> = (0..input_width).collect();
        for (&pos, &src) in self.positions.iter().zip(sources) {
            if pos < indices.len() {
                indices[pos] = src;
            } else {
                indices.push(src);
            }
        }
        indices
    }

    /// The input columns with the computed `values` (one per output, in order) placed in.
    pub(crate) fn assemble(
        &self,
        input: &RecordBatch,
        values: Vec<ArrayRef>,
    ) -> Result<RecordBatch> {
        let mut columns: Vec<ArrayRef> = input.columns().to_vec();
        for (&pos, v) in self.positions.iter().zip(values) {
            if pos < columns.len() {
                columns[pos] = v;
            } else {
                columns.push(v);
            }
        }
        make_batch(self.schema.clone(), columns, input.num_rows())
    }
}

pub(crate) use ferry_api::javatext::regex_replacement as java_replacement;

/// Splits `s` as Java's `String.split(regex, limit)` does with a positive `limit`: at most
/// `limit - 1` splits, trailing empty parts kept, and no empty leading part from a
/// zero-width match at the start. Parts are pushed to `out` as byte ranges.
pub(crate) fn java_split(re: &regex::Regex, s: &str, limit: usize, out: &mut Vec<(usize, usize)>) {
    out.clear();
    let mut index = 0;
    for m in re.find_iter(s) {
        if out.len() + 1 >= limit {
            break;
        }
        if m.start() == 0 && m.end() == 0 {
            continue;
        }
        out.push((index, m.start()));
        index = m.end();
    }
    out.push((index, s.len()));
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Helpers for the transforms' tests.

    use super::*;
    use arrow::array::{Int32Array, StringArray, UInt8Array};
    use arrow::datatypes::DataType;
    use ferry_api::{JobContext, PluginLocation, TransformFactory};

    /// Options of a transform block, as the engine passes them.
    pub(crate) fn opts(plugin: &str, v: Value) -> Options {
        let values = match v {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        Options::new(
            values,
            PluginLocation {
                file: "job.conf".into(),
                section: "transform".into(),
                plugin: plugin.into(),
                line: Some(3),
                ..Default::default()
            },
        )
    }

    /// Table `name` with nullable fields `(name, type)`.
    pub(crate) fn table(name: &str, fields: &[(&str, DataType)]) -> TableSchema {
        let fs: Vec<Field> = fields
            .iter()
            .map(|(n, t)| Field::new(*n, t.clone(), true))
            .collect();
        TableSchema::new(name, Arc::new(Schema::new(fs)))
    }

    /// Table `t` with `id int, name string`.
    pub(crate) fn people() -> TableSchema {
        table("t", &[("id", DataType::Int32), ("name", DataType::Utf8)])
    }

    /// A batch of `people()` with row kinds.
    pub(crate) fn people_batch(
        ids: Vec<Option<i32>>,
        names: Vec<Option<&str>>,
        kinds: Vec<u8>,
    ) -> ChangeBatch {
        let t = people();
        let data = RecordBatch::try_new(
            t.schema.clone(),
            vec![
                Arc::new(Int32Array::from(ids)),
                Arc::new(StringArray::from(names)),
            ],
        )
        .unwrap();
        ChangeBatch::with_kinds(t.name, data, UInt8Array::from(kinds))
    }

    /// Creates the transform for `input`.
    pub(crate) fn create(
        f: &dyn TransformFactory,
        v: Value,
        input: &[TableSchema],
    ) -> Result<Arc<dyn Transform>> {
        let mut o = opts(f.name(), v);
        f.create(&mut o, input, &JobContext::default())
    }

    /// The error text of creating the transform.
    pub(crate) fn create_err(f: &dyn TransformFactory, v: Value, input: &[TableSchema]) -> String {
        match create(f, v, input) {
            Ok(t) => panic!("expected an error, got {t:?}"),
            Err(e) => e.to_string(),
        }
    }

    /// Runs one batch through a fresh instance.
    pub(crate) fn run(t: &Arc<dyn Transform>, b: ChangeBatch) -> Option<ChangeBatch> {
        t.create_instance().unwrap().transform(b).unwrap()
    }

    /// Column `name` of `b` as optional texts.
    pub(crate) fn strings(b: &ChangeBatch, name: &str) -> Vec<Option<String>> {
        let c = b.data.column_by_name(name).unwrap();
        let s = c.as_any().downcast_ref::<StringArray>().unwrap();
        s.iter().map(|v| v.map(str::to_string)).collect()
    }

    /// Column names of `b`.
    pub(crate) fn names(b: &ChangeBatch) -> Vec<String> {
        b.data
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }

    /// Row kinds of `b`, short form.
    pub(crate) fn kinds(b: &ChangeBatch) -> Vec<&'static str> {
        (0..b.num_rows()).map(|i| b.kind(i).short()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::DataType;

    fn split(sep: &str, s: &str, limit: usize) -> Vec<String> {
        let re = regex::Regex::new(sep).unwrap();
        let mut parts = Vec::new();
        java_split(&re, s, limit, &mut parts);
        parts.iter().map(|&(a, b)| s[a..b].to_string()).collect()
    }

    #[test]
    fn java_split_semantics() {
        assert_eq!(split("1", "41", 2), ["4", ""]);
        assert_eq!(split("1", "11", 2), ["", "1"]);
        assert_eq!(split("1", "5", 2), ["5"]);
        assert_eq!(split(",", "a,b,c", 2), ["a", "b,c"]);
        assert_eq!(split(",", "a,b,c", 1), ["a,b,c"]);
        assert_eq!(split(",", "a,,", 5), ["a", "", ""]);
        assert_eq!(split("", "abc", 3), ["a", "b", "c"]);
        assert_eq!(split("", "abc", 10), ["a", "b", "c", ""]);
        assert_eq!(split(",", "", 3), [""]);
    }

    #[test]
    fn placement_replaces_same_names_and_appends_others() {
        let input = Schema::new(vec![
            Field::new("a", DataType::Int32, true),
            Field::new("b", DataType::Utf8, true),
        ]);
        let p = Placement::new(
            &input,
            vec![
                Field::new("c", DataType::Utf8, true),
                Field::new("a", DataType::Utf8, true),
            ],
        );
        let names: Vec<&str> = p
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(p.schema.field(0).data_type(), &DataType::Utf8);
        assert_eq!(p.as_projection(2, &[1, 0]), vec![0, 1, 1]);
    }
}
