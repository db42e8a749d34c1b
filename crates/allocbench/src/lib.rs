//! # nearflow-allocbench — one allocation benchmark, four global allocators
//!
//! The same program is built four times (`src/bin/allocbench-*.rs`), each with another
//! `#[global_allocator]`: glibc (the system allocator), mimalloc, jemalloc and nearflow
//! (`nearflow_alloc::Nearflow`, LAS paper §5). `nearflow bench alloc` runs them side by side and
//! prints the tables; each program prints one JSON object per measurement on stdout:
//! `{"allocator", "pattern", "size", "size_min", "ns_per_op", "peak_rss_bytes", "threads", "ops"}`.
//!
//! Patterns (`--pattern`):
//! - `latency`: malloc+free **pairs** and **batches of 64** (64 mallocs, then 64 frees) at 64 B
//!   (control) and 8, 16, 64, 128, 256, 512 KiB, one thread; each block gets one byte written;
//!   ns per malloc+free, median of three runs.
//! - `larson`: threads keep 64 slots and replace a random one per step (free + malloc); after
//!   their steps they hand the slots to a new thread of the next generation, which frees them.
//! - `xmalloc`: producer/consumer pairs: the producer allocates, the consumer frees (every free
//!   is foreign).
//! - `cache-scratch`: the main thread allocates one block per worker; each worker frees it and
//!   then allocates, writes and frees its own blocks.
//! - `pipeline`: a chain of stages like the dataflow engine's: each stage receives a packet,
//!   allocates its output packet, writes it, frees the input (made by the previous stage) and
//!   passes the output on, over bounded channels of 4.
//! - `large-churn`: blocks of 1–25 MiB (uniform), at most 500 MiB live in all: the threads
//!   share 20 slots and each replaces a random one of its own per step (the large
//!   tier had kept freed blocks of every size it had seen, 1.35 GB resident for 500 MiB live).
//! - `producer-consumer`: 64 KiB blocks from producer threads to consumer threads, one block
//!   at a time over bounded channels of 1,024 (every free foreign, at most about 64 MiB live per
//!   pair).
//!
//! Multi-thread patterns draw sizes log-uniformly from 8–512 KiB, write one byte per 4 KiB page
//! of each block, and report wall-clock ns per operation (one malloc+free; one packet for the
//! pipeline) over all threads, with the process's own peak RSS: each pattern runs in its own
//! process, which resets its high-water mark before the pattern (`/proc/self/clear_refs`) and
//! reads it after (`VmHWM` of `/proc/self/status`). `getrusage`'s `ru_maxrss` would not do:
//! Linux carries the parent's high-water mark into a child across fork and exec, so after a
//! large run every child reported the parent's peak.

use std::alloc::{alloc, dealloc, Layout};
use std::hint::black_box;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// One measurement (printed by the programs, read back by `nearflow bench alloc`).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Measurement {
    pub allocator: String,
    pub pattern: String,
    /// Block size in bytes (the largest, for a range).
    pub size: usize,
    /// Smallest block size of a range (equal to `size` for a fixed size).
    pub size_min: usize,
    pub ns_per_op: f64,
    /// Peak resident set of the process (multi-thread patterns only).
    pub peak_rss_bytes: Option<u64>,
    pub threads: usize,
    pub ops: u64,
}

/// Sizes of the latency pattern: a control below the sub-allocators' range, the range, and
/// three sizes of the large tier (packets of ½ L2 on 2 MiB and 4 MiB L2, and 8 MiB).
pub const LATENCY_SIZES: [usize; 10] = [
    64,
    8 << 10,
    16 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
    2 << 20,
    8 << 20,
];

/// Patterns that run threads.
pub const MT_PATTERNS: [&str; 6] = [
    "larson",
    "xmalloc",
    "cache-scratch",
    "pipeline",
    "large-churn",
    "producer-consumer",
];

const MIN: usize = 8 << 10;
const MAX: usize = 512 << 10;

struct Opts {
    pattern: String,
    threads: usize,
    scale: f64,
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        pattern: String::new(),
        threads: 4,
        scale: 1.0,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--pattern" => o.pattern = val()?.clone(),
            "--threads" => {
                o.threads = val()?.parse().map_err(|e| format!("--threads: {e}"))?;
                if o.threads < 2 {
                    return Err("--threads must be at least 2".into());
                }
            }
            "--scale" => {
                o.scale = val()?.parse().map_err(|e| format!("--scale: {e}"))?;
                if !(o.scale > 0.0 && o.scale <= 1000.0) {
                    return Err("--scale must be in (0, 1000]".into());
                }
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if o.pattern != "latency" && !MT_PATTERNS.contains(&o.pattern.as_str()) {
        return Err(format!(
            "--pattern must be one of latency, {} (got {:?})",
            MT_PATTERNS.join(", "),
            o.pattern
        ));
    }
    Ok(o)
}

/// The whole program: parse, run one pattern, print JSON lines.
pub fn main(allocator: &str) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = match parse(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("allocbench-{allocator}: {e}");
            eprintln!("usage: allocbench-{allocator} --pattern latency|larson|xmalloc|cache-scratch|pipeline|large-churn|producer-consumer [--threads N] [--scale F]");
            return ExitCode::from(2);
        }
    };
    let ms = run(allocator, &o);
    for m in ms {
        match serde_json::to_string(&m) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("allocbench-{allocator}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

fn run(allocator: &str, o: &Opts) -> Vec<Measurement> {
    let n = |base: f64| ((base * o.scale) as u64).max(64);
    reset_peak_rss();
    let mt_sized =
        |pattern: &str, ops: u64, ns: f64, (size_min, size): (usize, usize)| Measurement {
            allocator: allocator.into(),
            pattern: pattern.into(),
            size,
            size_min,
            ns_per_op: ns,
            peak_rss_bytes: Some(peak_rss()),
            threads: o.threads,
            ops,
        };
    let mt = |pattern: &str, ops: u64, ns: f64| mt_sized(pattern, ops, ns, (MIN, MAX));
    match o.pattern.as_str() {
        "latency" => latency(allocator, n(100_000.0)),
        "larson" => {
            let steps = n(100_000.0);
            let (ops, ns) = larson(o.threads, steps);
            vec![mt("larson", ops, ns)]
        }
        "xmalloc" => {
            let (ops, ns) = xmalloc(o.threads, n(200_000.0));
            vec![mt("xmalloc", ops, ns)]
        }
        "cache-scratch" => {
            let (ops, ns) = cache_scratch(o.threads, n(100_000.0));
            vec![mt("cache-scratch", ops, ns)]
        }
        "pipeline" => {
            let (ops, ns) = pipeline(o.threads, n(200_000.0));
            vec![mt("pipeline", ops, ns)]
        }
        "large-churn" => {
            let (ops, ns) = large_churn(o.threads, n(2_000.0));
            vec![mt_sized("large-churn", ops, ns, (LARGE_MIN, LARGE_MAX))]
        }
        "producer-consumer" => {
            let (ops, ns) = producer_consumer(o.threads, n(200_000.0));
            vec![mt_sized("producer-consumer", ops, ns, (PC_SIZE, PC_SIZE))]
        }
        _ => unreachable!("checked in parse"),
    }
}

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 16).expect("sizes here are small and aligned")
}

/// Allocates through the global allocator, aborting the benchmark on exhaustion.
fn get(size: usize) -> *mut u8 {
    // SAFETY: non-zero size.
    let p = unsafe { alloc(layout(size)) };
    if p.is_null() {
        std::alloc::handle_alloc_error(layout(size));
    }
    p
}

/// # Safety
/// `p` came from `get(size)`.
unsafe fn put(p: *mut u8, size: usize) {
    // SAFETY: by the caller's contract.
    unsafe { dealloc(p, layout(size)) }
}

/// One byte per page, as a buffer being filled would.
fn touch_pages(p: *mut u8, size: usize) {
    let mut off = 0;
    while off < size {
        // SAFETY: inside the block.
        unsafe { p.add(off).write_volatile(off as u8) };
        off += 4096;
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn latency(allocator: &str, iters: u64) -> Vec<Measurement> {
    let mut out = Vec::new();
    for &size in &LATENCY_SIZES {
        // Small blocks are cheap everywhere: more iterations for a stable figure.
        let iters = if size < MIN { iters * 4 } else { iters };
        let pairs = median(
            (0..3)
                .map(|_| {
                    let t = Instant::now();
                    for _ in 0..iters {
                        let p = get(size);
                        // SAFETY: a live block of `size` ≥ 1 bytes.
                        unsafe {
                            p.write_volatile(1);
                            put(black_box(p), size);
                        }
                    }
                    t.elapsed().as_nanos() as f64 / iters as f64
                })
                .collect(),
        );
        let rounds = (iters / 64).max(1);
        let batch = median(
            (0..3)
                .map(|_| {
                    let mut ptrs = [std::ptr::null_mut::<u8>(); 64];
                    let t = Instant::now();
                    for _ in 0..rounds {
                        for slot in ptrs.iter_mut() {
                            let p = get(size);
                            // SAFETY: live block.
                            unsafe { p.write_volatile(1) };
                            *slot = p;
                        }
                        for &p in black_box(&ptrs) {
                            // SAFETY: allocated above with `size`.
                            unsafe { put(p, size) };
                        }
                    }
                    t.elapsed().as_nanos() as f64 / (rounds * 64) as f64
                })
                .collect(),
        );
        for (pattern, ns, ops) in [("pair", pairs, iters), ("batch64", batch, rounds * 64)] {
            out.push(Measurement {
                allocator: allocator.into(),
                pattern: pattern.into(),
                size,
                size_min: size,
                ns_per_op: ns,
                peak_rss_bytes: None,
                threads: 1,
                ops,
            });
        }
    }
    out
}

/// A xorshift generator: the same sequence for every allocator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Log-uniform in [MIN, MAX].
    fn size(&mut self) -> usize {
        let bits = (self.next() % 1000) as f64 / 1000.0;
        let s = (MIN as f64) * ((MAX / MIN) as f64).powf(bits);
        (s as usize).clamp(MIN, MAX)
    }
}

type Slots = Vec<(usize, usize)>;

fn larson(threads: usize, steps: u64) -> (u64, f64) {
    const SLOTS: usize = 64;
    const GENERATIONS: usize = 4;
    let mut arrays: Vec<Slots> = (0..threads).map(|_| Vec::new()).collect();
    let t = Instant::now();
    for g in 0..GENERATIONS {
        let handles: Vec<_> = arrays
            .into_iter()
            .enumerate()
            .map(|(i, mut slots)| {
                std::thread::spawn(move || {
                    let mut rng = Rng(0x9e37_79b9 ^ ((g * 64 + i) as u64 + 1));
                    if slots.is_empty() {
                        slots = (0..SLOTS)
                            .map(|_| {
                                let s = rng.size();
                                let p = get(s);
                                touch_pages(p, s);
                                (p as usize, s)
                            })
                            .collect();
                    }
                    for _ in 0..steps {
                        let k = (rng.next() % SLOTS as u64) as usize;
                        let (p, s) = slots[k];
                        // SAFETY: a live block of this array (perhaps made by the previous
                        // generation's thread: a foreign free).
                        unsafe { put(p as *mut u8, s) };
                        let s = rng.size();
                        let p = get(s);
                        touch_pages(p, s);
                        slots[k] = (p as usize, s);
                    }
                    slots
                })
            })
            .collect();
        arrays = handles
            .into_iter()
            .map(|h| h.join().expect("larson thread"))
            .collect();
    }
    for (p, s) in arrays.into_iter().flatten() {
        // SAFETY: the last generation's live blocks.
        unsafe { put(p as *mut u8, s) };
    }
    let ops = (GENERATIONS * threads) as u64 * steps;
    (ops, t.elapsed().as_nanos() as f64 / ops as f64)
}

fn xmalloc(threads: usize, blocks: u64) -> (u64, f64) {
    let pairs = (threads / 2).max(1);
    let t = Instant::now();
    let mut handles = Vec::new();
    for i in 0..pairs {
        let (tx, rx) = mpsc::sync_channel::<Slots>(4);
        handles.push(std::thread::spawn(move || {
            let mut rng = Rng(0x51ed ^ (i as u64 + 1));
            let mut batch = Vec::with_capacity(64);
            for _ in 0..blocks {
                let s = rng.size();
                let p = get(s);
                touch_pages(p, s);
                batch.push((p as usize, s));
                if batch.len() == 64 {
                    tx.send(std::mem::replace(&mut batch, Vec::with_capacity(64)))
                        .expect("consumer");
                }
            }
            if !batch.is_empty() {
                tx.send(batch).expect("consumer");
            }
        }));
        handles.push(std::thread::spawn(move || {
            for batch in rx {
                for (p, s) in batch {
                    // SAFETY: the producer's block, handed over.
                    unsafe { put(p as *mut u8, s) };
                }
            }
        }));
    }
    for h in handles {
        h.join().expect("xmalloc thread");
    }
    let ops = pairs as u64 * blocks;
    (ops, t.elapsed().as_nanos() as f64 / ops as f64)
}

fn cache_scratch(threads: usize, rounds: u64) -> (u64, f64) {
    let t = Instant::now();
    let mut rng = Rng(0xcafe);
    let first: Slots = (0..threads)
        .map(|_| {
            let s = rng.size();
            let p = get(s);
            touch_pages(p, s);
            (p as usize, s)
        })
        .collect();
    let handles: Vec<_> = first
        .into_iter()
        .enumerate()
        .map(|(i, (p, s))| {
            std::thread::spawn(move || {
                // SAFETY: the main thread's block, handed over: a foreign free.
                unsafe { put(p as *mut u8, s) };
                let mut rng = Rng(0xbeef ^ (i as u64 + 1));
                for _ in 0..rounds {
                    let s = rng.size();
                    let p = get(s);
                    touch_pages(p, s);
                    for k in 0..8 {
                        // SAFETY: the first cache line of the live block, written repeatedly.
                        unsafe { p.add(k * 8).write_volatile(k as u8) };
                    }
                    // SAFETY: allocated above.
                    unsafe { put(p, s) };
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("cache-scratch thread");
    }
    let ops = threads as u64 * rounds;
    (ops, t.elapsed().as_nanos() as f64 / ops as f64)
}

fn pipeline(threads: usize, packets: u64) -> (u64, f64) {
    let t = Instant::now();
    let (first_tx, mut rx) = mpsc::sync_channel::<(usize, usize)>(4);
    let mut handles = Vec::new();
    handles.push(std::thread::spawn(move || {
        let mut rng = Rng(0xfeed);
        for _ in 0..packets {
            let s = rng.size();
            let p = get(s);
            touch_pages(p, s);
            first_tx.send((p as usize, s)).expect("next stage");
        }
    }));
    for stage in 1..threads {
        let (tx, next_rx) = mpsc::sync_channel::<(usize, usize)>(4);
        let input = std::mem::replace(&mut rx, next_rx);
        let last = stage == threads - 1;
        handles.push(std::thread::spawn(move || {
            let mut rng = Rng(0xd00d ^ stage as u64);
            for (p, s) in input {
                let p = p as *mut u8;
                // SAFETY: the previous stage's live packet: read it, then free it (foreign).
                let sum = unsafe { p.read_volatile() };
                unsafe { put(p, s) };
                if !last {
                    let s2 = rng.size();
                    let q = get(s2);
                    touch_pages(q, s2);
                    // SAFETY: live block.
                    unsafe { q.write_volatile(sum) };
                    tx.send((q as usize, s2)).expect("next stage");
                }
            }
            drop(tx);
        }));
    }
    // The last stage's sender is dropped with the stage; drain nothing here.
    drop(rx);
    for h in handles {
        h.join().expect("pipeline stage");
    }
    (packets, t.elapsed().as_nanos() as f64 / packets as f64)
}

const LARGE_MIN: usize = 1 << 20;
const LARGE_MAX: usize = 25 << 20;
/// Slots of `large-churn`, over all threads: at most 20 × 25 MiB = 500 MiB live.
const LARGE_SLOTS: usize = 20;
const PC_SIZE: usize = 64 << 10;
const PC_QUEUE: usize = 1024;

fn large_churn(threads: usize, steps: u64) -> (u64, f64) {
    let t = Instant::now();
    let threads = threads.min(LARGE_SLOTS);
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let slots = LARGE_SLOTS / threads + usize::from(i < LARGE_SLOTS % threads);
            std::thread::spawn(move || {
                let mut rng = Rng(0x1a79e ^ (i as u64 + 1));
                let mut live: Slots = Vec::with_capacity(slots);
                for _ in 0..steps {
                    if live.len() == slots {
                        let k = (rng.next() % slots as u64) as usize;
                        let (p, s) = live.swap_remove(k);
                        // SAFETY: a live block of this thread.
                        unsafe { put(p as *mut u8, s) };
                    }
                    let s = LARGE_MIN + (rng.next() as usize) % (LARGE_MAX - LARGE_MIN + 1);
                    let p = get(s);
                    touch_pages(p, s);
                    live.push((p as usize, s));
                }
                for (p, s) in live {
                    // SAFETY: as above.
                    unsafe { put(p as *mut u8, s) };
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("large-churn thread");
    }
    let ops = threads as u64 * steps;
    (ops, t.elapsed().as_nanos() as f64 / ops as f64)
}

fn producer_consumer(threads: usize, blocks: u64) -> (u64, f64) {
    let pairs = (threads / 2).max(1);
    let t = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..pairs {
        let (tx, rx) = mpsc::sync_channel::<usize>(PC_QUEUE);
        handles.push(std::thread::spawn(move || {
            for _ in 0..blocks {
                let p = get(PC_SIZE);
                touch_pages(p, PC_SIZE);
                tx.send(p as usize).expect("consumer");
            }
        }));
        handles.push(std::thread::spawn(move || {
            for p in rx {
                // SAFETY: the producer's block, handed over.
                unsafe { put(p as *mut u8, PC_SIZE) };
            }
        }));
    }
    for h in handles {
        h.join().expect("producer-consumer thread");
    }
    let ops = pairs as u64 * blocks;
    (ops, t.elapsed().as_nanos() as f64 / ops as f64)
}

/// Resets this process's RSS high-water mark to its current RSS (Linux ≥ 4.0: writing 5 to
/// `/proc/self/clear_refs`); harmless where it cannot.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// This process's own peak RSS since the last reset: `VmHWM`, else `getrusage` (which may
/// include the parent's peak, see the module docs).
fn peak_rss() -> u64 {
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        if let Some(kb) = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            return kb * 1024;
        }
    }
    // SAFETY: getrusage writes into a zeroed struct we own.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut u) == 0 {
            u.ru_maxrss as u64 * 1024
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_runs_small_and_reports() {
        let o = |p: &str| Opts {
            pattern: p.into(),
            threads: 3,
            scale: 0.002,
        };
        let lat = run("test", &o("latency"));
        assert_eq!(lat.len(), 2 * LATENCY_SIZES.len());
        assert!(lat
            .iter()
            .all(|m| m.ns_per_op > 0.0 && m.peak_rss_bytes.is_none()));
        for p in MT_PATTERNS {
            let m = run("test", &o(p));
            assert_eq!(m.len(), 1);
            assert!(m[0].ns_per_op > 0.0 && m[0].ops > 0, "{p}");
            assert!(m[0].peak_rss_bytes.unwrap() > 0);
        }
    }

    #[test]
    fn bad_arguments_are_refused() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(parse(&s(&["--pattern", "nope"])).is_err());
        assert!(parse(&s(&["--pattern"])).is_err());
        assert!(parse(&s(&["--pattern", "larson", "--threads", "1"])).is_err());
        assert!(parse(&s(&["--pattern", "larson", "--scale", "-1"])).is_err());
        assert!(parse(&s(&["--what"])).is_err());
        assert!(parse(&s(&["--pattern", "xmalloc", "--threads", "8"])).is_ok());
    }
}
