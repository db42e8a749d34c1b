//! CSV source: reads rows from a CSV file (gzip-compressed or not, detected from its first
//! bytes) or any reader, turns each into a tuple with a parse function, and emits one packet per
//! run. A row the parser rejects, or a malformed CSV line, stops the plan with an error naming
//! the line; the parser may also skip a row by returning `Ok(None)`.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, FlowError, PlanBuilder};
//! let rt = example_runtime();
//! let data = "name,qty\nbolt,4\nnut,x\n";
//! let mut b = PlanBuilder::new();
//! let rows = b.csv_reader(std::io::Cursor::new(data), true, |r: &csv::StringRecord| {
//!     let qty: u32 = r[1].parse().map_err(|e| format!("qty {:?}: {e}", &r[1]))?;
//!     Ok(Some((r[0].to_string(), qty)))
//! });
//! let out = b.collect(rows);
//! let err = b.build().unwrap().run(&rt).unwrap_err();
//! assert!(matches!(err, FlowError::Operator { .. }));
//! assert!(err.to_string().contains("line 3"), "{err}");
//! ```

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use super::Emitter;
use crate::error::FlowError;
use crate::plan::{Operator, PlanBuilder, PortType, Status, Stream};
use crate::Io;

/// Opens a file for reading, decompressing it if it starts with the gzip magic bytes.
pub fn open_maybe_gz(path: &Path) -> std::io::Result<Box<dyn Read + Send>> {
    let mut r = BufReader::new(File::open(path)?);
    let gz = r.fill_buf()?.starts_with(&[0x1f, 0x8b]);
    Ok(if gz {
        Box::new(flate2::bufread::MultiGzDecoder::new(r))
    } else {
        Box::new(r)
    })
}

struct CsvSource<T, F> {
    reader: csv::Reader<Box<dyn Read + Send>>,
    record: csv::StringRecord,
    parse: F,
    out: Emitter<T>,
}

impl<T, F> Operator for CsvSource<T, F>
where
    T: Send + 'static,
    F: FnMut(&csv::StringRecord) -> Result<Option<T>, String> + Send + 'static,
{
    fn inputs(&self) -> Vec<PortType> {
        Vec::new()
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<T>()]
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        for _ in 0..io.capacity_of::<T>() {
            let more = self
                .reader
                .read_record(&mut self.record)
                .map_err(|e| FlowError::input(format!("bad CSV: {e}")))?;
            if !more {
                self.out.flush(io);
                return Ok(Status::Done);
            }
            let line = self.record.position().map_or(0, csv::Position::line);
            match (self.parse)(&self.record) {
                Ok(Some(t)) => self.out.push(io, t),
                Ok(None) => {}
                Err(e) => return Err(FlowError::input(format!("line {line}: {e}"))),
            }
        }
        self.out.flush(io);
        Ok(Status::More)
    }
}

impl PlanBuilder {
    /// Rows of CSV from `reader` (`header`: skip the first line), parsed by `parse`.
    pub fn csv_reader<T, R, F>(&mut self, reader: R, header: bool, parse: F) -> Stream<T>
    where
        T: Send + 'static,
        R: Read + Send + 'static,
        F: FnMut(&csv::StringRecord) -> Result<Option<T>, String> + Send + 'static,
    {
        let reader = csv::ReaderBuilder::new()
            .has_headers(header)
            .from_reader(Box::new(reader) as Box<dyn Read + Send>);
        let n = self.add_auto(
            "csv",
            CsvSource {
                reader,
                record: csv::StringRecord::new(),
                parse,
                out: Emitter::new(0),
            },
        );
        self.out0(n)
    }

    /// Rows of the CSV file at `path` (gzip or plain); the file is opened now, so a missing
    /// file is an error here.
    pub fn csv_file<T, F>(
        &mut self,
        path: &Path,
        header: bool,
        parse: F,
    ) -> std::io::Result<Stream<T>>
    where
        T: Send + 'static,
        F: FnMut(&csv::StringRecord) -> Result<Option<T>, String> + Send + 'static,
    {
        let r = open_maybe_gz(path)?;
        Ok(self.csv_reader(r, header, parse))
    }
}
