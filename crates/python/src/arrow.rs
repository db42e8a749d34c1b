//! Solutions to Arrow: each variable's column built from the engine's ids in Rust and handed
//! to Python through the Arrow C data interface (the PyCapsule protocol's
//! `__arrow_c_array__`), so a million-row answer reaches pandas without a Python object per
//! value.

use std::collections::HashSet;
use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{Array, ArrayRef, RecordBatch, StructArray};
use arrow_schema::{Field, Schema};
use nearflow_rdf::term::{Id, TermRef, UNBOUND};
use nearflow_sparql::{Collected, Form};
use pyo3::exceptions::{PyImportError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};

const XSD: &str = "http://www.w3.org/2001/XMLSchema#";

/// The Arrow type of a column whose bound values are all literals of one kind.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Int,
    Float,
    Bool,
    Text,
}

/// The kind of one term: a literal of a numeric or boolean datatype whose lexical form reads
/// as one, else text.
fn kind_of(t: TermRef<'_>) -> Kind {
    let TermRef::Literal {
        value, datatype, ..
    } = t
    else {
        return Kind::Text;
    };
    match datatype.strip_prefix(XSD) {
        Some("integer") if value.trim().parse::<i64>().is_ok() => Kind::Int,
        Some("double" | "float" | "decimal") if float(value).is_some() => Kind::Float,
        Some("boolean") if boolean(value).is_some() => Kind::Bool,
        _ => Kind::Text,
    }
}

/// An `xsd:double`'s lexical form as a number (`INF`, `-INF` and `NaN` included).
fn float(v: &str) -> Option<f64> {
    match v.trim() {
        "INF" | "+INF" => Some(f64::INFINITY),
        "-INF" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        s if s.contains(['i', 'I', 'n', 'N']) => None,
        s => s.parse().ok(),
    }
}

fn boolean(v: &str) -> Option<bool> {
    match v.trim() {
        "true" | "1" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    }
}

/// The text of a term in a string column.
fn text(t: TermRef<'_>, out: &mut String) {
    out.clear();
    match t {
        TermRef::Iri(i) => out.push_str(i),
        TermRef::Blank(b) => {
            out.push_str("_:");
            out.push_str(b);
        }
        TermRef::Literal { value, .. } => out.push_str(value),
    }
}

/// One output column of `all`.
fn column(all: &Collected, col: usize) -> ArrayRef {
    let cx = all.cx();
    let rows = &all.rows;
    // Decide the column's type from its distinct ids (an answer repeats its terms: each is
    // read from the dictionary once).
    let mut seen: HashSet<Id> = HashSet::new();
    let mut kind = None;
    for row in rows {
        let id = row[col];
        if id == UNBOUND || !seen.insert(id) {
            continue;
        }
        let k = kind_of(cx.term(id).as_ref());
        kind = match kind {
            None => Some(k),
            Some(prev) if prev == k => Some(k),
            // Integers and decimals together are numbers.
            Some(Kind::Int | Kind::Float) if matches!(k, Kind::Int | Kind::Float) => {
                Some(Kind::Float)
            }
            Some(_) => Some(Kind::Text),
        };
    }
    let n = rows.len();
    match kind.unwrap_or(Kind::Text) {
        Kind::Int => {
            let mut b = Int64Builder::with_capacity(n);
            each_literal(all, col, |v| {
                b.append_option(v.and_then(|v| v.trim().parse().ok()))
            });
            Arc::new(b.finish())
        }
        Kind::Float => {
            let mut b = Float64Builder::with_capacity(n);
            each_literal(all, col, |v| b.append_option(v.and_then(float)));
            Arc::new(b.finish())
        }
        Kind::Bool => {
            let mut b = BooleanBuilder::with_capacity(n);
            each_literal(all, col, |v| b.append_option(v.and_then(boolean)));
            Arc::new(b.finish())
        }
        Kind::Text => {
            let mut b = StringBuilder::with_capacity(n, n * 16);
            let mut s = String::new();
            for row in rows {
                match row[col] {
                    UNBOUND => b.append_null(),
                    id => {
                        text(cx.term(id).as_ref(), &mut s);
                        b.append_value(&s);
                    }
                }
            }
            Arc::new(b.finish())
        }
    }
}

/// Calls `push` with the lexical form of each row's literal in column `col`, `None` where the
/// row leaves it unbound (or binds it to another kind of term).
fn each_literal(all: &Collected, col: usize, mut push: impl FnMut(Option<&str>)) {
    let cx = all.cx();
    for row in &all.rows {
        match row[col] {
            UNBOUND => push(None),
            id => match cx.term(id).as_ref() {
                TermRef::Literal { value, .. } => push(Some(value)),
                _ => push(None),
            },
        }
    }
}

/// The solutions as one record batch, a column per projected variable.
pub(crate) fn batch(vars: &[String], all: &Collected) -> Result<RecordBatch, String> {
    let Form::Select(cols) = &all.form else {
        return Err("only a SELECT's solutions are a table".into());
    };
    let columns: Vec<ArrayRef> = cols.iter().map(|&(_, c)| column(all, c)).collect();
    all.undamaged().map_err(|e| e.to_string())?;
    let fields: Vec<Field> = vars
        .iter()
        .zip(&columns)
        .map(|(v, c)| Field::new(v, c.data_type().clone(), true))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    if columns.is_empty() {
        let opts = arrow_array::RecordBatchOptions::new().with_row_count(Some(all.rows.len()));
        return RecordBatch::try_new_with_options(schema, columns, &opts)
            .map_err(|e| e.to_string());
    }
    RecordBatch::try_new(schema, columns).map_err(|e| e.to_string())
}

/// The `(schema, array)` capsules of the Arrow PyCapsule interface for the solutions.
pub(crate) fn capsules<'py>(
    py: Python<'py>,
    vars: &[String],
    all: &Collected,
) -> PyResult<Bound<'py, PyTuple>> {
    let batch = py
        .detach(|| batch(vars, all))
        .map_err(PyRuntimeError::new_err)?;
    let data = StructArray::from(batch).into_data();
    let (array, schema) =
        arrow_array::ffi::to_ffi(&data).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let schema = PyCapsule::new(py, schema, Some(c"arrow_schema".to_owned()))?;
    let array = PyCapsule::new(py, array, Some(c"arrow_array".to_owned()))?;
    PyTuple::new(py, [schema.into_any(), array.into_any()])
}

/// The `pyarrow` module, or an error saying how to install it.
pub(crate) fn pyarrow(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    py.import("pyarrow").map_err(|_| {
        PyImportError::new_err(
            "to_arrow() and to_pandas() need pyarrow (14 or later): pip install pyarrow",
        )
    })
}
