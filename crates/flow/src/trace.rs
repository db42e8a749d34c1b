//! A per-PU timeline of a run as SVG: one lane per PU, one box per task, colour = request,
//! `<title>` (shown on hover by browsers) = request, operator and duration.

use std::collections::HashMap;
use std::fmt::Write as _;

use nearflow_policy::RequestId;
use nearflow_rt::{TraceEvent, NO_LABEL};

/// Operator names of the plans in a trace, by request.
#[derive(Clone, Debug, Default)]
pub struct Names {
    by_request: HashMap<RequestId, Vec<String>>,
}

impl Names {
    /// No names yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the operator names of the plan run by `request`.
    pub fn add(&mut self, request: RequestId, names: Vec<String>) {
        self.by_request.insert(request, names);
    }

    fn label(&self, request: RequestId, label: u32) -> String {
        if label == NO_LABEL {
            return "(runtime task)".into();
        }
        self.by_request
            .get(&request)
            .and_then(|n| n.get(label as usize))
            .cloned()
            .unwrap_or_else(|| format!("task {label}"))
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn colour(request: RequestId) -> String {
    // Golden-ratio hues: neighbouring requests get distant colours.
    let hue = (request as f64 * 137.507_764) % 360.0;
    format!("hsl({hue:.0},65%,55%)")
}

/// Renders `events` of a runtime with `pus` workers. `title` heads the picture.
pub fn svg(events: &[TraceEvent], pus: usize, names: &Names, title: &str) -> String {
    const LANE: f64 = 18.0;
    const LEFT: f64 = 60.0;
    const WIDTH: f64 = 1400.0;
    const TOP: f64 = 40.0;
    let t0 = events.iter().map(|e| e.start_ns).min().unwrap_or(0);
    let t1 = events
        .iter()
        .map(|e| e.end_ns)
        .max()
        .unwrap_or(t0 + 1)
        .max(t0 + 1);
    let span = (t1 - t0) as f64;
    let scale = WIDTH / span;
    let height = TOP + LANE * pus as f64 + 30.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" font-family="sans-serif" font-size="11">"#,
        w = LEFT + WIDTH + 20.0
    );
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="20" font-size="14">{} — {} tasks over {:.3} ms</text>"#,
        escape(title),
        events.len(),
        span / 1e6
    );
    for pu in 0..pus {
        let y = TOP + LANE * pu as f64;
        let _ = writeln!(
            s,
            r##"<text x="4" y="{:.1}">PU {pu}</text><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#ddd"/>"##,
            y + LANE * 0.7,
            y + LANE,
            LEFT + WIDTH,
            y + LANE
        );
    }
    for e in events {
        let x = LEFT + (e.start_ns - t0) as f64 * scale;
        let w = ((e.end_ns.saturating_sub(e.start_ns)) as f64 * scale).max(0.5);
        let y = TOP + LANE * e.worker as f64 + 2.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x:.2}" y="{y:.1}" width="{w:.2}" height="{:.1}" fill="{}" stroke="white" stroke-width="0.3"><title>request {} · {} · {:.1} µs</title></rect>"#,
            LANE - 4.0,
            colour(e.request),
            e.request,
            escape(&names.label(e.request, e.label)),
            (e.end_ns.saturating_sub(e.start_ns)) as f64 / 1e3
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="{:.1}">0 ms</text><text x="{:.1}" y="{:.1}" text-anchor="end">{:.3} ms</text>"#,
        height - 8.0,
        LEFT + WIDTH,
        height - 8.0,
        span / 1e6
    );
    s.push_str("</svg>\n");
    s
}
