//! The answers of a query as Python objects: the solutions of a SELECT (read as Python terms
//! or as Arrow columns), one solution, and their iterator.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use nearflow_rdf::term::Id;
use nearflow_sparql::{Collected, Form};
use pyo3::exceptions::{PyIndexError, PyKeyError};
use pyo3::prelude::*;

use crate::query_error;
use crate::terms::{AnyTerm, Triple};

/// A query's answer before it becomes Python objects.
pub(crate) enum Answer {
    Solutions(Vec<String>, Box<Collected>),
    Boolean(bool),
    Graph(Vec<Triple>),
}

/// The solutions of a SELECT: held in the engine's ids and turned into Python terms as they
/// are read, or into Arrow columns by `to_arrow()` without a Python object per value.
#[pyclass(module = "nearflow", frozen, sequence)]
pub struct QuerySolutions {
    pub(crate) vars: Arc<[String]>,
    pub(crate) all: Collected,
}

impl QuerySolutions {
    pub(crate) fn new(vars: Vec<String>, all: Collected) -> Self {
        QuerySolutions {
            vars: vars.into(),
            all,
        }
    }

    /// Solution `i`; an error in place of terms read from a damaged store.
    fn row(&self, i: usize) -> PyResult<QuerySolution> {
        let row = self.all.rows.get(i).expect("in range");
        let values = (0..self.vars.len())
            .map(|c| self.all.term(row, c).map(|t| AnyTerm::of(t.as_ref())))
            .collect();
        self.all.undamaged().map_err(query_error)?;
        Ok(QuerySolution {
            vars: self.vars.clone(),
            values,
        })
    }
}

#[pymethods]
impl QuerySolutions {
    /// The projected variables' names, in order.
    #[getter]
    fn variables(&self) -> Vec<String> {
        self.vars.to_vec()
    }

    fn __len__(&self) -> usize {
        self.all.rows.len()
    }

    fn __getitem__(&self, i: isize) -> PyResult<QuerySolution> {
        let n = self.all.rows.len() as isize;
        let j = if i < 0 { i + n } else { i };
        if j < 0 || j >= n {
            return Err(PyIndexError::new_err("solution index out of range"));
        }
        self.row(j as usize)
    }

    fn __iter__(slf: Py<Self>) -> SolutionsIter {
        SolutionsIter {
            of: slf,
            next: AtomicUsize::new(0),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "<QuerySolutions {} rows of ?{}>",
            self.all.rows.len(),
            self.vars.join(" ?")
        )
    }

    /// The solutions as distinct terms and, per variable, each row's index into them (-1 where
    /// unbound): an answer repeats its terms, so a caller that makes objects of its own of
    /// them (the rdflib plugin) makes each once.
    fn term_columns(&self) -> PyResult<(Vec<AnyTerm>, Vec<Vec<i64>>)> {
        let Form::Select(cols) = &self.all.form else {
            return Ok((Vec::new(), Vec::new()));
        };
        let cx = self.all.cx();
        let mut index: std::collections::HashMap<Id, i64> = std::collections::HashMap::new();
        let mut terms = Vec::new();
        let columns = cols
            .iter()
            .map(|&(_, c)| {
                self.all
                    .rows
                    .iter()
                    .map(|r| match r[c] {
                        nearflow_rdf::term::UNBOUND => -1,
                        id => *index.entry(id).or_insert_with(|| {
                            terms.push(AnyTerm::of(cx.term(id).as_ref()));
                            terms.len() as i64 - 1
                        }),
                    })
                    .collect()
            })
            .collect();
        self.all.undamaged().map_err(query_error)?;
        Ok((terms, columns))
    }

    /// The solutions as one Arrow record batch, by the Arrow PyCapsule interface (pyarrow,
    /// polars and others read it without a copy).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
        let _ = requested_schema;
        crate::arrow::capsules(py, &self.vars, &self.all)
    }

    /// The solutions as a `pyarrow.Table`: one column per variable, unbound values null.
    /// A column whose bound values are all `xsd:integer` literals is `int64`; all
    /// `xsd:double`, `xsd:float` or `xsd:decimal`, `float64`; all `xsd:boolean`, `bool`;
    /// any other column `string` (an IRI's text, a literal's lexical form, `_:label` for a
    /// blank node).
    fn to_arrow<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let pa = crate::arrow::pyarrow(py)?;
        let batch = pa.call_method1("record_batch", (slf,))?;
        pa.getattr("Table")?
            .call_method1("from_batches", (vec![batch],))
    }

    /// The solutions as a `pandas.DataFrame` (through `to_arrow()`).
    fn to_pandas<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::to_arrow(slf)?.call_method0("to_pandas")
    }

    /// The solutions as a `polars.DataFrame` (through `to_arrow()`).
    fn to_polars<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let pl = py.import("polars").map_err(|_| {
            pyo3::exceptions::PyImportError::new_err("to_polars() needs polars: pip install polars")
        })?;
        pl.call_method1("from_arrow", (Self::to_arrow(slf)?,))
    }
}

/// Iterates over `QuerySolutions`.
#[pyclass(module = "nearflow", frozen)]
pub struct SolutionsIter {
    of: Py<QuerySolutions>,
    next: AtomicUsize,
}

#[pymethods]
impl SolutionsIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<QuerySolution>> {
        let of = self.of.bind(py).get();
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        (i < of.all.rows.len()).then(|| of.row(i)).transpose()
    }
}

/// One solution: its values by position (`row[0]`) or by variable name (`row["x"]`), `None`
/// where unbound; it unpacks as a tuple.
#[pyclass(module = "nearflow", frozen)]
pub struct QuerySolution {
    vars: Arc<[String]>,
    values: Vec<Option<AnyTerm>>,
}

#[pymethods]
impl QuerySolution {
    fn __len__(&self) -> usize {
        self.values.len()
    }

    fn __getitem__(&self, key: &Bound<'_, PyAny>) -> PyResult<Option<AnyTerm>> {
        if let Ok(i) = key.extract::<isize>() {
            let n = self.values.len() as isize;
            let j = if i < 0 { i + n } else { i };
            if j < 0 || j >= n {
                return Err(PyIndexError::new_err("solution index out of range"));
            }
            return Ok(self.values[j as usize].clone());
        }
        let name: String = key.extract()?;
        let name = name.strip_prefix(['?', '$']).unwrap_or(&name);
        match self.vars.iter().position(|v| v == name) {
            Some(i) => Ok(self.values[i].clone()),
            None => Err(PyKeyError::new_err(format!(
                "no variable ?{name} in the solution"
            ))),
        }
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let t = pyo3::types::PyTuple::new(py, self.values.clone())?;
        Ok(t.try_iter()?.into_any())
    }

    fn __repr__(&self) -> String {
        let parts: Vec<String> = self
            .vars
            .iter()
            .zip(&self.values)
            .filter_map(|(v, t)| t.as_ref().map(|t| format!("?{v}={}", t.as_ref())))
            .collect();
        format!("<QuerySolution {}>", parts.join(" "))
    }
}
