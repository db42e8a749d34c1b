//! Parallelism as part of the plan: how many streams a node runs, and an exchange wherever an
//! operator needs another partitioning than its input has (as DataFusion's
//! `EnforceDistribution` is its own rule).

use super::plan::*;
use super::planner::Planner;

/// Rows below which an operator is not worth parallelising.
pub const PAR_MIN_ROWS: f64 = 20_000.0;

impl Planner<'_> {
    pub(super) fn par(&self, est: f64) -> usize {
        if est >= PAR_MIN_ROWS {
            self.dop.max(1)
        } else {
            1
        }
    }

    /// `p` with its output repartitioned as `to` (as it is when it already is).
    pub(super) fn exchange(&self, p: Phys, to: Partitioning) -> Phys {
        if p.out == to || (to.count() == 1 && p.out.count() == 1) {
            return p;
        }
        let est = p.est;
        let mut x = Phys::over(Op::Exchange(to.clone()), p, est);
        x.out = to;
        x
    }
}
