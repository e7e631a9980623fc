//! FakeSource's source protocol, proved with the shared connector test kit: restored at
//! any point it generates every remaining row once, and a replay generates the same rows.

use ferry_api::{JobMode, Options, SourceFactory};
use ferry_connector_testkit::{check_source_replay, check_source_restore, job};
use serde_json::json;

use crate::FakeSourceFactory;

#[test]
fn restored_anywhere_every_row_comes_once() {
    let src = FakeSourceFactory
        .create(
            &mut Options::from_json(
                "FakeSource",
                json!({"row.num": 20_000, "split.num": 3, "schema": {"fields": {"id": "bigint", "s": "string", "a": "array<int>"}}}),
            ),
            &job(JobMode::Batch),
        )
        .unwrap();
    for parallelism in [1, 2] {
        let total = 20_000 * parallelism;
        for at in [0, 1, 8_192, total / 2, total - 1, total] {
            let whole = check_source_restore(&*src, parallelism, job(JobMode::Batch), at)
                .unwrap_or_else(|e| panic!("parallelism {parallelism}, at {at}: {e}"));
            assert_eq!(whole.iter().map(|b| b.num_rows()).sum::<usize>(), total);
        }
        check_source_replay(&*src, parallelism, job(JobMode::Batch), total / 3).unwrap();
    }
}
