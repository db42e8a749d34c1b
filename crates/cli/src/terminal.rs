//! What a command shows while a store opens or loads ([`Terminal`]): a progress bar on stderr
//! for a long step, and the lines the store has to say.

use indicatif::{ProgressBar, ProgressStyle};
use nearflow_rdf::open::{Report, Step};
use std::sync::Mutex;

/// A [`Report`] on the terminal: a progress bar per long step and lines on stderr, or nothing
/// when quiet.
pub struct Terminal {
    quiet: bool,
    /// The bar of the step being shown, and that step's name.
    bar: Mutex<Option<(ProgressBar, String)>>,
}

impl Terminal {
    /// Shows everything, or nothing when `quiet`.
    pub fn new(quiet: bool) -> Terminal {
        Terminal {
            quiet,
            bar: Mutex::new(None),
        }
    }
}

impl Report for Terminal {
    fn progress(&self, step: &Step<'_>) {
        if self.quiet {
            return;
        }
        let mut bar = self.bar.lock().expect("not poisoned");
        if bar.as_ref().is_none_or(|(_, name)| name != step.name) {
            let b = bar.take().map_or_else(|| ProgressBar::new(0), |(b, _)| b);
            let template = if step.bytes {
                "{prefix} {bar:30} {bytes}/{total_bytes} {msg} ({elapsed}, {eta} left)"
            } else {
                "{prefix} {bar:30} {human_pos}/{human_len} ({per_sec}, {eta} left)"
            };
            b.set_style(ProgressStyle::with_template(template).expect("a valid template"));
            b.set_prefix(step.name.to_owned());
            b.reset_eta();
            *bar = Some((b, step.name.to_owned()));
        }
        let (b, _) = bar.as_ref().expect("set above");
        b.set_length(step.total);
        b.set_position(step.done);
        if let Some(m) = &step.message {
            b.set_message(m.clone());
        }
    }

    fn finished(&self) {
        if let Some((b, _)) = self.bar.lock().expect("not poisoned").take() {
            b.finish_and_clear();
        }
    }

    fn say(&self, line: &str) {
        if !self.quiet {
            eprintln!("{line}");
        }
    }
}
