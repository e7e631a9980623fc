-- Workload 8 (c): the same table in MariaDB, loaded once from PostgreSQL's text COPY
-- (tab-separated, \N for NULL: LOAD DATA's defaults). bool -> tinyint(1), timestamptz ->
-- datetime (UTC), uuid -> char(36), bytea -> varbinary (from hex).
CREATE DATABASE IF NOT EXISTS ferry_bench;
DROP TABLE IF EXISTS ferry_bench.jdbc_2m;
CREATE TABLE ferry_bench.jdbc_2m (
  id bigint PRIMARY KEY, user_id int NOT NULL, qty int, small smallint, big bigint,
  amount decimal(12,2), score double, name text, code varchar(32), flag tinyint(1),
  day date, ts datetime, tstz datetime, uid char(36), payload varbinary(16), note text
) ENGINE = InnoDB;
