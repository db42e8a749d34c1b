//! Term keys front-coded in blocks (the terms of snapshot format 5).
//!
//! The keys go in id order, [`BLOCK`] to a block. A block's first key is written whole (its
//! length as a varint, then its bytes), so a binary search over the blocks compares keys in
//! place; each later key is the length it shares with the block's first key and the length of
//! the rest (two varints), then the rest. Ids given in key order (`nearflow load`) put keys
//! that share long prefixes side by side: at 25 M SP²Bench triples this takes the keys and
//! their offsets from 21.7 to about 7 bytes a triple. Reading key `j` of a block steps over the
//! keys before it (two varints each) and copies two pieces: the shared part of the first key,
//! then its own rest. (Sharing with the key just before would save a little more room, but
//! reading a key would then copy every key before it in its block.)

/// Keys per block.
pub(crate) const BLOCK: usize = 16;

/// Appends `v` as an unsigned LEB128 varint.
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The varint at `*p`, advancing past it; `None` when it runs out of `b` or past 64 bits.
#[inline]
fn varint(b: &[u8], p: &mut usize) -> Option<usize> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*p)?;
        *p += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return usize::try_from(v).ok();
        }
    }
    None
}

/// Encodes keys one after another into blocks.
#[derive(Default)]
pub(crate) struct Encoder {
    head: Vec<u8>,
    n: usize,
}

impl Encoder {
    /// Appends `key`'s encoding to `out`; true when it starts a block (the caller records
    /// where).
    pub(crate) fn push(&mut self, key: &[u8], out: &mut Vec<u8>) -> bool {
        let head = self.n % BLOCK == 0;
        if head {
            put_varint(out, key.len() as u64);
            out.extend_from_slice(key);
            self.head.clear();
            self.head.extend_from_slice(key);
        } else {
            let shared = self
                .head
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count();
            put_varint(out, shared as u64);
            put_varint(out, (key.len() - shared) as u64);
            out.extend_from_slice(&key[shared..]);
        }
        self.n += 1;
        head
    }
}

/// The first key of `block`, in place.
#[inline]
pub(crate) fn head(block: &[u8]) -> Option<&[u8]> {
    let mut p = 0;
    let len = varint(block, &mut p)?;
    block.get(p..p.checked_add(len)?)
}

/// Calls `each(j, key)` for the keys `0..count` of `block` in order, each decoded into `buf`
/// (`key` is `buf`), until `each` returns false. `None` when the block is malformed.
#[inline]
pub(crate) fn scan(
    block: &[u8],
    count: usize,
    buf: &mut Vec<u8>,
    mut each: impl FnMut(usize, &[u8]) -> bool,
) -> Option<usize> {
    let head = self::head(block)?;
    let mut at = varint_len(block)? + head.len();
    for j in 0..count {
        buf.clear();
        if j == 0 {
            buf.extend_from_slice(head);
        } else {
            let (shared, rest) = entry(block, &mut at, head.len())?;
            buf.extend_from_slice(&head[..shared]);
            buf.extend_from_slice(rest);
        }
        if !each(j, buf) {
            break;
        }
    }
    Some(at)
}

/// The length of the varint at the start of `b`.
#[inline]
fn varint_len(b: &[u8]) -> Option<usize> {
    let mut p = 0;
    varint(b, &mut p)?;
    Some(p)
}

/// The entry at `*at` of a block whose first key is `head_len` long: the length it shares with
/// the first key, and its rest; `*at` moves past it.
#[inline]
fn entry<'b>(block: &'b [u8], at: &mut usize, head_len: usize) -> Option<(usize, &'b [u8])> {
    let shared = varint(block, at)?;
    if shared > head_len {
        return None;
    }
    let len = varint(block, at)?;
    let end = at.checked_add(len)?;
    let rest = block.get(*at..end)?;
    *at = end;
    Some((shared, rest))
}

/// Decodes key `j` of `block` into `buf`; `None` when the block is malformed.
#[inline]
pub(crate) fn nth(block: &[u8], j: usize, buf: &mut Vec<u8>) -> Option<()> {
    let head = head(block)?;
    buf.clear();
    if j == 0 {
        buf.extend_from_slice(head);
        return Some(());
    }
    let mut at = varint_len(block)? + head.len();
    for _ in 1..j {
        entry(block, &mut at, head.len())?;
    }
    let (shared, rest) = entry(block, &mut at, head.len())?;
    buf.reserve_exact(shared + rest.len());
    buf.extend_from_slice(&head[..shared]);
    buf.extend_from_slice(rest);
    Some(())
}

/// Whether `block` holds exactly `count` keys, each non-empty UTF-8 whose first byte is at most
/// `max_tag`, and nothing after them.
pub(crate) fn check(block: &[u8], count: usize, max_tag: u8) -> bool {
    let mut buf = Vec::new();
    let mut good = true;
    let end = scan(block, count, &mut buf, |_, key| {
        good = key.first().is_some_and(|&t| t <= max_tag) && std::str::from_utf8(key).is_ok();
        good
    });
    good && end == Some(block.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(keys: &[&str]) -> (Vec<u8>, Vec<usize>) {
        let (mut out, mut starts, mut e) = (Vec::new(), Vec::new(), Encoder::default());
        for k in keys {
            let at = out.len();
            if e.push(k.as_bytes(), &mut out) {
                starts.push(at);
            }
        }
        (out, starts)
    }

    #[test]
    fn every_key_decodes_as_written() {
        let keys: Vec<String> = (0..100)
            .map(|i| format!("\0http://example.org/{}/é{}", i / 7, i % 13))
            .chain(["\u{2}".into(), "\u{2}a".into(), "\u{2}ab".into()])
            .collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let (out, starts) = encode(&keys);
        assert_eq!(starts.len(), keys.len().div_ceil(BLOCK));
        let mut buf = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            let b = i / BLOCK;
            let end = starts.get(b + 1).copied().unwrap_or(out.len());
            let block = &out[starts[b]..end];
            nth(block, i % BLOCK, &mut buf).unwrap();
            assert_eq!(buf, k.as_bytes(), "key {i}");
            if i % BLOCK == 0 {
                assert_eq!(head(block).unwrap(), k.as_bytes());
            }
            let count = (keys.len() - b * BLOCK).min(BLOCK);
            assert!(check(block, count, 4));
            assert!(!check(block, count + 1, 4));
            assert!(!check(&block[..block.len() - 1], count, 4));
        }
    }

    #[test]
    fn malformed_blocks_are_refused_never_a_panic() {
        let (out, _) = encode(&["\0http://a/1", "\0http://a/2", "\0http://b"]);
        let mut buf = Vec::new();
        for cut in 0..out.len() {
            let _ = nth(&out[..cut], 2, &mut buf);
            assert!(!check(&out[..cut], 3, 4));
        }
        for i in 0..out.len() {
            for x in [0u8, 0x7f, 0x80, 0xff] {
                let mut bad = out.clone();
                bad[i] = x;
                let _ = nth(&bad, 2, &mut buf);
                let _ = check(&bad, 3, 4);
            }
        }
        // A shared length past the key before it.
        let bad = [1, b'a', 5, 1, b'b'];
        assert!(nth(&bad, 1, &mut buf).is_none());
        assert!(!check(&bad, 2, 4));
    }
}
