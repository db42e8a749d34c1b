"""`Store.serve`: the endpoint of `nearflow serve` started from Python, driven by two clients
nobody here wrote: SPARQLWrapper and rdflib's SPARQLStore / SPARQLUpdateStore."""

import socket

import pytest

import nearflow
from nearflow import Literal, NamedNode, Quad

from conftest import EX

SPARQLWrapper = pytest.importorskip("SPARQLWrapper")
rdflib = pytest.importorskip("rdflib")
from rdflib.plugins.stores.sparqlstore import SPARQLStore, SPARQLUpdateStore  # noqa: E402


def test_sparqlwrapper_queries_and_updates(small):
    from SPARQLWrapper import JSON, POST, XML, SPARQLWrapper as Client

    with small.serve("127.0.0.1:0") as server:
        assert server.url.startswith("http://127.0.0.1:")
        c = Client(server.query_url, updateEndpoint=server.update_url)
        c.setReturnFormat(JSON)
        c.setQuery("SELECT ?n WHERE { ?p <http://example.com/name> ?n } ORDER BY str(?n)")
        r = c.query().convert()
        assert [b["n"]["value"] for b in r["results"]["bindings"]] == ["Alice", "Bob", "Carol"]
        assert r["results"]["bindings"][1]["n"]["xml:lang"] == "en"
        c.setQuery("ASK { ?s <http://example.com/knows> ?o }")
        c.setReturnFormat(XML)
        doc = c.query().convert()
        assert doc.getElementsByTagName("boolean")[0].firstChild.data == "true"
        c.setMethod(POST)
        c.setQuery("INSERT DATA { <http://example.com/x> <http://example.com/p> 'new' }")
        c.query()
    # The update went to the store the Python program holds.
    assert Quad(NamedNode(EX + "x"), NamedNode(EX + "p"), Literal("new")) in small


def test_rdflib_sparqlstore_and_sparqlupdatestore(small):
    with small.serve("127.0.0.1:0") as server:
        g = rdflib.Graph(store=SPARQLStore(server.query_url))
        rows = g.query("SELECT ?p ?a WHERE { ?p <http://example.com/age> ?a } ORDER BY ?a")
        assert [(str(p), int(a)) for p, a in rows] == [(EX + "bob", 27), (EX + "alice", 31)]
        assert (rdflib.URIRef(EX + "alice"), rdflib.URIRef(EX + "knows"), rdflib.URIRef(EX + "bob")) in g
        # rdflib writes a graph named by a blank node nowhere: this one is the default graph.
        u = rdflib.Graph(
            store=SPARQLUpdateStore(server.query_url, server.update_url),
            identifier=rdflib.graph.DATASET_DEFAULT_GRAPH_ID,
        )
        u.add((rdflib.URIRef(EX + "y"), rdflib.URIRef(EX + "p"), rdflib.Literal(2)))
        assert small.query("ASK { <http://example.com/y> <http://example.com/p> 2 }") is True


def test_a_taken_port_is_an_os_error_and_stop_frees_it(small):
    server = small.serve("127.0.0.1:0")
    port = int(server.url.rsplit(":", 1)[1])
    with pytest.raises(OSError):
        small.serve(f"127.0.0.1:{port}")
    server.stop()
    server.stop()
    assert "stopped" in repr(server)
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
    with pytest.raises(ValueError):
        small.serve("localhost:80")
