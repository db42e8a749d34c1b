//! `join`: a parallel quicksort that sorts a slice in place, borrowing it (no `'static`).
//!
//! `cargo run --release -p nearflow --example quicksort [N]`

fn quicksort(v: &mut [u64]) {
    if v.len() <= 1024 {
        v.sort_unstable();
        return;
    }
    let last = v.len() - 1;
    v.swap(v.len() / 2, last);
    let mut store = 0;
    for i in 0..last {
        if v[i] < v[last] {
            v.swap(i, store);
            store += 1;
        }
    }
    v.swap(store, last);
    let (lo, hi) = v.split_at_mut(store);
    nearflow::join(|| quicksort(lo), || quicksort(&mut hi[1..]));
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let mut v: Vec<u64> = (0..n as u64)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20)
        .collect();
    let t = std::time::Instant::now();
    quicksort(&mut v);
    assert!(v.windows(2).all(|w| w[0] <= w[1]));
    println!(
        "sorted {n} numbers in {:.1} ms on {} workers",
        t.elapsed().as_secs_f64() * 1e3,
        nearflow::current_num_threads()
    );
}
