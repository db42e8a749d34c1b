"""nearflow: a parallel SPARQL 1.1 engine for RDF.

>>> import nearflow
>>> store = nearflow.Store()
>>> store.load(b'<http://ex/a> <http://ex/p> "1"^^<http://www.w3.org/2001/XMLSchema#integer> .', format="nt")
>>> [row["o"].value for row in store.query("SELECT ?o WHERE { ?s ?p ?o }")]
['1']

``Store()`` is held in memory, ``Store(path)`` is a store on disk with its update log.
``Store.query`` answers SELECT with ``QuerySolutions`` (iterable rows, ``to_arrow()``,
``to_pandas()``, ``to_polars()``), ASK with a ``bool`` and CONSTRUCT/DESCRIBE with a list of
``Triple``. ``rdflib.Graph(store="nearflow")`` runs rdflib programs on this engine
(``nearflow.rdflib``).
"""

from ._nearflow import (
    BlankNode,
    DefaultGraph,
    Literal,
    MemoryLimitExceeded,
    NamedNode,
    Quad,
    QueryCancelled,
    QuerySolution,
    QuerySolutions,
    QuerySyntaxError,
    Server,
    Store,
    Triple,
    __version__,
)

__all__ = [
    "BlankNode",
    "DefaultGraph",
    "Literal",
    "MemoryLimitExceeded",
    "NamedNode",
    "Quad",
    "QueryCancelled",
    "QuerySolution",
    "QuerySolutions",
    "QuerySyntaxError",
    "Server",
    "Store",
    "Triple",
    "__version__",
]
