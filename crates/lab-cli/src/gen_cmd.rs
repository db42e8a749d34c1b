//! `nearflow gen sp2bench`: a document of SP²Bench's shape from our own generator
//! (`nearflow_apps::sp2bench`), for machines without the original's files.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use nearflow_apps::sp2bench::{self, Class};

#[derive(Subcommand, Debug)]
pub enum GenCmd {
    /// A bibliography of SP²Bench's shape (classes, predicates, growth curves, authors,
    /// citations), as Turtle; `.gz` output is gzip-compressed.
    Sp2bench(Sp2benchGen),
}

#[derive(Args, Debug, Clone)]
pub struct Sp2benchGen {
    /// Triples to generate (the last document is completed, so a few more).
    /// Range: 1..=1e10.
    #[arg(value_parser = nearflow_cli::args::int_in(1u64, 10_000_000_000), long)]
    pub triples: u64,
    /// The file to write (`.gz`: gzip), or `-` for standard output (to stream a document too
    /// large to keep into `nearflow load -`). A file is written to a temporary name first and
    /// renamed at the end.
    #[arg(long)]
    pub out: PathBuf,
    /// Seed: the same seed and size give the same file.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// No progress output.
    #[arg(long)]
    pub quiet: bool,
}

pub fn run(cmd: &GenCmd) -> Result<()> {
    match cmd {
        GenCmd::Sp2bench(c) => sp2bench_file(c).map(|_| ()),
    }
}

/// Generates into `w` and flushes it; hands `w` back (a gzip stream still needs its trailer).
fn generate_into<W: Write>(
    c: &Sp2benchGen,
    progress: &AtomicU64,
    mut w: W,
) -> std::io::Result<(sp2bench::Summary, W)> {
    let summary = sp2bench::generate_with_progress(c.triples, c.seed, &mut w, Some(progress))?;
    w.flush()?;
    Ok((summary, w))
}

/// Generates to standard output, as it goes (nothing kept); returns the summary.
fn sp2bench_stdout(c: &Sp2benchGen) -> Result<sp2bench::Summary> {
    let progress = AtomicU64::new(0);
    let out = BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    let (summary, _) =
        generate_into(c, &progress, out).context("writing the document to standard output")?;
    if !c.quiet {
        eprintln!("wrote {} triples to standard output", summary.triples);
    }
    Ok(summary)
}

/// Generates `c.out`; returns the summary.
pub fn sp2bench_file(c: &Sp2benchGen) -> Result<sp2bench::Summary> {
    if c.triples == 0 {
        bail!("--triples must be at least 1");
    }
    if c.out.as_os_str() == "-" {
        return sp2bench_stdout(c);
    }
    let name = c
        .out
        .file_name()
        .with_context(|| format!("{}: not a file name", c.out.display()))?;
    // The generator writes Turtle (SP²Bench's own format, `@prefix` lines): a name the loader
    // would read as N-Triples or N-Quads is refused rather than written wrongly.
    let plain = name.to_string_lossy();
    let plain = plain.strip_suffix(".gz").unwrap_or(&plain);
    if plain.ends_with(".nt") || plain.ends_with(".nq") {
        bail!(
            "{}: the generator writes Turtle; name the file .ttl or .n3 (optionally with .gz)",
            c.out.display()
        );
    }
    let mut tmp_name = name.to_os_string();
    tmp_name.push(".partial");
    let tmp = c.out.with_file_name(tmp_name);
    if let Some(dir) = c.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let file = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let gz = c.out.extension().is_some_and(|e| e == "gz");
    let progress = AtomicU64::new(0);
    let started = Instant::now();
    let bar = (!c.quiet).then(|| {
        let b = indicatif::ProgressBar::new(c.triples);
        b.set_style(
            indicatif::ProgressStyle::with_template("generating {bar:30} {pos}/{len} triples")
                .expect("a valid template"),
        );
        b
    });
    let result = std::thread::scope(|s| {
        let worker = s.spawn(|| -> std::io::Result<sp2bench::Summary> {
            let w = BufWriter::with_capacity(1 << 20, file);
            if gz {
                let enc = flate2::write::GzEncoder::new(w, flate2::Compression::fast());
                let (summary, enc) = generate_into(c, &progress, enc)?;
                enc.finish()?.flush()?;
                Ok(summary)
            } else {
                generate_into(c, &progress, w).map(|(summary, _)| summary)
            }
        });
        while !worker.is_finished() {
            if let Some(b) = &bar {
                b.set_position(progress.load(Ordering::Relaxed).min(c.triples));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        worker.join().expect("the generator does not panic")
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let summary = match result {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e).with_context(|| format!("writing {}", tmp.display()));
        }
    };
    std::fs::rename(&tmp, &c.out)
        .with_context(|| format!("renaming {} to {}", tmp.display(), c.out.display()))?;
    let secs = started.elapsed().as_secs_f64();
    if !c.quiet {
        let docs: Vec<String> = Class::ALL
            .iter()
            .map(|&k| format!("{} {}", summary.documents[k as usize], k.name()))
            .collect();
        eprintln!(
            "wrote {}: {} triples, years {}–{}, {} persons; {}; {:.2} s ({:.0} triples/s)",
            c.out.display(),
            summary.triples,
            sp2bench::FIRST_YEAR,
            summary.last_year,
            summary.persons,
            docs.join(", "),
            secs,
            summary.triples as f64 / secs
        );
    }
    Ok(summary)
}
