//! LocalFile source and sink: text, csv, json and parquet, hive-style partitions, transactional commits
