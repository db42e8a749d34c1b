//! A plan with joins: a hash join of orders with customers, then a two-input operator of one's
//! own (`PlanBuilder::binary`) that pairs each order's total with a running budget.
//! `cargo run --release -p nearflow-apps --example join [ORDERS]`

use nearflow_flow::ops::example_runtime;
use nearflow_flow::PlanBuilder;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let orders: u64 = std::env::args().nth(1).map_or(Ok(50_000), |s| s.parse())?;
    let rt = example_runtime();
    let mut b = PlanBuilder::for_runtime(&rt);
    // (customer, region) and (order, customer, amount).
    let customers = b.generate(1_000, |c| (c, c % 7));
    let order_rows = b.generate(orders, |o| (o, (o * 31) % 1_000, o % 100));
    // Hash join: build on customers, probe with orders → (region, amount).
    let by_region = b.hash_join(
        customers,
        order_rows,
        |c: &(u64, u64)| c.0,
        |o: &(u64, u64, u64)| o.1,
        |c, o| (c.1, o.2),
    );
    // A two-input operator: spend a budget stream on the joined amounts, in arrival order;
    // an amount with no budget left waits, and budget left at the end is dropped.
    let budgets = b.generate(orders / 2, |_| 150u64);
    let spent = b.binary("spend", by_region, budgets, |inp, out| {
        let (Some(&(region, amount)), Some(budget)) = (inp.left.front(), inp.right.front_mut())
        else {
            let ended = (
                inp.left.is_empty() && inp.left_ended,
                inp.right.is_empty() && inp.right_ended,
            );
            if ended.0 || ended.1 {
                // One side is over: what is left on the other can never be paired.
                let dropped = !inp.left.is_empty() || !inp.right.is_empty();
                inp.left.clear();
                inp.right.clear();
                return dropped;
            }
            return false;
        };
        if *budget >= amount {
            *budget -= amount;
            inp.left.pop_front();
            out.push((region, amount));
        } else {
            inp.right.pop_front(); // this budget is spent; try the next
        }
        true
    });
    let sink = b.collect(spent);
    let out = b.build()?.run(&rt)?;
    let paid = out.take(&sink);
    let total: u64 = paid.iter().map(|p| p.1).sum();
    assert!(total <= 150 * (orders / 2));
    println!(
        "{orders} orders joined with 1000 customers; {} paid from budgets, {total} in all",
        paid.len()
    );
    Ok(())
}
