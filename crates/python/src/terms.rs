//! RDF terms as Python objects: `NamedNode`, `BlankNode`, `Literal`, `DefaultGraph`, `Triple`
//! and `Quad`. They compare and hash as RDF terms (RDF 1.1 Concepts §3: two literals are equal
//! when their lexical forms, datatypes and language tags are), print in N-Triples syntax, and
//! are immutable.

use std::sync::atomic::{AtomicU64, Ordering};

use nearflow_rdf::term::{TermRef, RDF_LANG_STRING, XSD_STRING};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// An IRI, as `NamedNode("http://example.com/a")`.
#[pyclass(module = "nearflow", frozen, eq, hash, from_py_object)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct NamedNode {
    pub(crate) iri: String,
}

#[pymethods]
impl NamedNode {
    #[new]
    fn new(value: String) -> PyResult<Self> {
        oxiri::Iri::parse(value.as_str())
            .map_err(|e| PyValueError::new_err(format!("<{value}> is not an absolute IRI: {e}")))?;
        Ok(NamedNode { iri: value })
    }

    /// The IRI.
    #[getter]
    fn value(&self) -> &str {
        &self.iri
    }

    fn __str__(&self) -> String {
        TermRef::Iri(&self.iri).to_string()
    }

    fn __repr__(&self) -> String {
        format!("<NamedNode value={}>", self.iri)
    }

    fn __getnewargs__(&self) -> (String,) {
        (self.iri.clone(),)
    }
}

/// Labels of blank nodes made without one: unique in this process.
static FRESH: AtomicU64 = AtomicU64::new(0);

/// A blank node, by its label; `BlankNode()` makes one with a label of its own.
#[pyclass(module = "nearflow", frozen, eq, hash, from_py_object)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct BlankNode {
    pub(crate) label: String,
}

#[pymethods]
impl BlankNode {
    #[new]
    #[pyo3(signature = (value=None))]
    fn new(value: Option<String>) -> PyResult<Self> {
        let label = match value {
            Some(v) => {
                let ok = !v.is_empty()
                    && v.chars()
                        .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
                    && !v.ends_with('.');
                if !ok {
                    return Err(PyValueError::new_err(format!(
                        "{v:?} is not a blank node label (letters, digits, '_', '-' and '.' inside)"
                    )));
                }
                v
            }
            None => format!(
                "py{}x{}",
                std::process::id(),
                FRESH.fetch_add(1, Ordering::Relaxed)
            ),
        };
        Ok(BlankNode { label })
    }

    /// The label.
    #[getter]
    fn value(&self) -> &str {
        &self.label
    }

    fn __str__(&self) -> String {
        TermRef::Blank(&self.label).to_string()
    }

    fn __repr__(&self) -> String {
        format!("<BlankNode value={}>", self.label)
    }

    fn __getnewargs__(&self) -> (String,) {
        (self.label.clone(),)
    }
}

/// A literal: `Literal("chat", language="fr")`, `Literal("1", datatype=XSD_INTEGER)`, or a
/// plain string `Literal("x")` (datatype `xsd:string`).
#[pyclass(module = "nearflow", frozen, eq, hash, from_py_object)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Literal {
    pub(crate) value: String,
    pub(crate) datatype: String,
    pub(crate) lang: Option<String>,
}

#[pymethods]
impl Literal {
    #[new]
    #[pyo3(signature = (value, *, datatype=None, language=None))]
    fn new(value: String, datatype: Option<NamedNode>, language: Option<String>) -> PyResult<Self> {
        match (datatype, language) {
            (Some(d), Some(_)) if d.iri != RDF_LANG_STRING => Err(PyValueError::new_err(
                "a literal with a language tag has the datatype rdf:langString; give one of datatype and language",
            )),
            (_, Some(lang)) => {
                let ok = !lang.is_empty()
                    && lang.split('-').all(|p| {
                        !p.is_empty() && p.len() <= 8 && p.chars().all(|c| c.is_ascii_alphanumeric())
                    });
                if !ok {
                    return Err(PyValueError::new_err(format!(
                        "{lang:?} is not a language tag (BCP 47: letters and digits in parts of 1 to 8, joined by '-')"
                    )));
                }
                Ok(Literal {
                    value,
                    datatype: RDF_LANG_STRING.into(),
                    lang: Some(lang.to_ascii_lowercase()),
                })
            }
            (Some(d), None) if d.iri == RDF_LANG_STRING => Err(PyValueError::new_err(
                "a literal of datatype rdf:langString needs a language tag",
            )),
            (d, None) => Ok(Literal {
                value,
                datatype: d.map_or_else(|| XSD_STRING.into(), |d| d.iri),
                lang: None,
            }),
        }
    }

    /// The lexical form.
    #[getter]
    fn value(&self) -> &str {
        &self.value
    }

    /// The datatype IRI.
    #[getter]
    fn datatype(&self) -> NamedNode {
        NamedNode {
            iri: self.datatype.clone(),
        }
    }

    /// The language tag (lower case), or `None`.
    #[getter]
    fn language(&self) -> Option<&str> {
        self.lang.as_deref()
    }

    fn __str__(&self) -> String {
        self.as_ref().to_string()
    }

    fn __repr__(&self) -> String {
        match &self.lang {
            Some(l) => format!("<Literal value={:?} language={l}>", self.value),
            None => format!(
                "<Literal value={:?} datatype={}>",
                self.value, self.datatype
            ),
        }
    }
}

impl Literal {
    fn as_ref(&self) -> TermRef<'_> {
        TermRef::Literal {
            value: &self.value,
            datatype: &self.datatype,
            lang: self.lang.as_deref(),
        }
    }
}

/// The default graph, as the graph of a `Quad`.
#[pyclass(module = "nearflow", frozen, eq, hash, from_py_object)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct DefaultGraph {}

#[pymethods]
impl DefaultGraph {
    #[new]
    fn new() -> Self {
        DefaultGraph {}
    }

    fn __str__(&self) -> &'static str {
        "DEFAULT"
    }

    fn __repr__(&self) -> &'static str {
        "<DefaultGraph>"
    }
}

/// Any RDF term, as a Python function takes it.
#[derive(Clone, PartialEq, Eq, Hash, FromPyObject, IntoPyObject)]
pub enum AnyTerm {
    Named(NamedNode),
    Blank(BlankNode),
    Literal(Literal),
}

impl AnyTerm {
    /// The engine's form of the term.
    pub fn as_ref(&self) -> TermRef<'_> {
        match self {
            AnyTerm::Named(n) => TermRef::Iri(&n.iri),
            AnyTerm::Blank(b) => TermRef::Blank(&b.label),
            AnyTerm::Literal(l) => l.as_ref(),
        }
    }

    /// The Python form of an engine's term.
    pub fn of(t: TermRef<'_>) -> AnyTerm {
        match t {
            TermRef::Iri(i) => AnyTerm::Named(NamedNode { iri: i.into() }),
            TermRef::Blank(b) => AnyTerm::Blank(BlankNode { label: b.into() }),
            TermRef::Literal {
                value,
                datatype,
                lang,
            } => AnyTerm::Literal(Literal {
                value: value.into(),
                datatype: datatype.into(),
                lang: lang.map(str::to_owned),
            }),
        }
    }
}

/// A graph name: a named graph's IRI or blank node, or the default graph.
#[derive(Clone, PartialEq, Eq, Hash, FromPyObject, IntoPyObject)]
pub enum GraphName {
    Named(NamedNode),
    Blank(BlankNode),
    Default(DefaultGraph),
}

impl GraphName {
    /// The graph's term, `None` for the default graph.
    pub fn term(&self) -> Option<TermRef<'_>> {
        match self {
            GraphName::Named(n) => Some(TermRef::Iri(&n.iri)),
            GraphName::Blank(b) => Some(TermRef::Blank(&b.label)),
            GraphName::Default(_) => None,
        }
    }
}

/// A triple: `Triple(subject, predicate, object)`; unpacks as a tuple of three.
#[pyclass(module = "nearflow", frozen, eq, hash, from_py_object)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Triple {
    #[pyo3(get)]
    pub(crate) subject: AnyTerm,
    #[pyo3(get)]
    pub(crate) predicate: NamedNode,
    #[pyo3(get)]
    pub(crate) object: AnyTerm,
}

#[pymethods]
impl Triple {
    #[new]
    fn new(subject: AnyTerm, predicate: NamedNode, object: AnyTerm) -> PyResult<Self> {
        if matches!(subject, AnyTerm::Literal(_)) {
            return Err(PyValueError::new_err(
                "a triple's subject is an IRI or a blank node, not a literal",
            ));
        }
        Ok(Triple {
            subject,
            predicate,
            object,
        })
    }

    fn __str__(&self) -> String {
        format!(
            "{} {} {} .",
            self.subject.as_ref(),
            TermRef::Iri(&self.predicate.iri),
            self.object.as_ref()
        )
    }

    fn __repr__(&self) -> String {
        format!("<Triple {}>", self.__str__())
    }

    fn __len__(&self) -> usize {
        3
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let t = PyTuple::new(
            py,
            [
                self.subject.clone().into_pyobject(py)?.into_any(),
                self.predicate.clone().into_pyobject(py)?.into_any(),
                self.object.clone().into_pyobject(py)?.into_any(),
            ],
        )?;
        Ok(t.try_iter()?.into_any())
    }
}

/// A quad: `Quad(subject, predicate, object, graph_name=DefaultGraph())`; unpacks as a tuple
/// of four.
#[pyclass(module = "nearflow", frozen, eq, hash, from_py_object)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Quad {
    #[pyo3(get)]
    pub(crate) subject: AnyTerm,
    #[pyo3(get)]
    pub(crate) predicate: NamedNode,
    #[pyo3(get)]
    pub(crate) object: AnyTerm,
    #[pyo3(get)]
    pub(crate) graph_name: GraphName,
}

#[pymethods]
impl Quad {
    #[new]
    #[pyo3(signature = (subject, predicate, object, graph_name=None))]
    fn new(
        subject: AnyTerm,
        predicate: NamedNode,
        object: AnyTerm,
        graph_name: Option<GraphName>,
    ) -> PyResult<Self> {
        let t = Triple::new(subject, predicate, object)?;
        Ok(Quad {
            subject: t.subject,
            predicate: t.predicate,
            object: t.object,
            graph_name: graph_name.unwrap_or(GraphName::Default(DefaultGraph {})),
        })
    }

    /// The quad's triple.
    #[getter]
    fn triple(&self) -> Triple {
        Triple {
            subject: self.subject.clone(),
            predicate: self.predicate.clone(),
            object: self.object.clone(),
        }
    }

    fn __str__(&self) -> String {
        let t = format!(
            "{} {} {}",
            self.subject.as_ref(),
            TermRef::Iri(&self.predicate.iri),
            self.object.as_ref()
        );
        match self.graph_name.term() {
            Some(g) => format!("{t} {g} ."),
            None => format!("{t} ."),
        }
    }

    fn __repr__(&self) -> String {
        format!("<Quad {}>", self.__str__())
    }

    fn __len__(&self) -> usize {
        4
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let t = PyTuple::new(
            py,
            [
                self.subject.clone().into_pyobject(py)?.into_any(),
                self.predicate.clone().into_pyobject(py)?.into_any(),
                self.object.clone().into_pyobject(py)?.into_any(),
                self.graph_name.clone().into_pyobject(py)?.into_any(),
            ],
        )?;
        Ok(t.try_iter()?.into_any())
    }
}
