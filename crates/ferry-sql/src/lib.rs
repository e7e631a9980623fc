//! SeaTunnel's Sql transform on Apache DataFusion
