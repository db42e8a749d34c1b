//! VWAP bargain detection (StreamMap §V.A, Fig. 9).
//!
//! trades and quotes → filter → split by hash(ticker) into N branches; in each branch the
//! trades feed a running VWAP over a count-based sliding window of the ticker's last `window`
//! trades, and each quote is joined with its ticker's latest VWAP; a quote whose ask price is
//! below the VWAP is a **bargain** with index `ask_size · exp(vwap − ask_price)`; all branches
//! end in one sink.
//!
//! Prices are fixed-point (micro-dollars) and window sums are integers, so the plan and the
//! sequential reference ([`reference()`]) compute bit-identical results whatever the order of
//! evaluation; the window join takes trades and quotes in input order (by sequence number), so
//! each quote sees exactly the trades before it, as in a sequential pass.

use std::collections::{HashMap, VecDeque};
use std::path::Path;

use nearflow_flow::ops::window_agg::WindowAgg;
use nearflow_flow::ops::window_join::Windows;
use nearflow_flow::{PlanBuilder, Sink, Stream};

/// A ticker symbol, inline (symbols in the data are at most 4 bytes; up to 8 are kept).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticker([u8; 8]);

impl Ticker {
    /// From text; longer symbols are an error.
    pub fn new(s: &str) -> Result<Self, String> {
        let b = s.as_bytes();
        if b.is_empty() || b.len() > 8 {
            return Err(format!("ticker {s:?} must have 1 to 8 bytes"));
        }
        let mut t = [0u8; 8];
        t[..b.len()].copy_from_slice(b);
        Ok(Ticker(t))
    }

    /// As text.
    pub fn as_str(&self) -> &str {
        let end = self.0.iter().position(|&c| c == 0).unwrap_or(8);
        std::str::from_utf8(&self.0[..end]).unwrap_or("?")
    }
}

/// Trade or quote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A trade: `price`, `volume`.
    Trade,
    /// A quote: `price` = ask price, `volume` = ask size.
    Quote,
}

/// One input tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tick {
    /// Position in the input (0-based), the sequence order of the stream.
    pub seq: u64,
    /// Symbol.
    pub ticker: Ticker,
    /// Trade or quote.
    pub kind: Kind,
    /// Micro-dollars: trade price or ask price.
    pub price: i64,
    /// Shares: trade volume or ask size.
    pub volume: i64,
}

/// A running VWAP after a trade.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Vwap {
    /// The trade's sequence number.
    pub seq: u64,
    /// Symbol.
    pub ticker: Ticker,
    /// Σ price·volume over the window (micro-dollar shares).
    pub pv: i128,
    /// Σ volume over the window.
    pub v: i64,
}

/// A detected bargain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bargain {
    /// The quote's sequence number.
    pub seq: u64,
    /// Symbol.
    pub ticker: Ticker,
    /// The VWAP it was compared with, dollars.
    pub vwap: f64,
    /// Ask price, dollars.
    pub ask: f64,
    /// `ask_size · exp(vwap − ask_price)`.
    pub index: f64,
}

/// Parses a decimal price into micro-dollars, exactly.
pub fn parse_price(s: &str) -> Result<i64, String> {
    let s = s.trim();
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty()
        || frac.len() > 6
        || !frac.bytes().all(|c| c.is_ascii_digit())
    {
        return Err(format!("bad price {s:?}"));
    }
    let whole: i64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| format!("bad price {s:?}"))?
    };
    let mut f: i64 = if frac.is_empty() {
        0
    } else {
        frac.parse().map_err(|_| format!("bad price {s:?}"))?
    };
    for _ in frac.len()..6 {
        f *= 10;
    }
    whole
        .checked_mul(1_000_000)
        .and_then(|w| w.checked_add(f))
        .ok_or_else(|| format!("price {s:?} out of range"))
}

/// The VWAP in dollars.
pub fn vwap_dollars(pv: i128, v: i64) -> f64 {
    pv as f64 / v as f64 / 1e6
}

/// The bargain for a quote against a VWAP, if the ask is below it.
pub fn bargain(q: &Tick, pv: i128, v: i64) -> Option<Bargain> {
    if v <= 0 {
        return None;
    }
    let vwap = vwap_dollars(pv, v);
    let ask = q.price as f64 / 1e6;
    (vwap > ask).then(|| Bargain {
        seq: q.seq,
        ticker: q.ticker,
        vwap,
        ask,
        index: q.volume as f64 * (vwap - ask).exp(),
    })
}

/// The filter of the plan: trades with a price and volume, quotes with an ask price and size.
pub fn relevant(t: &Tick) -> bool {
    t.price > 0 && t.volume > 0
}

/// Parses one row of the TradesAndQuotes CSV (30 columns: `#RIC`, …, `Type` (4), `Price` (6),
/// `Volume` (7), … `Ask Price` (14), `Ask Size` (15)); rows with empty fields give a tick with
/// zero price or volume, which the filter drops.
pub fn parse_row(r: &csv::StringRecord, seq: u64) -> Result<Tick, String> {
    if r.len() < 16 {
        return Err(format!("{} columns, expected 30", r.len()));
    }
    let num = |i: usize| -> Result<i64, String> {
        let f = r[i].trim();
        if f.is_empty() {
            Ok(0)
        } else if let Ok(v) = f.parse::<i64>() {
            Ok(v)
        } else {
            // Sizes are integers; tolerate "1600.0".
            parse_price(f).map(|m| m / 1_000_000)
        }
    };
    let price = |i: usize| -> Result<i64, String> {
        let f = r[i].trim();
        if f.is_empty() {
            Ok(0)
        } else {
            parse_price(f)
        }
    };
    let ticker = Ticker::new(r[0].trim())?;
    match r[4].trim() {
        "Trade" => Ok(Tick {
            seq,
            ticker,
            kind: Kind::Trade,
            price: price(6)?,
            volume: num(7)?,
        }),
        "Quote" => Ok(Tick {
            seq,
            ticker,
            kind: Kind::Quote,
            price: price(14)?,
            volume: num(15)?,
        }),
        other => Err(format!("type {other:?} is neither Trade nor Quote")),
    }
}

/// Reads the whole file (gzip or plain) into ticks, `repeat` times (sequence numbers go on).
pub fn read_file(path: &Path, repeat: u32) -> Result<Vec<Tick>, String> {
    let r = nearflow_flow::ops::csv_source::open_maybe_gz(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rd = csv::ReaderBuilder::new().has_headers(true).from_reader(r);
    let mut once = Vec::new();
    for (i, rec) in rd.records().enumerate() {
        let rec = rec.map_err(|e| format!("{}: {e}", path.display()))?;
        let line = rec.position().map_or(i as u64 + 2, csv::Position::line);
        once.push(parse_row(&rec, 0).map_err(|e| format!("{}: line {line}: {e}", path.display()))?);
    }
    let mut all = Vec::with_capacity(once.len() * repeat as usize);
    for _ in 0..repeat {
        for t in &once {
            all.push(Tick {
                seq: all.len() as u64,
                ..*t
            });
        }
    }
    Ok(all)
}

/// A deterministic stream shaped like the real day: ~1,900 tickers, 22% trades with a random
/// walk of prices per ticker, 78% quotes with asks around the price, some rows with missing
/// fields (zero price).
pub fn generate(n: u64, seed: u64) -> Vec<Tick> {
    let tickers = 1_925u64;
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut price: HashMap<u64, i64> = HashMap::new();
    (0..n)
        .map(|seq| {
            let r = next();
            // Skewed popularity: low ids trade more.
            let id = (r % tickers) * (next() % tickers) / tickers;
            let mut name = [b'A'; 4];
            let mut x = id;
            for c in name.iter_mut().rev() {
                *c = b'A' + (x % 26) as u8;
                x /= 26;
            }
            let ticker = Ticker::new(std::str::from_utf8(&name).expect("ascii")).expect("4 bytes");
            let p = price
                .entry(id)
                .or_insert(5_000_000 + (id as i64 * 37_000) % 95_000_000);
            let step = (next() % 2001) as i64 - 1000; // ±0.1 cent steps
            *p = (*p + step * 100).max(10_000);
            let missing = next() % 100 < 3;
            if next() % 100 < 22 {
                Tick {
                    seq,
                    ticker,
                    kind: Kind::Trade,
                    price: if missing { 0 } else { *p },
                    volume: 100 * (1 + (next() % 50) as i64),
                }
            } else {
                let spread = (next() % 60_000) as i64 - 20_000;
                Tick {
                    seq,
                    ticker,
                    kind: Kind::Quote,
                    price: if missing {
                        0
                    } else {
                        (*p + spread).max(10_000)
                    },
                    volume: 1 + (next() % 100) as i64,
                }
            }
        })
        .collect()
}

struct VwapWindow;

impl WindowAgg<Tick> for VwapWindow {
    type Acc = (i128, i64);
    type Out = Vwap;

    fn add(&mut self, acc: &mut (i128, i64), t: &Tick) {
        acc.0 += i128::from(t.price) * i128::from(t.volume);
        acc.1 += t.volume;
    }

    fn remove(&mut self, acc: &mut (i128, i64), t: &Tick) {
        acc.0 -= i128::from(t.price) * i128::from(t.volume);
        acc.1 -= t.volume;
    }

    fn output(&mut self, acc: &(i128, i64), t: &Tick, _len: usize) -> Option<Vwap> {
        Some(Vwap {
            seq: t.seq,
            ticker: t.ticker,
            pv: acc.0,
            v: acc.1,
        })
    }
}

/// Builds the VWAP plan over `input` with `branches` branches and a window of `window` trades;
/// returns the bargains' sink.
pub fn build(
    b: &mut PlanBuilder,
    input: Stream<Tick>,
    branches: usize,
    window: usize,
) -> Sink<Bargain> {
    build_inner(b, input, branches, Window::fixed(window), false)
}

/// The sliding window's size along the stream: `first` trades per ticker, then `then` from
/// the tick with sequence number `from_seq` on (a run whose behaviour changes halfway, for
/// StreamMap's online re-mapping).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub first: usize,
    pub then: usize,
    pub from_seq: u64,
}

impl Window {
    /// The same size all along.
    pub fn fixed(size: usize) -> Window {
        Window {
            first: size,
            then: size,
            from_seq: u64::MAX,
        }
    }

    /// The size for the tick with sequence number `seq` (at least 1).
    pub fn size(&self, seq: u64) -> usize {
        if seq < self.from_seq {
            self.first.max(1)
        } else {
            self.then.max(1)
        }
    }
}

/// The plan of [`build`] with StreamMap's threads (Fig. 9): the source thread (thread 0:
/// the caller's source, the filter and the split) and one worker thread per branch (threads
/// `1..threads`); with one thread, one branch on thread 0. The caller creates `input` on
/// thread 0 (`b.on_thread(Some(0))`). The sink is on no thread: each worker delivers to it.
pub fn build_threads(
    b: &mut PlanBuilder,
    input: Stream<Tick>,
    threads: usize,
    window: usize,
) -> Sink<Bargain> {
    build_threads_window(b, input, threads, Window::fixed(window))
}

/// [`build_threads`] with a window whose size changes along the stream.
pub fn build_threads_window(
    b: &mut PlanBuilder,
    input: Stream<Tick>,
    threads: usize,
    window: Window,
) -> Sink<Bargain> {
    b.on_thread(Some(0));
    build_inner(
        b,
        input,
        threads.saturating_sub(1).max(1),
        window,
        threads > 1,
    )
}

fn build_inner(
    b: &mut PlanBuilder,
    input: Stream<Tick>,
    branches: usize,
    window: Window,
    threaded: bool,
) -> Sink<Bargain> {
    let ticks = b.filter(input, relevant);
    let parts = b.partition(ticks, branches, |t: &Tick| t.ticker);
    let mut outs = Vec::with_capacity(branches);
    for (i, part) in parts.into_iter().enumerate() {
        if threaded {
            b.on_thread(Some(1 + i));
        }
        let by_kind = b.partition_by(part, 2, |t: &Tick| usize::from(t.kind == Kind::Quote));
        let (trades, quotes) = (by_kind[0], by_kind[1]);
        let vwaps = if window.first == window.then {
            b.window_aggregate(trades, window.first, |t: &Tick| t.ticker, VwapWindow)
        } else {
            let size = move |t: &Tick| window.size(t.seq);
            b.window_aggregate_sized(trades, size, |t: &Tick| t.ticker, VwapWindow)
        };
        let bargains = b.window_join(
            vwaps,
            quotes,
            Windows { left: 1, right: 0 },
            (|v: &Vwap| v.seq, |q: &Tick| q.seq),
            (|v: &Vwap| v.ticker, |q: &Tick| q.ticker),
            |v: &Vwap, q: &Tick| bargain(q, v.pv, v.v),
        );
        outs.push(bargains);
    }
    if threaded {
        b.on_thread(None);
    }
    let all = b.union(outs);
    b.collect(all)
}

/// The straightforward sequential computation: one pass in input order, a window per ticker.
pub fn reference(ticks: &[Tick], window: usize) -> Vec<Bargain> {
    reference_window(ticks, Window::fixed(window))
}

/// [`reference()`] with a window whose size changes along the stream.
pub fn reference_window(ticks: &[Tick], window: Window) -> Vec<Bargain> {
    let mut windows: HashMap<Ticker, VecDeque<(i64, i64)>> = HashMap::new();
    let mut out = Vec::new();
    for t in ticks.iter().filter(|t| relevant(t)) {
        match t.kind {
            Kind::Trade => {
                let w = windows.entry(t.ticker).or_default();
                while w.len() >= window.size(t.seq) {
                    w.pop_front();
                }
                w.push_back((t.price, t.volume));
            }
            Kind::Quote => {
                if let Some(w) = windows.get(&t.ticker) {
                    let pv: i128 = w.iter().map(|&(p, v)| i128::from(p) * i128::from(v)).sum();
                    let v: i64 = w.iter().map(|&(_, v)| v).sum();
                    out.extend(bargain(t, pv, v));
                }
            }
        }
    }
    out
}

/// An order-independent checksum of bargains: the wrapping sum of a 64-bit mix of each
/// bargain's sequence number, ticker and index bits.
pub fn checksum(bargains: &[Bargain]) -> u64 {
    bargains.iter().fold(0u64, |acc, b| {
        let mut h = b.seq
            ^ u64::from_le_bytes(b.ticker.0).rotate_left(17)
            ^ b.index.to_bits().rotate_left(41);
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^= h >> 33;
        acc.wrapping_add(h)
    })
}

/// One run of the VWAP plan on a runtime: what `nearflow run vwap` reports.
pub struct Run {
    /// The bargains, the largest index first (then by sequence number).
    pub bargains: Vec<Bargain>,
    /// Tuples in.
    pub tuples: u64,
    /// From submitting the plan to its end.
    pub seconds: f64,
    /// The packet size the plan ran with.
    pub packet_bytes: usize,
    /// [`checksum`] of the bargains (order-independent).
    pub checksum: u64,
    /// Whether the bargains equal a sequential pass's (`None` when not compared).
    pub matches_reference: Option<bool>,
    /// The request it ran as and its operators' names (for a timeline).
    pub request: nearflow_policy::RequestId,
    /// The operators' names, in plan order.
    pub operators: Vec<String>,
}

/// A bargain as a [`Report`] lists it.
#[derive(Debug, serde::Serialize)]
pub struct BargainOut {
    /// The tick's sequence number.
    pub seq: u64,
    /// Its ticker.
    pub ticker: String,
    /// The window's VWAP.
    pub vwap: f64,
    /// The ask.
    pub ask: f64,
    /// The bargain index.
    pub index: f64,
}

/// A run as `nearflow run vwap` reports it: as JSON (serde) or as text (`Display`).
#[derive(Debug, serde::Serialize)]
pub struct Report {
    /// The machine it ran on.
    pub machine: String,
    /// The scheduling policy.
    pub policy: String,
    /// Parallel branches.
    pub branches: usize,
    /// The window, in ticks.
    pub window: usize,
    /// The packet size.
    pub packet_bytes: usize,
    /// Where the ticks came from.
    pub input: String,
    /// Tuples in.
    pub tuples_in: u64,
    /// Bargains out.
    pub bargains: usize,
    /// [`checksum`] of the bargains, in hex.
    pub checksum: String,
    /// The run's time.
    pub seconds: f64,
    /// Tuples in per second.
    pub tuples_per_s: f64,
    /// Whether the bargains equal a sequential pass's (`None` when not compared).
    pub matches_reference: Option<bool>,
    /// The first bargains, the largest index first.
    pub top: Vec<BargainOut>,
}

impl Report {
    /// `run`'s report: on `machine` under `policy`, with `branches` and `window`, its ticks
    /// from `input`, the `top` first bargains listed.
    pub fn new(
        run: &Run,
        (machine, policy): (String, String),
        (branches, window): (usize, usize),
        input: String,
        top: usize,
    ) -> Report {
        Report {
            machine,
            policy,
            branches,
            window,
            packet_bytes: run.packet_bytes,
            input,
            tuples_in: run.tuples,
            bargains: run.bargains.len(),
            checksum: format!("{:016x}", run.checksum),
            seconds: run.seconds,
            tuples_per_s: run.tuples as f64 / run.seconds,
            matches_reference: run.matches_reference,
            top: (run.bargains.iter().take(top))
                .map(|b| BargainOut {
                    seq: b.seq,
                    ticker: b.ticker.as_str().into(),
                    vwap: b.vwap,
                    ask: b.ask,
                    index: b.index,
                })
                .collect(),
        }
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "vwap on {} · policy {} · {} branches · window {} · packets {} B",
            self.machine, self.policy, self.branches, self.window, self.packet_bytes
        )?;
        writeln!(f, "input: {}", self.input)?;
        writeln!(
            f,
            "{} tuples in {:.3} s = {:.0} tuples/s; {} bargains, checksum {}",
            self.tuples_in, self.seconds, self.tuples_per_s, self.bargains, self.checksum
        )?;
        writeln!(
            f,
            "{}",
            match self.matches_reference {
                Some(true) => "result equals the sequential reference",
                Some(false) => "RESULT DIFFERS from the sequential reference",
                None => "(not compared with the sequential reference)",
            }
        )?;
        writeln!(f, "top bargains:")?;
        let (seq, ticker, vwap, ask, index) = ("seq", "ticker", "vwap", "ask", "index");
        writeln!(f, "  {seq:>8} {ticker:<6} {vwap:>10} {ask:>10} {index:>14}")?;
        for b in &self.top {
            writeln!(
                f,
                "  {:>8} {:<6} {:>10.4} {:>10.4} {:>14.2}",
                b.seq, b.ticker, b.vwap, b.ask, b.index
            )?;
        }
        Ok(())
    }
}

/// Runs VWAP over `ticks` with `branches` parallel branches and a window of `window` ticks, as
/// one request of the runtime `b` was made for; with `check`, compares the bargains with
/// [`reference()`] (computed before the run, not timed).
pub fn run(
    rt: &nearflow_rt::Runtime,
    mut b: PlanBuilder,
    ticks: Vec<Tick>,
    branches: usize,
    window: usize,
    check: bool,
) -> Result<Run, Box<dyn std::error::Error + Send + Sync>> {
    let tuples = ticks.len() as u64;
    let reference = check.then(|| reference(&ticks, window));
    let src = b.source(ticks);
    let sink = build(&mut b, src, branches, window);
    let plan = b.build()?;
    let t = std::time::Instant::now();
    let handle = plan.submit(rt);
    let (operators, request) = (handle.names(), handle.request_id());
    let out = handle.wait()?;
    let seconds = t.elapsed().as_secs_f64();
    let mut bargains = out.take(&sink);
    let sum = checksum(&bargains);
    let matches_reference = reference.map(|r| checksum(&r) == sum && r.len() == bargains.len());
    bargains.sort_by(|a, b| b.index.total_cmp(&a.index).then(a.seq.cmp(&b.seq)));
    Ok(Run {
        bargains,
        tuples,
        seconds,
        packet_bytes: out.stats.packet_bytes,
        checksum: sum,
        matches_reference,
        request,
        operators,
    })
}
