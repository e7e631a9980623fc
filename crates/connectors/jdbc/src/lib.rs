//! Jdbc: SeaTunnel's `Jdbc` source and sink for PostgreSQL and MySQL/MariaDB.
//!
//! The dialect follows from `url` (`jdbc:postgresql://`, `jdbc:mysql://`, `jdbc:mariadb://`)
//! and `driver` (the Java class names SeaTunnel job files give). Drivers are pure Rust on
//! the process's I/O runtime: `tokio-postgres` (binary COPY in and out) and `mysql_async`
//! (streaming result sets). See `docs/connectors/Jdbc.md`.

mod copy;
mod copy_binary;
mod render;
mod sink;
mod source;

pub use crate::sink::{JdbcSink, JdbcSinkFactory};

pub use crate::source::{JdbcSource, JdbcSourceFactory};

#[cfg(test)]
mod tests;
