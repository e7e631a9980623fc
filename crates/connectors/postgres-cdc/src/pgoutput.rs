//! The `pgoutput` logical decoding protocol (version 1) in binary mode: relation
//! descriptions and the row changes that refer to them, decoded straight into the Jdbc
//! connector's Arrow builders (the values are in their types' binary send format, the
//! format of a binary COPY field).
//!
//! `Begin`, `Commit` and logical messages are parsed by `pgwire-replication`; this module
//! reads the rest of each `XLogData` payload.

use ferry_api::{FerryError, Result};

/// One column of a relation as the server describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelColumn {
    /// Part of the replica identity (the key the server sends for updates and deletes).
    pub is_key: bool,
    /// Column name.
    pub name: String,
    /// Type OID.
    pub type_oid: u32,
}

/// A `Relation` message: which table a relation id stands for, with its columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    /// The relation's OID, which change messages refer to.
    pub id: u32,
    /// Schema name.
    pub namespace: String,
    /// Table name.
    pub name: String,
    /// `d` default, `n` nothing, `f` full, `i` index.
    pub replica_identity: u8,
    /// Its columns in the order tuples carry them.
    pub columns: Vec<RelColumn>,
}

/// One column value of a tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datum<'a> {
    /// NULL.
    Null,
    /// An unchanged out-of-line (TOASTed) value the server did not send.
    Unchanged,
    /// The value's bytes (binary send format, or text when the type has no binary form).
    Value(&'a [u8]),
}

/// A change message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change<'a> {
    /// A row inserted.
    Insert {
        /// Relation id.
        rel: u32,
        /// The new row.
        new: Vec<Datum<'a>>,
    },
    /// A row updated: the old key or old row when the replica identity provides it.
    Update {
        /// Relation id.
        rel: u32,
        /// The old row (`O`, replica identity full) or its key columns (`K`).
        old: Option<(u8, Vec<Datum<'a>>)>,
        /// The new row.
        new: Vec<Datum<'a>>,
    },
    /// A row deleted: its key (`K`) or the whole old row (`O`).
    Delete {
        /// Relation id.
        rel: u32,
        /// `K` or `O`, and the tuple.
        old: (u8, Vec<Datum<'a>>),
    },
    /// Tables truncated.
    Truncate {
        /// Relation ids.
        rels: Vec<u32>,
    },
}

/// A decoded payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message<'a> {
    /// A relation's description (sent before its first change in a session, and after it
    /// changed).
    Relation(Relation),
    /// A row change.
    Change(Change<'a>),
    /// Something this reader has no use for (types, origins, …).
    Other(u8),
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

fn truncated(what: &str) -> FerryError {
    FerryError::data(
        "source Postgres-CDC",
        format!("pgoutput message cut short in {what}"),
    )
}

impl<'a> Reader<'a> {
    fn u8(&mut self, what: &str) -> Result<u8> {
        let v = *self.b.get(self.pos).ok_or_else(|| truncated(what))?;
        self.pos += 1;
        Ok(v)
    }
    fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or_else(|| truncated(what))?;
        let v = self.b.get(self.pos..end).ok_or_else(|| truncated(what))?;
        self.pos = end;
        Ok(v)
    }
    fn u16(&mut self, what: &str) -> Result<u16> {
        let v = self.bytes(2, what)?;
        Ok(u16::from_be_bytes([v[0], v[1]]))
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        let v = self.bytes(4, what)?;
        Ok(u32::from_be_bytes([v[0], v[1], v[2], v[3]]))
    }
    fn cstr(&mut self, what: &str) -> Result<String> {
        let rest = self.b.get(self.pos..).ok_or_else(|| truncated(what))?;
        let n = rest
            .iter()
            .position(|c| *c == 0)
            .ok_or_else(|| truncated(what))?;
        let s = String::from_utf8_lossy(&rest[..n]).into_owned();
        self.pos += n + 1;
        Ok(s)
    }
    fn tuple(&mut self) -> Result<Vec<Datum<'a>>> {
        let n = self.u16("a tuple's column count")? as usize;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(match self.u8("a column's kind")? {
                b'n' => Datum::Null,
                b'u' => Datum::Unchanged,
                b't' | b'b' => {
                    let len = self.u32("a column's length")? as usize;
                    Datum::Value(self.bytes(len, "a column's value")?)
                }
                other => {
                    return Err(FerryError::data(
                        "source Postgres-CDC",
                        format!("pgoutput tuple column of unknown kind '{}'", other as char),
                    ))
                }
            });
        }
        Ok(out)
    }
}

/// Decodes one `XLogData` payload.
pub fn decode(b: &[u8]) -> Result<Message<'_>> {
    let mut r = Reader { b, pos: 0 };
    let tag = r.u8("the message tag")?;
    Ok(match tag {
        b'R' => {
            let id = r.u32("a relation id")?;
            let namespace = r.cstr("a schema name")?;
            let name = r.cstr("a table name")?;
            let replica_identity = r.u8("the replica identity")?;
            let n = r.u16("the column count")? as usize;
            let mut columns = Vec::with_capacity(n);
            for _ in 0..n {
                let flags = r.u8("column flags")?;
                let name = r.cstr("a column name")?;
                let type_oid = r.u32("a column type")?;
                let _typmod = r.u32("a column type modifier")?;
                columns.push(RelColumn {
                    is_key: flags & 1 == 1,
                    name,
                    type_oid,
                });
            }
            Message::Relation(Relation {
                id,
                namespace,
                name,
                replica_identity,
                columns,
            })
        }
        b'I' => {
            let rel = r.u32("a relation id")?;
            let _n = r.u8("the new tuple marker")?;
            Message::Change(Change::Insert {
                rel,
                new: r.tuple()?,
            })
        }
        b'U' => {
            let rel = r.u32("a relation id")?;
            let mut kind = r.u8("the tuple marker")?;
            let mut old = None;
            if kind == b'K' || kind == b'O' {
                old = Some((kind, r.tuple()?));
                kind = r.u8("the new tuple marker")?;
            }
            if kind != b'N' {
                return Err(FerryError::data(
                    "source Postgres-CDC",
                    format!(
                        "pgoutput update without a new tuple (marker '{}')",
                        kind as char
                    ),
                ));
            }
            Message::Change(Change::Update {
                rel,
                old,
                new: r.tuple()?,
            })
        }
        b'D' => {
            let rel = r.u32("a relation id")?;
            let kind = r.u8("the old tuple marker")?;
            Message::Change(Change::Delete {
                rel,
                old: (kind, r.tuple()?),
            })
        }
        b'T' => {
            let n = r.u32("the relation count")? as usize;
            let _options = r.u8("truncate options")?;
            let mut rels = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                rels.push(r.u32("a relation id")?);
            }
            Message::Change(Change::Truncate { rels })
        }
        other => Message::Other(other),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relation_bytes() -> Vec<u8> {
        let mut b = vec![b'R'];
        b.extend(16384u32.to_be_bytes());
        b.extend(b"public\0items\0");
        b.push(b'd');
        b.extend(2u16.to_be_bytes());
        b.push(1);
        b.extend(b"id\0");
        b.extend(23u32.to_be_bytes());
        b.extend((-1i32).to_be_bytes());
        b.push(0);
        b.extend(b"name\0");
        b.extend(25u32.to_be_bytes());
        b.extend((-1i32).to_be_bytes());
        b
    }

    #[test]
    fn relations_and_changes_decode_and_truncated_input_is_an_error() {
        let rel_msg = relation_bytes();
        let Message::Relation(r) = decode(&rel_msg).unwrap() else {
            panic!("not a relation")
        };
        assert_eq!(
            (r.id, r.namespace.as_str(), r.name.as_str()),
            (16384, "public", "items")
        );
        assert!(r.columns[0].is_key && !r.columns[1].is_key);
        assert_eq!(r.columns[1].type_oid, 25);

        let mut upd = vec![b'U'];
        upd.extend(16384u32.to_be_bytes());
        upd.push(b'K');
        upd.extend(2u16.to_be_bytes());
        upd.push(b'b');
        upd.extend(4u32.to_be_bytes());
        upd.extend(7i32.to_be_bytes());
        upd.push(b'n');
        upd.push(b'N');
        upd.extend(2u16.to_be_bytes());
        upd.push(b'b');
        upd.extend(4u32.to_be_bytes());
        upd.extend(8i32.to_be_bytes());
        upd.push(b'u');
        let Message::Change(Change::Update { rel, old, new }) = decode(&upd).unwrap() else {
            panic!("not an update")
        };
        assert_eq!(rel, 16384);
        let (kind, old) = old.unwrap();
        assert_eq!(kind, b'K');
        assert_eq!(old, vec![Datum::Value(&7i32.to_be_bytes()), Datum::Null]);
        assert_eq!(
            new,
            vec![Datum::Value(&8i32.to_be_bytes()), Datum::Unchanged]
        );

        // Every prefix of a message is an error, never a panic.
        for n in 1..upd.len() {
            assert!(decode(&upd[..n]).is_err(), "prefix of {n} bytes");
        }
        for n in 1..rel_msg.len() {
            assert!(decode(&rel_msg[..n]).is_err(), "prefix of {n} bytes");
        }
    }
}
