//! `Store`: a store in memory or on disk, queried and updated through the same path as the
//! command line and the endpoint. The answers of its queries are `answers.rs`'s.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nearflow_rdf::db::Db;
use nearflow_rdf::dict::Dict;
use nearflow_rdf::load::{self, Format, Loaded};
use nearflow_rdf::term::{Id, TermRef};
use nearflow_rdf::DEFAULT_GRAPH;
use nearflow_sparql::update::{add_loaded, LoadFrom, Update, UpdateOptions};
use nearflow_sparql::{Options, Plan, Query, QueryError, QueryResults};
use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::terms::{AnyTerm, GraphName, NamedNode, Quad, Triple};
use crate::{query_error, run_detached, runtime};

use crate::answers::{Answer, QuerySolutions};

/// An RDF dataset that answers SPARQL 1.1 queries and updates.
///
/// `Store()` is held in memory; `Store(path)` is the store whose snapshot is the file `path`
/// (made empty when it does not exist), with its update log beside it: every update is synced
/// to the log before it returns, and the log is folded into the snapshot by checkpoints
/// (`flush()`, or when it grows). A store on disk takes its write lock: one process at a time
/// writes it.
#[pyclass(module = "nearflow", frozen, weakref)]
pub struct Store {
    db: Arc<Db>,
    merger: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for Store {
    /// Stops the background merge and waits for it, so that the store's write lock is
    /// released when the object goes: the same process may open the store again at once.
    fn drop(&mut self) {
        self.db.stop_merger();
        if let Some(h) = self.merger.lock().expect("not poisoned").take() {
            let _ = h.join();
        }
    }
}

/// A duration: seconds (a number), a `datetime.timedelta`, or text as the command line takes
/// it (`"30s"`, `"250ms"`, `"2m"`).
#[derive(FromPyObject)]
enum Seconds {
    Delta(Duration),
    Number(f64),
    Text(String),
}

impl Seconds {
    fn duration(self) -> PyResult<Duration> {
        match self {
            Seconds::Delta(d) => Ok(d),
            Seconds::Number(s) if s.is_finite() && s > 0.0 => Ok(Duration::from_secs_f64(s)),
            Seconds::Number(s) => Err(PyValueError::new_err(format!(
                "timeout={s}: give a positive number of seconds"
            ))),
            Seconds::Text(t) => nearflow_topo::units::duration(&t)
                .map_err(|e| PyValueError::new_err(format!("timeout={t:?}: {e}"))),
        }
    }
}

/// A size in bytes: a number, or text as the command line takes it (`"512MiB"`, `"2G"`).
#[derive(FromPyObject)]
enum Size {
    Bytes(usize),
    Text(String),
}

impl Size {
    fn bytes(self) -> PyResult<usize> {
        match self {
            Size::Bytes(0) => Err(PyValueError::new_err(
                "memory_limit=0: give a number of bytes",
            )),
            Size::Bytes(n) => Ok(n),
            Size::Text(t) => nearflow_topo::units::bytes(&t)
                .map_err(|e| PyValueError::new_err(format!("memory_limit={t:?}: {e}"))),
        }
    }
}

/// What a query or update may take: [`Options::standard`], with what the call sets — a time
/// limit, a memory limit in bytes past which operators spill to `spill_dir` (the system's
/// temporary folder unless given) or, with `spill_dir=False`, stop the query.
fn options(
    base_iri: Option<String>,
    timeout: Option<Seconds>,
    memory_limit: Option<Size>,
    spill_dir: Option<&Bound<'_, PyAny>>,
) -> PyResult<Options> {
    let memory_limit = memory_limit.map(Size::bytes).transpose()?;
    let standard = Options::standard();
    let spill = match spill_dir {
        None => standard.spill.clone(),
        Some(d) if d.is_instance_of::<pyo3::types::PyBool>() => {
            if d.extract::<bool>()? {
                standard.spill.clone()
            } else {
                None
            }
        }
        Some(d) => {
            let p: PathBuf = d.extract()?;
            if !p.is_dir() {
                return Err(PyValueError::new_err(format!(
                    "spill_dir={}: not a directory",
                    p.display()
                )));
            }
            Some(p)
        }
    };
    Ok(Options {
        timeout: timeout.map(Seconds::duration).transpose()?,
        memory_limit: memory_limit.or(standard.memory_limit),
        spill,
        base: base_iri,
        ..standard
    })
}

/// A store error as Python's exception.
fn store_error(e: impl std::fmt::Display) -> PyErr {
    PyOSError::new_err(e.to_string())
}

/// Where the data to load comes from.
enum Input {
    File(PathBuf),
    Bytes(Vec<u8>),
}

impl Input {
    /// A path (`str` or `os.PathLike`), `bytes`, or a file object opened for reading.
    fn of(input: &Bound<'_, PyAny>) -> PyResult<Input> {
        if let Ok(b) = input.cast::<PyBytes>() {
            return Ok(Input::Bytes(b.as_bytes().to_vec()));
        }
        if input.is_instance_of::<PyString>() || input.hasattr("__fspath__")? {
            return Ok(Input::File(input.extract()?));
        }
        if input.hasattr("read")? {
            let data = input.call_method0("read")?;
            if let Ok(b) = data.cast::<PyBytes>() {
                return Ok(Input::Bytes(b.as_bytes().to_vec()));
            }
            if let Ok(s) = data.cast::<PyString>() {
                return Ok(Input::Bytes(s.to_cow()?.as_bytes().to_vec()));
            }
            return Err(PyTypeError::new_err(
                "the file object's read() gave neither bytes nor str",
            ));
        }
        Err(PyTypeError::new_err(
            "load takes a path, bytes, or a file object opened for reading",
        ))
    }
}

/// The format a `format=` argument names: a media type (`text/turtle`), an extension
/// (`ttl`, `nt`, `nq`, `trig`, `rdf`) or a name (`turtle`, `ntriples`, `nquads`, `xml`).
fn format_named(name: &str) -> PyResult<Format> {
    Format::from_name(name).ok_or_else(|| {
        PyValueError::new_err(format!(
            "format={name:?} is not an RDF syntax nearflow reads: give text/turtle, application/n-triples, application/n-quads, application/trig or application/rdf+xml (or ttl, nt, nq, trig, rdf)"
        ))
    })
}

/// Parses `input` into terms and quads.
fn parse(
    input: Input,
    format: Option<Format>,
    base: Option<&str>,
    graph: Option<&str>,
    progress: &Arc<load::Progress>,
) -> Result<Loaded, String> {
    let mut out = Loaded::default();
    let (name, format, reader): (PathBuf, Format, Box<dyn Read + Send>) = match input {
        Input::File(path) => {
            let format = match format.or_else(|| Format::from_path(&path)) {
                Some(f) => f,
                None => {
                    return Err(format!(
                        "{}: the file's format is not known from its name; give format=",
                        path.display()
                    ))
                }
            };
            let reader = load::open_input(&path).map_err(|e| e.to_string())?;
            (path, format, reader)
        }
        Input::Bytes(b) => {
            let Some(format) = format else {
                return Err("give format= to load bytes or a file object".into());
            };
            ("<bytes>".into(), format, Box::new(std::io::Cursor::new(b)))
        }
    };
    let file_base = (name.to_str() != Some("<bytes>")).then(|| load::file_iri(&name));
    let base = base.map(str::to_owned).or(file_base);
    // A named graph's triples resolve against the graph's IRI when nothing else is given.
    let base = base.or_else(|| graph.map(str::to_owned));
    let r = load::load_reader_to(
        &mut out,
        &name,
        format,
        reader,
        "p",
        base.as_deref(),
        graph,
        progress,
    );
    r.map_err(|e| e.to_string())?;
    Ok(out)
}

impl Store {
    /// Applies `edit` to the current version as one update, synced to the log of a store on
    /// disk before it returns; a checkpoint follows when the log has grown past its size.
    fn change(
        &self,
        py: Python<'_>,
        edit: impl FnOnce(
                &Arc<nearflow_rdf::Store>,
                Arc<AtomicBool>,
            ) -> Result<(nearflow_rdf::Store, Vec<([Id; 4], bool)>), String>
            + Send
            + 'static,
    ) -> PyResult<u64> {
        let db = self.db.clone();
        run_detached(py, move |stop| {
            let done = db
                .update(|s| edit(s, stop).map_err(PyValueError::new_err))
                .map_err(|e| match e {
                    nearflow_rdf::db::UpdateError::Update(e) => e,
                    other => store_error(other),
                })?;
            if db.checkpoint_due() {
                db.merge(true).map_err(store_error)?;
            }
            Ok::<_, PyErr>(done.changed as u64)
        })?
    }

    /// The ids of a pattern's terms in `store`; `None` when one of them is not in it (the
    /// pattern then matches nothing).
    fn pattern_ids(
        store: &nearflow_rdf::Store,
        terms: [Option<TermRef<'_>>; 3],
    ) -> Option<[Option<Id>; 3]> {
        let mut out = [None; 3];
        for (o, t) in out.iter_mut().zip(terms) {
            if let Some(t) = t {
                *o = Some(store.id_of(t)?);
            }
        }
        Some(out)
    }
}

#[pymethods]
impl Store {
    #[new]
    #[pyo3(signature = (path=None))]
    fn new(py: Python<'_>, path: Option<PathBuf>) -> PyResult<Self> {
        let machine = runtime()?.machine().clone();
        let db = run_detached(py, move |_| -> Result<Db, String> {
            match path {
                None => {
                    let empty = nearflow_rdf::Store::build(&machine, Dict::default(), Vec::new())
                        .map_err(|e| e.to_string())?;
                    Ok(Db::in_memory(empty))
                }
                Some(p) => {
                    if !p.exists() {
                        let empty =
                            nearflow_rdf::Store::build(&machine, Dict::default(), Vec::new())
                                .map_err(|e| e.to_string())?;
                        Db::replace(&p, &empty).map_err(|e| e.to_string())?;
                    }
                    Db::open(&p, &machine, true).map_err(|e| e.to_string())
                }
            }
        })?
        .map_err(store_error)?;
        let db = Arc::new(db);
        let merger = std::sync::Mutex::new(Some(db.start_merger()));
        Ok(Store { db, merger })
    }

    /// The path of a store on disk, `None` for one in memory.
    #[getter]
    fn path(&self) -> Option<PathBuf> {
        self.db.path().map(Path::to_owned)
    }

    /// The number of quads.
    fn __len__(&self) -> usize {
        self.db.current().len() as usize
    }

    fn __repr__(&self) -> String {
        match self.db.path() {
            Some(p) => format!(
                "<nearflow.Store {} quads at {}>",
                self.__len__(),
                p.display()
            ),
            None => format!("<nearflow.Store {} quads in memory>", self.__len__()),
        }
    }

    /// Runs a SPARQL 1.1 query: `QuerySolutions` for SELECT, a `bool` for ASK, a list of
    /// `Triple` for CONSTRUCT and DESCRIBE.
    ///
    /// `default_graph` (an IRI or a list of them) and `named_graphs` set the query's dataset
    /// as the SPARQL Protocol's `default-graph-uri` and `named-graph-uri` do, over the query's
    /// own `FROM` clauses. `timeout` (seconds, a `timedelta` or `"30s"`) and `memory_limit`
    /// (bytes or `"2GiB"`) stop the run with `TimeoutError` and `MemoryLimitExceeded`; past the
    /// memory limit, joins and DISTINCT first spill to `spill_dir` (the system's temporary
    /// folder unless `spill_dir=False`).
    #[pyo3(signature = (query, *, base_iri=None, default_graph=None, named_graphs=None, timeout=None, memory_limit=None, spill_dir=None))]
    #[allow(clippy::too_many_arguments)]
    fn query(
        &self,
        py: Python<'_>,
        query: String,
        base_iri: Option<String>,
        default_graph: Option<OneOrMany>,
        named_graphs: Option<Vec<NamedNode>>,
        timeout: Option<Seconds>,
        memory_limit: Option<Size>,
        spill_dir: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let options = options(base_iri, timeout, memory_limit, spill_dir)?;
        let mut parsed = Query::parse(&query, &options).map_err(query_error)?;
        parsed.use_dataset(
            default_graph.map(OneOrMany::iris).unwrap_or_default(),
            named_graphs
                .unwrap_or_default()
                .into_iter()
                .map(|n| n.iri)
                .collect(),
        );
        let parsed = Arc::new(parsed);
        let rt = runtime()?;
        let store = self.db.current();
        let answer = run_detached(py, move |stop| -> Result<Answer, QueryError> {
            let q = parsed.plan(&store, &options);
            Ok(match q.execute(rt, Some(stop))? {
                QueryResults::Solutions(s) => {
                    let vars: Vec<String> = s.variables().iter().map(|(v, _)| v.clone()).collect();
                    Answer::Solutions(vars, Box::new(s.collect()?))
                }
                QueryResults::Boolean(a) => Answer::Boolean(a.value),
                // The engine gives only valid triples: every predicate is an IRI.
                QueryResults::Graph(a) => Answer::Graph(
                    a.value
                        .iter()
                        .filter_map(|[s, p, o]| match AnyTerm::of(p.as_ref()) {
                            AnyTerm::Named(predicate) => Some(Triple {
                                subject: AnyTerm::of(s.as_ref()),
                                predicate,
                                object: AnyTerm::of(o.as_ref()),
                            }),
                            _ => None,
                        })
                        .collect(),
                ),
            })
        })?
        .map_err(query_error)?;
        Ok(match answer {
            Answer::Solutions(vars, all) => {
                Py::new(py, QuerySolutions::new(vars, *all))?.into_any()
            }
            Answer::Boolean(b) => pyo3::types::PyBool::new(py, b)
                .to_owned()
                .into_any()
                .unbind(),
            Answer::Graph(t) => t.into_pyobject(py)?.into_any().unbind(),
        })
    }

    /// Runs a SPARQL 1.1 update. On a store on disk it is synced to the update log before this
    /// returns. `LOAD <file:…>` reads local files.
    #[pyo3(signature = (update, *, base_iri=None, timeout=None))]
    fn update(
        &self,
        py: Python<'_>,
        update: &str,
        base_iri: Option<String>,
        timeout: Option<Seconds>,
    ) -> PyResult<()> {
        let parsed = Update::parse(update, base_iri.as_deref()).map_err(query_error)?;
        let timeout = timeout.map(Seconds::duration).transpose()?;
        let rt = runtime()?;
        let failed = Arc::new(std::sync::Mutex::new(None));
        let failure = failed.clone();
        let r = self.change(py, move |s, stop| {
            let options = UpdateOptions {
                query: Options {
                    timeout,
                    ..Options::default()
                },
                load: LoadFrom::AnyFile,
                cancel: Some(stop),
            };
            match parsed.apply(s, rt, &options) {
                Ok(a) => Ok((a.store, a.changes)),
                Err(e) => {
                    let m = e.to_string();
                    *failure.lock().expect("not poisoned") = Some(e);
                    Err(m)
                }
            }
        });
        let failed = failed.lock().expect("not poisoned").take();
        match failed {
            Some(e) => Err(query_error(e)),
            None => r.map(|_| ()),
        }
    }

    /// Loads RDF into the store as one update: `input` is a path (`.gz` read through), `bytes`,
    /// or a file object; `format` a media type or extension (a path's name says it when
    /// omitted); `base_iri` the base relative IRIs resolve against (a file's own `file:` IRI
    /// by default); `to_graph` the named graph the triples go to (the default graph when
    /// omitted). Blank nodes of the data are new ones, never the store's. Nothing is loaded
    /// when the data has an error, which names its line and column.
    #[pyo3(signature = (input, format=None, *, base_iri=None, to_graph=None))]
    fn load(
        &self,
        py: Python<'_>,
        input: &Bound<'_, PyAny>,
        format: Option<&str>,
        base_iri: Option<String>,
        to_graph: Option<GraphName>,
    ) -> PyResult<()> {
        let input = Input::of(input)?;
        let format = format.map(format_named).transpose()?;
        let graph = match &to_graph {
            None | Some(GraphName::Default(_)) => None,
            Some(GraphName::Named(n)) => Some(n.iri.clone()),
            Some(GraphName::Blank(_)) => {
                return Err(PyValueError::new_err(
                    "to_graph: nearflow loads into named graphs that are IRIs",
                ))
            }
        };
        // Ctrl-C stops the parse after the batch it is encoding.
        let progress = Arc::new(load::Progress::default());
        let parsing = progress.clone();
        let loaded = crate::run_detached_with(
            py,
            move || {
                parse(
                    input,
                    format,
                    base_iri.as_deref(),
                    graph.as_deref(),
                    &parsing,
                )
            },
            move || progress.cancel.store(true, Ordering::Release),
        )?
        .map_err(PyValueError::new_err)?;
        let loaded = Arc::new(loaded);
        self.change(py, move |s, _| {
            let mut e = s.edit();
            add_loaded(&mut e, &loaded)?;
            let changes = e.changes();
            Ok((e.finish(), changes))
        })?;
        Ok(())
    }

    /// Adds a quad (one update).
    fn add(&self, py: Python<'_>, quad: Quad) -> PyResult<()> {
        self.extend(py, vec![quad])
    }

    /// Adds quads (one update for all of them).
    fn extend(&self, py: Python<'_>, quads: Vec<Quad>) -> PyResult<()> {
        self.change(py, move |s, _| {
            let mut e = s.edit();
            for q in &quads {
                let mut ids = [DEFAULT_GRAPH; 4];
                for (i, t) in [
                    q.subject.as_ref(),
                    TermRef::Iri(&q.predicate.iri),
                    q.object.as_ref(),
                ]
                .into_iter()
                .enumerate()
                {
                    ids[i] = e.intern(t).map_err(|e| e.to_string())?;
                }
                if let Some(g) = q.graph_name.term() {
                    ids[3] = e.intern(g).map_err(|e| e.to_string())?;
                }
                e.insert(ids);
            }
            let changes = e.changes();
            Ok((e.finish(), changes))
        })?;
        Ok(())
    }

    /// Removes a quad, when the store holds it (one update).
    fn remove(&self, py: Python<'_>, quad: Quad) -> PyResult<()> {
        self.change(py, move |s, _| {
            let mut e = s.edit();
            let g = match quad.graph_name.term() {
                None => Some(DEFAULT_GRAPH),
                Some(g) => s.id_of(g),
            };
            let ids = Store::pattern_ids(
                s,
                [
                    Some(quad.subject.as_ref()),
                    Some(TermRef::Iri(&quad.predicate.iri)),
                    Some(quad.object.as_ref()),
                ],
            );
            if let (Some(g), Some([Some(a), Some(b), Some(c)])) = (g, ids) {
                e.remove([a, b, c, g]);
            }
            let changes = e.changes();
            Ok((e.finish(), changes))
        })?;
        Ok(())
    }

    fn __contains__(&self, quad: Quad) -> bool {
        !self
            .quads_for_pattern(
                Some(quad.subject),
                Some(quad.predicate),
                Some(quad.object),
                Some(quad.graph_name),
            )
            .is_empty()
    }

    /// The quads that match a pattern: `None` matches any term, and `graph_name=None` any graph
    /// (`DefaultGraph()` the default graph only).
    #[pyo3(signature = (subject=None, predicate=None, object=None, graph_name=None))]
    fn quads_for_pattern(
        &self,
        subject: Option<AnyTerm>,
        predicate: Option<NamedNode>,
        object: Option<AnyTerm>,
        graph_name: Option<GraphName>,
    ) -> Vec<Quad> {
        let store = self.db.current();
        let Some(pattern) = Store::pattern_ids(
            &store,
            [
                subject.as_ref().map(AnyTerm::as_ref),
                predicate.as_ref().map(|p| TermRef::Iri(&p.iri)),
                object.as_ref().map(AnyTerm::as_ref),
            ],
        ) else {
            return Vec::new();
        };
        let graphs: Vec<Id> = match &graph_name {
            None => store.graph_ids().to_vec(),
            Some(g) => match g.term() {
                None => vec![DEFAULT_GRAPH],
                Some(t) => match store.id_of(t) {
                    Some(id) => vec![id],
                    None => return Vec::new(),
                },
            },
        };
        let dict = store.dict();
        let term = |id: Id| AnyTerm::of(dict.term(id).as_ref());
        let mut out = Vec::new();
        for g in graphs {
            let graph_name = if g == DEFAULT_GRAPH {
                GraphName::Default(crate::terms::DefaultGraph {})
            } else {
                match term(g) {
                    AnyTerm::Named(n) => GraphName::Named(n),
                    AnyTerm::Blank(b) => GraphName::Blank(b),
                    AnyTerm::Literal(_) => continue,
                }
            };
            store.for_each_match(g, pattern, |[s, p, o]| {
                let AnyTerm::Named(predicate) = term(p) else {
                    return;
                };
                out.push(Quad {
                    subject: term(s),
                    predicate,
                    object: term(o),
                    graph_name: graph_name.clone(),
                });
            });
        }
        out
    }

    /// The named graphs that hold a quad.
    fn named_graphs(&self) -> Vec<GraphName> {
        let store = self.db.current();
        store
            .named_graphs()
            .filter_map(|g| match AnyTerm::of(store.dict().term(g).as_ref()) {
                AnyTerm::Named(n) => Some(GraphName::Named(n)),
                AnyTerm::Blank(b) => Some(GraphName::Blank(b)),
                AnyTerm::Literal(_) => None,
            })
            .collect()
    }

    /// Writes the store as N-Quads (`format="nq"`, the default) or TriG (`"trig"`), every
    /// graph, or one graph as
    /// N-Triples, Turtle or RDF/XML (`"nt"`, `"ttl"`, `"rdf"`, or their media types): the
    /// graph `from_graph` (a `NamedNode`, or `DefaultGraph()`, the default when the store has
    /// no named graph). Into `output` (a path, written whole or not at all, or a binary file
    /// object), or returned as `bytes` when `output` is omitted.
    #[pyo3(signature = (output=None, format="nq", *, from_graph=None))]
    fn dump(
        &self,
        py: Python<'_>,
        output: Option<&Bound<'_, PyAny>>,
        format: &str,
        from_graph: Option<GraphName>,
    ) -> PyResult<Option<Py<PyBytes>>> {
        use nearflow_sparql::results::GraphFormat;
        use std::fmt::Write as _;
        let store = self.db.current();
        let format = format_named(format)?;
        let graph_format = match format {
            Format::NQuads | Format::TriG => None,
            Format::NTriples => Some(GraphFormat::NTriples),
            Format::Turtle => Some(GraphFormat::Turtle),
            Format::RdfXml => Some(GraphFormat::RdfXml),
        };
        if graph_format.is_none() && from_graph.is_some() {
            return Err(PyValueError::new_err(
                "from_graph= names one graph for a triples format; N-Quads and TriG hold them all",
            ));
        }
        let text = match graph_format {
            None if format == Format::TriG => py
                .detach(|| {
                    let dict = store.dict();
                    let graphs: Vec<_> = store
                        .graph_ids()
                        .iter()
                        .map(|&g| {
                            let name = (g != DEFAULT_GRAPH)
                                .then(|| nearflow_rdf::Term::from(dict.term(g).as_ref()));
                            let mut triples = Vec::new();
                            store.for_each_match(g, [None; 3], |ids| {
                                triples.push(
                                    ids.map(|id| nearflow_rdf::Term::from(dict.term(id).as_ref())),
                                );
                            });
                            (name, triples)
                        })
                        .collect();
                    let mut out = Vec::new();
                    nearflow_sparql::results::write_dataset_trig(&mut out, &graphs).map(|()| out)
                })
                .map_err(|e| PyValueError::new_err(format!("cannot write the dataset: {e}")))?,
            None => py.detach(|| {
                let dict = store.dict();
                let mut text = String::new();
                for g in store.graph_ids().to_vec() {
                    let graph = (g != DEFAULT_GRAPH).then(|| dict.term(g));
                    store.for_each_match(g, [None; 3], |[s, p, o]| {
                        let _ = write!(
                            text,
                            "{} {} {}",
                            dict.term(s).as_ref(),
                            dict.term(p).as_ref(),
                            dict.term(o).as_ref()
                        );
                        if let Some(g) = &graph {
                            let _ = write!(text, " {}", g.as_ref());
                        }
                        text.push_str(" .\n");
                    });
                }
                text.into_bytes()
            }),
            Some(gf) => {
                let g = match &from_graph {
                    None if store.named_graphs().next().is_some() => {
                        return Err(PyValueError::new_err(
                            "the store has named graphs: give from_graph= (a NamedNode, or DefaultGraph()) for a triples format, or dump N-Quads",
                        ))
                    }
                    None | Some(GraphName::Default(_)) => Some(DEFAULT_GRAPH),
                    Some(g) => g.term().and_then(|t| store.id_of(t)),
                };
                py.detach(|| {
                    let dict = store.dict();
                    let mut triples = Vec::new();
                    if let Some(g) = g {
                        store.for_each_match(g, [None; 3], |ids| {
                            triples.push(
                                ids.map(|id| nearflow_rdf::Term::from(dict.term(id).as_ref())),
                            );
                        });
                    }
                    let mut out = Vec::new();
                    nearflow_sparql::results::write_graph_as(&mut out, &triples, gf).map(|()| out)
                })
                .map_err(|e| PyValueError::new_err(format!("cannot write the graph: {e}")))?
            }
        };
        let text = text.as_slice();
        match output {
            None => Ok(Some(PyBytes::new(py, text).unbind())),
            Some(o) if o.hasattr("write")? && !o.is_instance_of::<PyString>() => {
                o.call_method1("write", (PyBytes::new(py, text),))?;
                Ok(None)
            }
            Some(o) => {
                let p: PathBuf = o.extract()?;
                let mut tmp = p.clone().into_os_string();
                tmp.push(".tmp");
                let tmp = PathBuf::from(tmp);
                std::fs::write(&tmp, text)
                    .and_then(|()| std::fs::rename(&tmp, &p))
                    .map_err(|e| {
                        let _ = std::fs::remove_file(&tmp);
                        PyOSError::new_err(format!("{}: {e}", p.display()))
                    })?;
                Ok(None)
            }
        }
    }

    /// Serves the store over HTTP as `nearflow serve` does (the SPARQL 1.1 Protocol at
    /// `/query` and `/update`, the Graph Store Protocol, the query page), from threads of its
    /// own while Python goes on; the `Server` returned says its `url` and stops at `stop()` or
    /// at the end of a `with` block. `bind` is `HOST:PORT` (port 0 picks a free one); as with
    /// `nearflow serve`, no page of another origin may read or write unless `cors` names its
    /// origin, and beyond loopback writes need `write_token` (sent as `Authorization: Bearer`).
    /// `timeout` (seconds, or `"30s"`) and `memory_limit` (bytes, or `"1GiB"`) bound each
    /// query (defaults: 60 s, and the host's memory shared by twice the queries that may run).
    #[pyo3(signature = (bind="127.0.0.1:7878", *, cors=None, write_token=None, timeout=None, memory_limit=None))]
    fn serve(
        &self,
        py: Python<'_>,
        bind: &str,
        cors: Option<Vec<String>>,
        write_token: Option<String>,
        timeout: Option<Seconds>,
        memory_limit: Option<Size>,
    ) -> PyResult<crate::server::Server> {
        let addr: std::net::SocketAddr = bind.parse().map_err(|e| {
            PyValueError::new_err(format!(
                "bind={bind:?} is not HOST:PORT with an IP address: {e}"
            ))
        })?;
        let rt = runtime()?.clone();
        let mut config = nearflow_serve::Config::for_pus(rt.machine().pu_count());
        if let Some(t) = timeout {
            config.timeout = t.duration()?;
        }
        if let Some(m) = memory_limit {
            config.memory_limit = Some(m.bytes()?);
        }
        config.access = nearflow_serve::Access {
            cors: cors.unwrap_or_default(),
            write_token,
            bind: Some(addr),
            hosts: Vec::new(),
        };
        crate::server::Server::start(py, self.db.clone(), rt, config, addr)
    }

    /// Folds the update log of a store on disk into its snapshot now (a checkpoint); nothing
    /// for a store in memory.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        if self.db.is_durable() {
            let db = self.db.clone();
            py.detach(move || db.merge(true)).map_err(store_error)?;
        }
        Ok(())
    }
}

/// One IRI or a list of them.
#[derive(FromPyObject)]
enum OneOrMany {
    One(NamedNode),
    Many(Vec<NamedNode>),
}

impl OneOrMany {
    fn iris(self) -> Vec<String> {
        match self {
            OneOrMany::One(n) => vec![n.iri],
            OneOrMany::Many(v) => v.into_iter().map(|n| n.iri).collect(),
        }
    }
}
