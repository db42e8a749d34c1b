"""The rdflib store plugin: rdflib's API over nearflow, answers equal to rdflib's own engine."""

import pytest

rdflib = pytest.importorskip("rdflib")
from rdflib import RDF, BNode, Graph, Dataset, Literal, Namespace, URIRef  # noqa: E402
import rdflib.namespace as ns  # noqa: E402

from nearflow.rdflib import NearflowStore  # noqa: E402

EX = Namespace("http://example.com/")

TTL = """
@prefix ex: <http://example.com/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
ex:alice a ex:Person ; ex:name "Alice" ; ex:age 31 ; ex:knows ex:bob, [ ex:name "Anon" ] .
ex:bob a ex:Person ; ex:name "Bob"@en ; ex:age "27"^^xsd:integer .
ex:carol a ex:Person ; ex:name "Carol" ; ex:nick "C", "Caz" .
"""

QUERIES = [
    "SELECT ?p ?n WHERE { ?p a ex:Person ; ex:name ?n }",
    "SELECT ?p (COUNT(?o) AS ?k) WHERE { ?p ?q ?o } GROUP BY ?p",
    "SELECT ?n WHERE { ?p ex:name ?n FILTER(lang(?n) = 'en') }",
    "SELECT ?p ?a WHERE { ?p a ex:Person OPTIONAL { ?p ex:age ?a } }",
    "SELECT ?x WHERE { ex:alice ex:knows ?y . ?y ex:name ?x }",
    "SELECT (SUM(?a) AS ?t) WHERE { ?p ex:age ?a }",
    "SELECT DISTINCT ?n WHERE { ?p ex:nick ?n } ORDER BY DESC(?n)",
]


def graph_pair():
    ours = Graph(store="nearflow")
    theirs = Graph()
    for g in (ours, theirs):
        g.parse(data=TTL, format="turtle")
        g.bind("ex", EX)
    return ours, theirs


def canon(result):
    """Rows as sets of (variable, term), blank nodes by position left out."""
    rows = []
    for row in result:
        rows.append(tuple(None if isinstance(t, BNode) else t for t in row))
    return sorted(rows, key=repr)


def test_the_plugin_is_registered():
    g = Graph(store="nearflow")
    assert isinstance(g.store, NearflowStore)


def test_triples_and_len_agree_with_rdflibs_memory_store():
    ours, theirs = graph_pair()
    assert len(ours) == len(theirs) == 13
    assert set(ours.triples((None, RDF.type, None))) == set(theirs.triples((None, RDF.type, None)))
    assert set(ours.objects(EX.carol, EX.nick)) == {Literal("C"), Literal("Caz")}
    assert ours.value(EX.bob, EX.age) == Literal(27)
    assert (EX.alice, EX.name, Literal("Alice")) in ours
    ours.remove((EX.carol, None, None))
    assert len(ours) == 9


@pytest.mark.parametrize("q", QUERIES)
def test_queries_run_on_nearflow_and_agree_with_rdflib(q, monkeypatch):
    ours, theirs = graph_pair()
    calls = []
    real = NearflowStore.query

    def counted(self, *a, **k):
        r = real(self, *a, **k)
        calls.append(1)
        return r

    monkeypatch.setattr(NearflowStore, "query", counted)
    a = ours.query(q)
    assert calls, "the query went to rdflib's engine, not nearflow's"
    b = theirs.query(q)
    assert [str(v) for v in a.vars] == [str(v) for v in b.vars]
    assert canon(a) == canon(b)


def test_ask_and_construct():
    ours, theirs = graph_pair()
    assert ours.query("ASK { ex:alice ex:knows ex:bob }").askAnswer is True
    assert ours.query("ASK { ex:bob ex:knows ex:alice }").askAnswer is False
    c = ours.query("CONSTRUCT { ?b ex:knownBy ?a } WHERE { ?a ex:knows ?b FILTER isIRI(?b) }")
    assert set(c.graph) == {(EX.bob, EX.knownBy, EX.alice)}


def test_update_through_rdflib():
    ours, theirs = graph_pair()
    for g in (ours, theirs):
        g.update("INSERT { ?p ex:adult true } WHERE { ?p ex:age ?a FILTER(?a >= 30) }")
    assert set(ours.subjects(EX.adult, Literal(True))) == {EX.alice}
    assert len(ours) == len(theirs)


def test_init_bindings_fall_back_to_rdflibs_engine_and_still_answer():
    ours, theirs = graph_pair()
    q = "SELECT ?n WHERE { ?p ex:name ?n }"
    a = ours.query(q, initBindings={"p": EX.alice})
    b = theirs.query(q, initBindings={"p": EX.alice})
    assert canon(a) == canon(b) == [(Literal("Alice"),)]


def test_datasets_and_named_graphs():
    ds = Dataset(store="nearflow")
    g1 = ds.graph(URIRef("http://example.com/g1"))
    g1.add((EX.a, EX.p, Literal("in g1")))
    ds.add((EX.b, EX.p, Literal("in default")))
    assert {c.identifier for c in ds.graphs()} >= {URIRef("http://example.com/g1")}
    r = ds.query("SELECT ?o WHERE { GRAPH <http://example.com/g1> { ?s ?p ?o } }")
    assert [row[0] for row in r] == [Literal("in g1")]
    assert [row[0] for row in g1.query("SELECT ?o WHERE { ?s ?p ?o }")] == [Literal("in g1")]
    assert len(g1) == 1


def test_literals_keep_their_lexical_form():
    g = Graph(store="nearflow")
    g.add((EX.a, EX.p, Literal("01", datatype=ns.XSD.integer, normalize=False)))
    (o,) = list(g.objects(EX.a, EX.p))
    assert str(o) == "01" and o.datatype == ns.XSD.integer


def test_relative_urirefs_come_back_as_they_went_in():
    ds = Dataset(store="nearflow")
    g = ds.graph(URIRef("context-1"))
    g.add((URIRef("michel"), URIRef("likes"), URIRef("pizza")))
    g.add((URIRef("michel"), URIRef("likes"), URIRef("http://example.com/cheese")))
    assert set(g.objects(URIRef("michel"), URIRef("likes"))) == {
        URIRef("pizza"),
        URIRef("http://example.com/cheese"),
    }
    assert URIRef("context-1") in {c.identifier for c in ds.graphs()}
    r = ds.query(
        "SELECT ?s ?o WHERE { GRAPH <urn:x-nearflow:relative:context-1> "
        "{ ?s <urn:x-nearflow:relative:likes> ?o } }"
    )
    assert {(row.s, row.o) for row in r} == {
        (URIRef("michel"), URIRef("pizza")),
        (URIRef("michel"), URIRef("http://example.com/cheese")),
    }
    g.remove((URIRef("michel"), None, URIRef("pizza")))
    assert len(g) == 1
    # Not an IRI even under the prefix: refused, nothing stored.
    with pytest.raises(ValueError):
        g.add((URIRef("a b"), URIRef("likes"), URIRef("pizza")))
    assert len(g) == 1


def test_a_store_on_disk(tmp_path):
    path = str(tmp_path / "g.store")
    g = Graph(store="nearflow")
    g.open(path, create=True)
    g.parse(data=TTL, format="turtle")
    g.close()
    g2 = Graph(store="nearflow")
    g2.open(path)
    assert len(g2) == 13
    # Namespace bindings are kept with the store.
    g2.bind("mine", "http://example.com/mine#")
    g2.close()
    g3 = Graph(store="nearflow")
    g3.open(path)
    assert ("mine", URIRef("http://example.com/mine#")) in set(g3.namespaces())
    g3.close()
    with open(path + ".namespaces.json", "w") as f:
        f.write("[not bindings")
    with pytest.raises(ValueError, match="namespace bindings"):
        Graph(store="nearflow").open(path)
    with pytest.raises(FileNotFoundError):
        Graph(store="nearflow").open(str(tmp_path / "none.store"))
