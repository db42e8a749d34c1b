//! Rows written to disk by an operator whose state would pass the plan's memory limit
//! ([`Options::spill`](crate::Options::spill)): a hash join partitions both its inputs into
//! files and joins them a partition at a time; a DISTINCT writes sorted runs and merges them.
//!
//! A file is unnamed (`O_TMPFILE` where the system has it), so the system removes it when the
//! operator drops it, when the query fails and when the process is killed. Rows are written as
//! their ids, little-endian, and read back in chunks; a failed write (a full disk) is the
//! operator's error, naming the folder.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use nearflow_flow::FlowError;
use nearflow_rdf::term::{Id, UNBOUND};

use super::Row;

/// Bytes each file's writer buffers.
pub(crate) const WRITE_BUFFER: usize = 8 << 10;

/// The error of a spill file in `dir`.
fn failed(dir: &Path, what: &str, e: std::io::Error) -> FlowError {
    FlowError::input(format!(
        "{what} rows spilled past the memory limit to {}: {e}",
        dir.display()
    ))
}

/// Where a run's operators spill: the folder, and the bytes its files may take together.
#[derive(Clone)]
pub struct Spill {
    /// The folder.
    pub dir: std::sync::Arc<Path>,
    /// Bytes written so far by the run's files, and the most they may take.
    budget: std::sync::Arc<(std::sync::atomic::AtomicU64, u64)>,
}

impl Spill {
    /// Spilling to `dir`, at most `limit` bytes over the run.
    pub fn new(dir: &Path, limit: u64) -> Spill {
        Spill {
            dir: dir.into(),
            budget: std::sync::Arc::new((std::sync::atomic::AtomicU64::new(0), limit)),
        }
    }

    /// Takes `bytes` of the budget before they are written; an error past it.
    fn take(&self, bytes: u64) -> Result<(), FlowError> {
        use std::sync::atomic::Ordering;
        let (used, limit) = &*self.budget;
        let was = used.fetch_add(bytes, Ordering::Relaxed);
        if was.saturating_add(bytes) > *limit {
            used.fetch_sub(bytes, Ordering::Relaxed);
            return Err(FlowError::input(format!(
                "the rows spilled past the memory limit would take more than the query's spill \
                 limit of {limit} bytes on disk (in {})",
                self.dir.display()
            )));
        }
        Ok(())
    }
}

/// Where an operator spills, and the columns its rows use (the rest of a row's `N` ids are
/// unbound, and are not written).
#[derive(Clone)]
pub(crate) struct SpillTo {
    pub(crate) spill: Spill,
    pub(crate) width: usize,
}

/// Rows of `N` ids written to an unnamed file, then read back from its start.
pub(crate) struct RowFile<const N: usize> {
    spill: Spill,
    dir: std::sync::Arc<Path>,
    /// Ids written of each row.
    width: usize,
    out: Option<BufWriter<File>>,
    input: Option<File>,
    rows: u64,
    read: u64,
}

impl<const N: usize> RowFile<N> {
    /// A new, empty file in `to.dir`, written through [`WRITE_BUFFER`] bytes.
    pub(crate) fn create(to: &SpillTo) -> Result<Self, FlowError> {
        Self::buffered(to, WRITE_BUFFER)
    }

    /// A new, empty file in `to.dir`, written through `buffer` bytes.
    pub(crate) fn buffered(to: &SpillTo, buffer: usize) -> Result<Self, FlowError> {
        let dir = &to.spill.dir;
        let file = tempfile::tempfile_in(dir).map_err(|e| failed(dir, "writing", e))?;
        Ok(RowFile {
            spill: to.spill.clone(),
            dir: dir.clone(),
            width: to.width.clamp(1, N),
            out: Some(BufWriter::with_capacity(buffer, file)),
            input: None,
            rows: 0,
            read: 0,
        })
    }

    /// Writes what follows through `buffer` bytes (the rows buffered so far are written
    /// first).
    pub(crate) fn rebuffer(&mut self, buffer: usize) -> Result<(), FlowError> {
        if let Some(out) = self.out.take() {
            let file = out
                .into_inner()
                .map_err(|e| failed(&self.dir, "writing", e.into_error()))?;
            self.out = Some(BufWriter::with_capacity(buffer, file));
        }
        Ok(())
    }

    /// Rows written.
    pub(crate) fn rows(&self) -> u64 {
        self.rows
    }

    /// Appends `rows`, within the run's spill limit.
    pub(crate) fn write(&mut self, rows: &[Row<N>]) -> Result<(), FlowError> {
        let bytes = rows.len() * self.width * std::mem::size_of::<Id>();
        self.spill.take(bytes as u64)?;
        let out = self
            .out
            .as_mut()
            .expect("rows are written before they are read");
        for r in rows {
            debug_assert!(r[self.width..].iter().all(|&id| id == UNBOUND));
            for id in &r[..self.width] {
                out.write_all(&id.to_le_bytes())
                    .map_err(|e| failed(&self.dir, "writing", e))?;
            }
        }
        self.rows += rows.len() as u64;
        Ok(())
    }

    /// Ends the writing: what follows reads the rows from the first.
    pub(crate) fn finish(&mut self) -> Result<(), FlowError> {
        if let Some(out) = self.out.take() {
            let mut file = out
                .into_inner()
                .map_err(|e| failed(&self.dir, "writing", e.into_error()))?;
            file.seek(SeekFrom::Start(0))
                .map_err(|e| failed(&self.dir, "reading", e))?;
            self.input = Some(file);
        }
        Ok(())
    }

    /// Reads the rows again from the first.
    pub(crate) fn rewind(&mut self) -> Result<(), FlowError> {
        self.finish()?;
        self.input
            .as_mut()
            .expect("finished above")
            .seek(SeekFrom::Start(0))
            .map_err(|e| failed(&self.dir, "reading", e))?;
        self.read = 0;
        Ok(())
    }

    /// Reads up to `max` (at least 1) more rows into `into` (cleared first); false when none
    /// were left. A file shorter than what was written is an error, never a clean end.
    pub(crate) fn read(&mut self, into: &mut Vec<Row<N>>, max: usize) -> Result<bool, FlowError> {
        into.clear();
        self.finish()?;
        let n = (self.rows - self.read).min(max.max(1) as u64) as usize;
        if n == 0 {
            return Ok(false);
        }
        let width = std::mem::size_of::<Id>();
        let mut bytes = vec![0u8; n * self.width * width];
        self.input
            .as_mut()
            .expect("finished above")
            .read_exact(&mut bytes)
            .map_err(|e| failed(&self.dir, "reading", e))?;
        into.extend(bytes.chunks_exact(self.width * width).map(|r| {
            let mut row = [UNBOUND; N];
            for (id, b) in row.iter_mut().zip(r.chunks_exact(width)) {
                *id = Id::from_le_bytes(b.try_into().expect("an id's bytes"));
            }
            row
        }));
        self.read += n as u64;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_come_back_in_order_and_in_chunks() {
        let to = SpillTo {
            spill: Spill::new(&std::env::temp_dir(), u64::MAX),
            width: 3,
        };
        let mut f = RowFile::<4>::create(&to).unwrap();
        let rows: Vec<Row<4>> = (0..10_000u32)
            .map(|i| [i, i.wrapping_mul(2_654_435_761), 7, UNBOUND])
            .collect();
        f.write(&rows[..3000]).unwrap();
        // Rows buffered when the buffer changes are kept.
        f.rebuffer(512).unwrap();
        f.write(&rows[3000..]).unwrap();
        assert_eq!(f.rows(), 10_000);
        let (mut back, mut chunk) = (Vec::new(), Vec::new());
        while f.read(&mut chunk, 999).unwrap() {
            assert!(chunk.len() <= 999);
            back.extend_from_slice(&chunk);
        }
        assert_eq!(back, rows);
        assert!(!f.read(&mut chunk, 10).unwrap());
        assert!(chunk.is_empty());
        f.rewind().unwrap();
        assert!(f.read(&mut chunk, 2).unwrap());
        assert_eq!(chunk, rows[..2]);
    }

    #[test]
    fn a_folder_that_cannot_be_written_is_a_clear_error() {
        let to = SpillTo {
            spill: Spill::new(Path::new("/nonexistent/nearflow-spill"), u64::MAX),
            width: 4,
        };
        let Err(e) = RowFile::<4>::create(&to) else {
            panic!("a file in a missing folder");
        };
        let msg = e.to_string();
        assert!(msg.contains("/nonexistent/nearflow-spill"), "{msg}");
        assert!(msg.contains("memory limit"), "{msg}");
    }

    #[test]
    fn the_files_of_a_run_stop_at_its_spill_limit_together() {
        // Two files of one run share 1,000 bytes: 12-byte rows.
        let spill = Spill::new(&std::env::temp_dir(), 1000);
        let to = SpillTo { spill, width: 3 };
        let (mut a, mut b) = (
            RowFile::<3>::create(&to).unwrap(),
            RowFile::<3>::create(&to).unwrap(),
        );
        let rows = vec![[1, 2, 3]; 40];
        a.write(&rows).unwrap();
        b.write(&rows[..40]).unwrap();
        let e = a.write(&rows[..4]).unwrap_err().to_string();
        assert!(e.contains("spill limit of 1000 bytes"), "{e}");
        // What was refused was not counted: the last 40 bytes still fit.
        b.write(&rows[..3]).unwrap();
        assert_eq!(b.rows(), 43);
    }
}
