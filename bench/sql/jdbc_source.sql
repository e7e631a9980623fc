-- Workload 8's source table: 16 columns of mixed types, every value a function of the row id
-- (deterministic). :rows and :tbl are psql variables (bench/harness.py sets them).
CREATE SCHEMA IF NOT EXISTS ferry_bench;
DROP TABLE IF EXISTS ferry_bench.:tbl;
CREATE TABLE ferry_bench.:tbl (
  id      int8 PRIMARY KEY,
  user_id int4 NOT NULL,
  qty     int4,
  small   int2,
  big     int8,
  amount  numeric(12,2),
  score   float8,
  name    text,
  code    varchar(32),
  flag    bool,
  day     date,
  ts      timestamp,
  tstz    timestamptz,
  uid     uuid,
  payload bytea,
  note    text
);
INSERT INTO ferry_bench.:tbl
SELECT g,
       (g * 7919 % 1000000)::int4,
       CASE WHEN g % 17 = 0 THEN NULL ELSE (g % 1000)::int4 END,
       (g % 30000)::int2,
       g * 2654435761 % 1000000007,
       ((g * 48271) % 10000000) / 100.0,
       (g % 100000) / 7.0,
       'user ' || (g % 100000),
       substr(md5(g::text), 1, (8 + g % 25)::int),
       g % 3 = 0,
       date '2020-01-01' + (g % 2000)::int,
       timestamp '2024-01-01' + (g * 37 % 31622400) * interval '1 second',
       timestamptz '2024-01-01 00:00:00+00' + (g * 53 % 31622400) * interval '1 second',
       md5('u' || g)::uuid,
       decode(lpad(to_hex(g), 16, '0'), 'hex'),
       CASE WHEN g % 50 = 0 THEN NULL ELSE 'note ' || repeat('x', (g % 20)::int) END
FROM generate_series(1::int8, :rows) AS g;
ANALYZE ferry_bench.:tbl;
