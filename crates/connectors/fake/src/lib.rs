//! FakeSource: generates rows of any schema, deterministically under a seed
