//! The open output file of a writer, by format: text-like (text, csv, json; plain or
//! lzop-compressed) or parquet.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use parquet::arrow::ArrowWriter;

use crate::lzo::LzopWriter;

pub(super) enum TextOut {
    Plain(BufWriter<File>),
    Lzo(LzopWriter<BufWriter<File>>),
}

impl TextOut {
    pub(super) fn write_all(&mut self, b: &[u8]) -> std::io::Result<()> {
        match self {
            TextOut::Plain(w) => w.write_all(b),
            TextOut::Lzo(w) => w.write_all(b),
        }
    }
    pub(super) fn finish(self) -> std::io::Result<()> {
        match self {
            TextOut::Plain(mut w) => w.flush(),
            TextOut::Lzo(w) => w.finish()?.flush(),
        }
    }
}

pub(super) enum Out {
    Text(TextOut),
    Parquet(Box<ArrowWriter<BufWriter<File>>>),
}

pub(super) struct OpenOut {
    pub(super) out: Out,
    pub(super) rows: u64,
    pub(super) staged: PathBuf,
    pub(super) target: PathBuf,
}
