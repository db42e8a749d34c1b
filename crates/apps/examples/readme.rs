//! The README's Rust snippets, each run as written: `tests/readme.rs` checks that every ```rust
//! block of the README appears here, between a `README begin` and a `README end` line, so the
//! README cannot show code that does not compile. `cargo run --release -p nearflow-apps
//! --example readme [ROWS]`.

// The README's allocator snippet installs the nearflow allocator for the whole program.
// README begin: allocator
// 1. As the global allocator: 8–512 KiB blocks come from the calling thread's local allocator,
//    on its NUMA node; smaller ones from glibc (§5); 512 KiB–64 MiB from the large tier (the
//    thread's cache, then its node's: no system call once warm); larger ones from the OS.
#[global_allocator]
static A: nearflow_alloc::Nearflow = nearflow_alloc::Nearflow;

// README end

use std::error::Error;

type R = Result<(), Box<dyn Error>>;

/// A row of the SplittableData snippet.
struct Row {
    key: u64,
}

/// An order and a customer of the dataflow snippet.
struct Order {
    customer: u32,
    amount: u64,
    paid: bool,
}

struct Customer {
    id: u32,
    region: u32,
}

#[rustfmt::skip] // the snippets keep the README's layout
fn rayon_style(rt: &nearflow_rt::Runtime, n: u64) {
    // README begin: rayon
    use nearflow::prelude::*;                                 // rayon's names: ParallelIterator, …

    fn sum(v: &[u64]) -> u64 {                                // fork-join that borrows the slice
        if v.len() <= 1024 { return v.iter().sum(); }
        let (l, r) = v.split_at(v.len() / 2);
        let (a, b) = nearflow::join(|| sum(l), || sum(r));
        a + b
    }
    let v: Vec<u64> = (0..n).collect();
    let squares: u64 = v.par_iter().map(|x| x * x).sum();    // a parallel iterator
    let mut halves = [0u64; 2];
    nearflow::scope(|s| {                                     // tasks that write to the caller's data
        let (l, r) = v.split_at(v.len() / 2);
        let [a, b] = &mut halves;
        s.spawn(move |_| *a = sum(l));
        s.spawn(move |_| *b = sum(r));
    });
    assert_eq!(halves[0] + halves[1], sum(&v));
    let same: u64 = rt.install(|| v.par_iter().map(|x| x * x).sum()); // on a runtime of yours
    assert_eq!(squares, same);
    // README end
}

#[rustfmt::skip] // the snippets keep the README's layout
fn main() -> R {
    let n: u64 = std::env::args().nth(1).map_or(Ok(2000), |s| s.parse())?;
    // README begin: runtime
    use nearflow_policy::PolicyKind;
    use nearflow_rt::{Pinning, Runtime};

    let machine = nearflow_topo::detect_host()?;             // or presets::build("e7-4820")
    let rt = Runtime::builder(machine.clone()).policy(PolicyKind::Las).pinning(Pinning::Group).build()?;
    let h = rt.submit(|cx| {                                 // a request; its root task is deferred
        cx.spawn_deferred(|cx| {                             // detached work: may run far away
            cx.spawn_immediate(|_| { /* uses hot data */ }); // runs soon, near its spawner
        });
        42
    });
    assert_eq!(h.wait()?, 42);                               // after every task of the request
    // README end
    rayon_style(&rt, n);
    split(&machine, &rt, n)?;
    dataflow(&rt, n)?;
    allocator()?;
    functions(&machine, &rt)?;
    println!("readme: every snippet ran");
    Ok(())
}

// The README writes `&rt` and `&machine` for a program that owns them; here they are borrowed.
#[allow(clippy::needless_borrow)]
#[rustfmt::skip]
fn split(machine: &nearflow_topo::Machine, rt: &nearflow_rt::Runtime, n: u64) -> R {
    let machine = machine.clone();
    let rows: Vec<Row> = (0..n).map(|key| Row { key }).collect();
    // README begin: split
    use nearflow_split::{Route, SplitBy, SplittableData};

    let data = SplittableData::build_by_key(&machine, SplitBy::Node, rows, |r| r.key, Route::Hash,
        |_| Vec::new(), |part: &mut Vec<Row>, r| part.push(r))?;     // each partition built on its node
    let n = data.dispatch(&rt, |_cx, part, _info| part.len(), |a, b| a + b)?; // one homed task each
    // README end
    assert_eq!(n as u64, rows_len(&data));
    Ok(())
}

fn rows_len(data: &nearflow_split::SplittableData<Vec<Row>>) -> u64 {
    data.partitions().iter().map(|p| p.data.len() as u64).sum()
}

#[allow(clippy::needless_borrow)]
#[rustfmt::skip]
fn dataflow(rt: &nearflow_rt::Runtime, n: u64) -> R {
    let orders_vec: Vec<Order> = (0..n)
        .map(|i| Order {
            customer: (i % 10) as u32,
            amount: i,
            paid: i % 2 == 0,
        })
        .collect();
    let customers_vec: Vec<Customer> =
        (0..10).map(|id| Customer { id, region: id % 3 }).collect();
    // README begin: dataflow
    use nearflow_flow::PlanBuilder;

    let mut b = PlanBuilder::for_runtime(&rt);        // parallel forms default to rt's PU count
    let orders = b.source(orders_vec);                // or b.csv_file(path, true, parse)?
    let customers = b.source(customers_vec);
    let paid = b.filter(orders, |o: &Order| o.paid);
    let joined = b.par_hash_join(customers, paid, None, |c: &Customer| c.id, |o: &Order| o.customer,
                                 |c, o| (c.region, o.amount));
    let totals = b.par_group_by(joined, None, |t: &(u32, u64)| t.0, 0u64, |s: &mut u64, t| *s += t.1);
    let sink = b.collect(totals);
    let out = b.build()?.submit(&rt).wait()?;        // build() rejects unconnected ports, cycles
    let totals = out.take(&sink);
    // README end
    let paid_sum: u64 = (0..n).filter(|i| i % 2 == 0).sum();
    assert_eq!(totals.iter().map(|t| t.1).sum::<u64>(), paid_sum);
    Ok(())
}

#[rustfmt::skip]
fn allocator() -> R {
    // README begin: allocator
    // 2. Directly, including allocate-on-node (mbind, then touched):
    let a = &nearflow_alloc::GLOBAL;
    let p = a.alloc(256 << 10);
    let part = a.alloc_on_node(64 << 20, 0)?;          // Err(NoSuchNode) where a node is missing
    unsafe { a.free(p); a.free(part.as_ptr()); }
    // README end
    Ok(())
}

/// The SPARQL page's function of the user's, called in a query over two triples.
#[rustfmt::skip]
fn functions(machine: &nearflow_topo::Machine, rt: &nearflow_rt::Runtime) -> R {
    let mut loaded = nearflow_rdf::load::Loaded::default();
    let data = "<http://example.org/a> <http://example.org/name> \"ab\" .\n\
                <http://example.org/b> <http://example.org/name> <http://example.org/c> .\n";
    nearflow_rdf::load::load_reader(&mut loaded, "data.nt".as_ref(), nearflow_rdf::load::Format::NTriples, data.as_bytes(), "")?;
    let store = std::sync::Arc::new(loaded.into_store(machine)?);
    // README begin: functions
    use std::sync::Arc;
    use nearflow_rdf::term::{Term, TermRef};
    use nearflow_sparql::functions::{Function, Registry};

    let mut functions = (**Registry::builtins()).clone();
    functions.register(Function::on_terms("http://example.org/twice", 1..=1, |args| match &args[0] {
        Term::Literal { value, .. } => Some(Term::from(TermRef::string(&value.repeat(2)))),
        _ => None,                         // the error value: a FILTER over it is false
    }));
    let options = nearflow_sparql::Options { functions: Some(Arc::new(functions)), ..Default::default() };
    let query = "SELECT ?s ?t WHERE { ?s ?p ?o BIND(<http://example.org/twice>(?o) AS ?t) }";
    let answer = nearflow_sparql::prepare(&store, query, &options)?.run_collect(rt)?;
    // README end
    let twice: Vec<String> = answer.rows.iter().filter_map(|r| answer.term(r, 1)).map(|t| t.as_ref().to_string()).collect();
    assert_eq!(twice, ["\"abab\""], "the IRI's call is an error: ?t unbound");
    Ok(())
}
