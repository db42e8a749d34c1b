//! `nearflow`: the command-line tool of the nearflow runtime and its SPARQL engine (the
//! commands are in this crate's library; see its documentation).
//!
//! The experiments of the papers (`bench`, `sim`, `map`, `stress`, `gen`, `demo`) are the
//! `nearflow-lab` binary's (`crates/lab-cli`): `nearflow bench …` runs `nearflow-lab bench …`
//! when that binary is installed beside this one or on the `PATH`, as `git foo` runs
//! `git-foo`, so this binary links none of their harness.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

/// The whole program allocates through the nearflow allocator (LAS paper §5): 8–512 KiB blocks
/// (the dataflow engine's packets) from per-thread local allocators on the thread's NUMA node,
/// the rest from glibc or the OS. `--allocator system` sends everything to glibc.
#[global_allocator]
static GLOBAL_ALLOCATOR: nearflow_alloc::Nearflow = nearflow_alloc::Nearflow;

/// The commands `nearflow-lab` has and this binary hands on to it.
const LAB_COMMANDS: [&str; 6] = ["bench", "sim", "map", "stress", "gen", "demo"];

#[derive(Parser, Debug)]
#[command(
    name = "nearflow",
    version,
    about = "A locality-aware runtime for parallel dataflow on multicore and NUMA machines, and a SPARQL engine on it",
    after_help = "The experiments of the papers (bench, sim, map, stress, gen, demo) are in the \
                  nearflow-lab binary, which `nearflow bench …` and the others run when it is \
                  installed beside this one or on the PATH."
)]
struct Cli {
    #[command(subcommand)]
    command: nearflow_cli::Command,
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    if let Some(cmd) = args.get(1).and_then(|a| a.to_str()) {
        if LAB_COMMANDS.contains(&cmd) {
            return hand_to_lab(cmd, &args[1..]);
        }
    }
    nearflow_cli::init_process();
    nearflow_cli::exit_status(nearflow_cli::run(Cli::parse().command))
}

/// Runs `nearflow-lab ARGS…` in place of this process (the lab binary beside this one first,
/// then the `PATH`'s), or says where to get it.
fn hand_to_lab(cmd: &str, args: &[OsString]) -> ExitCode {
    use std::os::unix::process::CommandExt;
    let beside = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("nearflow-lab")))
        .filter(|p| p.is_file());
    let program = beside.map_or_else(|| OsString::from("nearflow-lab"), |p| p.into_os_string());
    let err = std::process::Command::new(&program).args(args).exec();
    if err.kind() == std::io::ErrorKind::NotFound {
        eprintln!(
            "error: `nearflow {cmd}` is an experiment of the papers, in the nearflow-lab binary, \
             which is neither beside this one nor on the PATH; build it with \
             `cargo build --release -p nearflow-lab-cli` (or install it with \
             `cargo install --path crates/lab-cli`)"
        );
    } else {
        eprintln!("error: cannot run {}: {err}", program.to_string_lossy());
    }
    ExitCode::from(2)
}

#[cfg(test)]
mod tests {
    /// clap's own checks of every subcommand's flags (two fields of one name in a command were
    /// a panic at the first parse, not a compile error).
    #[test]
    fn the_command_line_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
