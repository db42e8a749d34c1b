"""The Python API as a user calls it: terms, loading, queries of every form, updates, the
store on disk, errors, limits and Ctrl-C."""

import gzip
import io
import os
import pickle
import signal
import threading
import time

import pytest

import nearflow
from nearflow import BlankNode, DefaultGraph, Literal, NamedNode, Quad, Triple

from conftest import EX, XSD


def test_terms_compare_and_hash_as_rdf_terms():
    assert NamedNode(EX + "a") == NamedNode(EX + "a")
    assert NamedNode(EX + "a") != NamedNode(EX + "b")
    assert Literal("1", datatype=NamedNode(XSD + "integer")) != Literal("01", datatype=NamedNode(XSD + "integer"))
    assert Literal("x") == Literal("x", datatype=NamedNode(XSD + "string"))
    assert Literal("chat", language="FR") == Literal("chat", language="fr")
    assert Literal("x") != NamedNode(EX + "x")
    assert len({NamedNode(EX + "a"), NamedNode(EX + "a"), Literal("a"), BlankNode("b1"), BlankNode("b1")}) == 3
    assert BlankNode() != BlankNode()
    assert str(Literal("a\"b", language="en")) == '"a\\"b"@en'
    assert str(NamedNode(EX + "a")) == f"<{EX}a>"
    assert Literal("chat", language="fr").datatype == NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#langString")
    q = Quad(NamedNode(EX + "s"), NamedNode(EX + "p"), Literal("o"))
    assert q.graph_name == DefaultGraph()
    s, p, o, g = q
    assert (s, p, o) == tuple(q.triple)
    assert pickle.loads(pickle.dumps(NamedNode(EX + "a"))) == NamedNode(EX + "a")


@pytest.mark.parametrize(
    "make",
    [
        lambda: NamedNode("not an iri"),
        lambda: BlankNode("has space"),
        lambda: Literal("x", language="not a tag"),
        lambda: Literal("x", language="en", datatype=NamedNode(XSD + "string")),
        lambda: Triple(Literal("s"), NamedNode(EX + "p"), Literal("o")),
    ],
)
def test_bad_terms_are_value_errors(make):
    with pytest.raises(ValueError):
        make()


def test_select_rows_by_name_and_position(small):
    r = small.query("PREFIX ex: <http://example.com/> SELECT ?p ?age WHERE { ?p ex:age ?age } ORDER BY ?age")
    assert r.variables == ["p", "age"]
    assert len(r) == 2
    rows = list(r)
    assert rows[0]["p"] == NamedNode(EX + "bob")
    assert rows[0][1] == Literal("27", datatype=NamedNode(XSD + "integer"))
    assert rows[1]["?age"].value == "31"
    p, age = rows[1]
    assert p == NamedNode(EX + "alice")
    assert r[-1]["p"] == p
    with pytest.raises(KeyError):
        rows[0]["nope"]
    with pytest.raises(IndexError):
        r[2]


def test_unbound_values_are_none(small):
    r = small.query(
        "PREFIX ex: <http://example.com/> SELECT ?p ?age WHERE { ?p ex:name ?n OPTIONAL { ?p ex:age ?age } } ORDER BY ?p"
    )
    assert [row["age"] is None for row in r] == [False, False, True]


def test_ask_construct_describe(small):
    assert small.query("ASK { ?s <http://example.com/knows> ?o }") is True
    assert small.query("ASK { ?s <http://example.com/hates> ?o }") is False
    triples = small.query("CONSTRUCT { ?o <http://example.com/knownBy> ?s } WHERE { ?s <http://example.com/knows> ?o }")
    assert triples == [Triple(NamedNode(EX + "bob"), NamedNode(EX + "knownBy"), NamedNode(EX + "alice"))]
    described = small.query("DESCRIBE <http://example.com/carol>")
    assert Triple(NamedNode(EX + "carol"), NamedNode(EX + "name"), Literal("Carol")) in described


def test_named_graphs_and_datasets(small):
    g = NamedNode(EX + "g")
    assert small.named_graphs() == [g]
    assert len(small.query("SELECT * WHERE { ?s ?p ?o }")) == 9
    assert len(small.query("SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }")) == 1
    assert len(small.query("SELECT * WHERE { ?s ?p ?o }", default_graph=g)) == 1
    assert len(small.query("SELECT * WHERE { ?s ?p ?o }", default_graph=[g], named_graphs=[])) == 1
    quads = small.quads_for_pattern(None, NamedNode(EX + "said"), None, None)
    assert quads == [Quad(NamedNode(EX + "alice"), NamedNode(EX + "said"), Literal("hi"), g)]
    assert small.quads_for_pattern(None, NamedNode(EX + "said"), None, DefaultGraph()) == []
    assert len(small) == 10


def test_update_add_remove(small):
    small.update("PREFIX ex: <http://example.com/> INSERT DATA { ex:dave ex:name 'Dave' }")
    assert Quad(NamedNode(EX + "dave"), NamedNode(EX + "name"), Literal("Dave")) in small
    small.update("PREFIX ex: <http://example.com/> DELETE WHERE { ex:dave ?p ?o }")
    assert small.quads_for_pattern(NamedNode(EX + "dave")) == []
    q = Quad(BlankNode("x"), NamedNode(EX + "p"), Literal("1", datatype=NamedNode(XSD + "integer")))
    small.add(q)
    assert q in small
    small.remove(q)
    assert q not in small
    small.extend([Quad(NamedNode(EX + f"n{i}"), NamedNode(EX + "i"), Literal(str(i))) for i in range(1000)])
    assert small.query("SELECT (COUNT(*) AS ?n) WHERE { ?s <http://example.com/i> ?o }")[0]["n"].value == "1000"


def test_load_from_path_gzip_file_object_and_bytes(tmp_path):
    ttl = b'@prefix ex: <http://example.com/> . ex:a ex:p "x" .\n'
    (tmp_path / "d.ttl").write_bytes(ttl)
    (tmp_path / "d.nt.gz").write_bytes(gzip.compress(b'<http://example.com/b> <http://example.com/p> "y" .\n'))
    s = nearflow.Store()
    s.load(str(tmp_path / "d.ttl"))
    s.load(tmp_path / "d.nt.gz")
    s.load(io.BytesIO(b'<http://example.com/c> <http://example.com/p> "z" .'), format="application/n-triples")
    s.load(io.StringIO('<http://example.com/d> <http://example.com/p> "w" .'), format="nt")
    s.load(b"<c> <http://example.com/p> 'rel' .", format="ttl", base_iri="http://example.com/")
    assert len(s) == 5
    assert Quad(NamedNode(EX + "c"), NamedNode(EX + "p"), Literal("rel")) in s


def test_bad_data_is_a_value_error_with_its_place_and_loads_nothing(tmp_path):
    s = nearflow.Store()
    bad = tmp_path / "bad.ttl"
    bad.write_text('<http://example.com/a> <http://example.com/p> "ok" .\n<http://example.com/a> <p "x" .\n')
    with pytest.raises(ValueError, match=r"bad.ttl.*2"):
        s.load(bad)
    assert len(s) == 0
    with pytest.raises(ValueError, match="format"):
        s.load(b"<a> <b> <c> .")
    with pytest.raises(ValueError, match="format"):
        s.load(b"x", format="yaml")
    with pytest.raises(ValueError):
        s.load(tmp_path / "missing.ttl")
    with pytest.raises(TypeError):
        s.load(42)


def test_syntax_errors_are_syntax_errors_with_their_place(small):
    with pytest.raises(SyntaxError) as e:
        small.query("SELECT ?s\nWHERE { ?s ?p }")
    assert isinstance(e.value, nearflow.QuerySyntaxError)
    assert e.value.lineno == 2
    assert e.value.offset > 1
    with pytest.raises(SyntaxError):
        small.update("INSERT DATA { ?s }")


def test_relative_iris_need_a_base(small):
    with pytest.raises(SyntaxError):
        small.query("SELECT * WHERE { <alice> ?p ?o }")
    r = small.query("SELECT * WHERE { <alice> ?p ?o }", base_iri=EX)
    assert len(r) == 5


def _heavy(store):
    store.extend([Quad(NamedNode(EX + f"s{i}"), NamedNode(EX + "p"), Literal(str(i))) for i in range(3000)])
    return "SELECT (COUNT(*) AS ?n) WHERE { ?a ?p ?b . ?c ?q ?d . ?e ?r ?f }"


@pytest.fixture(autouse=True)
def _ctrl_c_raises():
    """Ctrl-C raises KeyboardInterrupt during each test, as in an interactive Python: a
    process started in the background by a shell without job control inherits SIGINT ignored,
    and Python then leaves it ignored, so the Ctrl-C tests would wait out their queries."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _ctrl_c_after(seconds):
    """Sends this process SIGINT (Ctrl-C) in `seconds`, from another thread."""
    threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGINT)).start()


def test_timeout_stops_a_query():
    s = nearflow.Store()
    q = _heavy(s)
    t = time.monotonic()
    with pytest.raises(TimeoutError):
        s.query(q, timeout=0.3)
    with pytest.raises(TimeoutError):
        s.query(q, timeout="300ms")
    for bad in (0, -1.0, "soon", "0s"):
        with pytest.raises(ValueError, match="timeout"):
            s.query(q, timeout=bad)
    assert time.monotonic() - t < 20


def test_ctrl_c_stops_a_query_inside_the_runtime():
    s = nearflow.Store()
    q = _heavy(s)
    _ctrl_c_after(0.3)
    t = time.monotonic()
    # The time limit turns a Ctrl-C that is not seen into a failure, not a wait for the count.
    with pytest.raises(KeyboardInterrupt):
        s.query(q, timeout=60)
    assert time.monotonic() - t < 20
    # The store answers the next query.
    assert s.query("ASK { ?s ?p ?o }") is True


def test_ctrl_c_reaches_the_programs_own_sigint_handler():
    # A query on the main thread has nearflow's handler in front of Python's while it runs:
    # the program's handler still runs (and what it raises comes out), and is in place after.
    class Stop(Exception):
        pass

    def handler(signum, frame):
        raise Stop()

    s = nearflow.Store()
    q = _heavy(s)
    previous = signal.signal(signal.SIGINT, handler)
    try:
        _ctrl_c_after(0.3)
        t = time.monotonic()
        with pytest.raises(Stop):
            s.query(q, timeout=60)
        assert time.monotonic() - t < 20
        assert signal.getsignal(signal.SIGINT) is handler
        with pytest.raises(Stop):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
    finally:
        signal.signal(signal.SIGINT, previous)


def test_queries_from_several_threads_at_once():
    # Off the main thread a query runs on a helper thread while its caller waits.
    s = nearflow.Store()
    s.extend([Quad(NamedNode(EX + f"s{i}"), NamedNode(EX + "p"), Literal(str(i))) for i in range(1000)])
    answers = []

    def ask(k):
        for _ in range(20):
            answers.append(s.query(f"SELECT (COUNT(*) AS ?n) WHERE {{ ?s ?p ?o FILTER (?o != '{k}') }}")[0]["n"].value)

    threads = [threading.Thread(target=ask, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == ["999"] * 80


def test_ctrl_c_stops_a_load_that_would_not_end(tmp_path):
    # A FIFO fed without end: only a cancel inside the parser ends this load.
    fifo = tmp_path / "endless.nt"
    os.mkfifo(fifo)

    def feed():
        try:
            with open(fifo, "wb") as f:
                i = 0
                while True:
                    f.write(b"".join(b'<http://example.com/s%d> <http://example.com/p> "v" .\n' % (i + j) for j in range(1000)))
                    i += 1000
        except OSError:
            pass

    threading.Thread(target=feed, daemon=True).start()
    s = nearflow.Store()
    _ctrl_c_after(0.5)
    t = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        s.load(fifo)
    assert time.monotonic() - t < 60
    assert len(s) == 0


def test_memory_limit_stops_or_spills(tmp_path):
    s = nearflow.Store()
    s.extend([Quad(NamedNode(EX + f"s{i}"), NamedNode(EX + "p"), Literal(str(i))) for i in range(200_000)])
    # The answer is one row; the DISTINCT's set of 200,000 rows is what passes the limit.
    q = "SELECT (COUNT(*) AS ?n) WHERE { SELECT DISTINCT ?o WHERE { ?s ?p ?o } }"
    with pytest.raises(nearflow.MemoryLimitExceeded):
        s.query(q, memory_limit=1 << 20, spill_dir=False)
    assert s.query(q, memory_limit=1 << 20)[0]["n"].value == "200000"
    assert s.query(q, memory_limit=1 << 20, spill_dir=tmp_path)[0]["n"].value == "200000"
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="not a directory"):
        s.query(q, spill_dir="/no/such/folder")
    # Sizes as the command line writes them.
    with pytest.raises(nearflow.MemoryLimitExceeded):
        s.query(q, memory_limit="1MiB", spill_dir=False)
    for bad in (0, "lots", "0B", "3 parsecs"):
        with pytest.raises(ValueError, match="memory_limit"):
            s.query(q, memory_limit=bad)


def test_store_on_disk_keeps_updates_and_takes_its_lock(tmp_path):
    path = tmp_path / "data.store"
    s = nearflow.Store(path)
    assert s.path == path
    s.update("INSERT DATA { <http://example.com/a> <http://example.com/p> 1 }")
    s.load(b'<http://example.com/b> <http://example.com/p> "2" .', format="nt")
    with pytest.raises(OSError):
        nearflow.Store(path)
    del s
    s = nearflow.Store(path)
    assert len(s) == 2
    s.flush()
    del s
    assert len(nearflow.Store(path)) == 2


def test_dump_writes_n_quads(small, tmp_path):
    text = small.dump().decode()
    assert len(text.splitlines()) == 10
    assert '<http://example.com/said> "hi" <http://example.com/g> .' in text
    out = tmp_path / "d.nq"
    small.dump(out)
    again = nearflow.Store()
    again.load(out)
    assert len(again) == 10
    buf = io.BytesIO()
    small.dump(buf)
    assert buf.getvalue().decode() == text


def test_term_columns_agree_with_the_rows(small):
    r = small.query(
        "SELECT ?p ?age WHERE { ?p <http://example.com/name> ?n OPTIONAL { ?p <http://example.com/age> ?age } }"
    )
    terms, columns = r.term_columns()
    assert len(terms) == len(set(terms))
    assert [[None if i < 0 else terms[i] for i in col] for col in columns] == [
        [row[k] for row in r] for k in range(2)
    ]
    assert small.query("SELECT * WHERE { }").term_columns() == ([], [])


@pytest.mark.parametrize("fmt", ["nt", "ttl", "rdf", "text/turtle"])
def test_dump_one_graph_in_a_triples_format(small, fmt, tmp_path):
    with pytest.raises(ValueError, match="from_graph"):
        small.dump(format=fmt)
    data = small.dump(format=fmt, from_graph=DefaultGraph())
    again = nearflow.Store()
    again.load(data, format=fmt)
    assert sorted(map(str, again.quads_for_pattern())) == sorted(
        map(str, small.quads_for_pattern(graph_name=DefaultGraph()))
    )
    named = small.dump(format=fmt, from_graph=NamedNode(EX + "g"))
    one = nearflow.Store()
    one.load(named, format=fmt)
    assert len(one) == 1
    out = tmp_path / "g.out"
    small.dump(out, fmt, from_graph=NamedNode(EX + "g"))
    assert out.read_bytes() == named
    with pytest.raises(ValueError, match="from_graph"):
        small.dump(format="nq", from_graph=DefaultGraph())


def test_dump_writes_trig(small):
    data = small.dump(format="trig")
    assert data.decode().count("{") == 1  # one named graph's block
    again = nearflow.Store()
    again.load(data, format="trig")
    assert sorted(map(str, again.quads_for_pattern())) == sorted(map(str, small.quads_for_pattern()))
    with pytest.raises(ValueError, match="from_graph"):
        small.dump(format="trig", from_graph=DefaultGraph())


def test_a_damaged_store_raises_and_never_answers_with_made_up_terms(tmp_path):
    path = tmp_path / "d.store"
    s = nearflow.Store(path)
    data = "".join(f'<http://example.com/s{i}> <http://example.com/p> "value {i}" .\n' for i in range(3000))
    s.load(data.encode(), format="nt")
    s.flush()
    del s
    good = path.read_bytes()
    refused = 0
    for pct in (20, 40, 60, 80, 95):
        damaged = bytearray(good)
        damaged[len(good) * pct // 100] ^= 0x04
        path.write_bytes(bytes(damaged))
        for f in tmp_path.iterdir():
            if f.name != path.name and f.name.startswith(path.name) and not f.name.endswith(".lock"):
                f.unlink()
        try:
            s = nearflow.Store(path)
        except (OSError, ValueError, RuntimeError) as e:
            assert "damaged" in str(e), str(e)
            refused += 1
            continue
        try:
            rows = [tuple(str(v) for v in r) for r in s.query("SELECT ?s ?o { ?s ?p ?o }")]
            df = s.query("SELECT ?s ?o { ?s ?p ?o }").term_columns()
        except RuntimeError as e:
            assert "damaged" in str(e), str(e)
            refused += 1
        else:
            assert len(rows) == 3000
            assert not any("damaged-term" in x for r in rows for x in r)
            assert len(df[1][0]) == 3000
        del s
    assert refused > 0, "no damage was found at any of the points"
