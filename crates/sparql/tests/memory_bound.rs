//! A query under a memory limit allocates about that much, never its unbounded need: the heap
//! is counted by this test binary's own allocator while queries of SP²Bench's shapes run
//! under limits of a fraction of what they take unbounded. Each either answers (the planner
//! planned it within the limit) or stops with the memory-limit error, and its peak heap stays
//! within the limit and an allowance the data does not change: the packets its plan can hold in flight between operators, which the
//! limit does not count.
//!
//! With a spill folder ([`Options::spill`]) the hash joins and the DISTINCT over unordered rows
//! write their rows to disk instead of stopping: those queries answer under every limit, the
//! same rows as unbounded, within the same allowance.
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

/// What a run answered: its rows' count and a sum of their hashes (the same rows in any
/// order give the same sum), and the bytes of packets its plan can hold in flight.
#[derive(Debug)]
struct Answer {
    rows: usize,
    sum: u64,
    in_flight: usize,
}

/// Adds `rows` to the count and the sum (a term the query made, a count, by its value: its
/// id differs from run to run).
fn tally(rows: &sparql::Rows, minted: &sparql::minted::Minted, n: &mut usize, sum: &mut u64) {
    for r in rows {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for &id in r {
            let v = if minted.holds(id) {
                let t = format!("{:?}", minted.term(id));
                t.bytes()
                    .fold(0u64, |a, b| a.wrapping_mul(131).wrapping_add(u64::from(b)))
            } else {
                u64::from(id)
            };
            h = (h ^ v).wrapping_mul(0x0100_0000_01b3);
        }
        *sum = sum.wrapping_add(h);
        *n += 1;
    }
}

/// Runs `text` to its end, dropping its rows as they come or, with `hold`, holding them all
/// ([`sparql::Prepared::collect`]), spilling to `spill` where given: its answer, the most the
/// heap grew meanwhile, and whether some operator wrote rows to disk.
fn measured(
    store: &Arc<nearflow_rdf::Store>,
    rt: &nearflow_rt::Runtime,
    text: &str,
    hold: bool,
    limit: Option<usize>,
    spill: Option<&std::path::Path>,
) -> (Result<Answer, QueryError>, usize, bool) {
    let options = Options {
        memory_limit: limit,
        spill: spill.map(Into::into),
        dop: Some(2),
        ..Options::default()
    };
    let prepared = sparql::prepare(store, text, &options).unwrap();
    let base = NOW.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let run = || -> Result<Answer, QueryError> {
        let (mut rows, mut sum) = (0, 0);
        let stats = if hold {
            let all = prepared.collect(rt, None)?;
            tally(&all.rows, &all.minted, &mut rows, &mut sum);
            all.stats
        } else {
            let mut running = prepared.start(rt)?;
            let minted = running.minted();
            while let Some(batch) = running.next_batch() {
                tally(&batch, &minted, &mut rows, &mut sum);
            }
            running.finish()?
        };
        // Every input buffer full, a packet being filled at each operator's output, and the
        // packets held back by blocked producers.
        let in_flight = stats.channels.iter().map(|c| c.capacity).sum::<usize>()
            + stats.operators
            + stats.max_pending_packets;
        Ok(Answer {
            rows,
            sum,
            in_flight: in_flight * stats.packet_bytes,
        })
    };
    let r = run();
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    (r, peak, prepared.explain().contains("spilled to disk"))
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
    // Each query, whether the caller holds its answer, and whether with a spill folder it
    // answers under every limit.
    let queries = [
        // A star of hash joins, its answer ordered: SP²Bench's Q2 in shape (a sort does not
        // spill).
        (
            format!("PREFIX ex: <http://ex/> SELECT * {star} ORDER BY ?a"),
            false,
            false,
        ),
        // Pairs of subjects sharing a value, deduplicated.
        (pairs.to_owned(), false, true),
        // The same pairs held by the caller: the held answer and the DISTINCT's table share
        // one limit (a held answer does not spill).
        (pairs.to_owned(), true, false),
        // The star's rows counted: the joins' tables alone.
        (
            format!("PREFIX ex: <http://ex/> SELECT (COUNT(*) AS ?n) {star}"),
            false,
            true,
        ),
        // The subjects whose number is the least of those sharing their value: an anti hash
        // join over every subject, SP²Bench's Q6 in shape.
        (
            "PREFIX ex: <http://ex/> SELECT ?s ?a { ?s ex:q ?o ; ex:p0 ?a \
             OPTIONAL { ?t ex:q ?o2 ; ex:p0 ?a2 FILTER (?o = ?o2 && ?a2 < ?a) } \
             FILTER (!bound(?a2)) }"
                .to_owned(),
            false,
            true,
        ),
    ];
    let spill_dir = tempfile::tempdir().unwrap();
    // Runs whose limit and allowance are below what they took unbounded: where the check
    // bites.
    let (mut bites, mut spilled) = (0, 0);
    for (q, hold, answers) in &queries {
        let (full, unbounded, _) = measured(&store, &rt, q, *hold, None, None);
        let full = full.unwrap();
        // What the limit does not count: the packets in flight between operators, and a few
        // MiB of the plan's own.
        let allowance = full.in_flight + (4 << 20);
        println!(
            "{q}{}\n  {} rows, the heap grew {} MiB unbounded; allowance {} MiB",
            if *hold { " (held)" } else { "" },
            full.rows,
            unbounded >> 20,
            allowance >> 20
        );
        for part in [2, 4, 8] {
            let limit = unbounded / part;
            bites += usize::from(unbounded > limit + allowance);
            for spill in [None, Some(spill_dir.path())] {
                let (r, peak, wrote) = measured(&store, &rt, q, *hold, Some(limit), spill);
                spilled += usize::from(wrote);
                println!(
                    "  limit {} MiB{}: {}, the heap grew {} MiB",
                    limit >> 20,
                    if spill.is_some() { ", spilling" } else { "" },
                    match &r {
                        Ok(a) => format!(
                            "{} rows{}",
                            a.rows,
                            if wrote { ", some spilled" } else { "" }
                        ),
                        Err(e) => e.to_string(),
                    },
                    peak >> 20
                );
                match r {
                    Ok(a) => assert_eq!(
                        (a.rows, a.sum),
                        (full.rows, full.sum),
                        "{q} under {limit} bytes"
                    ),
                    Err(QueryError::MemoryLimit { .. }) if spill.is_none() || !answers => {}
                    Err(e) => panic!("{q} under {limit} bytes, spill {spill:?}: {e}"),
                }
                assert!(!wrote || spill.is_some(), "{q}: spilled without a folder");
                assert!(
                    peak <= limit + allowance,
                    "{q} under a limit of {} MiB allocated {} MiB",
                    limit >> 20,
                    peak >> 20
                );
            }
        }
    }
    assert!(
        bites >= 10,
        "only {bites} runs of 15 were held below what they take unbounded"
    );
    // The anti join and the DISTINCT, under a quarter and an eighth of their need at least.
    assert!(spilled >= 4, "only {spilled} runs wrote rows to disk");
    assert_eq!(
        std::fs::read_dir(spill_dir.path()).unwrap().count(),
        0,
        "the spill files are unnamed"
    );
}
