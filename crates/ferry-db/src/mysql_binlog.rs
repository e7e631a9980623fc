//! MySQL/MariaDB binary log pieces a change-data source needs: positions in the binlog and
//! the server's current one, MariaDB's GTID events (which `mysql_common` does not decode),
//! and the values of ROW events appended to the same Arrow builders the snapshot's text
//! rows go to, so that a row read by `SELECT` and the same row read from the binlog are
//! equal.
//!
//! The binlog's TABLE_MAP event gives each column's storage type but, unless the server
//! writes `binlog_row_metadata = FULL`, neither names nor signedness nor `ENUM`/`SET`
//! members; those come from the catalog ([`BinlogKind`] from the column's `source_type`).

use std::collections::BTreeMap;
use std::fmt;

use chrono::NaiveDate;
use ferry_api::value::parse_decimal;
use ferry_api::{FerryError, Result};
use mysql_async::binlog::value::BinlogValue;
use mysql_async::prelude::Queryable;
use mysql_async::Value;

use crate::decode::{fits, Builders, Col};
use crate::types::ColumnDef;

/// A position in the binary log: a file and a byte offset in it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BinlogPos {
    /// The binlog file (`mysql-bin.000042`).
    pub file: String,
    /// The byte offset in it.
    pub pos: u64,
}

impl BinlogPos {
    /// Files sort by their numeric extension (`.000042`), which the server increments.
    fn key(&self) -> (u64, &str, u64) {
        let n = self
            .file
            .rsplit_once('.')
            .and_then(|(_, n)| n.parse::<u64>().ok())
            .unwrap_or(0);
        (n, self.file.as_str(), self.pos)
    }

    /// Whether `self` is at or past `other`.
    pub fn reached(&self, other: &BinlogPos) -> bool {
        self.key() >= other.key()
    }
}

impl fmt::Display for BinlogPos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.pos)
    }
}

/// What a server says about its binary log.
#[derive(Debug, Clone)]
pub struct ServerLog {
    /// The end of the binlog (`SHOW MASTER STATUS`); `None` when binary logging is off.
    pub end: Option<BinlogPos>,
    /// The GTID state at that end (`@@gtid_binlog_pos` on MariaDB, `@@gtid_executed` on
    /// MySQL); empty when the server has none.
    pub gtid: String,
    /// Whether the server is MariaDB (its own GTIDs and events).
    pub mariadb: bool,
}

fn text_of(v: Option<&Value>) -> String {
    match v {
        Some(Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(Value::NULL) | None => String::new(),
        Some(other) => other.as_sql(true).trim_matches('\'').to_string(),
    }
}

/// Where the server's binlog ends (`SHOW MASTER STATUS`; `None` with the binlog off).
/// `component` names the plugin in errors.
pub async fn binlog_end(
    conn: &mut mysql_async::Conn,
    component: &str,
) -> Result<Option<BinlogPos>> {
    let rows: Vec<mysql_async::Row> = conn
        .query("SHOW MASTER STATUS")
        .await
        .map_err(|e| FerryError::external(component, format!("{e}: SHOW MASTER STATUS")))?;
    Ok(rows.first().map(|r| BinlogPos {
        file: text_of(r.as_ref(0)),
        pos: text_of(r.as_ref(1)).parse().unwrap_or(0),
    }))
}

/// The server's binlog end and GTID state. `component` names the plugin in errors.
pub async fn server_log(conn: &mut mysql_async::Conn, component: &str) -> Result<ServerLog> {
    let err = |e: mysql_async::Error, q: &str| FerryError::external(component, format!("{e}: {q}"));
    let end = binlog_end(conn, component).await?;
    let version: Vec<mysql_async::Row> = conn
        .query("SELECT VERSION()")
        .await
        .map_err(|e| err(e, "SELECT VERSION()"))?;
    let mariadb = version
        .first()
        .map(|r| text_of(r.as_ref(0)).contains("MariaDB"))
        .unwrap_or(false);
    let q = if mariadb {
        "SELECT @@gtid_binlog_pos"
    } else {
        "SELECT @@gtid_executed"
    };
    let gtid = match conn.query::<mysql_async::Row, _>(q).await {
        Ok(rows) => rows
            .first()
            .map(|r| text_of(r.as_ref(0)).replace(['\n', ' '], ""))
            .unwrap_or_default(),
        Err(_) => String::new(),
    };
    Ok(ServerLog { end, gtid, mariadb })
}

/// The binlog files the server still has, oldest first, with their sizes.
pub async fn binary_logs(
    conn: &mut mysql_async::Conn,
    component: &str,
) -> Result<Vec<(String, u64)>> {
    let rows: Vec<mysql_async::Row> = conn
        .query("SHOW BINARY LOGS")
        .await
        .map_err(|e| FerryError::external(component, format!("{e}: SHOW BINARY LOGS")))?;
    Ok(rows
        .iter()
        .map(|r| {
            (
                text_of(r.as_ref(0)),
                text_of(r.as_ref(1)).parse().unwrap_or(0),
            )
        })
        .collect())
}

/// MariaDB's GTID event type (`GTID_EVENT`, 162).
pub const MARIADB_GTID_EVENT: u8 = 162;
/// MariaDB's `GTID_LIST_EVENT` (163): the GTID state at the start of a binlog file.
pub const MARIADB_GTID_LIST_EVENT: u8 = 163;
/// MariaDB's `ANNOTATE_ROWS_EVENT` (160): the statement of the rows events that follow.
pub const MARIADB_ANNOTATE_ROWS_EVENT: u8 = 160;
/// MariaDB's `BINLOG_CHECKPOINT_EVENT` (161).
pub const MARIADB_BINLOG_CHECKPOINT_EVENT: u8 = 161;

/// A MariaDB GTID event: the transaction `domain-server-seq` that follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MariaGtid {
    /// Replication domain.
    pub domain: u32,
    /// The server that wrote it.
    pub server: u32,
    /// Sequence number in the domain.
    pub seq: u64,
    /// The transaction is one statement without BEGIN/COMMIT (DDL).
    pub standalone: bool,
}

/// Reads a MariaDB GTID event's body (after the common header, without checksum):
/// `seq_no` (8 bytes), `domain_id` (4), `flags2` (1), then optional parts.
pub fn mariadb_gtid(body: &[u8], server: u32) -> Option<MariaGtid> {
    let seq = u64::from_le_bytes(body.get(0..8)?.try_into().ok()?);
    let domain = u32::from_le_bytes(body.get(8..12)?.try_into().ok()?);
    let flags = *body.get(12)?;
    Some(MariaGtid {
        domain,
        server,
        seq,
        standalone: flags & 1 != 0,
    })
}

/// A MariaDB GTID state: per domain, the server and sequence number of its last
/// transaction (`0-1-42,1-5-7`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GtidState(pub BTreeMap<u32, (u32, u64)>);

impl GtidState {
    /// Reads `domain-server-seq` items separated by commas; `None` if one is malformed.
    pub fn parse(s: &str) -> Option<GtidState> {
        let mut m = BTreeMap::new();
        for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let mut p = item.split('-');
            let d = p.next()?.parse().ok()?;
            let sv = p.next()?.parse().ok()?;
            let n = p.next()?.parse().ok()?;
            if p.next().is_some() {
                return None;
            }
            m.insert(d, (sv, n));
        }
        Some(GtidState(m))
    }

    /// Records transaction `g`.
    pub fn apply(&mut self, g: &MariaGtid) {
        self.0.insert(g.domain, (g.server, g.seq));
    }
}

impl fmt::Display for GtidState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items: Vec<String> = self
            .0
            .iter()
            .map(|(d, (s, n))| format!("{d}-{s}-{n}"))
            .collect();
        f.write_str(&items.join(","))
    }
}

/// What the catalog adds to a binlog value of a column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BinlogKind {
    /// The value is what it says.
    Plain,
    /// An unsigned integer of this many bits: the binlog gives it signed unless the server
    /// logs signedness.
    Unsigned(u32),
    /// `ENUM`: the binlog gives the member's number (1-based; 0 is the empty error value).
    Enum(Vec<String>),
    /// `SET`: the binlog gives a bit mask of members.
    Set(Vec<String>),
    /// `YEAR`: the binlog gives 1900 + the stored byte (0 is year 0000).
    Year,
    /// A signed `MEDIUMINT`: `mysql_common` reads its three bytes without the sign.
    Medium,
    /// `BINARY(n)`: the binlog drops trailing zero bytes, which `SELECT` returns.
    Binary(usize),
    /// Text in a character set other than UTF-8 (the binlog carries the column's own
    /// bytes; `SELECT` converts them to the connection's UTF-8).
    Text(&'static encoding_rs::Encoding),
}

/// The encoding of a MySQL character set (`CHARACTER_SET_NAME`): `None` for UTF-8 and its
/// subsets (no conversion), `Err` for one Ferry cannot decode.
pub fn charset_encoding(
    charset: &str,
) -> std::result::Result<Option<&'static encoding_rs::Encoding>, String> {
    use encoding_rs::*;
    Ok(Some(match charset.to_ascii_lowercase().as_str() {
        "" | "utf8" | "utf8mb3" | "utf8mb4" | "ascii" | "binary" => return Ok(None),
        // MySQL's latin1 is Windows-1252.
        "latin1" => WINDOWS_1252,
        "latin2" => ISO_8859_2,
        "latin5" => WINDOWS_1254,
        "latin7" => ISO_8859_13,
        "greek" => ISO_8859_7,
        "hebrew" => ISO_8859_8,
        "cp1250" => WINDOWS_1250,
        "cp1251" => WINDOWS_1251,
        "cp1256" => WINDOWS_1256,
        "cp1257" => WINDOWS_1257,
        "cp866" => IBM866,
        "koi8r" => KOI8_R,
        "koi8u" => KOI8_U,
        "gbk" | "gb2312" => GBK,
        "gb18030" => GB18030,
        "big5" => BIG5,
        "sjis" | "cp932" => SHIFT_JIS,
        "ujis" | "eucjpms" => EUC_JP,
        "euckr" => EUC_KR,
        "ucs2" | "utf16" => UTF_16BE,
        "utf16le" => UTF_16LE,
        other => {
            return Err(format!(
                "character set {other} is not decoded from the binlog"
            ))
        }
    }))
}

/// The members of `enum('a','b')` / `set('x','y')`, quotes undone.
fn members(ty: &str) -> Vec<String> {
    let Some(open) = ty.find('(') else {
        return Vec::new();
    };
    let inner = &ty[open + 1..ty.rfind(')').unwrap_or(ty.len())];
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_q = false;
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match (in_q, c) {
            (false, '\'') => in_q = true,
            (true, '\'') if chars.peek() == Some(&'\'') => {
                chars.next();
                cur.push('\'');
            }
            (true, '\'') => {
                in_q = false;
                out.push(std::mem::take(&mut cur));
            }
            (true, '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            (true, c) => cur.push(c),
            _ => {}
        }
    }
    out
}

/// How column `c`'s binlog values are read (from its catalog type, `c.source_type`).
pub fn binlog_kind(c: &ColumnDef) -> BinlogKind {
    let t = c.source_type.to_ascii_lowercase();
    let name: String = t
        .chars()
        .take_while(|ch| ch.is_ascii_alphanumeric() || *ch == '_')
        .collect();
    if t.contains("unsigned") {
        let bits = match name.as_str() {
            "tinyint" => 8,
            "smallint" => 16,
            "mediumint" => 24,
            "int" | "integer" => 32,
            "bigint" => 64,
            _ => 0,
        };
        if bits > 0 {
            return BinlogKind::Unsigned(bits);
        }
    }
    match name.as_str() {
        "enum" => BinlogKind::Enum(members(&c.source_type)),
        "set" => BinlogKind::Set(members(&c.source_type)),
        "year" => BinlogKind::Year,
        "mediumint" => BinlogKind::Medium,
        "binary" => BinlogKind::Binary(c.length.unwrap_or(0) as usize),
        _ => BinlogKind::Plain,
    }
}

/// Whether a TABLE_MAP column type (`mysql_common`'s `ColumnType` as a byte) can hold
/// values of a column whose catalog type is `source_type`: a column whose storage changed
/// after the job read the catalog (a type change, or columns moved by a DDL) fails this.
pub fn binlog_type_fits(source_type: &str, binlog_type: u8) -> bool {
    let t = source_type.to_ascii_lowercase();
    let name: String = t
        .chars()
        .take_while(|ch| ch.is_ascii_alphanumeric() || *ch == '_')
        .collect();
    // MYSQL_TYPE_* numbers (include/mysql_com.h).
    let expected: &[u8] = match name.as_str() {
        "tinyint" => &[1],
        "smallint" => &[2],
        "mediumint" => &[9],
        "int" | "integer" => &[3],
        "bigint" => &[8],
        "float" => &[4],
        "double" | "real" => &[5],
        "decimal" | "numeric" => &[246, 0],
        "date" => &[10, 14],
        "time" => &[11, 19],
        "datetime" => &[12, 18],
        "timestamp" => &[7, 17],
        "year" => &[13],
        "bit" => &[16],
        "enum" | "set" => &[247, 248, 254],
        "char" | "binary" => &[254, 15, 253],
        "varchar" | "varbinary" => &[15, 253, 254],
        "tinytext" | "text" | "mediumtext" | "longtext" | "tinyblob" | "blob" | "mediumblob"
        | "longblob" => &[252, 249, 250, 251],
        // MySQL's JSON; MariaDB's is a LONGTEXT.
        "json" => &[245, 252],
        "geometry" => &[255],
        _ => return true,
    };
    expected.contains(&binlog_type)
}

fn days(y: u16, m: u8, d: u8) -> Option<i32> {
    let date = NaiveDate::from_ymd_opt(y as i32, m as u32, d as u32)?;
    Some((date - NaiveDate::from_ymd_opt(1970, 1, 1)?).num_days() as i32)
}

fn as_i128(v: &Value, kind: &BinlogKind) -> Option<i128> {
    match v {
        Value::Int(x) => Some(match kind {
            BinlogKind::Unsigned(bits) if *x < 0 => *x as i128 + (1i128 << bits),
            BinlogKind::Medium if *x >= 1 << 23 => *x as i128 - (1i128 << 24),
            _ => *x as i128,
        }),
        Value::UInt(x) => Some(*x as i128),
        Value::Bytes(b) => std::str::from_utf8(b).ok()?.trim().parse().ok(),
        _ => None,
    }
}

impl Builders {
    /// Appends column `i`'s value from a binlog ROW event (`None` or SQL NULL is NULL);
    /// `kind` is what the catalog says of the column ([`binlog_kind`]).
    pub fn append_binlog(
        &mut self,
        i: usize,
        v: Option<&BinlogValue<'_>>,
        kind: &BinlogKind,
    ) -> Result<()> {
        let v =
            match v {
                None | Some(BinlogValue::Value(Value::NULL)) => {
                    self.append_null(i);
                    return Ok(());
                }
                Some(BinlogValue::Value(v)) => v,
                Some(BinlogValue::Jsonb(j)) => {
                    let text = match serde_json::Value::try_from(j.clone()) {
                        Ok(json) => json.to_string(),
                        Err(e) => return Err(self.bad(i, format!("JSON value: {e}"))),
                    };
                    return match self.col(i) {
                        Col::Str(b) => {
                            b.append_value(text);
                            Ok(())
                        }
                        _ => Err(self.bad(i, "a JSON value for a column that is not a string")),
                    };
                }
                Some(BinlogValue::JsonDiff(_)) => return Err(self.bad(
                    i,
                    "a partial JSON update (binlog_row_value_options = PARTIAL_JSON) carries no \
                     whole value; turn that server option off",
                )),
            };
        let bad_value = format!("{v:?} does not fit the column's type");
        macro_rules! int {
            ($b:expr, $t:ty) => {{
                let x = match kind {
                    BinlogKind::Year => match v {
                        Value::Bytes(b) if b.as_slice() == b"1900" => Some(0),
                        _ => as_i128(v, kind),
                    },
                    _ => as_i128(v, kind),
                };
                match x.and_then(|x| <$t>::try_from(x).ok()) {
                    Some(x) => $b.append_value(x),
                    None => return Err(self.bad(i, bad_value)),
                }
            }};
        }
        match self.col(i) {
            Col::Bool(b) => match v {
                Value::Int(x) => b.append_value(*x != 0),
                Value::UInt(x) => b.append_value(*x != 0),
                Value::Bytes(bytes) => b.append_value(bytes.iter().any(|x| *x != 0)),
                _ => return Err(self.bad(i, bad_value)),
            },
            Col::I8(b) => int!(b, i8),
            Col::I16(b) => int!(b, i16),
            Col::I32(b) => int!(b, i32),
            Col::I64(b) => int!(b, i64),
            Col::F32(b) => match v {
                Value::Float(x) => b.append_value(*x),
                Value::Double(x) => b.append_value(*x as f32),
                _ => return Err(self.bad(i, bad_value)),
            },
            Col::F64(b) => match v {
                Value::Double(x) => b.append_value(*x),
                Value::Float(x) => b.append_value(*x as f64),
                _ => return Err(self.bad(i, bad_value)),
            },
            Col::Dec(b, p, s) => {
                let (p, s) = (*p, *s);
                let x = match v {
                    Value::Bytes(t) => std::str::from_utf8(t)
                        .ok()
                        .and_then(|t| parse_decimal(t, s)),
                    other => as_i128(other, kind)
                        .and_then(|x| x.checked_mul(10i128.checked_pow(s.max(0) as u32)?)),
                };
                match x {
                    Some(x) if fits(x, p) => b.append_value(x),
                    _ => return Err(self.bad(i, format!("{v:?} does not fit decimal({p},{s})"))),
                }
            }
            Col::Str(b) => match (v, kind) {
                (Value::Int(_) | Value::UInt(_), BinlogKind::Enum(m)) => {
                    let n = as_i128(v, kind).unwrap_or(0);
                    let text = if n <= 0 {
                        ""
                    } else {
                        m.get(n as usize - 1).map_or("", String::as_str)
                    };
                    b.append_value(text);
                }
                (Value::Bytes(mask), BinlogKind::Set(m)) => {
                    let mut parts: Vec<&str> = Vec::new();
                    for (k, name) in m.iter().enumerate() {
                        if mask
                            .get(k / 8)
                            .is_some_and(|byte| byte & (1 << (k % 8)) != 0)
                        {
                            parts.push(name);
                        }
                    }
                    b.append_value(parts.join(","));
                }
                (Value::Bytes(bytes), BinlogKind::Text(enc)) => {
                    let (text, _, bad) = enc.decode(bytes);
                    if bad {
                        return Err(self.bad(i, format!("text is not valid {}", enc.name())));
                    }
                    b.append_value(text.as_bytes())
                }
                (Value::Bytes(bytes), _) => match std::str::from_utf8(bytes) {
                    Ok(s) => b.append_value(s),
                    Err(_) => {
                        return Err(self.bad(
                            i,
                            "text is not UTF-8 (the binlog carries the column's own character \
                             set; MySQL-CDC reads utf8/utf8mb4 and ascii text columns)",
                        ))
                    }
                },
                _ => return Err(self.bad(i, bad_value)),
            },
            Col::Bin(b) => match v {
                Value::Bytes(bytes) => match kind {
                    BinlogKind::Binary(n) if bytes.len() < *n => {
                        let mut padded = bytes.clone();
                        padded.resize(*n, 0);
                        b.append_value(padded)
                    }
                    _ => b.append_value(bytes),
                },
                _ => return Err(self.bad(i, bad_value)),
            },
            Col::Date(b) => match v {
                Value::Date(0, _, _, _, _, _, _) => b.append_null(),
                Value::Date(y, m, d, _, _, _, _) => match days(*y, *m, *d) {
                    Some(x) => b.append_value(x),
                    None => return Err(self.bad(i, bad_value)),
                },
                _ => return Err(self.bad(i, bad_value)),
            },
            Col::Time(b) => match v {
                Value::Time(false, 0, h, m, s, us) if *h < 24 => b.append_value(
                    ((*h as i64 * 60 + *m as i64) * 60 + *s as i64) * 1_000_000 + *us as i64,
                ),
                _ => {
                    return Err(self.bad(
                        i,
                        format!("{v:?} is no time of day (00:00:00 to 23:59:59.999999)"),
                    ))
                }
            },
            Col::Ts(b) => match v {
                Value::Date(0, _, _, _, _, _, _) => b.append_null(),
                Value::Date(y, mo, d, h, mi, s, us) => match days(*y, *mo, *d) {
                    Some(x) => b.append_value(
                        x as i64 * 86_400_000_000
                            + ((*h as i64 * 60 + *mi as i64) * 60 + *s as i64) * 1_000_000
                            + *us as i64,
                    ),
                    None => return Err(self.bad(i, bad_value)),
                },
                // TIMESTAMP: seconds since the epoch, with the fraction after a point;
                // 0 is MySQL's zero timestamp, which JDBC reads as NULL.
                Value::Bytes(t) => {
                    let t = std::str::from_utf8(t).unwrap_or("");
                    match parse_decimal(t, 6) {
                        Some(0) => b.append_null(),
                        Some(x) => b.append_value(x as i64),
                        None => return Err(self.bad(i, bad_value)),
                    }
                }
                Value::Int(0) => b.append_null(),
                Value::Int(secs) => b.append_value(secs * 1_000_000),
                _ => return Err(self.bad(i, bad_value)),
            },
            Col::List(_, _) => return Err(self.bad(i, "arrays are not read from MySQL")),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::mysql_column;
    use arrow::array::*;
    use arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    fn col(dt: &str, ct: &str, p: Option<u64>, s: Option<u64>) -> ColumnDef {
        mysql_column("c", dt, ct, p, s, p, true).unwrap()
    }

    fn one(c: &ColumnDef, v: Value) -> ArrayRef {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "c",
            c.data_type.clone(),
            true,
        )]));
        let mut b = Builders::new(std::slice::from_ref(c), schema, 1, "test").unwrap();
        b.append_binlog(0, Some(&BinlogValue::Value(v)), &binlog_kind(c))
            .unwrap();
        b.end_row();
        b.finish().unwrap().column(0).clone()
    }

    #[test]
    fn unsigned_integers_logged_signed_come_back_unsigned() {
        let c = col("int", "int(10) unsigned", None, None);
        let a = one(&c, Value::Int(-1));
        assert_eq!(
            a.as_primitive::<arrow::datatypes::Int64Type>().value(0),
            4294967295
        );
        let c = col("bigint", "bigint(20) unsigned", Some(20), Some(0));
        let a = one(&c, Value::Int(-1));
        assert_eq!(
            a.as_primitive::<arrow::datatypes::Decimal128Type>()
                .value(0),
            18446744073709551615
        );
        let c = col("tinyint", "tinyint(3) unsigned", None, None);
        let a = one(&c, Value::Int(-56));
        assert_eq!(
            a.as_primitive::<arrow::datatypes::Int16Type>().value(0),
            200
        );
        let c = col("mediumint", "mediumint(8) unsigned", None, None);
        let a = one(&c, Value::Int(-1));
        assert_eq!(
            a.as_primitive::<arrow::datatypes::Int32Type>().value(0),
            16777215
        );
        let c = col("mediumint", "mediumint(9)", None, None);
        let a = one(&c, Value::Int(8388608));
        assert_eq!(
            a.as_primitive::<arrow::datatypes::Int32Type>().value(0),
            -8388608
        );
    }

    #[test]
    fn enums_sets_years_binaries_and_times_read_as_select_shows_them() {
        let c = col("enum", "enum('a','it''s','c')", None, None);
        assert_eq!(one(&c, Value::Int(2)).as_string::<i32>().value(0), "it's");
        assert_eq!(one(&c, Value::Int(0)).as_string::<i32>().value(0), "");
        let c = col("set", "set('x','y','z')", None, None);
        assert_eq!(
            one(&c, Value::Bytes(vec![0b101]))
                .as_string::<i32>()
                .value(0),
            "x,z"
        );
        let c = col("year", "year(4)", None, None);
        let y = |v: &[u8]| {
            one(&c, Value::Bytes(v.to_vec()))
                .as_primitive::<arrow::datatypes::Int32Type>()
                .value(0)
        };
        assert_eq!((y(b"2024"), y(b"1900")), (2024, 0));
        let c = col("binary", "binary(4)", Some(4), None);
        assert_eq!(
            one(&c, Value::Bytes(vec![1, 2]))
                .as_binary::<i32>()
                .value(0),
            &[1, 2, 0, 0]
        );
        let c = col("timestamp", "timestamp(3)", None, None);
        let ts = |v: &[u8]| {
            let a = one(&c, Value::Bytes(v.to_vec()));
            let a = a.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
            (!a.is_null(0)).then(|| a.value(0))
        };
        assert_eq!(ts(b"1594980022.123000"), Some(1_594_980_022_123_000));
        assert_eq!(ts(b"0"), None);
        let c = col("datetime", "datetime(6)", None, None);
        let a = one(&c, Value::Date(2020, 7, 17, 18, 0, 22, 123456));
        assert_eq!(
            a.as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
                .value(0),
            1_595_008_822_123_456
        );
        let c = col("time", "time", None, None);
        let a = one(&c, Value::Time(false, 0, 18, 0, 22, 5));
        assert_eq!(
            a.as_primitive::<arrow::datatypes::Time64MicrosecondType>()
                .value(0),
            64_822_000_005
        );
        let c = col("decimal", "decimal(10,2)", Some(10), Some(2));
        let a = one(&c, Value::Bytes(b"-123.45".to_vec()));
        assert_eq!(
            a.as_primitive::<arrow::datatypes::Decimal128Type>()
                .value(0),
            -12345
        );
    }

    #[test]
    fn text_of_other_character_sets_is_converted() {
        let c = col("varchar", "varchar(100)", Some(100), None);
        let schema = Arc::new(Schema::new(vec![Field::new(
            "c",
            c.data_type.clone(),
            true,
        )]));
        let mut b = Builders::new(std::slice::from_ref(&c), schema, 1, "test").unwrap();
        let gbk = charset_encoding("gbk").unwrap().unwrap();
        let (bytes, _, _) = gbk.encode("中文测试");
        b.append_binlog(
            0,
            Some(&BinlogValue::Value(Value::Bytes(bytes.to_vec()))),
            &BinlogKind::Text(gbk),
        )
        .unwrap();
        b.end_row();
        let a = b.finish().unwrap();
        assert_eq!(a.column(0).as_string::<i32>().value(0), "中文测试");
        assert!(charset_encoding("utf8mb4").unwrap().is_none());
        assert!(charset_encoding("utf32").is_err());
    }

    #[test]
    fn positions_order_by_file_number_then_offset_and_gtids_round_trip() {
        let p = |f: &str, n| BinlogPos {
            file: f.into(),
            pos: n,
        };
        assert!(p("mysql-bin.000010", 4).reached(&p("mysql-bin.000009", 900)));
        assert!(!p("mysql-bin.000009", 899).reached(&p("mysql-bin.000009", 900)));
        assert!(p("mysql-bin.000009", 900).reached(&p("mysql-bin.000009", 900)));
        let g = GtidState::parse("0-1-42, 3-7-9").unwrap();
        assert_eq!(g.to_string(), "0-1-42,3-7-9");
        assert!(GtidState::parse("0-1").is_none());
        let mut body = 77u64.to_le_bytes().to_vec();
        body.extend(5u32.to_le_bytes());
        body.push(1);
        let e = mariadb_gtid(&body, 3).unwrap();
        assert_eq!((e.domain, e.server, e.seq, e.standalone), (5, 3, 77, true));
        assert!(mariadb_gtid(&body[..10], 3).is_none());
    }

    #[test]
    fn table_map_types_are_checked_against_the_catalog() {
        assert!(binlog_type_fits("int(11)", 3));
        assert!(!binlog_type_fits("int(11)", 15));
        assert!(binlog_type_fits("varchar(20)", 15));
        assert!(binlog_type_fits("longtext", 252));
        assert!(binlog_type_fits("datetime(6)", 18));
    }
}
