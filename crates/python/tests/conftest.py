import pytest

import nearflow

EX = "http://example.com/"
XSD = "http://www.w3.org/2001/XMLSchema#"


@pytest.fixture
def small():
    """A store of 3 people with names, ages and one knows-edge; one named graph."""
    s = nearflow.Store()
    s.load(
        b"""
        @prefix ex: <http://example.com/> .
        @prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
        ex:alice ex:name "Alice" ; ex:age 31 ; ex:knows ex:bob ; ex:height 1.70 ; ex:member true .
        ex:bob ex:name "Bob"@en ; ex:age 27 ; ex:member false .
        ex:carol ex:name "Carol" .
        """,
        format="ttl",
    )
    s.load(
        b'<http://example.com/alice> <http://example.com/said> "hi" .',
        format="nt",
        to_graph=nearflow.NamedNode(EX + "g"),
    )
    return s
