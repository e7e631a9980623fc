//! Jdbc: SeaTunnel's `Jdbc` source and sink for PostgreSQL and MySQL/MariaDB.
//!
//! The dialect follows from `url` (`jdbc:postgresql://`, `jdbc:mysql://`, `jdbc:mariadb://`)
//! and `driver` (the Java class names SeaTunnel job files give). Drivers are pure Rust on
//! the process's I/O runtime: `tokio-postgres` (binary COPY in and out) and `mysql_async`
//! (streaming result sets). See `docs/connectors/Jdbc.md`.

mod catalog;
mod conn;
mod decode;
mod render;
mod sink;
mod source;
mod types;

pub use crate::sink::{JdbcSink, JdbcSinkFactory};

/// The PostgreSQL pieces other connectors build on (Postgres-CDC reads its snapshot chunks
/// and its change stream's binary tuples with them): connections, the catalog lookup that
/// maps a table's columns to SeaTunnel types on Arrow, and the binary decoders.
pub mod pg {
    pub use crate::catalog::{literal, pg_rows};
    pub use crate::conn::{
        connect_pg, parse_url, pg_error_text, ConnInfo, Dialect, Secret, UrlParts,
    };
    pub use crate::decode::{Builders, CopyDecoder};
    pub use crate::source::{describe_table, DescribedTable};
    pub use crate::types::{ColumnDef, Wire};
}
pub use crate::source::{JdbcSource, JdbcSourceFactory};

#[cfg(test)]
mod tests;
