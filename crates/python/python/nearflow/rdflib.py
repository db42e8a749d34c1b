"""An rdflib store backed by nearflow: ``rdflib.Graph(store="nearflow")``.

Triples, quads, named graphs, namespaces, and SPARQL queries and updates run on nearflow's
engine instead of rdflib's, so that an rdflib program becomes fast by changing one line::

    import rdflib
    g = rdflib.Graph(store="nearflow")              # in memory
    g = rdflib.Dataset(store="nearflow")
    g.open("data.store", create=True)               # or a store on disk, with its update log
    g.parse("data.ttl")
    for row in g.query("SELECT ?s WHERE { ?s ?p ?o }"):
        ...

How it maps rdflib's model onto nearflow's, where the two differ:

- A context whose identifier is a blank node (a plain ``Graph()``'s) or rdflib's dataset
  default graph ``urn:x-rdflib:default`` is nearflow's default graph; a context named by an IRI
  is a named graph of that IRI.
- A literal of datatype ``xsd:string`` comes back as rdflib's plain literal
  (``Literal("x")``, datatype ``None``), as rdflib itself writes one; other literals keep their
  lexical form exactly as stored (``normalize=False``), so ``"01"^^xsd:integer`` stays ``"01"``.
- Added triples are buffered and written as one update before the next read, query or
  removal, and at ``commit()``/``close()``: rdflib adds a parsed file one triple at a time.
- Queries that nearflow's engine does not take from rdflib — a prepared query object, a query
  with ``initBindings``, a query over the union of all graphs (a ``ConjunctiveGraph``'s
  default), an update on a named graph — raise ``NotImplementedError`` here, which makes rdflib
  answer them with its own engine over this store's triples: slower, never wrong.
- A relative URIRef (``URIRef("michel")``, which rdflib allows and an RDF store does not) is
  stored as the IRI ``urn:x-nearflow:relative:michel`` and comes back from the store, its
  queries and its contexts as the URIRef it was; a SPARQL query names it by that IRI (a
  relative IRI in a query's text is resolved against its base, as SPARQL says).
- Namespace bindings of a store on disk are kept beside its file, in
  ``<store>.namespaces.json`` (written whole at each change); nearflow's other tools ignore it.
- Formulas (N3's quoted graphs) are not supported.
"""

from __future__ import annotations

import json
import os
import re
import weakref
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

import rdflib
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID, Graph
from rdflib.query import Result
from rdflib.store import VALID_STORE, Store
from rdflib.term import BNode, Node, URIRef, Variable

from . import _nearflow as nf

# The stores on disk this process has open, by their file's real path: a store takes its write
# lock once, and rdflib may open two graphs over one folder.
_OPEN: "weakref.WeakValueDictionary[str, nf.Store]" = weakref.WeakValueDictionary()

_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"

# Added triples are written as one update once this many wait, or before the next read.
_BUFFER = 10_000

# rdflib lets a URIRef be relative (``URIRef("michel")``); an IRI of RDF is absolute. The
# plugin stores a relative one as an IRI under this prefix and gives it back as it was.
_RELATIVE = "urn:x-nearflow:relative:"
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def _iri(ref: URIRef) -> Any:
    """nearflow's IRI for an rdflib URIRef: a relative one under `_RELATIVE`."""
    text = str(ref)
    if _SCHEME.match(text) is None:
        return nf.NamedNode(_RELATIVE + text)
    return nf.NamedNode(text)


def _to_nf(term: Node) -> Any:
    """nearflow's term for an rdflib term."""
    if isinstance(term, URIRef):
        return _iri(term)
    if isinstance(term, BNode):
        return nf.BlankNode(str(term))
    if isinstance(term, rdflib.Literal):
        if term.language:
            return nf.Literal(str(term), language=term.language)
        if term.datatype is not None:
            return nf.Literal(str(term), datatype=nf.NamedNode(str(term.datatype)))
        return nf.Literal(str(term))
    raise TypeError(f"nearflow stores IRIs, blank nodes and literals, not {term!r}")


def _to_rdflib(term: Any) -> Optional[Node]:
    """rdflib's term for a nearflow term."""
    if term is None:
        return None
    if isinstance(term, nf.NamedNode):
        value = term.value
        if value.startswith(_RELATIVE):
            return URIRef(value[len(_RELATIVE) :])
        return URIRef(value)
    if isinstance(term, nf.BlankNode):
        return BNode(term.value)
    if isinstance(term, nf.Literal):
        if term.language is not None:
            return rdflib.Literal(term.value, lang=term.language)
        if term.datatype.value == _XSD_STRING:
            return rdflib.Literal(term.value)
        return rdflib.Literal(term.value, datatype=URIRef(term.datatype.value), normalize=False)
    raise TypeError(f"not a nearflow term: {term!r}")


def _graph_of(context: Any) -> Any:
    """nearflow's graph name for an rdflib context: `None` (every graph) for no context."""
    if context is None:
        return None
    ident = context.identifier if isinstance(context, Graph) else context
    if ident == DATASET_DEFAULT_GRAPH_ID or isinstance(ident, BNode):
        return nf.DefaultGraph()
    if isinstance(ident, URIRef):
        return _iri(ident)
    raise TypeError(f"a graph is named by an IRI or a blank node, not {ident!r}")


class NearflowStore(Store):
    """An rdflib `Store` over a `nearflow.Store`."""

    context_aware = True
    formula_aware = False
    transaction_aware = False
    graph_aware = True

    def __init__(self, configuration: Optional[str] = None, identifier: Optional[Node] = None):
        self._inner: Optional[nf.Store] = None
        self._pending: List[Any] = []
        self._namespaces: Dict[str, URIRef] = {}
        self._prefixes: Dict[URIRef, str] = {}
        # Where a store on disk keeps the namespace bindings (beside its file); None in memory.
        self._namespaces_path: Optional[str] = None
        self._empty: set = set()
        super().__init__(configuration, identifier)
        if self._inner is None:
            self._inner = nf.Store()

    # -- opening and closing -------------------------------------------------------------

    def open(self, configuration: Any, create: bool = False) -> Optional[int]:
        """Opens the store on disk at `configuration`, made empty when `create`: a store file,
        or a folder (as rdflib's other stores take one) holding the store file `nearflow.store`."""
        path = os.fspath(configuration)
        if os.path.isdir(path):
            path = os.path.join(path, "nearflow.store")
        if not create and not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no such store (open it with create=True to make one)")
        self._flush()
        key = os.path.realpath(path)
        inner = _OPEN.get(key)
        if inner is None:
            inner = nf.Store(path)
            _OPEN[key] = inner
        self._inner = inner
        self._namespaces_path = path + ".namespaces.json"
        self._load_namespaces()
        return VALID_STORE

    def close(self, commit_pending_transaction: bool = False) -> None:
        """Writes what is pending and lets the store go (a store on disk: its checkpoint and its
        write lock)."""
        self._flush()
        if self._inner is not None:
            self._inner.flush()
        self._inner = None
        self._namespaces_path = None

    def commit(self) -> None:
        self._flush()

    def rollback(self) -> None:
        self._pending.clear()

    @property
    def inner(self) -> nf.Store:
        """The nearflow store, with every added triple written."""
        self._flush()
        if self._inner is None:
            raise ValueError("the nearflow store is closed")
        return self._inner

    def _flush(self) -> None:
        if self._pending and self._inner is not None:
            pending, self._pending = self._pending, []
            self._inner.extend(pending)

    # -- triples -------------------------------------------------------------------------

    def add(self, triple: Tuple[Node, Node, Node], context: Any, quoted: bool = False) -> None:
        if quoted:
            raise NotImplementedError("nearflow stores no formulas (N3 quoted graphs)")
        s, p, o = triple
        g = _graph_of(context)
        self._pending.append(nf.Quad(_to_nf(s), _to_nf(p), _to_nf(o), g))
        if len(self._pending) >= _BUFFER:
            self._flush()
        super().add(triple, context, quoted)

    def addN(self, quads: Iterable[Tuple[Node, Node, Node, Any]]) -> None:
        for s, p, o, c in quads:
            self.add((s, p, o), c)

    def remove(self, triple: Tuple[Any, Any, Any], context: Any = None) -> None:
        store = self.inner
        g = _graph_of(context)
        for q in self._matches(triple, g):
            store.remove(q)
        super().remove(triple, context)

    def _matches(self, triple: Tuple[Any, Any, Any], graph: Any) -> List[Any]:
        s, p, o = triple
        try:
            pattern = [None if t is None else _to_nf(t) for t in (s, p, o)]
        except (TypeError, ValueError):
            return []
        if pattern[1] is not None and not isinstance(pattern[1], nf.NamedNode):
            return []
        return self.inner.quads_for_pattern(pattern[0], pattern[1], pattern[2], graph)

    def _context(self, graph_name: Any) -> Graph:
        if isinstance(graph_name, nf.DefaultGraph):
            ident: Node = DATASET_DEFAULT_GRAPH_ID
        else:
            ident = _to_rdflib(graph_name)  # type: ignore[assignment]
        return Graph(store=self, identifier=ident)

    def triples(self, triple_pattern: Tuple[Any, Any, Any], context: Any = None) -> Iterator[Any]:
        g = _graph_of(context)
        if g is not None:
            ctx = context if isinstance(context, Graph) else self._context(g)
            for q in self._matches(triple_pattern, g):
                t = (_to_rdflib(q.subject), _to_rdflib(q.predicate), _to_rdflib(q.object))
                yield t, iter([ctx])
            return
        # Every graph: each triple once, with the graphs that hold it.
        seen: Dict[Any, List[Any]] = {}
        for q in self._matches(triple_pattern, None):
            seen.setdefault(q.triple, []).append(q.graph_name)
        for t, graphs in seen.items():
            triple = (_to_rdflib(t.subject), _to_rdflib(t.predicate), _to_rdflib(t.object))
            yield triple, iter([self._context(gn) for gn in graphs])

    def __len__(self, context: Any = None) -> int:
        # Counted by the engine (from the indexes where it can), not by making every quad.
        g = _graph_of(context)
        if g is None:
            text = "SELECT (COUNT(*) AS ?n) { SELECT DISTINCT ?s ?p ?o { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } } } }"
        elif isinstance(g, nf.DefaultGraph):
            text = "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }"
        else:
            text = f"SELECT (COUNT(*) AS ?n) {{ GRAPH <{g.value}> {{ ?s ?p ?o }} }}"
        return int(self.inner.query(text)[0]["n"].value)

    def contexts(self, triple: Optional[Tuple[Any, Any, Any]] = None) -> Iterator[Graph]:
        if triple is None:
            names = [nf.DefaultGraph()] if self._matches((None, None, None), nf.DefaultGraph()) else []
            names += self.inner.named_graphs()
            names += [g for g in self._empty if g not in names]
        else:
            names = list(dict.fromkeys(q.graph_name for q in self._matches(triple, None)))
        for g in names:
            yield self._context(g)

    def add_graph(self, graph: Graph) -> None:
        # nearflow holds a graph while it holds a quad of it; an empty one added here is
        # listed by contexts() for as long as this object lives (it is not on disk).
        g = _graph_of(graph)
        if isinstance(g, nf.NamedNode):
            self._empty.add(g)

    def remove_graph(self, graph: Graph) -> None:
        self.remove((None, None, None), graph)
        self._empty.discard(_graph_of(graph))

    # -- namespaces ----------------------------------------------------------------------

    def bind(self, prefix: str, namespace: URIRef, override: bool = True) -> None:
        if self._bind(prefix, URIRef(namespace), override):
            self._save_namespaces()

    def _bind(self, prefix: str, namespace: URIRef, override: bool) -> bool:
        """Binds `prefix` to `namespace` as rdflib's stores do; whether a binding changed."""
        taken = self._prefixes.get(namespace)
        if taken is not None and not override:
            return False
        if prefix in self._namespaces and not override:
            return False
        if taken == prefix and self._namespaces.get(prefix) == namespace:
            return False
        if taken is not None:
            self._namespaces.pop(taken, None)
        old = self._namespaces.get(prefix)
        if old is not None:
            self._prefixes.pop(old, None)
        self._namespaces[prefix] = namespace
        self._prefixes[namespace] = prefix
        return True

    def _load_namespaces(self) -> None:
        """Takes the bindings saved beside the store on disk, over those made before it was
        opened, and saves the union."""
        path = self._namespaces_path
        try:
            with open(path, encoding="utf-8") as f:
                saved = json.load(f)
            if not isinstance(saved, dict) or not all(isinstance(v, str) for v in saved.values()):
                raise ValueError("not an object of prefixes and namespaces")
        except FileNotFoundError:
            saved = {}
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: the store's namespace bindings cannot be read: {e}") from None
        for prefix, namespace in saved.items():
            self._bind(prefix, URIRef(namespace), True)
        self._save_namespaces()

    def _save_namespaces(self) -> None:
        """Writes the bindings beside the store on disk, whole or not at all (a temporary file
        renamed over the old one)."""
        path = self._namespaces_path
        if path is None:
            return
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({p: str(n) for p, n in self._namespaces.items()}, f, indent=1, sort_keys=True)
        os.replace(tmp, path)

    def namespace(self, prefix: str) -> Optional[URIRef]:
        return self._namespaces.get(prefix)

    def prefix(self, namespace: URIRef) -> Optional[str]:
        return self._prefixes.get(URIRef(namespace))

    def namespaces(self) -> Iterator[Tuple[str, URIRef]]:
        yield from list(self._namespaces.items())

    # -- SPARQL --------------------------------------------------------------------------

    @staticmethod
    def _prologue(text: str, init_ns: Optional[Dict[str, Any]]) -> str:
        lines = [f"PREFIX {p}: <{ns}>" for p, ns in (init_ns or {}).items()]
        return "\n".join(lines + [text])

    def query(self, query: Any, initNs: Any, initBindings: Any, queryGraph: Any, **kwargs: Any) -> Result:
        if not isinstance(query, str) or initBindings:
            raise NotImplementedError
        default_graph = None
        if queryGraph == "__UNION__":
            raise NotImplementedError
        if isinstance(queryGraph, URIRef) and queryGraph != DATASET_DEFAULT_GRAPH_ID:
            default_graph = _iri(queryGraph)
        text = self._prologue(query, initNs)
        base = kwargs.get("base")
        answer = self.inner.query(text, base_iri=base, default_graph=default_graph)
        if isinstance(answer, bool):
            r = Result("ASK")
            r.askAnswer = answer
            return r
        if isinstance(answer, list):
            r = Result("CONSTRUCT")
            g = Graph()
            for t in answer:
                g.add((_to_rdflib(t.subject), _to_rdflib(t.predicate), _to_rdflib(t.object)))
            r.graph = g
            return r
        r = Result("SELECT")
        variables = [Variable(v) for v in answer.variables]
        r.vars = variables
        # Each distinct term of the answer becomes an rdflib term once.
        terms, columns = answer.term_columns()
        made = [_to_rdflib(t) for t in terms]
        made.append(None)  # index -1: unbound
        values = [[made[i] for i in col] for col in columns]
        r.bindings = [
            {v: t for v, t in zip(variables, row) if t is not None} for row in zip(*values)
        ] if values else [{} for _ in range(len(answer))]
        return r

    def update(self, update: Any, initNs: Any, initBindings: Any, queryGraph: Any, **kwargs: Any) -> None:
        if not isinstance(update, str) or initBindings:
            raise NotImplementedError
        if isinstance(queryGraph, URIRef) and queryGraph != DATASET_DEFAULT_GRAPH_ID:
            raise NotImplementedError
        if queryGraph == "__UNION__":
            raise NotImplementedError
        self.inner.update(self._prologue(update, initNs), base_iri=kwargs.get("base"))
