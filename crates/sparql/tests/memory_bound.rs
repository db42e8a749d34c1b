//! A query under a memory limit allocates about that much, never its unbounded need: the heap
//! is counted by this test binary's own allocator while queries of SP²Bench's shapes run
//! under limits of a fraction of what they take unbounded. Each either answers (the planner
//! planned it within the limit) or stops with the memory-limit error, and its peak heap stays
//! within the limit and an allowance the data does not change: the packets its plan can hold in flight between operators, which the
//! limit does not count.
//!
//! One test in this file, so that nothing else allocates beside it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use nearflow_sparql::{self as sparql, Options, QueryError};

/// The system allocator, counting the bytes allocated now and at the most.
struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = NOW.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn shrank(bytes: usize) {
    NOW.fetch_sub(bytes, Ordering::Relaxed);
}

// SAFETY: every call is passed to the system allocator unchanged; the counters only read the
// sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // Counted as the new block beside the old one, as a moving reallocation holds both.
            grew(new_size);
            shrank(layout.size());
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `text` to its end, dropping its rows as they come or, with `hold`, holding them all
/// ([`sparql::Prepared::collect`]): the row count and the bytes of packets its plan can hold
/// in flight, and the most the heap grew meanwhile.
fn measured(
    store: &Arc<nearflow_rdf::Store>,
    rt: &nearflow_rt::Runtime,
    text: &str,
    hold: bool,
    limit: Option<usize>,
) -> (Result<(usize, usize), QueryError>, usize) {
    let options = Options {
        memory_limit: limit,
        dop: Some(2),
        ..Options::default()
    };
    let prepared = sparql::prepare(store, text, &options).unwrap();
    let base = NOW.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let run = || -> Result<(usize, usize), QueryError> {
        let (rows, stats) = if hold {
            let all = prepared.collect(rt, None)?;
            (all.rows.len(), all.stats)
        } else {
            let mut running = prepared.start(rt)?;
            let mut rows = 0;
            while let Some(batch) = running.next_batch() {
                rows += batch.len();
            }
            (rows, running.finish()?)
        };
        // Every input buffer full, a packet being filled at each operator's output, and the
        // packets held back by blocked producers.
        let in_flight = stats.channels.iter().map(|c| c.capacity).sum::<usize>()
            + stats.operators
            + stats.max_pending_packets;
        Ok((rows, in_flight * stats.packet_bytes))
    };
    let r = run();
    (r, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

/// `n` subjects, each with `ex:p0` … `ex:p5` (a number and five names), and one `ex:q` of
/// `n / 4` values.
fn synthetic(n: usize) -> String {
    let mut t = String::new();
    for i in 0..n {
        t += &format!("<http://ex/s{i}> <http://ex/p0> {} .\n", (i * 7919) % n);
        for p in 1..6 {
            t += &format!("<http://ex/s{i}> <http://ex/p{p}> \"v{p}-{i}\" .\n");
        }
        t += &format!(
            "<http://ex/s{i}> <http://ex/q> <http://ex/o{}> .\n",
            i % (n / 4)
        );
    }
    t
}

#[test]
fn a_query_allocates_at_most_its_memory_limit_and_a_fixed_allowance() {
    let machine = nearflow_topo::presets::build("nehalem-2x4").unwrap();
    let mut loaded = nearflow_rdf::load::Loaded::default();
    let text = synthetic(200_000);
    nearflow_rdf::load::load_reader(
        &mut loaded,
        "synthetic.ttl".as_ref(),
        nearflow_rdf::load::Format::Turtle,
        text.as_bytes(),
        "",
    )
    .unwrap();
    drop(text);
    let store = Arc::new(loaded.into_store(&machine).unwrap());
    let rt = nearflow_rt::Runtime::builder(machine).build().unwrap();
    let star = "{ ?s ex:p0 ?a ; ex:p1 ?b ; ex:p2 ?c ; ex:p3 ?d ; ex:p4 ?e ; ex:p5 ?f }";
    let pairs = "PREFIX ex: <http://ex/> SELECT DISTINCT ?x ?y { ?x ex:q ?o . ?y ex:q ?o }";
    let queries = [
        // A star of hash joins, its answer ordered: SP²Bench's Q2 in shape.
        (
            format!("PREFIX ex: <http://ex/> SELECT * {star} ORDER BY ?a"),
            false,
        ),
        // Pairs of subjects sharing a value, deduplicated.
        (pairs.to_owned(), false),
        // The same pairs held by the caller: the held answer and the DISTINCT's table share
        // one limit.
        (pairs.to_owned(), true),
        // The star's rows counted: the joins' tables alone.
        (
            format!("PREFIX ex: <http://ex/> SELECT (COUNT(*) AS ?n) {star}"),
            false,
        ),
    ];
    // Runs whose limit and allowance are below what they took unbounded: where the check
    // bites.
    let mut bites = 0;
    for (q, hold) in &queries {
        let (full, unbounded) = measured(&store, &rt, q, *hold, None);
        let (full, in_flight) = full.unwrap();
        // What the limit does not count: the packets in flight between operators, and a few
        // MiB of the plan's own.
        let allowance = in_flight + (4 << 20);
        println!(
            "{q}{}\n  {full} rows, the heap grew {} MiB unbounded; allowance {} MiB",
            if *hold { " (held)" } else { "" },
            unbounded >> 20,
            allowance >> 20
        );
        for part in [2, 4, 8] {
            let limit = unbounded / part;
            let (r, peak) = measured(&store, &rt, q, *hold, Some(limit));
            bites += usize::from(unbounded > limit + allowance);
            println!(
                "  limit {} MiB: {}, the heap grew {} MiB",
                limit >> 20,
                match &r {
                    Ok((n, _)) => format!("{n} rows"),
                    Err(e) => e.to_string(),
                },
                peak >> 20
            );
            match r {
                Ok((n, _)) => assert_eq!(n, full, "{q} under {limit} bytes"),
                Err(QueryError::MemoryLimit { .. }) => {}
                Err(e) => panic!("{q} under {limit} bytes: {e}"),
            }
            assert!(
                peak <= limit + allowance,
                "{q} under a limit of {} MiB allocated {} MiB",
                limit >> 20,
                peak >> 20
            );
        }
    }
    assert!(
        bites >= 8,
        "only {bites} runs of 12 were held below what they take unbounded"
    );
}
