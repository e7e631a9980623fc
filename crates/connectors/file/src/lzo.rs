//! The `lzop` container (what SeaTunnel's `compress_codec = "lzo"` writes through
//! airlift's `LzopCodec`): a header, then blocks of LZO1X-compressed data, each with an
//! Adler-32 of its uncompressed bytes, ended by a zero-length block.

use std::io::{self, Read, Write};

const MAGIC: [u8; 9] = [0x89, b'L', b'Z', b'O', 0x00, 0x0D, 0x0A, 0x1A, 0x0A];
const F_ADLER32_D: u32 = 0x0000_0001;
const F_ADLER32_C: u32 = 0x0000_0002;
const F_H_EXTRA_FIELD: u32 = 0x0000_0040;
const F_CRC32_D: u32 = 0x0000_0100;
const F_CRC32_C: u32 = 0x0000_0200;
const F_H_FILTER: u32 = 0x0000_0800;
/// lzop's block size: 256 KiB of uncompressed data per block.
const BLOCK_SIZE: usize = 256 * 1024;

fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65_521;
    let (mut a, mut b) = (1u32, 0u32);
    // 5552 is the largest run for which the sums cannot overflow a u32.
    for chunk in data.chunks(5552) {
        for &x in chunk {
            a += x as u32;
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Writes an lzop file: compresses in 256 KiB blocks, keeps a block stored when
/// compression would not shrink it (as lzop does).
pub struct LzopWriter<W: Write> {
    inner: W,
    buf: Vec<u8>,
    dict: lzokay_native::Dict,
    finished: bool,
}

impl<W: Write> LzopWriter<W> {
    /// Writes the header to `inner`.
    pub fn new(mut inner: W) -> io::Result<Self> {
        let mut header = Vec::with_capacity(34);
        header.extend_from_slice(&0x1030u16.to_be_bytes()); // version
        header.extend_from_slice(&0x2080u16.to_be_bytes()); // library version
        header.extend_from_slice(&0x0940u16.to_be_bytes()); // version needed to extract
        header.push(1); // M_LZO1X_1
        header.push(5); // level
        header.extend_from_slice(&F_ADLER32_D.to_be_bytes());
        header.extend_from_slice(&0o100644u32.to_be_bytes()); // mode
        header.extend_from_slice(&0u32.to_be_bytes()); // mtime low
        header.extend_from_slice(&0u32.to_be_bytes()); // mtime high
        header.push(0); // no file name
        let sum = adler32(&header);
        inner.write_all(&MAGIC)?;
        inner.write_all(&header)?;
        inner.write_all(&sum.to_be_bytes())?;
        Ok(LzopWriter {
            inner,
            buf: Vec::with_capacity(BLOCK_SIZE),
            dict: lzokay_native::Dict::new(),
            finished: false,
        })
    }

    fn flush_block(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let compressed = lzokay_native::compress_with_dict(&self.buf, &mut self.dict)
            .map_err(|e| io::Error::other(format!("lzo: {e:?}")))?;
        self.inner
            .write_all(&(self.buf.len() as u32).to_be_bytes())?;
        let stored = compressed.len() >= self.buf.len();
        let body: &[u8] = if stored { &self.buf } else { &compressed };
        self.inner.write_all(&(body.len() as u32).to_be_bytes())?;
        self.inner.write_all(&adler32(&self.buf).to_be_bytes())?;
        self.inner.write_all(body)?;
        self.buf.clear();
        Ok(())
    }

    /// Writes the last block and the end marker; returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.finish_in_place()?;
        Ok(self.inner)
    }

    fn finish_in_place(&mut self) -> io::Result<()> {
        if !self.finished {
            self.flush_block()?;
            self.inner.write_all(&0u32.to_be_bytes())?;
            self.inner.flush()?;
            self.finished = true;
        }
        Ok(())
    }
}

impl<W: Write> Write for LzopWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = BLOCK_SIZE - self.buf.len();
        let n = room.min(data.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == BLOCK_SIZE {
            self.flush_block()?;
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Reads an lzop file block by block.
pub struct LzopReader<R: Read> {
    inner: R,
    flags: u32,
    block: Vec<u8>,
    pos: usize,
    done: bool,
}

fn read_u32<R: Read>(r: &mut R) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

fn read_u16<R: Read>(r: &mut R) -> io::Result<u16> {
    let mut b = [0u8; 2];
    r.read_exact(&mut b)?;
    Ok(u16::from_be_bytes(b))
}

fn read_u8<R: Read>(r: &mut R) -> io::Result<u8> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b)?;
    Ok(b[0])
}

impl<R: Read> LzopReader<R> {
    /// Reads and checks the header.
    pub fn new(mut inner: R) -> io::Result<Self> {
        let mut magic = [0u8; 9];
        inner
            .read_exact(&mut magic)
            .map_err(|_| invalid("not an lzop file (too short)"))?;
        if magic != MAGIC {
            return Err(invalid("not an lzop file (bad magic bytes)"));
        }
        let version = read_u16(&mut inner)?;
        let _lib_version = read_u16(&mut inner)?;
        if version >= 0x0940 {
            let _needed = read_u16(&mut inner)?;
        }
        let method = read_u8(&mut inner)?;
        if !(1..=3).contains(&method) {
            return Err(invalid(format!(
                "unsupported lzop method {method} (only LZO1X is supported)"
            )));
        }
        if version >= 0x0940 {
            let _level = read_u8(&mut inner)?;
        }
        let flags = read_u32(&mut inner)?;
        if flags & F_H_FILTER != 0 {
            let _filter = read_u32(&mut inner)?;
        }
        let _mode = read_u32(&mut inner)?;
        let _mtime_low = read_u32(&mut inner)?;
        if version >= 0x0940 {
            let _mtime_high = read_u32(&mut inner)?;
        }
        let name_len = read_u8(&mut inner)? as usize;
        let mut name = vec![0u8; name_len];
        inner.read_exact(&mut name)?;
        let _header_sum = read_u32(&mut inner)?;
        if flags & F_H_EXTRA_FIELD != 0 {
            let len = read_u32(&mut inner)? as usize;
            io::copy(&mut (&mut inner).take(len as u64 + 4), &mut io::sink())?;
        }
        Ok(LzopReader {
            inner,
            flags,
            block: Vec::new(),
            pos: 0,
            done: false,
        })
    }

    fn next_block(&mut self) -> io::Result<()> {
        let dst_len = match read_u32(&mut self.inner) {
            Ok(n) => n as usize,
            // Files cut short after the last block (no end marker) still read.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => 0,
            Err(e) => return Err(e),
        };
        if dst_len == 0 {
            self.done = true;
            self.block.clear();
            self.pos = 0;
            return Ok(());
        }
        let src_len = read_u32(&mut self.inner)? as usize;
        let want_d = self.flags & F_ADLER32_D != 0;
        let sum_d = if want_d {
            Some(read_u32(&mut self.inner)?)
        } else {
            None
        };
        if self.flags & F_CRC32_D != 0 {
            read_u32(&mut self.inner)?;
        }
        if src_len < dst_len {
            if self.flags & F_ADLER32_C != 0 {
                read_u32(&mut self.inner)?;
            }
            if self.flags & F_CRC32_C != 0 {
                read_u32(&mut self.inner)?;
            }
        }
        let mut src = vec![0u8; src_len];
        self.inner
            .read_exact(&mut src)
            .map_err(|_| invalid("lzop file is truncated inside a block"))?;
        self.block = if src_len < dst_len {
            // lzokay-native indexes out of bounds on some corrupt input instead of
            // returning an error: contain that as a data error.
            match std::panic::catch_unwind(|| lzokay_native::decompress_all(&src, Some(dst_len))) {
                Ok(Ok(b)) if b.len() == dst_len => b,
                Ok(Ok(_)) => return Err(invalid("corrupt LZO block: wrong decompressed length")),
                Ok(Err(e)) => return Err(invalid(format!("corrupt LZO block: {e:?}"))),
                Err(_) => return Err(invalid("corrupt LZO block")),
            }
        } else {
            src
        };
        if let Some(s) = sum_d {
            if adler32(&self.block) != s {
                return Err(invalid("lzop block checksum mismatch"));
            }
        }
        self.pos = 0;
        Ok(())
    }
}

impl<R: Read> Read for LzopReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos >= self.block.len() {
            if self.done {
                return Ok(0);
            }
            self.next_block()?;
        }
        let n = out.len().min(self.block.len() - self.pos);
        out[..n].copy_from_slice(&self.block[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adler32_matches_known_value() {
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
    }

    #[test]
    fn lzop_round_trips_many_blocks() {
        let mut data = Vec::new();
        for i in 0..120_000u32 {
            data.extend_from_slice(format!("row {i}\u{1}value {}\n", i % 97).as_bytes());
        }
        let mut w = LzopWriter::new(Vec::new()).unwrap();
        w.write_all(&data).unwrap();
        let bytes = w.finish().unwrap();
        assert!(
            bytes.len() < data.len() / 2,
            "compressed {} of {}",
            bytes.len(),
            data.len()
        );
        let mut r = LzopReader::new(&bytes[..]).unwrap();
        let mut back = Vec::new();
        r.read_to_end(&mut back).unwrap();
        assert_eq!(back, data);
    }

    #[test]
    fn corrupt_files_are_rejected() {
        assert!(LzopReader::new(&b"plain text"[..]).is_err());
        let mut w = LzopWriter::new(Vec::new()).unwrap();
        w.write_all(b"hello hello hello hello hello").unwrap();
        let mut bytes = w.finish().unwrap();
        let n = bytes.len();
        bytes[n - 6] ^= 0xFF; // inside the data of the only block
        let mut back = Vec::new();
        assert!(LzopReader::new(&bytes[..])
            .unwrap()
            .read_to_end(&mut back)
            .is_err());
    }
}
