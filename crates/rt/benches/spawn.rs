//! `cargo bench -p nearflow-rt`: the cost of spawning and running an empty task, per policy.
//! (`nearflow bench overhead` compares the policies with rayon in interleaved rounds; this is
//! the criterion view of the same path, for before/after comparisons of one change.)

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use nearflow_policy::PolicyKind;
use nearflow_rt::{Runtime, TaskCx};

const TASKS: u64 = 10_000;

fn chain(cx: &TaskCx<'_>, left: u64) {
    if left > 0 {
        cx.spawn_immediate(move |cx| chain(cx, left - 1));
    }
}

fn spawn(c: &mut Criterion) {
    let machine = nearflow_topo::detect_host().expect("this machine's topology");
    let mut g = c.benchmark_group("spawn");
    g.throughput(Throughput::Elements(TASKS));
    for policy in [PolicyKind::Las, PolicyKind::Nls] {
        let rt = Runtime::builder(machine.clone())
            .policy(policy)
            .build()
            .expect("runtime");
        g.bench_function(BenchmarkId::new("chain", policy.name()), |b| {
            b.iter(|| rt.submit(|cx| chain(cx, TASKS - 1)).wait().unwrap())
        });
        g.bench_function(BenchmarkId::new("fanout", policy.name()), |b| {
            b.iter(|| {
                rt.submit(|cx| {
                    for _ in 1..TASKS {
                        cx.spawn_deferred(|_| {});
                    }
                })
                .wait()
                .unwrap()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, spawn);
criterion_main!(benches);
