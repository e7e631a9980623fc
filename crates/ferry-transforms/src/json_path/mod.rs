//! `JsonPath`: extracts values from JSON with JSONPath expressions into new fields
//! (SeaTunnel's `JsonPathTransform`).
//!
//! Each entry of `columns` reads `src_field` — text holding JSON, bytes holding JSON text,
//! or a nested row, array or map (turned into JSON first: a row becomes a positional list,
//! so `$[0]` is its first field) — applies `path` and stores the result, converted to
//! `dest_type` (default `string`), in `dest_field`. A destination named like an existing
//! field replaces it in place; others are appended in order.
//!
//! Paths are compiled once, when the job starts, with `serde_json_path` (RFC 9535, which
//! reads Jayway's usual syntax: `$.a.b`, `$['a']`, `$[0]`, `$..a`, `$.a[*]`, `$[?(@.x > 1)]`).
//! As in Jayway, a path without a leading `$` is taken relative to the root, a *definite*
//! path (names and single indices only) yields its one value and fails when there is none,
//! and any other path yields the list of what it matched (possibly empty).
//!
//! Text that strict JSON rejects is read permissively, as SeaTunnel's json-smart parser does
//! (unquoted keys and text values, single-quoted strings; see `lenient.rs`).
//!
//! A value that cannot be read (the source is not JSON, a definite path matches nothing,
//! the result does not convert to `dest_type`) is an error handled by the column's
//! `column_error_handle_way` (`SKIP`: the field is null; `SKIP_ROW`: the row is dropped;
//! `FAIL`) or, when that is unset, by `row_error_handle_way` (`SKIP` drops the row, `FAIL`,
//! the default, fails the job). As in SeaTunnel, the first failing column of a row decides.
//! A null source gives a null result and no error.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use arrow::datatypes::{DataType, Field};
use ferry_api::types::{parse_type, type_name};
use ferry_api::value::{array_value_to_json, json_to_array, RowStyle};
use ferry_api::{
    ChangeBatch, FerryError, JobContext, OptionSpec, Options, Result, TableSchema, Transform,
    TransformFactory,
};
use serde_json::{Map, Value};
use serde_json_path::JsonPath;

mod lenient;

use crate::common::{
    block_string, check_block_keys, find_field, Blocks, PerTable, Placement, TablePlan,
};

const WAYS_ROW: &[&str] = &["FAIL", "SKIP"];
const WAYS_COLUMN: &[&str] = &["FAIL", "SKIP", "SKIP_ROW"];
const COLUMN_KEYS: &[&str] = &[
    "src_field",
    "path",
    "dest_field",
    "dest_type",
    "column_error_handle_way",
];

ferry_api::declare_options! {
    /// The `JsonPath` transform's options.
    struct JsonPathOptions => SPECS {
        /// What to extract: a list of { src_field, path, dest_field, dest_type = string,
        /// column_error_handle_way }. Several paths, dest_fields and dest_types may be given
        /// in one entry, separated by ';' (dest_type is then required).
        columns: Blocks = "columns", required;
        /// What a value that cannot be extracted does when its column sets no
        /// column_error_handle_way: FAIL the job or SKIP (drop) the row.
        row_way: String = "row_error_handle_way", default "FAIL", one_of WAYS_ROW;
    }
}

/// What an extraction error does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    /// Fail the job.
    Fail,
    /// Leave the field null (column level) or drop the row (row level).
    Skip,
    /// Drop the row.
    SkipRow,
}

impl Way {
    fn parse(s: &str) -> Option<Way> {
        match s {
            "FAIL" => Some(Way::Fail),
            "SKIP" => Some(Way::Skip),
            "SKIP_ROW" => Some(Way::SkipRow),
            _ => None,
        }
    }
}

/// One extraction, as configured.
#[derive(Debug, Clone)]
struct ColumnSpec {
    src_field: String,
    path_text: String,
    path: Arc<JsonPath>,
    definite: bool,
    dest_field: String,
    dest_type: DataType,
    on_error: Option<Way>,
    /// The option that named `src_field`, for errors.
    key: String,
}

/// Factory of the `JsonPath` transform.
pub struct JsonPathTransformFactory;

impl TransformFactory for JsonPathTransformFactory {
    fn name(&self) -> &'static str {
        "JsonPath"
    }

    fn description(&self) -> &'static str {
        "Extracts values from JSON (or nested) fields with JSONPath into new typed fields."
    }

    fn options(&self) -> &'static [OptionSpec] {
        SPECS
    }

    fn create(
        &self,
        options: &mut Options,
        input: &[TableSchema],
        _job: &JobContext,
    ) -> Result<Arc<dyn Transform>> {
        let o = JsonPathOptions::read(options)?;
        let columns = read_columns(options, o.columns.0)?;
        let row_way = match o.row_way.as_str() {
            "SKIP" => Way::Skip,
            _ => Way::Fail,
        };
        options.finish(SPECS)?;
        let mut plans: Vec<(Arc<str>, Arc<dyn TablePlan>)> = Vec::with_capacity(input.len());
        for table in input {
            plans.push((
                table.name.clone(),
                Arc::new(JsonPathPlan::new(options, table, &columns, row_way)?),
            ));
        }
        Ok(Arc::new(PerTable::new("JsonPath", plans)))
    }
}

fn read_columns(options: &mut Options, blocks: Vec<Map<String, Value>>) -> Result<Vec<ColumnSpec>> {
    if blocks.is_empty() {
        return Err(options.error(
            "columns",
            "must list at least one { src_field, path, dest_field }",
        ));
    }
    let mut out = Vec::with_capacity(blocks.len());
    for (i, block) in blocks.iter().enumerate() {
        read_column(options, i, block, &mut out)?;
    }
    Ok(out)
}

/// Reads entry `i` of `columns` (one extraction, or several separated by ';').
fn read_column(
    options: &Options,
    i: usize,
    block: &Map<String, Value>,
    out: &mut Vec<ColumnSpec>,
) -> Result<()> {
    check_block_keys(options, "columns", i, block, COLUMN_KEYS)?;
    let required = |name: &str| -> Result<String> {
        match block_string(options, "columns", i, block, name)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            _ => Err(options.error(
                &format!("columns[{i}].{name}"),
                "is required and must not be empty",
            )),
        }
    };
    let src_field = required("src_field")?;
    let path = required("path")?;
    let dest_field = required("dest_field")?;
    let dest_type = block_string(options, "columns", i, block, "dest_type")?;
    let on_error = match block_string(options, "columns", i, block, "column_error_handle_way")? {
        None => None,
        Some(s) => Some(
            Way::parse(s.trim().to_ascii_uppercase().as_str()).ok_or_else(|| {
                options.location().error_with_hint(
                    &format!("columns[{i}].column_error_handle_way"),
                    format!("invalid value '{s}'"),
                    format!("valid values: {}", WAYS_COLUMN.join(", ")),
                )
            })?,
        ),
    };

    // SeaTunnel's batch form: `path = "$.a;$.b"`, `dest_field = "a;b"`, `dest_type = "int;string"`.
    let paths: Vec<&str> = path.split(';').collect();
    let dests: Vec<&str> = dest_field.split(';').collect();
    let types: Vec<&str> =
        match &dest_type {
            Some(t) => t.split(';').collect(),
            None if paths.len() == 1 && dests.len() == 1 => vec!["string"],
            None => return Err(options.error(
                &format!("columns[{i}].dest_type"),
                "is required when several paths are given (one type per path, separated by ';')",
            )),
        };
    if paths.len() != dests.len() || paths.len() != types.len() {
        return Err(options.error(
            &format!("columns[{i}]"),
            format!(
                "path, dest_field and dest_type must list as many entries (separated by ';'), \
                 found {} paths, {} dest_fields and {} dest_types",
                paths.len(),
                dests.len(),
                types.len()
            ),
        ));
    }
    for ((p, d), t) in paths.iter().zip(&dests).zip(&types) {
        let (p, d, t) = (p.trim(), d.trim(), t.trim());
        if p.is_empty() || d.is_empty() || t.is_empty() {
            return Err(options.error(
                &format!("columns[{i}]"),
                "an entry of path, dest_field or dest_type between ';' is empty",
            ));
        }
        let dest_type = parse_type(t)
            .map_err(|e| options.error(&format!("columns[{i}].dest_type"), format!("{e}")))?;
        out.push(ColumnSpec {
            src_field: src_field.trim().to_string(),
            path_text: p.to_string(),
            path: Arc::new(compile_path(options, i, p)?),
            definite: is_definite(p),
            dest_field: d.to_string(),
            dest_type,
            on_error,
            key: format!("columns[{i}].src_field"),
        });
    }
    Ok(())
}

/// Compiles `path`; like Jayway, a path not starting with `$` or `@` is relative to the root.
fn compile_path(options: &Options, i: usize, path: &str) -> Result<JsonPath> {
    let full: Cow<str> = if path.starts_with('$') {
        Cow::Borrowed(path)
    } else if let Some(rest) = path.strip_prefix('@') {
        Cow::Owned(format!("${rest}"))
    } else if path.starts_with('[') {
        Cow::Owned(format!("${path}"))
    } else {
        Cow::Owned(format!("$.{path}"))
    };
    JsonPath::parse(&full).map_err(|e| {
        options.error(
            &format!("columns[{i}].path"),
            format!("invalid JSONPath '{path}': {e}"),
        )
    })
}

/// Whether `path` is *definite* (Jayway's word; RFC 9535's "singular query"): it has only
/// names and single indices, so it selects at most one value. Any deep scan (`..`),
/// wildcard, filter (`?`), slice (`:`) or union (`,`) outside a quoted name makes it not.
fn is_definite(path: &str) -> bool {
    let b = path.as_bytes();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = quote {
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
        } else {
            match c {
                b'\'' | b'"' => quote = Some(c),
                b'*' | b'?' | b':' | b',' => return false,
                b'.' if b.get(i + 1) == Some(&b'.') => return false,
                _ => {}
            }
        }
        i += 1;
    }
    true
}

/// How a source field's values become JSON documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SourceKind {
    /// Text holding JSON.
    Text,
    /// Bytes holding JSON text (UTF-8).
    Bytes,
    /// A row, array or map, turned into JSON (rows positionally).
    Nested,
}

fn source_kind(dt: &DataType) -> Option<SourceKind> {
    match dt {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Some(SourceKind::Text),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => Some(SourceKind::Bytes),
        DataType::List(_) | DataType::LargeList(_) | DataType::Map(_, _) | DataType::Struct(_) => {
            Some(SourceKind::Nested)
        }
        _ => None,
    }
}

/// A source field read by one or more extractions; each batch parses it once per row.
#[derive(Debug)]
struct Source {
    index: usize,
    kind: SourceKind,
}

/// One extraction bound to a table.
#[derive(Debug)]
struct Extraction {
    spec: ColumnSpec,
    /// Index into [`JsonPathPlan::sources`].
    source: usize,
}

/// The JSON documents of a source field, one per row, and the rows that were not JSON.
type Documents = (Vec<Value>, Vec<(usize, String)>);

/// What a failing value does to its row.
#[derive(Debug, Clone)]
enum Fate {
    Drop,
    Fail(String),
}

#[derive(Debug)]
struct JsonPathPlan {
    output: TableSchema,
    placement: Placement,
    sources: Vec<Source>,
    extractions: Vec<Extraction>,
    row_way: Way,
}

impl JsonPathPlan {
    fn new(
        options: &Options,
        table: &TableSchema,
        columns: &[ColumnSpec],
        row_way: Way,
    ) -> Result<Self> {
        let mut sources: Vec<Source> = Vec::new();
        let mut extractions = Vec::with_capacity(columns.len());
        let mut outputs = Vec::with_capacity(columns.len());
        for spec in columns {
            let index = find_field(options, &spec.key, table, &spec.src_field)?;
            let dt = table.schema.field(index).data_type();
            let kind = source_kind(dt).ok_or_else(|| {
                options.location().error_with_hint(
                    &spec.key,
                    format!(
                        "field '{}' of table '{}' is of type {}, which holds no JSON",
                        spec.src_field,
                        table.name,
                        type_name(dt)
                    ),
                    "src_field must be a string or bytes field holding JSON, or a row, array or map",
                )
            })?;
            let source = match sources.iter().position(|s| s.index == index) {
                Some(s) => s,
                None => {
                    sources.push(Source { index, kind });
                    sources.len() - 1
                }
            };
            outputs.push(Field::new(
                spec.dest_field.as_str(),
                spec.dest_type.clone(),
                true,
            ));
            extractions.push(Extraction {
                spec: spec.clone(),
                source,
            });
        }
        let placement = Placement::new(&table.schema, outputs);
        Ok(JsonPathPlan {
            output: table.derive(table.name.clone(), placement.schema.clone()),
            placement,
            sources,
            extractions,
            row_way,
        })
    }

    /// The JSON documents of a source field, one per row (`Null` for a null value), and
    /// the rows whose value is not JSON, with the parser's message.
    fn documents(&self, source: &Source, array: &ArrayRef) -> Result<Documents> {
        let wrong_type = || {
            FerryError::internal(format!(
                "JsonPath: column {} holds {} where its schema promised text or bytes",
                source.index,
                type_name(array.data_type())
            ))
        };
        let rows = array.len();
        let mut docs = Vec::with_capacity(rows);
        let mut bad = Vec::new();
        let mut parse = |row: usize, text: &str, docs: &mut Vec<Value>| {
            let doc = match serde_json::from_str::<Value>(text) {
                Ok(v) => v,
                // Only text that strict JSON rejects pays for the permissive reader.
                Err(e) => match lenient::parse(text) {
                    Some(v) => v,
                    None => {
                        bad.push((row, format!("value {} is not JSON: {e}", abbreviate(text))));
                        Value::Null
                    }
                },
            };
            docs.push(doc);
        };
        match source.kind {
            SourceKind::Text => {
                // One downcast per batch; the row loop only reads slices.
                let view = TextColumn::of(array).ok_or_else(wrong_type)?;
                for row in 0..rows {
                    match view.get(row) {
                        Some(s) => parse(row, s, &mut docs),
                        None => docs.push(Value::Null),
                    }
                }
            }
            SourceKind::Bytes => {
                let view = BytesColumn::of(array).ok_or_else(wrong_type)?;
                for row in 0..rows {
                    match view.get(row) {
                        Some(b) => parse(row, &String::from_utf8_lossy(b), &mut docs),
                        None => docs.push(Value::Null),
                    }
                }
            }
            SourceKind::Nested => {
                for row in 0..rows {
                    docs.push(if array.is_null(row) {
                        Value::Null
                    } else {
                        array_value_to_json(array.as_ref(), row, RowStyle::Positional)
                    });
                }
            }
        }
        Ok((docs, bad))
    }

    /// Applies extraction `e` to the documents of its source: the value of each row and
    /// the rows whose path found nothing (definite paths only).
    fn extract<'a>(
        &self,
        e: &Extraction,
        docs: &'a [Value],
        nulls: &dyn Fn(usize) -> bool,
    ) -> (Vec<Cow<'a, Value>>, Vec<(usize, String)>) {
        let mut values = Vec::with_capacity(docs.len());
        let mut missing = Vec::new();
        for (row, doc) in docs.iter().enumerate() {
            if nulls(row) {
                values.push(Cow::Owned(Value::Null));
                continue;
            }
            let nodes = e.spec.path.query(doc);
            if e.spec.definite {
                match nodes.first() {
                    Some(v) => values.push(Cow::Borrowed(v)),
                    None => {
                        missing.push((
                            row,
                            format!(
                                "no value at path {} in {}",
                                e.spec.path_text,
                                abbreviate(&doc.to_string())
                            ),
                        ));
                        values.push(Cow::Owned(Value::Null));
                    }
                }
            } else {
                values.push(Cow::Owned(Value::Array(
                    nodes.all().into_iter().cloned().collect(),
                )));
            }
        }
        (values, missing)
    }

    /// Converts the extracted values to the destination type. Values that do not convert
    /// become null and are reported with their row.
    fn convert(
        &self,
        e: &Extraction,
        values: &mut [Cow<'_, Value>],
        errors: &mut Vec<(usize, String)>,
    ) -> Result<ArrayRef> {
        let dt = &e.spec.dest_type;
        {
            let refs: Vec<&Value> = values.iter().map(|v| v.as_ref()).collect();
            if let Ok(a) = json_to_array(&refs, dt) {
                return Ok(a);
            }
        }
        // Some value does not fit: find which, one by one (only on this slow path).
        for (row, v) in values.iter_mut().enumerate() {
            if v.is_null() {
                continue;
            }
            if let Err(msg) = json_to_array(&[v.as_ref()], dt) {
                errors.push((row, msg));
                *v = Cow::Owned(Value::Null);
            }
        }
        let refs: Vec<&Value> = values.iter().map(|v| v.as_ref()).collect();
        json_to_array(&refs, dt).map_err(|msg| {
            FerryError::internal(format!(
                "JsonPath: values that each convert to {} failed together: {msg}",
                type_name(dt)
            ))
        })
    }
}

impl TablePlan for JsonPathPlan {
    fn output(&self) -> Option<TableSchema> {
        Some(self.output.clone())
    }

    fn apply(&self, batch: ChangeBatch) -> Result<Option<ChangeBatch>> {
        let rows = batch.num_rows();
        let width = batch.data.num_columns();
        let mut docs = Vec::with_capacity(self.sources.len());
        for s in &self.sources {
            if s.index >= width {
                return Err(FerryError::internal(format!(
                    "batch of table '{}' has {width} columns, but its schema has a column {}",
                    batch.table, s.index
                )));
            }
            docs.push(self.documents(s, batch.data.column(s.index))?);
        }

        let mut fates: Vec<Option<Fate>> = vec![None; rows];
        let mut outputs = Vec::with_capacity(self.extractions.len());
        for e in &self.extractions {
            let (source_docs, not_json) = &docs[e.source];
            let column = batch.data.column(self.sources[e.source].index);
            // Rows that are null, or were not JSON, give null and are not queried.
            let mut unreadable = vec![false; rows];
            for (row, _) in not_json {
                unreadable[*row] = true;
            }
            let skip = |row: usize| column.is_null(row) || unreadable[row];
            let (mut values, mut errors) = self.extract(e, source_docs, &skip);
            errors.extend(not_json.iter().cloned());
            let array = self.convert(e, &mut values, &mut errors)?;
            outputs.push(array);
            errors.sort_by_key(|(row, _)| *row);
            for (row, msg) in errors {
                let fate = match e.spec.on_error.unwrap_or(self.row_way) {
                    // A column-level SKIP leaves the field null; a row-level SKIP drops the row.
                    Way::Skip if e.spec.on_error.is_some() => continue,
                    Way::Skip | Way::SkipRow => Fate::Drop,
                    Way::Fail => Fate::Fail(format!(
                        "src_field '{}', path '{}', dest_field '{}' ({}): {msg}",
                        e.spec.src_field,
                        e.spec.path_text,
                        e.spec.dest_field,
                        type_name(&e.spec.dest_type)
                    )),
                };
                // The first failing column of a row decides, as in SeaTunnel.
                if fates[row].is_none() {
                    fates[row] = Some(fate);
                }
            }
        }

        if let Some(Fate::Fail(msg)) = fates.iter().flatten().find(|f| matches!(f, Fate::Fail(_))) {
            return Err(FerryError::data(
                "transform JsonPath",
                format!(
                    "table '{}': {msg} (set column_error_handle_way or row_error_handle_way to skip such values)",
                    batch.table
                ),
            ));
        }
        let data = self.placement.assemble(&batch.data, outputs)?;
        let out = batch.with_data(data);
        if fates.iter().all(Option::is_none) {
            return Ok(Some(out));
        }
        let keep: BooleanArray = fates.iter().map(|f| Some(f.is_none())).collect();
        let out = out.filter(&keep)?;
        Ok((out.num_rows() > 0).then_some(out))
    }
}

/// A text column of any of Arrow's string layouts, downcast once.
enum TextColumn<'a> {
    Utf8(&'a arrow::array::StringArray),
    Large(&'a arrow::array::LargeStringArray),
    View(&'a arrow::array::StringViewArray),
}

impl<'a> TextColumn<'a> {
    fn of(array: &'a ArrayRef) -> Option<Self> {
        match array.data_type() {
            DataType::LargeUtf8 => array.as_string_opt::<i64>().map(TextColumn::Large),
            DataType::Utf8View => array.as_string_view_opt().map(TextColumn::View),
            _ => array.as_string_opt::<i32>().map(TextColumn::Utf8),
        }
    }

    fn get(&self, row: usize) -> Option<&'a str> {
        match self {
            TextColumn::Utf8(a) => a.is_valid(row).then(|| a.value(row)),
            TextColumn::Large(a) => a.is_valid(row).then(|| a.value(row)),
            TextColumn::View(a) => a.is_valid(row).then(|| a.value(row)),
        }
    }
}

/// A bytes column of any of Arrow's binary layouts, downcast once.
enum BytesColumn<'a> {
    Binary(&'a arrow::array::BinaryArray),
    Large(&'a arrow::array::LargeBinaryArray),
    View(&'a arrow::array::BinaryViewArray),
}

impl<'a> BytesColumn<'a> {
    fn of(array: &'a ArrayRef) -> Option<Self> {
        match array.data_type() {
            DataType::LargeBinary => array.as_binary_opt::<i64>().map(BytesColumn::Large),
            DataType::BinaryView => array.as_binary_view_opt().map(BytesColumn::View),
            _ => array.as_binary_opt::<i32>().map(BytesColumn::Binary),
        }
    }

    fn get(&self, row: usize) -> Option<&'a [u8]> {
        match self {
            BytesColumn::Binary(a) => a.is_valid(row).then(|| a.value(row)),
            BytesColumn::Large(a) => a.is_valid(row).then(|| a.value(row)),
            BytesColumn::View(a) => a.is_valid(row).then(|| a.value(row)),
        }
    }
}

/// At most 200 characters of `s`, for error messages.
fn abbreviate(s: &str) -> String {
    const MAX: usize = 200;
    match s.char_indices().nth(MAX) {
        Some((cut, _)) => format!("'{}…'", &s[..cut]),
        None => format!("'{s}'"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testutil::*;
    use arrow::array::{
        BinaryArray, Decimal128Array, Int32Array, Int64Array, ListArray, StringArray, StructArray,
    };
    use arrow::datatypes::{Fields, Schema};
    use arrow::record_batch::RecordBatch;
    use ferry_api::value::{format_date, parse_time};
    use serde_json::json;

    /// Table `t` with one text field `data`.
    fn data_table() -> TableSchema {
        table("t", &[("data", DataType::Utf8)])
    }

    fn data_batch(values: &[Option<&str>]) -> ChangeBatch {
        let t = data_table();
        let data = RecordBatch::try_new(
            t.schema.clone(),
            vec![Arc::new(StringArray::from(values.to_vec()))],
        )
        .unwrap();
        ChangeBatch::inserts(t.name, data)
    }

    fn columns(v: Value) -> Value {
        json!({ "columns": v })
    }

    /// The value of column `name` in row `row`, as JSON.
    fn cell(b: &ChangeBatch, name: &str, row: usize) -> Value {
        let c = b.data.column_by_name(name).unwrap();
        if c.is_null(row) {
            Value::Null
        } else {
            array_value_to_json(c.as_ref(), row, RowStyle::Named)
        }
    }

    /// Runs one batch, returning the error text.
    fn run_err(t: &Arc<dyn Transform>, b: ChangeBatch) -> String {
        match t.create_instance().unwrap().transform(b) {
            Ok(r) => panic!("expected an error, got {r:?}"),
            Err(e) => e.to_string(),
        }
    }

    const DOC: &str = r#"{"data": {"c_string": "this is a string", "c_boolean": true,
        "c_integer": 42, "c_float": 3.14, "c_double": 3.14, "c_decimal": 10.55,
        "c_date": "2023-10-29", "c_datetime": "16:12:43.459",
        "c_array": ["item1", "item2", "item3"],
        "c_map_array": [{"c_string_1": "c_string_1", "c_string_2": "c_string_2"},
                        {"c_string_1": "c_string_1", "c_string_2": "c_string_2"}]}}"#;

    const NAMES: [&str; 10] = [
        "c1_string",
        "c1_boolean",
        "c1_integer",
        "c1_float",
        "c1_double",
        "c1_decimal",
        "c1_date",
        "c1_datetime",
        "c1_array",
        "c1_map_array",
    ];
    const TYPES: [&str; 10] = [
        "string",
        "boolean",
        "int",
        "float",
        "double",
        "decimal(4,2)",
        "date",
        "time",
        "array<string>",
        "array<map<string, string>>",
    ];
    const PATHS: [&str; 10] = [
        "$.data.c_string",
        "$.data.c_boolean",
        "$.data.c_integer",
        "$.data.c_float",
        "$.data.c_double",
        "$.data.c_decimal",
        "$.data.c_date",
        "$.data.c_datetime",
        "$.data.c_array",
        "$.data.c_map_array",
    ];

    // 3.14 is the docs' example value, not an approximation of π.
    #[allow(clippy::approx_constant)]
    fn check_docs_example(t: &Arc<dyn Transform>) {
        let out = &t.output_tables()[0];
        let mut expected = vec!["data"];
        expected.extend(NAMES);
        let names: Vec<&str> = out
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, expected);
        for (i, ty) in TYPES.iter().enumerate() {
            assert_eq!(
                out.schema.field(i + 1).data_type(),
                &parse_type(ty).unwrap(),
                "{ty}"
            );
        }
        let r = run(t, data_batch(&[Some(DOC)])).unwrap();
        assert_eq!(cell(&r, "c1_string", 0), json!("this is a string"));
        assert_eq!(cell(&r, "c1_boolean", 0), json!(true));
        assert_eq!(cell(&r, "c1_integer", 0), json!(42));
        assert_eq!(cell(&r, "c1_float", 0), json!(3.14));
        assert_eq!(cell(&r, "c1_double", 0), json!(3.14));
        let dec = r.data.column(6).as_any().downcast_ref::<Decimal128Array>();
        assert_eq!(dec.unwrap().value(0), 1055);
        assert_eq!(cell(&r, "c1_date", 0), json!("2023-10-29"));
        let time = r.data.column(8);
        let time = time.as_primitive::<arrow::datatypes::Time64MicrosecondType>();
        assert_eq!(Some(time.value(0)), parse_time("16:12:43.459"));
        assert_eq!(cell(&r, "c1_array", 0), json!(["item1", "item2", "item3"]));
        assert_eq!(
            cell(&r, "c1_map_array", 0),
            json!([{"c_string_1": "c_string_1", "c_string_2": "c_string_2"},
                   {"c_string_1": "c_string_1", "c_string_2": "c_string_2"}])
        );
    }

    #[test]
    fn docs_read_json_example_extracts_every_type() {
        let cols: Vec<Value> = (0..10)
            .map(|i| {
                let mut c = json!({"src_field": "data", "path": PATHS[i], "dest_field": NAMES[i]});
                // The docs leave the first one at the default type, string.
                if i > 0 {
                    c["dest_type"] = json!(TYPES[i]);
                }
                c
            })
            .collect();
        let t = create(
            &JsonPathTransformFactory,
            columns(Value::Array(cols)),
            &[data_table()],
        )
        .unwrap();
        check_docs_example(&t);
    }

    #[test]
    fn docs_batch_form_with_semicolons_is_the_same() {
        let t = create(
            &JsonPathTransformFactory,
            columns(json!([{
                "src_field": "data",
                "path": PATHS.join(";"),
                "dest_field": NAMES.join(";"),
                "dest_type": TYPES.join(";"),
            }])),
            &[data_table()],
        )
        .unwrap();
        check_docs_example(&t);
    }

    #[test]
    fn batch_form_needs_dest_type_and_matching_counts() {
        let e = create_err(
            &JsonPathTransformFactory,
            columns(json!([{"src_field": "data", "path": "$.a;$.b", "dest_field": "a;b"}])),
            &[data_table()],
        );
        assert!(
            e.contains("option 'columns[0].dest_type': is required when several paths"),
            "{e}"
        );
        let e = create_err(
            &JsonPathTransformFactory,
            columns(
                json!([{"src_field": "data", "path": "$.a;$.b", "dest_field": "a",
                             "dest_type": "int;int"}]),
            ),
            &[data_table()],
        );
        assert!(
            e.contains("found 2 paths, 1 dest_fields and 2 dest_types"),
            "{e}"
        );
    }

    #[test]
    fn seatunnel_unit_test_extracts_a_number_as_text() {
        let t = create(
            &JsonPathTransformFactory,
            columns(json!([{"src_field": "data", "path": "$.f1", "dest_field": "f1"}])),
            &[data_table()],
        )
        .unwrap();
        let r = run(&t, data_batch(&[Some(r#"{"f1": 1}"#), None])).unwrap();
        assert_eq!(strings(&r, "f1"), vec![Some("1".to_string()), None]);
    }

    /// SeaTunnel's JsonPathTransformTest.testErrorHandleWay: `$.f1` on `{"f2": 1}` under
    /// each combination of row and column handling.
    #[test]
    fn error_handle_ways_follow_seatunnel() {
        let make = |row: Option<&str>, column: Option<&str>| {
            let mut c = json!({"src_field": "data", "path": "$.f1", "dest_field": "f1"});
            if let Some(w) = column {
                c["column_error_handle_way"] = json!(w);
            }
            let mut o = columns(json!([c]));
            if let Some(w) = row {
                o["row_error_handle_way"] = json!(w);
            }
            create(&JsonPathTransformFactory, o, &[data_table()]).unwrap()
        };
        let input = || data_batch(&[Some(r#"{"f2": 1}"#)]);
        // Failing: default, column FAIL, row SKIP overridden by column FAIL.
        for (row, column) in [
            (None, None),
            (None, Some("FAIL")),
            (Some("SKIP"), Some("FAIL")),
        ] {
            let e = run_err(&make(row, column), input());
            assert!(e.starts_with("transform JsonPath: table 't': src_field 'data', path '$.f1', dest_field 'f1' (string): no value at path $.f1 in '{\"f2\":1}'"), "{e}");
        }
        // Column SKIP keeps the row with a null field, whatever the row setting.
        for row in [None, Some("FAIL")] {
            let r = run(&make(row, Some("SKIP")), input()).unwrap();
            assert_eq!(r.num_rows(), 1);
            assert_eq!(strings(&r, "f1"), vec![None]);
        }
        // Column SKIP_ROW, or row SKIP, drops the row.
        for (row, column) in [
            (None, Some("SKIP_ROW")),
            (Some("FAIL"), Some("SKIP_ROW")),
            (Some("SKIP"), None),
        ] {
            assert!(
                run(&make(row, column), input()).is_none(),
                "{row:?} {column:?}"
            );
        }
    }

    /// SeaTunnel's e2e json_path_with_error_handle_way.conf.
    #[test]
    fn e2e_error_handle_way_keeps_both_rows() {
        let t = create(
            &JsonPathTransformFactory,
            json!({"row_error_handle_way": "FAIL", "columns": [
                {"src_field": "data", "path": "$.f1", "dest_field": "data_f1"},
                {"src_field": "data", "path": "$.f2", "dest_field": "data_f2",
                 "column_error_handle_way": "SKIP"}]}),
            &[data_table()],
        )
        .unwrap();
        let r = run(
            &t,
            data_batch(&[Some(r#"{"f1": "v1"}"#), Some(r#"{"f1": "v1", "f2": "v2"}"#)]),
        )
        .unwrap();
        assert_eq!(
            strings(&r, "data_f1"),
            vec![Some("v1".into()), Some("v1".into())]
        );
        assert_eq!(strings(&r, "data_f2"), vec![None, Some("v2".into())]);
    }

    #[test]
    fn the_first_failing_column_of_a_row_decides() {
        let t = create(
            &JsonPathTransformFactory,
            columns(json!([
                {"src_field": "data", "path": "$.a", "dest_field": "a", "column_error_handle_way": "SKIP_ROW"},
                {"src_field": "data", "path": "$.b", "dest_field": "b", "column_error_handle_way": "FAIL"}])),
            &[data_table()],
        )
        .unwrap();
        // Row 0 lacks both: `a` drops it before `b` could fail. Row 1 has both.
        let r = run(&t, data_batch(&[Some("{}"), Some(r#"{"a": 1, "b": 2}"#)])).unwrap();
        assert_eq!(strings(&r, "a"), vec![Some("1".into())]);
        // A row with `a` but no `b` fails.
        let e = run_err(&t, data_batch(&[Some(r#"{"a": 1}"#)]));
        assert!(e.contains("path '$.b'"), "{e}");
    }

    #[test]
    fn conversion_and_parse_failures_are_handled_like_missing_values() {
        let t = create(
            &JsonPathTransformFactory,
            columns(
                json!([{"src_field": "data", "path": "$.n", "dest_field": "n",
                             "dest_type": "int", "column_error_handle_way": "SKIP"}]),
            ),
            &[data_table()],
        )
        .unwrap();
        let r = run(
            &t,
            data_batch(&[
                Some(r#"{"n": "12"}"#),
                Some(r#"{"n": "x"}"#),
                Some("not json"),
                Some(r#"{"n": null}"#),
            ]),
        )
        .unwrap();
        let n = r
            .data
            .column(1)
            .as_any()
            .downcast_ref::<Int32Array>()
            .unwrap();
        assert_eq!(
            n.iter().collect::<Vec<_>>(),
            vec![Some(12), None, None, None]
        );

        let t = create(
            &JsonPathTransformFactory,
            columns(json!([{"src_field": "data", "path": "$.n", "dest_field": "n", "dest_type": "int"}])),
            &[data_table()],
        )
        .unwrap();
        let e = run_err(&t, data_batch(&[Some(r#"{"n": "x"}"#)]));
        assert!(
            e.contains("(int): value \"x\" does not fit type int"),
            "{e}"
        );
        let e = run_err(&t, data_batch(&[Some("{oops")]));
        assert!(e.contains("value '{oops' is not JSON"), "{e}");
    }

    #[test]
    fn indefinite_paths_give_lists_and_never_fail_on_no_match() {
        let t = create(
            &JsonPathTransformFactory,
            columns(json!([
                {"src_field": "data", "path": "$..price", "dest_field": "prices", "dest_type": "array<double>"},
                {"src_field": "data", "path": "$.books[?(@.price < 10)].title", "dest_field": "cheap"},
                {"src_field": "data", "path": "$.books[*].title", "dest_field": "titles", "dest_type": "array<string>"}])),
            &[data_table()],
        )
        .unwrap();
        let doc = r#"{"books": [{"title": "A", "price": 8.5}, {"title": "B", "price": 12}]}"#;
        let r = run(&t, data_batch(&[Some(doc), Some("{}")])).unwrap();
        assert_eq!(cell(&r, "prices", 0), json!([8.5, 12]));
        assert_eq!(
            strings(&r, "cheap"),
            vec![Some(r#"["A"]"#.into()), Some("[]".into())]
        );
        assert_eq!(cell(&r, "titles", 0), json!(["A", "B"]));
        assert_eq!(cell(&r, "titles", 1), json!([]));
    }

    #[test]
    fn definite_paths_are_told_apart() {
        for p in [
            "$.a.b",
            "$['a'][0]",
            "$[-1]",
            "$['x..y']",
            "$[\"a,b\"]",
            "a.b",
        ] {
            assert!(is_definite(p), "{p}");
        }
        for p in [
            "$..a",
            "$.a[*]",
            "$.*",
            "$[0,1]",
            "$[1:2]",
            "$[?@.a]",
            "$['a','b']",
        ] {
            assert!(!is_definite(p), "{p}");
        }
    }

    #[test]
    fn paths_without_a_dollar_are_relative_to_the_root() {
        let t = create(
            &JsonPathTransformFactory,
            columns(json!([
                {"src_field": "data", "path": "a.b", "dest_field": "x"},
                {"src_field": "data", "path": "[0]", "dest_field": "y", "column_error_handle_way": "SKIP"}])),
            &[data_table()],
        )
        .unwrap();
        let r = run(&t, data_batch(&[Some(r#"{"a": {"b": "deep"}}"#)])).unwrap();
        assert_eq!(strings(&r, "x"), vec![Some("deep".into())]);
        assert_eq!(strings(&r, "y"), vec![None]);
    }

    /// The docs' "Read SeatunnelRow" example: a row field is read as a positional list.
    #[test]
    fn docs_row_example_reads_fields_by_position() {
        let fields = Fields::from(vec![
            Field::new("name", DataType::Utf8, true),
            Field::new("age", DataType::Int32, true),
        ]);
        let col = StructArray::try_new(
            fields.clone(),
            vec![
                Arc::new(StringArray::from(vec!["a"])),
                Arc::new(Int32Array::from(vec![18])),
            ],
            None,
        )
        .unwrap();
        let schema = Arc::new(Schema::new(vec![
            Field::new("col", DataType::Struct(fields), true),
            Field::new("other", DataType::Int64, true),
        ]));
        let input = TableSchema::new("t", schema.clone());
        let t = create(
            &JsonPathTransformFactory,
            json!({"row_error_handle_way": "FAIL", "columns": [
                {"src_field": "col", "path": "$[0]", "dest_field": "name", "dest_type": "string"},
                {"src_field": "col", "path": "$[1]", "dest_field": "age", "dest_type": "int"}]}),
            &[input],
        )
        .unwrap();
        let data = RecordBatch::try_new(
            schema,
            vec![Arc::new(col), Arc::new(Int64Array::from(vec![7]))],
        )
        .unwrap();
        let r = run(&t, ChangeBatch::inserts("t".into(), data)).unwrap();
        assert_eq!(names(&r), ["col", "other", "name", "age"]);
        assert_eq!(strings(&r, "name"), vec![Some("a".into())]);
        assert_eq!(cell(&r, "age", 0), json!(18));
    }

    /// SeaTunnel's e2e array_test.conf: `$[0]` of an array<string> field.
    #[test]
    fn array_and_bytes_sources() {
        let list = ListArray::from_iter_primitive::<arrow::datatypes::Int32Type, _, _>(vec![
            Some(vec![Some(5), Some(6)]),
            None,
        ]);
        let schema = Arc::new(Schema::new(vec![
            Field::new("arr", list.data_type().clone(), true),
            Field::new("raw", DataType::Binary, true),
        ]));
        let t = create(
            &JsonPathTransformFactory,
            columns(json!([
                {"src_field": "arr", "path": "$[0]", "dest_field": "first", "dest_type": "bigint"},
                {"src_field": "raw", "path": "$.k", "dest_field": "k"}])),
            &[TableSchema::new("t", schema.clone())],
        )
        .unwrap();
        let data = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(list),
                Arc::new(BinaryArray::from(vec![Some(&br#"{"k": "v"}"#[..]), None])),
            ],
        )
        .unwrap();
        let r = run(&t, ChangeBatch::inserts("t".into(), data)).unwrap();
        assert_eq!(cell(&r, "first", 0), json!(5));
        assert_eq!(cell(&r, "first", 1), Value::Null);
        assert_eq!(strings(&r, "k"), vec![Some("v".into()), None]);
    }

    #[test]
    fn a_dest_field_named_like_an_existing_one_replaces_it_in_place() {
        let t = create(
            &JsonPathTransformFactory,
            columns(json!([{"src_field": "data", "path": "$.d", "dest_field": "data", "dest_type": "date"}])),
            &[data_table()],
        )
        .unwrap();
        assert_eq!(
            t.output_tables()[0].schema.field(0).data_type(),
            &DataType::Date32
        );
        let r = run(&t, data_batch(&[Some(r#"{"d": "2024-02-29"}"#)])).unwrap();
        assert_eq!(names(&r), ["data"]);
        let d = r
            .data
            .column(0)
            .as_primitive::<arrow::datatypes::Date32Type>();
        assert_eq!(format_date(d.value(0)), "2024-02-29");
    }

    #[test]
    fn row_kinds_survive_dropped_rows() {
        let t = create(
            &JsonPathTransformFactory,
            json!({"row_error_handle_way": "SKIP",
                   "columns": [{"src_field": "name", "path": "$.x", "dest_field": "x"}]}),
            &[people()],
        )
        .unwrap();
        let b = people_batch(
            vec![Some(1), Some(2), Some(3)],
            vec![Some(r#"{"x": "a"}"#), Some("{}"), Some(r#"{"x": "c"}"#)],
            vec![0, 3, 2],
        );
        let r = run(&t, b).unwrap();
        assert_eq!(kinds(&r), ["+I", "+U"]);
        assert_eq!(strings(&r, "x"), vec![Some("a".into()), Some("c".into())]);
    }

    #[test]
    fn applies_to_each_input_table() {
        let other = table("u", &[("k", DataType::Int32), ("data", DataType::Utf8)]);
        let t = create(
            &JsonPathTransformFactory,
            columns(json!([{"src_field": "data", "path": "$.a", "dest_field": "a"}])),
            &[data_table(), other],
        )
        .unwrap();
        let outs = t.output_tables();
        assert_eq!(outs.len(), 2);
        assert_eq!(outs[1].name.as_ref(), "u");
        assert_eq!(outs[1].schema.fields().len(), 3);
    }

    #[test]
    fn configuration_mistakes_are_reported_before_data_flows() {
        let f = &JsonPathTransformFactory;
        let t = [data_table()];
        let cases = [
            (json!({}), "option 'columns': is required but not set"),
            (columns(json!([])), "option 'columns': must list at least one"),
            (columns(json!(["x"])), "option 'columns[0]': expected a block"),
            (
                columns(json!([{"src_field": "data", "path": "$.a"}])),
                "option 'columns[0].dest_field': is required and must not be empty",
            ),
            (
                columns(json!([{"src_field": "data", "path": "$.a", "dest_field": "a", "typo": 1}])),
                "option 'columns[0].typo': unknown entry",
            ),
            (
                columns(json!([{"src_field": "nope", "path": "$.a", "dest_field": "a"}])),
                "option 'columns[0].src_field': field 'nope' not found in table 't' (available fields: data)",
            ),
            (
                columns(json!([{"src_field": "data", "path": "$.a[", "dest_field": "a"}])),
                "option 'columns[0].path': invalid JSONPath '$.a['",
            ),
            (
                columns(json!([{"src_field": "data", "path": "$.a", "dest_field": "a", "dest_type": "strnig"}])),
                "option 'columns[0].dest_type': unknown type 'strnig'",
            ),
            (
                columns(json!([{"src_field": "data", "path": "$.a", "dest_field": "a",
                                "column_error_handle_way": "IGNORE"}])),
                "option 'columns[0].column_error_handle_way': invalid value 'IGNORE' (valid values: FAIL, SKIP, SKIP_ROW)",
            ),
            (
                json!({"row_error_handle_way": "SKIP_ROW",
                       "columns": [{"src_field": "data", "path": "$.a", "dest_field": "a"}]}),
                "option 'row_error_handle_way': invalid value 'SKIP_ROW' (valid values: FAIL, SKIP)",
            ),
            (
                json!({"colums": 1, "columns": [{"src_field": "data", "path": "$.a", "dest_field": "a"}]}),
                "option 'colums': unknown option (did you mean 'columns'?",
            ),
        ];
        for (v, expected) in cases {
            let e = create_err(f, v, &t);
            assert!(e.contains(expected), "{e}\nexpected: {expected}");
        }
        let e = create_err(
            f,
            columns(json!([{"src_field": "id", "path": "$.a", "dest_field": "a"}])),
            &[people()],
        );
        assert!(
            e.contains("field 'id' of table 't' is of type int, which holds no JSON"),
            "{e}"
        );
    }
}
