//! Where a format-3 snapshot's bytes go, and what other layouts of the same data would take:
//! the measurement behind the "bytes per triple" figures in `docs/results/store.md`.
//!
//! `cargo run --release -p nearflow-store --example store_sizes -- STORE.nfs`
//!
//! It reads the file's header and sections directly (format 3, see `src/snapshot/mapped.rs`) and
//! counts, exactly, the bytes each alternative encoding of the same columns and terms would
//! write; nothing is estimated from samples. The alternatives:
//!
//! - **RLE of the leading column**: each permutation's first column as runs (value u32, first
//!   row u32), plus a u32 per 16 rows naming the run that row starts in (so a row is found by
//!   position in a few steps), for the permutations where that is smaller than plain columns.
//! - **Block delta coding**: rows in blocks of 256, each row as varints of the differences
//!   from the row before (the first key column's difference; the second's when the first is
//!   equal, else its value; the third likewise), a block directory of 8 + 12 bytes per block.
//!   Rows are then read by decoding a block, not by position.
//! - **u32 term ends**: an end offset per term in 4 bytes, with an 8-byte base per 65,536.
//! - **Front coding of the term keys** in blocks of 16 (each key as the length it shares with
//!   the key before, the rest's length, and the rest; an 8-byte offset per block), in id order
//!   (ids as today) or in key order (ids renumbered by key at save, which also makes the
//!   sorted term index unnecessary).

use std::fs::File;

const PAGE: u64 = 4096;

fn varint(mut x: u64) -> u64 {
    let mut n = 1;
    while x >= 0x80 {
        x >>= 7;
        n += 1;
    }
    n
}

fn lcp(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Front-coded size of `keys` (in the given order) in blocks of 16.
fn front_coded<'a>(keys: impl Iterator<Item = &'a [u8]>) -> u64 {
    let mut total = 0u64;
    let mut prev: &[u8] = &[];
    for (i, k) in keys.enumerate() {
        if i % 16 == 0 {
            total += 8 + varint(k.len() as u64) + k.len() as u64;
        } else {
            let l = lcp(prev, k);
            total += varint(l as u64) + varint((k.len() - l) as u64) + (k.len() - l) as u64;
        }
        prev = k;
    }
    total
}

fn main() {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        eprintln!("usage: store_sizes STORE.nfs (a format-3 snapshot)");
        std::process::exit(2)
    });
    let file = File::open(&path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(1)
    });
    // SAFETY: read-only mapping of a snapshot that is not written while this runs.
    let map = unsafe { memmap2::Mmap::map(&file) }.expect("map the file");
    if map.len() < 8 + 32 + 8 + 24 * 15 + 4 || &map[..6] != b"NFRDF\0" || map[6] != 3 {
        eprintln!("{path}: not a format-3 snapshot");
        std::process::exit(1);
    }
    let u64_at = |i: usize| u64::from_le_bytes(map[i..i + 8].try_into().unwrap());
    let (terms, _arena, quads) = (u64_at(8), u64_at(16), u64_at(24));
    let sec: Vec<(u64, u64)> = (0..15)
        .map(|i| (u64_at(48 + 24 * i), u64_at(56 + 24 * i)))
        .collect();
    // A damaged or foreign file gets a clear error, not a slice out of range (`nearflow
    // check store FILE` checks the sections' checksums too).
    let fail = |why: &str| -> ! {
        eprintln!("{path}: {why} (the file is damaged or not a whole snapshot; see `nearflow check store`)");
        std::process::exit(1)
    };
    for (i, &(off, len)) in sec.iter().enumerate() {
        let inside = off
            .checked_add(len)
            .is_some_and(|end| end <= map.len() as u64);
        let sized = match i {
            1 => len == terms * 8,
            2 => len == terms * 4,
            5..=13 => len == quads * 4,
            _ => true,
        };
        if !inside || !sized {
            fail(&format!(
                "section {i} lies outside the file or has the wrong size"
            ));
        }
    }
    let bytes = |i: usize| &map[sec[i].0 as usize..(sec[i].0 + sec[i].1) as usize];
    let u32s = |i: usize| -> Vec<u32> {
        bytes(i)
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
            .collect()
    };
    let per = |b: u64| b as f64 / quads as f64;
    let file_len = map.len() as u64;
    println!(
        "{path}: {quads} quads, {terms} terms, {file_len} bytes = {:.1} bytes/triple",
        per(file_len)
    );
    let names = [
        "term keys",
        "term ends",
        "term index",
        "graph table",
        "statistics",
        "SPO",
        "",
        "",
        "POS",
        "",
        "",
        "OSP",
        "",
        "",
        "",
    ];
    println!("\nnow (sections, without page padding):");
    for i in 0..5 {
        println!(
            "  {:<12} {:>14} B  {:>6.2} B/triple",
            names[i],
            sec[i].1,
            per(sec[i].1)
        );
    }
    let cols = 3 * 3 * 4 * quads;
    println!(
        "  {:<12} {:>14} B  {:>6.2} B/triple",
        "9 columns",
        cols,
        per(cols)
    );

    // Columns.
    println!("\ncolumns, per permutation (now 12 B/triple each):");
    let (mut rle_total, mut block_total) = (0u64, 0u64);
    for (o, name) in ["SPO", "POS", "OSP"].iter().enumerate() {
        let c: Vec<Vec<u32>> = (0..3).map(|k| u32s(5 + 3 * o + k)).collect();
        let n = c[0].len();
        let mut runs0 = 0u64;
        let mut runs01 = 0u64;
        let mut block = 0u64;
        for i in 0..n {
            if i == 0 || c[0][i] != c[0][i - 1] {
                runs0 += 1;
            }
            if i == 0 || c[0][i] != c[0][i - 1] || c[1][i] != c[1][i - 1] {
                runs01 += 1;
            }
            if i % 256 == 0 {
                block += 8 + 12;
                continue;
            }
            let d0 = u64::from(c[0][i].wrapping_sub(c[0][i - 1]));
            // Rows are sorted within a graph's run; at a graph boundary the difference may be
            // negative: charge the full value then.
            let (same0, b0) = if c[0][i] >= c[0][i - 1] {
                (d0 == 0, varint(d0))
            } else {
                (false, 5)
            };
            block += b0;
            let b1 = if same0 && c[1][i] >= c[1][i - 1] {
                varint(u64::from(c[1][i] - c[1][i - 1]))
            } else {
                varint(u64::from(c[1][i]))
            };
            block += b1;
            let same01 = same0 && c[1][i] == c[1][i - 1];
            let b2 = if same01 && c[2][i] >= c[2][i - 1] {
                varint(u64::from(c[2][i] - c[2][i - 1]))
            } else {
                varint(u64::from(c[2][i]))
            };
            block += b2;
        }
        // Runs only where they pay (OSP's objects repeat about twice: plain is smaller there).
        let rle = (8 * runs0 + 8 * n as u64 + 4 * (n as u64).div_ceil(16)).min(12 * n as u64);
        rle_total += rle;
        block_total += block;
        println!(
            "  {name}: leading runs {runs0} ({:.2} rows each), first-two runs {runs01}; RLE leading {:.2} B/triple; block delta {:.2} B/triple",
            n as f64 / runs0.max(1) as f64,
            per(rle),
            per(block)
        );
    }
    println!(
        "  all three: RLE leading {:.2}, block delta {:.2} B/triple (now 36)",
        per(rle_total),
        per(block_total)
    );

    // Terms.
    let arena = bytes(0);
    let ends: Vec<u64> = bytes(1)
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
        .collect();
    if ends.windows(2).any(|w| w[0] > w[1]) || ends.last().is_some_and(|&e| e > arena.len() as u64)
    {
        fail("the term ends are out of order or past the term keys");
    }
    let key = |id: u32| -> &[u8] {
        let i = id as usize - 1;
        let s = if i == 0 { 0 } else { ends[i - 1] as usize };
        &arena[s..ends[i] as usize]
    };
    let sorted = u32s(2);
    if sorted.iter().any(|&id| id == 0 || u64::from(id) > terms) {
        fail("the term index names a term that does not exist");
    }
    let (mut iri, mut iri_n, mut lit, mut lit_n, mut other) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for id in 1..=terms as u32 {
        let k = key(id);
        match k.first() {
            Some(0) => (iri, iri_n) = (iri + k.len() as u64, iri_n + 1),
            Some(2..=4) => (lit, lit_n) = (lit + k.len() as u64, lit_n + 1),
            _ => other += k.len() as u64,
        }
    }
    println!(
        "\nterm keys: {iri_n} IRIs {:.2} B/triple ({:.1} B each), {lit_n} literals {:.2} B/triple ({:.1} B each), blank nodes {:.2} B/triple",
        per(iri),
        iri as f64 / iri_n.max(1) as f64,
        per(lit),
        lit as f64 / lit_n.max(1) as f64,
        per(other)
    );
    let u32_ends = 4 * terms + 8 * terms.div_ceil(65536);
    let fc_id = front_coded((1..=terms as u32).map(key));
    let fc_sorted = front_coded(sorted.iter().map(|&id| key(id)));
    println!(
        "  u32 ends: {:.2} B/triple (now {:.2})",
        per(u32_ends),
        per(sec[1].1)
    );
    println!(
        "  front-coded keys+ends, id order: {:.2} B/triple; key order: {:.2} B/triple (now keys+ends {:.2})",
        per(fc_id),
        per(fc_sorted),
        per(sec[0].1 + sec[1].1)
    );
    let small = sec[3].1 + sec[4].1;
    let pad = |b: u64| b.div_ceil(PAGE) * PAGE;
    let combos = [
        (
            "RLE leading + u32 ends (ids and index as now)",
            rle_total + sec[0].1 + u32_ends + sec[2].1,
        ),
        (
            "RLE leading + front coding in id order + index",
            rle_total + fc_id + sec[2].1,
        ),
        (
            "RLE leading + front coding in key order (ids renumbered, no index)",
            rle_total + fc_sorted,
        ),
        (
            "block delta + front coding in key order (ids renumbered, no index)",
            block_total + fc_sorted,
        ),
    ];
    println!("\nwhole file under each combination (plus the small sections):");
    for (what, b) in combos {
        println!("  {:<70} {:>6.1} B/triple", what, per(pad(b + small)));
    }
}
