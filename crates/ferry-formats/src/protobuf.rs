//! SeaTunnel's `protobuf` format: each message one Protocol Buffers message of
//! `protobuf_message_name`, described by the `.proto` text in `protobuf_schema`.
//!
//! The `.proto` text is read here (no `protoc`): `syntax`, `package`, `option`, `message`
//! (nested too), `enum`, `oneof`, `map<K, V>`, `repeated`/`optional` fields and field
//! options; `import` is refused (the schema must be one text). Columns map to fields as
//! SeaTunnel's converters map them: by name, a `row` column to the message field named
//! like it in lower case (`Address` → `address`); a missing field reads as the proto3
//! default (0, "", false, an empty list, a message of defaults), a column with no field as
//! null. Repeated scalars are read packed or not, and written packed (proto3's default).

use std::collections::BTreeMap;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{
    DataType, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, Schema,
};
use base64::Engine;
use serde_json::{Map, Number, Value};

/// A field's wire type and meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Double,
    Float,
    Int32,
    Int64,
    UInt32,
    UInt64,
    SInt32,
    SInt64,
    Fixed32,
    Fixed64,
    SFixed32,
    SFixed64,
    Bool,
    String,
    Bytes,
    Enum,
    /// A message: its index in [`Proto::messages`].
    Message(usize),
}

impl Kind {
    fn scalar(name: &str) -> Option<Kind> {
        Some(match name {
            "double" => Kind::Double,
            "float" => Kind::Float,
            "int32" => Kind::Int32,
            "int64" => Kind::Int64,
            "uint32" => Kind::UInt32,
            "uint64" => Kind::UInt64,
            "sint32" => Kind::SInt32,
            "sint64" => Kind::SInt64,
            "fixed32" => Kind::Fixed32,
            "fixed64" => Kind::Fixed64,
            "sfixed32" => Kind::SFixed32,
            "sfixed64" => Kind::SFixed64,
            "bool" => Kind::Bool,
            "string" => Kind::String,
            "bytes" => Kind::Bytes,
            _ => return None,
        })
    }

    fn wire(self) -> u8 {
        match self {
            Kind::Double | Kind::Fixed64 | Kind::SFixed64 => 1,
            Kind::Float | Kind::Fixed32 | Kind::SFixed32 => 5,
            Kind::String | Kind::Bytes | Kind::Message(_) => 2,
            _ => 0,
        }
    }

    fn integer(self) -> bool {
        !matches!(
            self,
            Kind::Double | Kind::Float | Kind::Bool | Kind::String | Kind::Bytes | Kind::Message(_)
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Field {
    name: String,
    number: u32,
    kind: Kind,
    repeated: bool,
    /// `map<K, V>`: the key and value kinds (the field's kind is then its entry message).
    map: Option<(Kind, Kind)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Message {
    full_name: String,
    fields: Vec<Field>,
}

impl Message {
    /// The field for column `name`: by name, else by the name in lower case.
    fn field(&self, name: &str) -> Option<&Field> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .or_else(|| self.fields.iter().find(|f| f.name == name.to_lowercase()))
    }
}

/// A parsed `.proto` text and the message rows are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proto {
    messages: Vec<Message>,
    root: usize,
}

// ------------------------------------------------------------------------ the .proto text

struct Tokens<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Tokens<'a> {
    fn line(&self) -> usize {
        self.text[..self.at].matches('\n').count() + 1
    }

    fn skip_space(&mut self) {
        loop {
            let rest = &self.text[self.at..];
            let trimmed = rest.trim_start();
            self.at += rest.len() - trimmed.len();
            if trimmed.starts_with("//") {
                self.at += trimmed.find('\n').unwrap_or(trimmed.len());
            } else if let Some(body) = trimmed.strip_prefix("/*") {
                self.at += body.find("*/").map_or(trimmed.len(), |e| e + 4);
            } else {
                return;
            }
        }
    }

    /// The next token: a word, a number, a quoted text or one symbol.
    fn next(&mut self) -> Option<&'a str> {
        self.skip_space();
        let rest = &self.text[self.at..];
        let c = rest.chars().next()?;
        let len = if c.is_alphanumeric() || c == '_' || c == '.' || c == '-' {
            rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.' || c == '-'))
                .unwrap_or(rest.len())
        } else if c == '"' || c == '\'' {
            rest[1..].find(c).map_or(rest.len(), |e| e + 2)
        } else {
            c.len_utf8()
        };
        self.at += len;
        Some(&rest[..len])
    }

    fn peek(&mut self) -> Option<&'a str> {
        let at = self.at;
        let t = self.next();
        self.at = at;
        t
    }

    fn expect(&mut self, what: &str) -> Result<(), String> {
        match self.next() {
            Some(t) if t == what => Ok(()),
            Some(t) => Err(format!(
                "line {}: expected '{what}', found '{t}'",
                self.line()
            )),
            None => Err(format!("expected '{what}', found the end")),
        }
    }

    fn word(&mut self, what: &str) -> Result<&'a str, String> {
        match self.next() {
            Some(t)
                if t.chars()
                    .next()
                    .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '.') =>
            {
                Ok(t)
            }
            Some(t) => Err(format!(
                "line {}: expected {what}, found '{t}'",
                self.line()
            )),
            None => Err(format!("expected {what}, found the end")),
        }
    }

    /// Skips to the end of the statement (`;`), or past a `{ … }` block.
    fn skip_statement(&mut self) -> Result<(), String> {
        let mut depth = 0usize;
        loop {
            match self.next() {
                None => return Err("the text ends inside a statement".into()),
                Some("{") => depth += 1,
                Some("}") if depth <= 1 => return Ok(()),
                Some("}") => depth -= 1,
                Some(";") if depth == 0 => return Ok(()),
                Some(_) => {}
            }
        }
    }
}

/// A field as written, its type not yet resolved.
struct RawField {
    name: String,
    number: u32,
    type_name: String,
    repeated: bool,
    map: Option<(String, String)>,
}

struct Parser<'a> {
    t: Tokens<'a>,
    package: String,
    /// Messages by full name, each with its raw fields.
    messages: Vec<(String, Vec<RawField>)>,
    enums: Vec<String>,
}

impl Parser<'_> {
    fn file(&mut self) -> Result<(), String> {
        while let Some(tok) = self.t.next() {
            match tok {
                "syntax" | "option" | "edition" => self.t.skip_statement()?,
                "package" => {
                    self.package = self.t.word("a package name")?.to_string();
                    self.t.expect(";")?;
                }
                "import" => {
                    return Err(format!(
                        "line {}: imports are not supported: put every message in protobuf_schema",
                        self.t.line()
                    ))
                }
                "message" => {
                    let scope = self.package.clone();
                    self.message(&scope)?;
                }
                "enum" => {
                    let scope = self.package.clone();
                    self.enumeration(&scope)?;
                }
                "service" | "extend" => self.t.skip_statement()?,
                ";" => {}
                other => return Err(format!("line {}: unexpected '{other}'", self.t.line())),
            }
        }
        Ok(())
    }

    fn qualify(scope: &str, name: &str) -> String {
        if scope.is_empty() {
            name.to_string()
        } else {
            format!("{scope}.{name}")
        }
    }

    fn enumeration(&mut self, scope: &str) -> Result<(), String> {
        let name = self.t.word("an enum name")?;
        self.enums.push(Self::qualify(scope, name));
        self.t.expect("{")?;
        // Values are read as their numbers: their names do not matter here.
        let mut depth = 1;
        while depth > 0 {
            match self.t.next() {
                None => return Err("the text ends inside an enum".into()),
                Some("{") => depth += 1,
                Some("}") => depth -= 1,
                Some(_) => {}
            }
        }
        Ok(())
    }

    fn message(&mut self, scope: &str) -> Result<(), String> {
        let name = self.t.word("a message name")?;
        let full = Self::qualify(scope, name);
        let index = self.messages.len();
        self.messages.push((full.clone(), Vec::new()));
        self.t.expect("{")?;
        self.body(&full, index, "}")
    }

    /// Fields and nested definitions up to `end`.
    fn body(&mut self, full: &str, index: usize, end: &str) -> Result<(), String> {
        loop {
            let Some(tok) = self.t.next() else {
                return Err(format!("message {full} is not closed"));
            };
            match tok {
                t if t == end => return Ok(()),
                "message" => self.message(full)?,
                "enum" => self.enumeration(full)?,
                "oneof" => {
                    self.t.word("a oneof name")?;
                    self.t.expect("{")?;
                    self.body(full, index, "}")?;
                }
                "option" | "reserved" | "extensions" | "extend" => self.t.skip_statement()?,
                ";" => {}
                "map" if self.t.peek() == Some("<") => {
                    self.t.expect("<")?;
                    let k = self.t.word("a map key type")?.to_string();
                    self.t.expect(",")?;
                    let v = self.t.word("a map value type")?.to_string();
                    self.t.expect(">")?;
                    let f = self.field_rest(String::new(), false, Some((k, v)))?;
                    self.messages[index].1.push(f);
                }
                "repeated" | "optional" | "required" => {
                    let ty = self.t.word("a field type")?.to_string();
                    let f = self.field_rest(ty, tok == "repeated", None)?;
                    self.messages[index].1.push(f);
                }
                ty => {
                    let f = self.field_rest(ty.to_string(), false, None)?;
                    self.messages[index].1.push(f);
                }
            }
        }
    }

    fn field_rest(
        &mut self,
        type_name: String,
        repeated: bool,
        map: Option<(String, String)>,
    ) -> Result<RawField, String> {
        let name = self.t.word("a field name")?.to_string();
        self.t.expect("=")?;
        let line = self.t.line();
        let number = self
            .t
            .next()
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("line {line}: field {name} needs a positive number"))?;
        match self.t.next() {
            Some(";") => {}
            Some("[") => {
                while !matches!(self.t.next(), Some("]") | None) {}
                self.t.expect(";")?;
            }
            other => {
                return Err(format!(
                    "line {}: expected ';' after field {name}, found {other:?}",
                    self.t.line()
                ))
            }
        }
        Ok(RawField {
            name,
            number,
            type_name,
            repeated,
            map,
        })
    }

    /// The kind `name` names, seen from inside message `scope` (innermost scope first, as
    /// protoc resolves names).
    fn resolve(&self, scope: &str, name: &str) -> Result<Kind, String> {
        if let Some(k) = Kind::scalar(name) {
            return Ok(k);
        }
        let candidates: Vec<String> = if let Some(abs) = name.strip_prefix('.') {
            vec![abs.to_string()]
        } else {
            let mut out = Vec::new();
            let mut s = scope;
            loop {
                out.push(Self::qualify(s, name));
                match s.rfind('.') {
                    Some(i) => s = &s[..i],
                    None if !s.is_empty() => s = "",
                    None => break,
                }
            }
            out
        };
        for c in &candidates {
            if let Some(i) = self.messages.iter().position(|(n, _)| n == c) {
                return Ok(Kind::Message(i));
            }
            if self.enums.contains(c) {
                return Ok(Kind::Enum);
            }
        }
        Err(format!("type '{name}' (in {scope}) is not defined"))
    }
}

impl Proto {
    /// Parses `text` and picks message `name` (its simple or full name).
    pub fn parse(text: &str, name: &str) -> Result<Proto, String> {
        let mut p = Parser {
            t: Tokens { text, at: 0 },
            package: String::new(),
            messages: Vec::new(),
            enums: Vec::new(),
        };
        p.file()?;
        let mut messages = Vec::with_capacity(p.messages.len());
        for (full, raw) in &p.messages {
            let mut fields = Vec::with_capacity(raw.len());
            for f in raw {
                let (kind, map) = match &f.map {
                    Some((k, v)) => {
                        let (k, v) = (p.resolve(full, k)?, p.resolve(full, v)?);
                        (Kind::Bytes, Some((k, v)))
                    }
                    None => (p.resolve(full, &f.type_name)?, None),
                };
                fields.push(Field {
                    name: f.name.clone(),
                    number: f.number,
                    kind,
                    repeated: f.repeated || map.is_some(),
                    map,
                });
            }
            messages.push(Message {
                full_name: full.clone(),
                fields,
            });
        }
        let root = messages
            .iter()
            .position(|m| m.full_name == name || m.full_name.rsplit('.').next() == Some(name))
            .ok_or_else(|| {
                format!(
                    "protobuf_message_name '{name}' is not a message of protobuf_schema (it has {})",
                    messages
                        .iter()
                        .map(|m| m.full_name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
        Ok(Proto { messages, root })
    }

    /// Whether every column of `schema` fits the field it maps to; `writing`: every column
    /// needs a field (reading, a column without one is null).
    pub fn check(&self, schema: &Schema, writing: bool) -> Result<(), String> {
        for f in schema.fields() {
            self.check_column(self.root, f.name(), f.data_type(), writing)?;
        }
        Ok(())
    }

    fn check_column(
        &self,
        msg: usize,
        name: &str,
        dt: &DataType,
        writing: bool,
    ) -> Result<(), String> {
        let m = &self.messages[msg];
        let Some(field) = m.field(name) else {
            return if writing {
                Err(format!(
                    "column '{name}' has no field in message {}",
                    m.full_name
                ))
            } else {
                Ok(())
            };
        };
        let fits = |dt: &DataType, kind: Kind| -> Result<(), String> {
            let ok = match (dt, kind) {
                (DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64, k) => {
                    k.integer()
                }
                (DataType::Float32 | DataType::Float64, Kind::Float | Kind::Double) => true,
                (DataType::Boolean, Kind::Bool) => true,
                (DataType::Utf8 | DataType::LargeUtf8, Kind::String) => true,
                (DataType::Binary | DataType::LargeBinary, Kind::Bytes) => true,
                (DataType::Struct(fields), Kind::Message(i)) => {
                    for f in fields {
                        self.check_column(i, f.name(), f.data_type(), writing)?;
                    }
                    true
                }
                _ => false,
            };
            if ok {
                Ok(())
            } else {
                Err(format!(
                    "column '{name}' of type {dt} does not fit field {} ({kind:?}) of {}",
                    field.name, m.full_name
                ))
            }
        };
        match (dt, field.map, field.repeated) {
            (DataType::Map(entries, _), Some((k, v)), _) => match entries.data_type() {
                DataType::Struct(kv) if kv.len() == 2 => {
                    fits(kv[0].data_type(), k)?;
                    fits(kv[1].data_type(), v)
                }
                other => Err(format!("column '{name}': unexpected map entries {other}")),
            },
            (DataType::List(item), None, true) => fits(item.data_type(), field.kind),
            (DataType::List(_) | DataType::Map(..), _, _) | (_, Some(_), _) | (_, None, true) => {
                Err(format!(
                    "column '{name}' of type {dt} does not fit field {} of {} ({})",
                    field.name,
                    m.full_name,
                    if field.map.is_some() {
                        "a map"
                    } else if field.repeated {
                        "repeated"
                    } else {
                        "a single value"
                    }
                ))
            }
            _ => fits(dt, field.kind),
        }
    }
}

// ------------------------------------------------------------------------ the wire format

/// One encoded value as it came off the wire.
#[derive(Debug, Clone, Copy)]
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Bytes(&'a [u8]),
}

fn varint(b: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b
            .get(*at)
            .ok_or_else(|| format!("the message ends inside a varint (byte {at})"))?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(format!("a varint longer than 10 bytes (byte {at})"))
}

fn take<'a>(b: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], String> {
    let end = at
        .checked_add(n)
        .filter(|e| *e <= b.len())
        .ok_or_else(|| format!("the message ends early (byte {at})"))?;
    let s = &b[*at..end];
    *at = end;
    Ok(s)
}

/// Every field of one message: number → its values in order.
fn fields(b: &[u8]) -> Result<BTreeMap<u32, Vec<Wire<'_>>>, String> {
    let mut out: BTreeMap<u32, Vec<Wire<'_>>> = BTreeMap::new();
    let mut at = 0;
    while at < b.len() {
        let key = varint(b, &mut at)?;
        let number = u32::try_from(key >> 3).map_err(|_| format!("field number {}", key >> 3))?;
        let v = match key & 7 {
            0 => Wire::Varint(varint(b, &mut at)?),
            1 => {
                let s = take(b, &mut at, 8)?;
                Wire::Fixed64(u64::from_le_bytes(s.try_into().map_err(|_| "8 bytes")?))
            }
            2 => {
                let n = usize::try_from(varint(b, &mut at)?).map_err(|_| "a length")?;
                Wire::Bytes(take(b, &mut at, n)?)
            }
            5 => {
                let s = take(b, &mut at, 4)?;
                Wire::Fixed32(u32::from_le_bytes(s.try_into().map_err(|_| "4 bytes")?))
            }
            w => return Err(format!("wire type {w} of field {number} is not supported")),
        };
        if number == 0 {
            return Err("field number 0".into());
        }
        out.entry(number).or_default().push(v);
    }
    Ok(out)
}

fn float(v: f64) -> Value {
    Number::from_f64(v).map_or_else(|| Value::String(v.to_string()), Value::Number)
}

/// A scalar of `kind` from the wire.
fn scalar(kind: Kind, w: Wire<'_>) -> Result<Value, String> {
    Ok(match (kind, w) {
        (Kind::Int32 | Kind::Enum, Wire::Varint(v)) => Value::from(v as i64 as i32),
        (Kind::Int64, Wire::Varint(v)) => Value::from(v as i64),
        (Kind::UInt32, Wire::Varint(v)) => Value::from(v as u32),
        (Kind::UInt64, Wire::Varint(v)) => Value::from(v),
        (Kind::SInt32 | Kind::SInt64, Wire::Varint(v)) => {
            Value::from(((v >> 1) as i64) ^ -((v & 1) as i64))
        }
        (Kind::Bool, Wire::Varint(v)) => Value::Bool(v != 0),
        (Kind::Fixed32, Wire::Fixed32(v)) => Value::from(v),
        (Kind::SFixed32, Wire::Fixed32(v)) => Value::from(v as i32),
        (Kind::Float, Wire::Fixed32(v)) => float(f64::from(f32::from_bits(v))),
        (Kind::Fixed64, Wire::Fixed64(v)) => Value::from(v),
        (Kind::SFixed64, Wire::Fixed64(v)) => Value::from(v as i64),
        (Kind::Double, Wire::Fixed64(v)) => float(f64::from_bits(v)),
        (Kind::String, Wire::Bytes(b)) => Value::String(
            std::str::from_utf8(b)
                .map_err(|e| format!("a string that is not UTF-8: {e}"))?
                .to_string(),
        ),
        (Kind::Bytes, Wire::Bytes(b)) => {
            Value::String(base64::engine::general_purpose::STANDARD.encode(b))
        }
        (k, w) => return Err(format!("a {k:?} field sent as {w:?}")),
    })
}

/// The proto3 default of a field of `kind`, as a column of type `dt` reads it.
fn default(proto: &Proto, kind: Kind, dt: &DataType) -> Result<Value, String> {
    Ok(match (kind, dt) {
        (Kind::String, _) => Value::String(String::new()),
        (Kind::Bytes, _) => Value::String(String::new()),
        (Kind::Bool, _) => Value::Bool(false),
        (Kind::Message(i), DataType::Struct(_)) => message(proto, i, &[], dt)?,
        (Kind::Message(_), _) => Value::Null,
        _ => Value::from(0),
    })
}

/// The values of the repeated `field`, packed scalars unpacked.
fn repeated<'a>(field: &Field, values: &[Wire<'a>]) -> Result<Vec<Wire<'a>>, String> {
    let mut out = Vec::new();
    for w in values {
        match (w, field.kind.wire()) {
            (Wire::Bytes(b), 0 | 1 | 5) => {
                let mut at = 0;
                while at < b.len() {
                    out.push(match field.kind.wire() {
                        0 => Wire::Varint(varint(b, &mut at)?),
                        1 => Wire::Fixed64(u64::from_le_bytes(
                            take(b, &mut at, 8)?.try_into().map_err(|_| "8 bytes")?,
                        )),
                        _ => Wire::Fixed32(u32::from_le_bytes(
                            take(b, &mut at, 4)?.try_into().map_err(|_| "4 bytes")?,
                        )),
                    });
                }
            }
            _ => out.push(*w),
        }
    }
    Ok(out)
}

/// The value of `field` (its wire values `values`) as a column of type `dt` reads it.
fn value(
    proto: &Proto,
    field: &Field,
    values: &[Wire<'_>],
    dt: &DataType,
) -> Result<Value, String> {
    if let (Some((kk, vk)), DataType::Map(entries, _)) = (field.map, dt) {
        let DataType::Struct(kv) = entries.data_type() else {
            return Err(format!("unexpected map entries {}", entries.data_type()));
        };
        let mut m = Map::new();
        for w in values {
            let Wire::Bytes(b) = w else {
                return Err(format!("map field {} sent as {w:?}", field.name));
            };
            let entry = fields(b)?;
            let one = |n: u32, kind: Kind, dt: &DataType| -> Result<Value, String> {
                match entry.get(&n).and_then(|v| v.last()) {
                    Some(Wire::Bytes(b)) if matches!(kind, Kind::Message(_)) => {
                        let Kind::Message(i) = kind else {
                            unreachable!()
                        };
                        message(proto, i, b, dt)
                    }
                    Some(w) => scalar(kind, *w),
                    None => default(proto, kind, dt),
                }
            };
            let k = match one(1, kk, kv[0].data_type())? {
                Value::String(s) => s,
                other => other.to_string(),
            };
            m.insert(k, one(2, vk, kv[1].data_type())?);
        }
        return Ok(Value::Object(m));
    }
    let one = |w: Wire<'_>, dt: &DataType| -> Result<Value, String> {
        match (field.kind, w) {
            (Kind::Message(i), Wire::Bytes(b)) => message(proto, i, b, dt),
            (k, w) => scalar(k, w),
        }
    };
    if field.repeated {
        let DataType::List(item) = dt else {
            return Err(format!("repeated field {} into a {dt} column", field.name));
        };
        return repeated(field, values)?
            .into_iter()
            .map(|w| one(w, item.data_type()))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array);
    }
    match values.last() {
        Some(w) => one(*w, dt),
        None => default(proto, field.kind, dt),
    }
}

/// Message `msg` in `b` as the object of a row of the struct type `dt` (or of the
/// table's columns for the root).
fn message(proto: &Proto, msg: usize, b: &[u8], dt: &DataType) -> Result<Value, String> {
    let DataType::Struct(cols) = dt else {
        return Err(format!(
            "message {} into a {dt} column",
            proto.messages[msg].full_name
        ));
    };
    let wire = fields(b)?;
    let m = &proto.messages[msg];
    let mut row = Map::new();
    for c in cols {
        let v = match m.field(c.name()) {
            Some(f) => value(
                proto,
                f,
                wire.get(&f.number).map_or(&[][..], Vec::as_slice),
                c.data_type(),
            )
            .map_err(|e| format!("field {}: {e}", f.name))?,
            None => Value::Null,
        };
        row.insert(c.name().clone(), v);
    }
    Ok(Value::Object(row))
}

/// One message body as a row of `schema`.
pub(crate) fn decode_row(
    proto: &Proto,
    body: &[u8],
    schema: &Schema,
) -> Result<Map<String, Value>, String> {
    match message(
        proto,
        proto.root,
        body,
        &DataType::Struct(schema.fields().clone()),
    )? {
        Value::Object(m) => Ok(m),
        _ => Err("not a message".into()),
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_key(out: &mut Vec<u8>, number: u32, wire: u8) {
    put_varint(out, (u64::from(number) << 3) | u64::from(wire));
}

/// Value `i` of `array` as a scalar of `kind`, without its key.
fn put_scalar(out: &mut Vec<u8>, kind: Kind, array: &dyn Array, i: usize) -> Result<(), String> {
    let int = || -> Option<i64> {
        Some(match array.data_type() {
            DataType::Int8 => i64::from(array.as_primitive::<Int8Type>().value(i)),
            DataType::Int16 => i64::from(array.as_primitive::<Int16Type>().value(i)),
            DataType::Int32 => i64::from(array.as_primitive::<Int32Type>().value(i)),
            DataType::Int64 => array.as_primitive::<Int64Type>().value(i),
            _ => return None,
        })
    };
    let real = || -> Option<f64> {
        Some(match array.data_type() {
            DataType::Float32 => f64::from(array.as_primitive::<Float32Type>().value(i)),
            DataType::Float64 => array.as_primitive::<Float64Type>().value(i),
            _ => return None,
        })
    };
    let mismatch = || format!("a {} value for a {kind:?} field", array.data_type());
    match kind {
        Kind::Int32 | Kind::Int64 | Kind::UInt32 | Kind::UInt64 | Kind::Enum => {
            put_varint(out, int().ok_or_else(mismatch)? as u64)
        }
        Kind::SInt32 | Kind::SInt64 => {
            let v = int().ok_or_else(mismatch)?;
            put_varint(out, ((v << 1) ^ (v >> 63)) as u64)
        }
        Kind::Fixed32 | Kind::SFixed32 => {
            out.extend_from_slice(&(int().ok_or_else(mismatch)? as u32).to_le_bytes())
        }
        Kind::Fixed64 | Kind::SFixed64 => {
            out.extend_from_slice(&(int().ok_or_else(mismatch)? as u64).to_le_bytes())
        }
        Kind::Float => out.extend_from_slice(&(real().ok_or_else(mismatch)? as f32).to_le_bytes()),
        Kind::Double => out.extend_from_slice(&real().ok_or_else(mismatch)?.to_le_bytes()),
        Kind::Bool => out.push(u8::from(
            array.as_boolean_opt().ok_or_else(mismatch)?.value(i),
        )),
        Kind::String | Kind::Bytes => {
            let b: &[u8] = match array.data_type() {
                DataType::Utf8 => array.as_string::<i32>().value(i).as_bytes(),
                DataType::LargeUtf8 => array.as_string::<i64>().value(i).as_bytes(),
                DataType::Binary => array.as_binary::<i32>().value(i),
                DataType::LargeBinary => array.as_binary::<i64>().value(i),
                _ => return Err(mismatch()),
            };
            put_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        Kind::Message(_) => return Err(mismatch()),
    }
    Ok(())
}

/// Value `i` of `array` as field `field` (key included; nothing for a null).
fn put_field(
    proto: &Proto,
    out: &mut Vec<u8>,
    field: &Field,
    array: &dyn Array,
    i: usize,
) -> Result<(), String> {
    if array.is_null(i) {
        return Ok(());
    }
    let one = |out: &mut Vec<u8>, kind: Kind, a: &dyn Array, j: usize| -> Result<(), String> {
        match kind {
            Kind::Message(m) => {
                let mut inner = Vec::new();
                let row = a.as_struct_opt().ok_or("a row")?;
                put_message(proto, m, &mut inner, row.fields(), row.columns(), j)?;
                put_varint(out, inner.len() as u64);
                out.extend_from_slice(&inner);
                Ok(())
            }
            k => put_scalar(out, k, a, j),
        }
    };
    if let Some((kk, vk)) = field.map {
        let entries = array.as_map().value(i);
        for j in 0..entries.len() {
            let mut e = Vec::new();
            put_key(&mut e, 1, kk.wire());
            one(&mut e, kk, entries.column(0).as_ref(), j)?;
            if !entries.column(1).is_null(j) {
                put_key(&mut e, 2, vk.wire());
                one(&mut e, vk, entries.column(1).as_ref(), j)?;
            }
            put_key(out, field.number, 2);
            put_varint(out, e.len() as u64);
            out.extend_from_slice(&e);
        }
        return Ok(());
    }
    if field.repeated {
        let items = array.as_list::<i32>().value(i);
        if field.kind.wire() != 2 {
            // Packed, as proto3 writes repeated scalars.
            let mut packed = Vec::new();
            for j in 0..items.len() {
                one(&mut packed, field.kind, items.as_ref(), j)?;
            }
            if !packed.is_empty() {
                put_key(out, field.number, 2);
                put_varint(out, packed.len() as u64);
                out.extend_from_slice(&packed);
            }
        } else {
            for j in 0..items.len() {
                put_key(out, field.number, 2);
                one(out, field.kind, items.as_ref(), j)?;
            }
        }
        return Ok(());
    }
    put_key(out, field.number, field.kind.wire());
    one(out, field.kind, array, i)
}

fn put_message(
    proto: &Proto,
    msg: usize,
    out: &mut Vec<u8>,
    fields: &arrow::datatypes::Fields,
    columns: &[arrow::array::ArrayRef],
    i: usize,
) -> Result<(), String> {
    let m = &proto.messages[msg];
    for (f, c) in fields.iter().zip(columns) {
        let field = m.field(f.name()).ok_or_else(|| {
            format!(
                "column '{}' has no field in message {}",
                f.name(),
                m.full_name
            )
        })?;
        put_field(proto, out, field, c.as_ref(), i)
            .map_err(|e| format!("column '{}': {e}", f.name()))?;
    }
    Ok(())
}

/// Row `i` of `batch` as one message.
pub(crate) fn encode_row(proto: &Proto, batch: &RecordBatch, i: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(64);
    let schema = batch.schema_ref();
    put_message(
        proto,
        proto.root,
        &mut out,
        schema.fields(),
        batch.columns(),
        i,
    )?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{Decoder, Encoder, Format, OnError};

    /// SeaTunnel's e2e schema (connector-kafka-e2e protobuf/*.conf).
    const PERSON: &str = r#"
        syntax = "proto3";
        package org.apache.seatunnel.format.protobuf;
        option java_outer_classname = "ProtobufE2E";
        // A comment, and /* another */ one.
        message Person {
            int32 c_int32 = 1;
            int64 c_int64 = 2;
            float c_float = 3;
            double c_double = 4;
            bool c_bool = 5;
            string c_string = 6;
            bytes c_bytes = 7;
            message Address {
                string street = 1;
                string city = 2;
                string state = 3;
                string zip = 4;
            }
            Address address = 8;
            map<string, float> attributes = 9;
            repeated string phone_numbers = 10;
            repeated sint64 deltas = 11 [packed = true];
            enum Kind { A = 0; B = 1; }
            Kind kind = 12;
            oneof choice { string one = 13; int32 other = 14; }
        }
    "#;

    use crate::tests::schema_of as schema;

    fn person_schema() -> Arc<Schema> {
        schema(serde_json::json!({
            "c_int32": "int", "c_int64": "bigint", "c_float": "float", "c_double": "double",
            "c_bool": "boolean", "c_string": "string", "c_bytes": "bytes",
            "Address": {"city": "string", "state": "string", "street": "string"},
            "attributes": "map<string, float>", "phone_numbers": "array<string>",
            "deltas": "array<bigint>", "kind": "int", "one": "string"
        }))
    }

    fn format() -> Format {
        Format::Protobuf(Arc::new(Proto::parse(PERSON, "Person").unwrap()))
    }

    #[test]
    fn a_message_reads_by_field_name_and_reads_the_same_after_writing() {
        // Hand-encoded from the wire format: c_int32 = 150 (08 96 01), c_string = "hi",
        // address { city = "X" } (field 8), attributes {"k": 1.5}, phone_numbers ["1", "2"],
        // deltas [-1, 2] packed (zig-zag 01 04), kind = B.
        let mut body = vec![0x08, 0x96, 0x01, 0x32, 2, b'h', b'i'];
        body.extend([0x42, 3, 0x12, 1, b'X']);
        let mut entry = vec![0x0a, 1, b'k', 0x15];
        entry.extend(1.5f32.to_le_bytes());
        body.extend([0x4a, entry.len() as u8]);
        body.extend(&entry);
        body.extend([0x52, 1, b'1', 0x52, 1, b'2', 0x5a, 2, 0x01, 0x04, 0x60, 1]);
        let s = person_schema();
        let d = Decoder {
            schema: s.clone(),
            format: format(),
            on_error: OnError::Fail,
        }
        .decode("Kafka", &[&body])
        .unwrap();
        let row = ferry_api::value::array_value_to_json(
            &arrow::array::StructArray::from(d.batch.clone()),
            0,
            ferry_api::value::RowStyle::Named,
        );
        assert_eq!(
            row,
            serde_json::json!({
                "c_int32": 150, "c_int64": 0, "c_float": 0, "c_double": 0, "c_bool": false,
                "c_string": "hi", "c_bytes": "",
                "Address": {"city": "X", "state": "", "street": ""},
                "attributes": {"k": 1.5}, "phone_numbers": ["1", "2"], "deltas": [-1, 2],
                "kind": 1, "one": ""
            })
        );
        // Written back: defaults are written too (the row holds them), so compare by
        // reading the written message again.
        let enc = Encoder { format: format() };
        let written = enc.encode(&d.batch, 0).unwrap();
        let again = Decoder {
            schema: s,
            format: format(),
            on_error: OnError::Fail,
        }
        .decode("Kafka", &[&written])
        .unwrap();
        assert_eq!(again.batch, d.batch);
    }

    #[test]
    fn bad_schemas_and_bad_messages_are_errors_never_panics() {
        for (text, name, want) in [
            ("message A { int32 x = 1; }", "B", "'B' is not a message"),
            (
                "import \"x.proto\"; message A {}",
                "A",
                "imports are not supported",
            ),
            ("message A { Missing x = 1; }", "A", "type 'Missing'"),
            ("message A { int32 x = 0; }", "A", "positive number"),
            ("message A { int32 x = 1 }", "A", "expected ';'"),
            ("message A { int32 x = 1;", "A", "not closed"),
        ] {
            let e = Proto::parse(text, name).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
        let p = Proto::parse(PERSON, "org.apache.seatunnel.format.protobuf.Person").unwrap();
        let e = p
            .check(&schema(serde_json::json!({"c_string": "int"})), false)
            .unwrap_err();
        assert!(e.contains("c_string"), "{e}");
        let e = p
            .check(&schema(serde_json::json!({"nope": "int"})), true)
            .unwrap_err();
        assert!(e.contains("no field"), "{e}");
        assert!(p
            .check(&schema(serde_json::json!({"nope": "int"})), false)
            .is_ok());
        let s = person_schema();
        let dec = |on_error| Decoder {
            schema: s.clone(),
            format: format(),
            on_error,
        };
        // Every prefix of a message either reads (a message may end between fields) or
        // fails with a reason; a wire type 3 is refused.
        let body = [0x32u8, 4, b'a', b'b', b'c', b'd', 0x08, 0x96, 0x01];
        for n in 0..body.len() {
            let _ = dec(OnError::Fail).decode("Kafka", &[&body[..n]]);
        }
        assert!(dec(OnError::Fail).decode("Kafka", &[&body[..3]]).is_err());
        let e = dec(OnError::Fail).decode("Kafka", &[&[0x0b]]).unwrap_err();
        assert!(e.to_string().contains("wire type 3"), "{e}");
        let d = dec(OnError::Skip)
            .decode("Kafka", &[&body, &[0x0b]])
            .unwrap();
        assert_eq!((d.batch.num_rows(), d.skipped), (1, 1));
    }
}
