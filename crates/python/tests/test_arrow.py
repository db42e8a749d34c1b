"""Solutions to Arrow, pandas and polars: column types, nulls, and agreement with the rows."""

import pytest

import nearflow

pa = pytest.importorskip("pyarrow")


def test_columns_are_typed_by_their_values(small):
    r = small.query(
        "PREFIX ex: <http://example.com/> SELECT ?p ?name ?age ?height ?member WHERE { ?p ex:name ?name "
        "OPTIONAL { ?p ex:age ?age } OPTIONAL { ?p ex:height ?height } OPTIONAL { ?p ex:member ?member } } ORDER BY ?p"
    )
    t = r.to_arrow()
    assert t.column_names == ["p", "name", "age", "height", "member"]
    assert t.schema.field("p").type == pa.string()
    assert t.schema.field("age").type == pa.int64()
    assert t.schema.field("height").type == pa.float64()
    assert t.schema.field("member").type == pa.bool_()
    assert t.column("p").to_pylist() == ["http://example.com/alice", "http://example.com/bob", "http://example.com/carol"]
    assert t.column("name").to_pylist() == ["Alice", "Bob", "Carol"]
    assert t.column("age").to_pylist() == [31, 27, None]
    assert t.column("height").to_pylist() == [1.7, None, None]
    assert t.column("member").to_pylist() == [True, False, None]


def test_mixed_columns_are_text_and_blank_nodes_keep_their_label():
    s = nearflow.Store()
    s.load(b'_:b <http://example.com/v> 1 . <http://example.com/a> <http://example.com/v> "x" .', format="ttl")
    t = s.query("SELECT ?s ?v WHERE { ?s ?p ?v } ORDER BY ?v").to_arrow()
    assert t.schema.field("v").type == pa.string()
    assert sorted(t.column("v").to_pylist()) == ["1", "x"]
    assert any(x.startswith("_:") for x in t.column("s").to_pylist())


def test_arrow_agrees_with_the_rows_on_a_larger_answer():
    s = nearflow.Store()
    s.extend(
        [
            nearflow.Quad(
                nearflow.NamedNode(f"http://example.com/s{i}"),
                nearflow.NamedNode("http://example.com/p"),
                nearflow.Literal(str(i), datatype=nearflow.NamedNode("http://www.w3.org/2001/XMLSchema#integer")),
            )
            for i in range(50_000)
        ]
    )
    r = s.query("SELECT ?s ?o WHERE { ?s ?p ?o }")
    t = r.to_arrow()
    assert t.num_rows == len(r) == 50_000
    assert t.column("o").to_pylist() == [int(row["o"].value) for row in r]
    assert t.column("s").to_pylist() == [row["s"].value for row in r]
    assert sum(t.column("o").to_pylist()) == sum(range(50_000))


def test_empty_answers_and_no_variables(small):
    t = small.query("SELECT ?s WHERE { ?s <http://example.com/none> ?o }").to_arrow()
    assert t.num_rows == 0 and t.column_names == ["s"]
    t = small.query("SELECT * WHERE { }").to_arrow()
    assert t.num_rows == 1 and t.num_columns == 0


def test_pandas_and_polars(small):
    pd = pytest.importorskip("pandas")
    df = small.query("SELECT ?p ?age WHERE { ?p <http://example.com/age> ?age } ORDER BY ?age").to_pandas()
    assert isinstance(df, pd.DataFrame)
    assert list(df["age"]) == [27, 31]
    pl = pytest.importorskip("polars")
    df = small.query("SELECT ?p ?age WHERE { ?p <http://example.com/age> ?age } ORDER BY ?age").to_polars()
    assert isinstance(df, pl.DataFrame)
    assert df["age"].to_list() == [27, 31]


def test_pyarrow_reads_the_capsule_interface_directly(small):
    r = small.query("SELECT ?p WHERE { ?p <http://example.com/age> ?age }")
    batch = pa.record_batch(r)
    assert batch.num_rows == 2
