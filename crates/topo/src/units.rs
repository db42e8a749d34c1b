//! Sizes and durations as people write them (`512MiB`, `2G`, `250ms`, `30s`): the flags of the
//! command line and the arguments of the Python package read them alike.

/// A leading number (digits and `.`) and the unit after it, trimmed; `None` when the number
/// does not parse.
fn number_and_unit(s: &str) -> Option<(f64, &str)> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    Some((num.parse().ok()?, unit.trim()))
}

/// Parses a duration: a number of seconds (`30`, `1.5`) or with a unit (`250ms`, `30s`, `2m`,
/// `1h`), more than 0 and at most a week.
pub fn duration(s: &str) -> Result<std::time::Duration, String> {
    let (n, unit) = number_and_unit(s)
        .ok_or_else(|| format!("`{s}` is not a duration (e.g. 30, 1.5s, 250ms, 2m)"))?;
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => return Err(format!("`{other}` is not a unit of time (ms, s, m, h)")),
    };
    let secs = n * scale;
    if !(secs > 0.0 && secs <= 7.0 * 86400.0) {
        return Err(format!(
            "{s} is out of range: give more than 0 and at most a week"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// Parses a size in bytes: a number with an optional unit, binary (`KiB`, `MiB`, `GiB`, `TiB`,
/// or `K`, `M`, `G`, `T`) or decimal (`KB`, `MB`, `GB`, `TB`); at least 1 and at most 1 PiB.
pub fn bytes(s: &str) -> Result<usize, String> {
    let (n, unit) = number_and_unit(s)
        .ok_or_else(|| format!("`{s}` is not a size (e.g. 512MiB, 2G, 1048576)"))?;
    let scale: f64 = match unit {
        "" | "B" => 1.0,
        "K" | "KiB" | "k" => 1024.0,
        "M" | "MiB" => 1024.0 * 1024.0,
        "G" | "GiB" => 1024.0 * 1024.0 * 1024.0,
        "T" | "TiB" => 1024f64.powi(4),
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        other => {
            return Err(format!(
                "`{other}` is not a unit of size (KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
            ))
        }
    };
    let v = n * scale;
    if !(v >= 1.0 && v <= 1024f64.powi(5)) {
        return Err(format!("{s} is out of range: give 1 byte to 1 PiB"));
    }
    Ok(v as usize)
}
