//! Grouped bar charts with a logarithmic time axis, as SVG (plotters), in the style of the LAS
//! paper's Figs. 5–10: one group of bars per query, one bar per engine.

use std::path::Path;

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;

/// One bar's value: a time in seconds, or "more than" a limit (drawn to the limit, hatched
/// lighter, and labelled "> limit").
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bar {
    Secs(f64),
    Over(f64),
    Missing,
}

/// A time axis' tick: `50 µs`, `2 ms`, `1 s`, `20 s`.
fn duration_label(secs: f64) -> String {
    let (v, unit) = if secs >= 1.0 {
        (secs, "s")
    } else if secs >= 1e-3 {
        (secs * 1e3, "ms")
    } else {
        (secs * 1e6, "µs")
    };
    if v >= 10.0 || (v - v.round()).abs() < 1e-9 {
        format!("{v:.0} {unit}")
    } else {
        format!("{v:.1} {unit}")
    }
}

/// Writes the chart: `groups` along the x axis, one bar per `series` in each, `bars[g][s]`;
/// the time axis described as `y_desc`.
pub fn log_bars(
    path: &Path,
    title: &str,
    y_desc: &str,
    groups: &[String],
    series: &[String],
    bars: &[Vec<Bar>],
) -> Result<()> {
    let values: Vec<f64> = bars
        .iter()
        .flatten()
        .filter_map(|b| match *b {
            Bar::Secs(s) | Bar::Over(s) if s > 0.0 => Some(s),
            _ => None,
        })
        .collect();
    if values.is_empty() {
        return Err(anyhow!("no times to chart"));
    }
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min) / 2.0;
    let hi = values.iter().copied().fold(0.0, f64::max) * 2.0;
    let per_group = series.len() as f64 + 1.0;
    let width = (120.0 + groups.len() as f64 * per_group * 18.0).max(640.0) as u32;
    let root = SVGBackend::new(path, (width, 480)).into_drawing_area();
    let err = |e: DrawingAreaErrorKind<_>| anyhow!("drawing {}: {e:?}", path.display());
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..groups.len() as f64 * per_group, (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(y_desc)
        .y_label_formatter(&|v| duration_label(*v))
        .draw()
        .map_err(err)?;
    let colour = |s: usize| Palette99::pick(s).to_rgba();
    for (g, row) in bars.iter().enumerate() {
        let x0 = g as f64 * per_group + 0.5;
        for (s, bar) in row.iter().enumerate() {
            let x = x0 + s as f64;
            let (v, over) = match *bar {
                Bar::Secs(v) => (v, false),
                Bar::Over(v) => (v, true),
                Bar::Missing => continue,
            };
            let style = if over {
                colour(s).mix(0.35).filled()
            } else {
                colour(s).filled()
            };
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x, lo), (x + 0.9, v)],
                    style,
                )))
                .map_err(err)?;
            if over {
                chart
                    .draw_series(std::iter::once(Text::new(
                        format!("> {v}"),
                        (x, v * 1.15),
                        ("sans-serif", 10),
                    )))
                    .map_err(err)?;
            }
        }
        chart
            .draw_series(std::iter::once(Text::new(
                groups[g].clone(),
                (x0 + series.len() as f64 / 2.0 - 0.5, lo * 0.8),
                ("sans-serif", 13),
            )))
            .map_err(err)?;
    }
    for (s, name) in series.iter().enumerate() {
        let c = colour(s);
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(0.0, lo), (0.0, lo)],
                c.filled(),
            )))
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_names_every_group_and_series_and_marks_the_limit() {
        let dir = std::env::temp_dir().join(format!("nearflow-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.svg");
        let groups = vec!["q2".to_string(), "q5a".to_string()];
        let series = vec!["las ×1".to_string(), "oxigraph ×1".to_string()];
        let bars = vec![
            vec![Bar::Secs(0.02), Bar::Secs(0.1)],
            vec![Bar::Secs(0.15), Bar::Over(30.0)],
        ];
        log_bars(&path, "SP²Bench", "time", &groups, &series, &bars).unwrap();
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .any(|l| l.trim().ends_with(" ms")),
            "ticks with units"
        );
        let svg = std::fs::read_to_string(&path).unwrap();
        for needle in ["q2", "q5a", "las ×1", "oxigraph ×1", "&gt; 30", "<rect"] {
            assert!(svg.contains(needle), "the chart lacks {needle:?}");
        }
        assert!(log_bars(
            &path,
            "empty",
            "time",
            &groups,
            &series,
            &vec![vec![Bar::Missing; 2]; 2]
        )
        .is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn ticks_carry_their_unit() {
        let l = super::duration_label;
        assert_eq!(
            [l(0.00005), l(0.002), l(0.0125), l(1.0), l(20.0)],
            ["50 µs", "2 ms", "12 ms", "1 s", "20 s"]
        );
    }
}
