//! Printing an experiment's report.

use anyhow::Result;

/// Prints an experiment's report: one JSON document (and its notes on stderr) when `json`,
/// else its tables.
pub fn print_report<T: serde::Serialize>(r: &nearflow_lab::Report<T>, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(r)?);
        if !r.notes.is_empty() {
            eprintln!("{}", r.notes.trim_end());
        }
    } else {
        print!("{}", r.text);
    }
    Ok(())
}
