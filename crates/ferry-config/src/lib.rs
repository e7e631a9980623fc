//! Reads SeaTunnel job files (HOCON or JSON) into a typed, validated job plan
