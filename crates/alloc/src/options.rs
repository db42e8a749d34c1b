//! Every environment variable of the allocator, read in this one place (as mimalloc's
//! `options.c`), without allocating (the `LD_PRELOAD` library reads them inside `malloc`):
//!
//! | variable | read by | effect |
//! |---|---|---|
//! | `NEARFLOW_SUPERBLOCK_KB` | [`crate::GLOBAL`], at its first superblock | the superblock size, in KiB |
//! | `NEARFLOW_MALLOC_STATS` | the `LD_PRELOAD` library, at exit | print the counters to stderr |
//!
//! (The runtime's `NEARFLOW_MEMBARRIER` is the runtime's, read in `nearflow-rt`'s `config`.)

use crate::config::Config;

/// The value of environment variable `name`, as bytes, without allocating; None when unset.
fn get(name: &core::ffi::CStr) -> Option<&'static [u8]> {
    // SAFETY: `name` is NUL-terminated; getenv returns null or a NUL-terminated string that
    // stays valid while the environment is not modified (the program does not set variables
    // of ours while the allocator runs).
    let p = unsafe { libc::getenv(name.as_ptr()) };
    // SAFETY: non-null: a NUL-terminated string, as above.
    (!p.is_null()).then(|| unsafe { core::ffi::CStr::from_ptr(p) }.to_bytes())
}

/// Whether `NEARFLOW_MALLOC_STATS` is set (to anything).
pub fn malloc_stats() -> bool {
    get(c"NEARFLOW_MALLOC_STATS").is_some()
}

/// `NEARFLOW_SUPERBLOCK_KB` as a superblock size in bytes usable with `cfg`. None when unset or
/// unusable (then a one-line warning goes to stderr).
pub(crate) fn superblock_size(cfg: &Config) -> Option<usize> {
    let bytes = get(c"NEARFLOW_SUPERBLOCK_KB")?;
    let mut kb: usize = 0;
    let mut ok = !bytes.is_empty();
    for &b in bytes {
        ok &= b.is_ascii_digit();
        kb = kb
            .saturating_mul(10)
            .saturating_add(b.wrapping_sub(b'0') as usize);
    }
    let size = kb.saturating_mul(1024);
    if ok
        && (Config {
            superblock_size: size,
            ..*cfg
        })
        .classes()
        .is_ok()
    {
        return Some(size);
    }
    let msg = b"nearflow-alloc: NEARFLOW_SUPERBLOCK_KB must be a multiple of 4 holding two of the largest blocks (at least 1028 for the defaults); using 10240\n";
    // SAFETY: writes a static buffer of `msg.len()` bytes to stderr.
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
    None
}
