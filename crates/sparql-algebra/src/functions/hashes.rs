//! The hash functions (§17.4.6): `MD5`, `SHA1`, `SHA256`, `SHA384`, `SHA512`.

use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha384, Sha512};

use super::{Function, Registry, R};
use crate::value::{EvalError, Val};

pub(super) fn register(r: &mut Registry) {
    for name in ["MD5", "SHA1", "SHA256", "SHA384", "SHA512"] {
        r.register(Function::new(name, 1..=1, move |a| hash(name, &a.get(0)?)));
    }
}

/// `MD5`, `SHA1`, `SHA256`, `SHA384`, `SHA512` (§17.4.6) of a simple literal or `xsd:string`:
/// the digest of its UTF-8 bytes, in lower-case hexadecimal.
fn hash(what: &str, v: &Val<'_>) -> R<Val<'static>> {
    let s = v.plain_str().ok_or(EvalError)?.as_bytes();
    let digest: Vec<u8> = match what {
        "MD5" => Md5::digest(s).to_vec(),
        "SHA1" => Sha1::digest(s).to_vec(),
        "SHA256" => Sha256::digest(s).to_vec(),
        "SHA384" => Sha384::digest(s).to_vec(),
        _ => Sha512::digest(s).to_vec(),
    };
    let mut hex = String::with_capacity(digest.len() * 2);
    for b in digest {
        hex.push_str(&format!("{b:02x}"));
    }
    Ok(Val::string(hex))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{lit, text};
    use super::*;

    #[test]
    fn hashes_are_lower_case_hex_of_the_utf8() {
        let abc = Val::string("abc".into());
        assert_eq!(
            text(&hash("MD5", &abc).unwrap()),
            "900150983cd24fb0d6963f7d28e17f72"
        );
        assert_eq!(
            text(&hash("SHA1", &abc).unwrap()),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert!(hash("MD5", &lit("1", "integer")).is_err());
    }
}
