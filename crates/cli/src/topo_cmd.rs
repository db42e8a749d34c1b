//! `nearflow topo`: print a machine's tree, core groups and distance matrices.

use anyhow::Result;
use clap::Args;
use nearflow_topo::{presets, show};

use crate::args::TopoArgs;

#[derive(Args, Debug)]
pub struct TopoCmd {
    #[command(flatten)]
    pub topo: TopoArgs,
    /// Print one JSON object (pus, numa_nodes, core_groups, distances, caches, tree).
    #[arg(long)]
    pub json: bool,
    /// List the presets and exit.
    #[arg(long)]
    pub list: bool,
}

pub fn run(cmd: &TopoCmd) -> Result<()> {
    if cmd.list {
        for p in presets::PRESETS {
            println!(
                "{:<12} {}",
                p.name,
                p.about.split_whitespace().collect::<Vec<_>>().join(" ")
            );
        }
        println!(
            "{:<12} the machine nearflow runs on, detected with hwloc",
            "host"
        );
        return Ok(());
    }
    let m = cmd.topo.load()?;
    if cmd.json {
        println!("{}", serde_json::to_string_pretty(&show::json(&m))?);
    } else {
        print!("{}", show::text(&m));
    }
    Ok(())
}
