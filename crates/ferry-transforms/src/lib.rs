//! SeaTunnel's row transforms (Copy, Filter, FieldMapper, Replace, Split, FilterRowKind, …) on Arrow batches
