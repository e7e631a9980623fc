//! DES_ENCRYPT(key, text) / DES_DECRYPT(key, text) as SeaTunnel's `DESUtil`:
//! DES/CBC/PKCS5Padding, the key's first 8 UTF-8 bytes, IV "12345678", base64 text.

use arrow::array::ArrayRef;
use arrow::datatypes::DataType;
use base64::Engine;
use cbc::cipher::block_padding::Pkcs7;
use cbc::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use datafusion::common::Result as DFResult;

use super::string::str_out;
use super::{fn_error, Arg, Args, SeaFn};
use crate::ret;

const IV: &[u8; 8] = b"12345678";

pub(super) fn functions() -> Vec<SeaFn> {
    vec![
        SeaFn::new(
            "des_encrypt",
            &[Arg::Str, Arg::Str],
            2,
            ret!(DataType::Utf8),
            encrypt_kernel,
        ),
        SeaFn::new(
            "des_decrypt",
            &[Arg::Str, Arg::Str],
            2,
            ret!(DataType::Utf8),
            decrypt_kernel,
        ),
    ]
}

fn key_of(fname: &str, password: &str) -> DFResult<[u8; 8]> {
    let b = password.as_bytes();
    if password.chars().count() < 8 || b.len() < 8 {
        return Err(fn_error(
            fname,
            "the key must be at least 8 characters long",
        ));
    }
    let mut k = [0u8; 8];
    k.copy_from_slice(&b[..8]);
    Ok(k)
}

/// Encrypts `data` with `password`, as base64.
pub(crate) fn encrypt(password: &str, data: &str) -> DFResult<String> {
    let key = key_of("des_encrypt", password)?;
    let enc = cbc::Encryptor::<des::Des>::new(&key.into(), IV.into());
    let ct = enc.encrypt_padded_vec_mut::<Pkcs7>(data.as_bytes());
    Ok(base64::engine::general_purpose::STANDARD.encode(ct))
}

/// Decrypts base64 `data` with `password`; text that does not decrypt comes back as it
/// is, as in SeaTunnel.
pub(crate) fn decrypt(password: &str, data: &str) -> DFResult<String> {
    let key = key_of("des_decrypt", password)?;
    let Ok(ct) = base64::engine::general_purpose::STANDARD.decode(data.as_bytes()) else {
        return Ok(data.to_string());
    };
    let dec = cbc::Decryptor::<des::Des>::new(&key.into(), IV.into());
    match dec.decrypt_padded_vec_mut::<Pkcs7>(&ct) {
        // Java decodes the bytes as UTF-8, replacing what is not.
        Ok(pt) => Ok(String::from_utf8_lossy(&pt).into_owned()),
        Err(_) => Ok(data.to_string()),
    }
}

fn run(a: &Args, f: fn(&str, &str) -> DFResult<String>) -> DFResult<ArrayRef> {
    let (k, d) = (a.str(0)?, a.str(1)?);
    str_out(a.rows, |i, buf| {
        let (Some(key), Some(data)) = (k.get(i), d.get(i)) else {
            return Ok(false);
        };
        buf.push_str(&f(key, data)?);
        Ok(true)
    })
}

fn encrypt_kernel(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    run(a, encrypt)
}

fn decrypt_kernel(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    run(a, decrypt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_matches_java() {
        let ct = encrypt("1234567890", "Joy Ding").unwrap();
        assert_eq!(decrypt("1234567890", &ct).unwrap(), "Joy Ding");
        // 8 bytes of text + a full padding block.
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(&ct)
                .unwrap()
                .len(),
            16
        );
        assert!(encrypt("short", "x").is_err());
        assert_eq!(decrypt("1234567890", "not base64!").unwrap(), "not base64!");
    }
}
