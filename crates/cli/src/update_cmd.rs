//! `nearflow update`: a SPARQL 1.1 Update request against a store snapshot, logged and synced
//! before it is reported done (`nearflow_rdf::db`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use nearflow_policy::PolicyKind;
use nearflow_rdf::open;
use nearflow_rt::Pinning;
use nearflow_sparql::update::{LoadFrom, Update, UpdateOptions};
use nearflow_sparql::Options;

use crate::args::{build_runtime, TopoArgs};

#[derive(Args, Debug, Clone)]
pub struct UpdateCmd {
    /// The store snapshot to update (written by `nearflow load … --save`); its log of updates
    /// is `STORE.log` beside it.
    #[arg(long, value_name = "STORE")]
    pub store: PathBuf,
    /// The update request, from a file.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "expr",
        required_unless_present = "expr"
    )]
    pub update: Option<PathBuf>,
    /// The update request, as text.
    #[arg(short = 'e', value_name = "TEXT")]
    pub expr: Option<String>,
    /// The base IRI relative IRIs in the request resolve against (default: the request
    /// file's own IRI; none for `-e`).
    #[arg(long, value_name = "IRI")]
    pub base: Option<String>,
    /// Stop the update's WHERE clauses after this long (e.g. 30s); nothing is changed then.
    #[arg(long, value_name = "DURATION", value_parser = crate::args::duration)]
    pub timeout: Option<std::time::Duration>,
    /// Scheduling policy of the runtime the WHERE clauses run on.
    #[arg(long, default_value = "las")]
    pub policy: PolicyKind,
    #[command(flatten)]
    pub topo: TopoArgs,
    /// Print nothing but errors.
    #[arg(long)]
    pub quiet: bool,
}

pub fn run(cmd: &UpdateCmd) -> Result<()> {
    let (text, base) = match (&cmd.update, &cmd.expr) {
        (Some(f), _) => (
            std::fs::read_to_string(f).with_context(|| format!("{}", f.display()))?,
            cmd.base
                .clone()
                .or_else(|| Some(nearflow_rdf::load::file_iri(f))),
        ),
        (None, Some(e)) => (e.clone(), cmd.base.clone()),
        (None, None) => bail!("give an update with --update FILE or -e TEXT"),
    };
    if !cmd.store.exists() {
        bail!(
            "{}: no such store (`nearflow load FILES --save {}` makes one)",
            cmd.store.display(),
            cmd.store.display()
        );
    }
    // Parsed before the store is opened: a syntax error costs nothing.
    let update = Update::parse(&text, base.as_deref())?;
    let machine = cmd.topo.load()?;
    let db = open::open_db(&machine, &cmd.store, true, &crate::Terminal::new(cmd.quiet))?;
    let rt = build_runtime(
        machine,
        cmd.policy,
        Pinning::Group,
        false,
        nearflow_rt::AllocatorKind::Nearflow,
    )?;
    let options = UpdateOptions {
        query: Options {
            timeout: cmd.timeout,
            ..Options::standard()
        },
        load: LoadFrom::AnyFile,
        cancel: None,
    };
    let t = Instant::now();
    let done = db
        .update(|s: &Arc<nearflow_rdf::Store>| {
            let a = update.apply(s, &rt, &options)?;
            Ok::<_, nearflow_sparql::QueryError>((a.store, a.changes))
        })
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let took = t.elapsed();
    let checkpoint = db.checkpoint_due();
    if checkpoint {
        db.merge(true).context("writing the store's snapshot")?;
    }
    if !cmd.quiet {
        if done.changed == 0 {
            eprintln!(
                "the update changed nothing ({:.3} s); the store holds {} triples",
                took.as_secs_f64(),
                db.current().len()
            );
        } else {
            eprintln!(
                "update {} changed {} quad{} in {:.3} s, synced to {}; the store holds {} triples{}",
                done.seq,
                done.changed,
                if done.changed == 1 { "" } else { "s" },
                took.as_secs_f64(),
                nearflow_rdf::db::log_path(&cmd.store).display(),
                db.current().len(),
                if checkpoint {
                    " (the log was folded into the snapshot)"
                } else {
                    ""
                }
            );
        }
    }
    Ok(())
}
