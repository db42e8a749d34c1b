//! `cargo bench -p nearflow-flow`: the cost of moving packets through the engine — a source,
//! two maps and a collecting sink — at a few packet sizes (tuples per second).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use nearflow_flow::PlanBuilder;
use nearflow_rt::Runtime;

const ROWS: u64 = 200_000;

fn packets(c: &mut Criterion) {
    let machine = nearflow_topo::detect_host().expect("this machine's topology");
    let rt = Runtime::builder(machine).build().expect("runtime");
    let mut g = c.benchmark_group("packets");
    g.throughput(Throughput::Elements(ROWS));
    for kib in [4usize, 64, 256, 1024] {
        g.bench_function(
            BenchmarkId::new("map-map-collect", format!("{kib}KiB")),
            |b| {
                b.iter(|| {
                    let mut p = PlanBuilder::for_runtime(&rt);
                    p.packet_bytes(kib << 10);
                    let s = p.generate(ROWS, |i| i);
                    let m = p.map(s, |x: u64| x.wrapping_mul(3));
                    let m = p.map(m, |x: u64| x ^ 1);
                    let sink = p.collect(m);
                    let out = p.build().unwrap().run(&rt).unwrap();
                    assert_eq!(out.take(&sink).len() as u64, ROWS);
                })
            },
        );
    }
    g.finish();
}

criterion_group!(benches, packets);
criterion_main!(benches);
