//! Square matrix multiplication with one task per element of the product: the workload of the
//! queue study (`load-balancing-queues.txt` §III), run by `nearflow bench queues` and modelled
//! by `nearflow sim --workload matmul`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nearflow_policy::{Rng, TaskKind};
use nearflow_rt::{RequestError, Runtime};

/// Row-major square matrices, B stored transposed so every dot product reads contiguously.
pub struct Problem {
    /// The side.
    pub n: usize,
    a: Vec<f64>,
    bt: Vec<f64>,
}

/// Dot product with four accumulators (vectorizes); the sequential reference uses it too.
pub fn dot(x: &[f64], y: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let (xc, yc) = (x.chunks_exact(4), y.chunks_exact(4));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (a, b) in xc.zip(yc) {
        for k in 0..4 {
            acc[k] += a[k] * b[k];
        }
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for (a, b) in xr.iter().zip(yr) {
        s += a * b;
    }
    s
}

impl Problem {
    /// Two n×n matrices of values in [−1, 1] in steps of 0.001, from `seed`.
    pub fn new(n: usize, seed: u64) -> Problem {
        let mut rng = Rng::new(seed);
        let mut gen = || (rng.below(2001) as f64 - 1000.0) / 1000.0;
        let a = (0..n * n).map(|_| gen()).collect();
        let bt = (0..n * n).map(|_| gen()).collect();
        Problem { n, a, bt }
    }
    /// Element (i, j) of the product.
    pub fn element(&self, i: usize, j: usize) -> f64 {
        let n = self.n;
        dot(&self.a[i * n..(i + 1) * n], &self.bt[j * n..(j + 1) * n])
    }
    /// The whole product on this thread, row-major, with the same dot product.
    pub fn sequential(&self) -> Vec<f64> {
        let n = self.n;
        (0..n * n).map(|k| self.element(k / n, k % n)).collect()
    }
}

/// Where an element task finds the problem and its element of the product: raw pointers, not
/// `Arc` clones, so that the n² tasks do not all increment and decrement the same two reference
/// counts from both workers. That cost a cache-line transfer between the cores at every spawn and
/// every task end, a cost of this benchmark rather than of any queue (the paper's Java tasks
/// hold plain references, and the `--orders` contenders pay nothing of the kind); without it
/// every policy ran 512 15–21 % faster here.
#[derive(Clone, Copy)]
struct Operands {
    problem: *const Problem,
    product: *const AtomicU64,
}

// SAFETY: both point into data that `multiply` borrows or owns until `wait` has returned, and
// `wait` returns only once every task of the request has ended (run or skipped; a skipped task's
// closure is only dropped, which reads nothing). `Problem` is only read, the product's elements
// are atomics.
unsafe impl Send for Operands {}

impl Operands {
    /// The problem and element `k` of the product.
    ///
    /// # Safety
    /// `k` < n², from a task of the request `multiply` waits for.
    unsafe fn get<'a>(self, k: usize) -> (&'a Problem, &'a AtomicU64) {
        // SAFETY: see `Operands` and the contract above.
        unsafe { (&*self.problem, &*self.product.add(k)) }
    }
}

/// One parallel multiply on `rt`: a request whose root spawns the n² element tasks as `kind`;
/// returns the time and the product.
pub fn multiply(
    rt: &Runtime,
    p: &Problem,
    kind: TaskKind,
) -> Result<(Duration, Vec<f64>), RequestError> {
    let n = p.n;
    let c: Vec<AtomicU64> = (0..n * n).map(|_| AtomicU64::new(0)).collect();
    let ops = Operands {
        problem: p,
        product: c.as_ptr(),
    };
    let t = Instant::now();
    rt.submit(move |cx| {
        for i in 0..n {
            for j in 0..n {
                cx.spawn(kind, move |_| {
                    // SAFETY: i, j < n, and `multiply` waits for this task.
                    let (p, c) = unsafe { ops.get(i * n + j) };
                    // Relaxed: each element is written by one task; the request's completion
                    // orders all writes before `wait` returns.
                    c.store(p.element(i, j).to_bits(), Ordering::Relaxed);
                });
            }
        }
    })
    .wait()?;
    let d = t.elapsed();
    let out = c
        .into_iter()
        .map(|x| f64::from_bits(x.into_inner()))
        .collect();
    Ok((d, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parallel_product_equals_the_sequential_one_and_a_naive_one() {
        let p = Problem::new(19, 3);
        let seq = p.sequential();
        for (k, &c) in seq.iter().enumerate() {
            let (i, j) = (k / 19, k % 19);
            let naive: f64 = (0..19).map(|l| p.a[i * 19 + l] * p.bt[j * 19 + l]).sum();
            assert!((c - naive).abs() < 1e-9, "({i}, {j}): {c} vs {naive}");
        }
        let m = nearflow_topo::from_synthetic("pack:1 core:2 pu:1").unwrap();
        let rt = Runtime::builder(m).build().unwrap();
        for kind in [TaskKind::Immediate, TaskKind::Deferred] {
            let (_, par) = multiply(&rt, &p, kind).unwrap();
            assert_eq!(par, seq, "{kind:?}");
        }
    }
}
