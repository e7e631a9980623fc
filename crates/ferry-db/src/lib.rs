//! Relational databases for Ferry's connectors: PostgreSQL and MySQL/MariaDB.
//!
//! The `Jdbc` source and sink and the `Postgres-CDC` and `MySQL-CDC` sources all need the same pieces: where
//! to connect (a JDBC URL and driver class as SeaTunnel job files give them), a table's
//! columns and keys from the server's catalog mapped to SeaTunnel types on Arrow, and
//! decoders from the wire (PostgreSQL's binary COPY and binary tuples, MySQL's text
//! protocol) straight into Arrow builders. They live here, in a library of no connector's
//! own, so that connectors depend on it and never on each other.
//!
//! Drivers are pure Rust on the process's I/O runtime: `tokio-postgres` and `mysql_async`.

pub mod catalog;
pub mod conn;
pub mod decode;
pub mod keys;
pub mod mysql_binlog;
pub mod pg_wire;
pub mod relation;
pub mod types;

pub use crate::catalog::{literal, pg_rows, pg_script};
pub use crate::conn::{
    connect_mysql, connect_pg, connect_pg_lendable, parse_url, pg_error_text, ConnInfo,
    ConnOptions, Dialect, Secret, UrlParts, CONN_OPTIONS,
};
pub use crate::decode::{Builders, CopyDecoder};
pub use crate::relation::{describe, describe_table, DescribedTable, TablePath};
pub use crate::types::{ColumnDef, Wire};
