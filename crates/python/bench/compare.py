"""nearflow from Python beside pyoxigraph and rdflib's own engine, in one process, interleaved.

    python compare.py [--data FILE] [--queries DIR] [--rounds N] [--timeout S] [--repeat K]

Loads the same SP²Bench file into each (timed), runs the 17 queries round after round, each
round every query on every engine one after the other (rdflib once), and times a 1M-row SELECT
into a pandas DataFrame through each. A query is stopped after --timeout seconds: rdflib's (pure
Python) by an alarm signal, pyoxigraph's (which cannot be interrupted inside a query) by running
it in a worker process that is killed and started again. An
engine's time for a query is the wall time of the Python call that gives the whole answer:
nearflow's `len(store.query(q))`, pyoxigraph's count of the solutions it iterates,
rdflib's `len(list(graph.query(q)))`, on its own engine and on `Graph(store="nearflow")`
(the plugin: rdflib's API, nearflow's engine, every answer turned into rdflib's terms). With
--repeat K a cell of a round is the median of K calls one after the other (the engine's
threads and the query's pages warm), rather than one call after the other engines' turns.
Every answer's row count is compared across engines and a difference is printed. Prints
markdown tables; nothing here is a test.
"""

import argparse
import gzip
import json
import os
import platform
import signal
import statistics
import sys
import time

import nearflow

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "..", "..", "..", "..", "shared", "data", "sp2bench")
ORDER = ["q1", "q2", "q3a", "q3b", "q3c", "q4", "q5a", "q5b", "q6", "q7", "q8", "q9", "q10", "q11", "q12a", "q12b", "q12c"]
# The SPARQL 1.1 workloads of `nearflow bench sp2bench` (aggregates, a path, NOT EXISTS).
WORKLOADS = os.path.join(HERE, "..", "..", "lab", "queries", "sp2bench-sparql11")
ORDER11 = ["a1", "a2", "a3", "p1", "n1"]


def machine():
    model = "?"
    l2 = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
        with open("/sys/devices/system/cpu/cpu0/cache/index2/size") as f:
            l2 = f.read().strip()
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs, L2 {l2} per core, Python {platform.python_version()}"


class Deadline(Exception):
    pass


def _alarm(signum, frame):
    raise Deadline()


def timed(f):
    t = time.perf_counter()
    v = f()
    return time.perf_counter() - t, v


def timed_median(f, repeat):
    """`timed(f)` `repeat` times one after the other: the median time, and the last value."""
    runs = [timed(f) for _ in range(repeat)]
    return statistics.median(t for t, _ in runs), runs[-1][1]


class Worker:
    """pyoxigraph in a process of its own, so that a query past the time limit can be stopped:
    the process is killed and started again (the store loaded again)."""

    def __init__(self, data, rows):
        self.data = data
        self.start()

    def start(self):
        import subprocess

        self.p = subprocess.Popen(
            [sys.executable, __file__, "--worker", "pyoxigraph", "--data", self.data],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        line = self.p.stdout.readline().split()
        self.load_s, self.triples = float(line[1]), int(line[2])

    def run(self, text, timeout, repeat=1):
        """(seconds, rows) of the query inside the worker (the median of `repeat` calls), or
        (None, None) past `timeout`."""
        import select

        self.p.stdin.write(json.dumps({"text": text, "repeat": repeat}) + "\n")
        self.p.stdin.flush()
        ready, _, _ = select.select([self.p.stdout], [], [], timeout * repeat + 5)
        if not ready:
            self.p.kill()
            self.p.wait()
            self.start()
            return None, None
        t, n = self.p.stdout.readline().split()
        return float(t), int(n)


def worker(data):
    """The worker's loop: a query and how many calls to time (JSON) a line in, `seconds rows`
    a line out. A query that starts with FRAME is timed into a pandas DataFrame through CSV
    results."""
    import io

    import pyoxigraph as ox

    s = ox.Store()
    t, _ = timed(lambda: s.bulk_load(gzip.open(data), format=ox.RdfFormat.TURTLE))
    print(f"ready {t} {len(s)}", flush=True)
    for line in sys.stdin:
        asked = json.loads(line)
        text = asked["text"]
        if text.startswith("FRAME "):
            import pandas as pd

            def f():
                r = s.query(text[6:])
                return len(pd.read_csv(io.BytesIO(r.serialize(format=ox.QueryResultsFormat.CSV))))
        else:
            def f():
                r = s.query(text)
                if isinstance(r, bool) or type(r).__name__ == "QueryBoolean":
                    return int(bool(r))
                return sum(1 for _ in r)
        t, n = timed_median(f, asked["repeat"])
        print(f"{t} {n}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(SHARED, "sp2b-1000000.n3.gz"))
    ap.add_argument("--queries", default=os.path.join(SHARED, "queries"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--workloads", default=WORKLOADS, help="folder of the SPARQL 1.1 workloads ('' for none)")
    ap.add_argument("--only", help="run only these queries (comma-separated names)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--engines", default="nearflow,plugin,pyoxigraph,rdflib")
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the DataFrame timing")
    ap.add_argument("--repeat", type=int, default=1, help="calls of a query a cell times (their median)")
    a = ap.parse_args()
    if a.worker:
        return worker(a.data)
    engines = a.engines.split(",")
    print(f"machine: {machine()}", flush=True)
    print(f"data: {a.data}; {a.rounds} rounds; rdflib and pyoxigraph stopped after {a.timeout:.0f} s a query", flush=True)
    if a.repeat > 1:
        print(f"each cell the median of {a.repeat} calls one after the other", flush=True)
    queries = {q: open(os.path.join(a.queries, q + ".sparql")).read() for q in ORDER}
    order = list(ORDER)
    if a.workloads:
        queries.update({q: open(os.path.join(a.workloads, q + ".sparql")).read() for q in ORDER11})
        order += ORDER11
    if a.only:
        order = [q for q in order if q in a.only.split(",")]

    # Loads.
    stores = {}
    loads = {}
    if "nearflow" in engines:
        s = nearflow.Store()
        loads["nearflow"], _ = timed(lambda: s.load(a.data, format="ttl"))
        stores["nearflow"] = s
        print(f"nearflow loaded {len(s)} triples in {loads['nearflow']:.1f} s", flush=True)
    if "plugin" in engines:
        import rdflib

        g = rdflib.Graph(store="nearflow")
        # The file goes in through nearflow's loader; rdflib's own parser would add it a
        # triple at a time.
        loads["plugin"], _ = timed(lambda: g.store.inner.load(a.data, format="ttl"))
        stores["plugin"] = g
        print(f"the rdflib plugin loaded {len(g.store.inner)} triples in {loads['plugin']:.1f} s", flush=True)
    if "pyoxigraph" in engines:
        stores["pyoxigraph"] = Worker(a.data, a.rows)
        loads["pyoxigraph"] = stores["pyoxigraph"].load_s
        print(f"pyoxigraph loaded {stores['pyoxigraph'].triples} triples in {loads['pyoxigraph']:.1f} s", flush=True)
    if "rdflib" in engines:
        import rdflib

        g = rdflib.Graph()
        loads["rdflib"], _ = timed(lambda: g.parse(gzip.open(a.data), format="turtle"))
        stores["rdflib"] = g
        print(f"rdflib loaded {len(g)} triples in {loads['rdflib']:.1f} s", flush=True)

    def run(engine, text):
        s = stores[engine]
        if engine == "nearflow":
            r = s.query(text)
            return int(r) if isinstance(r, bool) else len(r)
        if engine == "pyoxigraph":
            return s.run(text, a.timeout, a.repeat)
        # rdflib's Graph.query: rdflib's engine, or through the plugin nearflow's.
        r = s.query(text)
        if r.type == "ASK":
            return int(r.askAnswer)
        return len(list(r))

    times = {e: {q: [] for q in order} for e in engines}
    rows = {e: {} for e in engines}
    signal.signal(signal.SIGALRM, _alarm)
    for rnd in range(a.rounds):
        for q in order:
            for e in engines:
                if e == "rdflib" and rnd > 0:
                    continue
                if e == "rdflib":
                    signal.setitimer(signal.ITIMER_REAL, a.timeout)
                try:
                    t, n = timed_median(lambda: run(e, queries[q]), a.repeat if e != "pyoxigraph" else 1)
                    if e == "pyoxigraph":
                        t, n = n
                except Deadline:
                    t, n = None, None
                finally:
                    if e == "rdflib":
                        signal.setitimer(signal.ITIMER_REAL, 0)
                times[e][q].append(t)
                if n is not None:
                    rows[e][q] = n
            print(f"round {rnd + 1} {q}: " + ", ".join(
                f"{e} {'—' if times[e][q][-1] is None else f'{times[e][q][-1] * 1000:.1f} ms'}"
                for e in engines if times[e][q]), flush=True)

    for q in order:
        counts = {e: rows[e].get(q) for e in engines if q in rows[e]}
        if len(set(counts.values())) > 1:
            print(f"ROWS DIFFER on {q}: {counts}")

    def med(e, q):
        ts = [t for t in times[e][q] if t is not None]
        return statistics.median(ts) if ts and len(ts) == len(times[e][q]) else None

    print()
    head = "| query | rows | " + " | ".join(f"{e} (ms)" for e in engines)
    if "pyoxigraph" in engines and "nearflow" in engines:
        head += " | pyoxigraph / nearflow"
    if "rdflib" in engines and "nearflow" in engines:
        head += " | rdflib / nearflow"
    if "rdflib" in engines and "plugin" in engines:
        head += " | rdflib / plugin"
    print(head + " |")
    print("|---" * (head.count("|")) + "|")
    for q in order:
        n = rows.get("nearflow", {}).get(q, next((rows[e][q] for e in engines if q in rows[e]), "?"))
        cells = [q, f"{n:,}" if isinstance(n, int) else str(n)]
        for e in engines:
            m = med(e, q)
            cells.append("stopped" if m is None else f"{m * 1000:.2f}" if m < 0.001 else f"{m * 1000:.1f}")
        pairs = [("pyoxigraph", "nearflow"), ("rdflib", "nearflow"), ("rdflib", "plugin")]
        for other, ours in pairs:
            if other in engines and ours in engines:
                o, t = med(other, q), med(ours, q)
                if t is None:
                    cells.append("—")
                elif o is None:
                    cells.append(f"> {a.timeout / t:.0f}")
                else:
                    cells.append(f"{o / t:.1f}")
        print("| " + " | ".join(cells) + " |")
    print()
    print("| load of the file | " + " | ".join(f"{e}: {loads[e]:.1f} s" for e in engines) + " |")

    # A large answer into pandas.
    import pandas as pd

    text = f"SELECT ?s ?p ?o WHERE {{ ?s ?p ?o }} LIMIT {a.rows}"
    frames = {}
    for rnd in range(a.rounds):
        for e in engines:
            if (e == "rdflib" and rnd > 0) or e == "plugin":
                continue
            if e == "nearflow":
                f = lambda: stores[e].query(text).to_pandas()
            elif e == "pyoxigraph":
                def f():
                    t, n = stores["pyoxigraph"].run("FRAME " + text, a.timeout)
                    if t is None:
                        raise Deadline()
                    return t, n
            else:
                def f():
                    r = stores["rdflib"].query(text)
                    return pd.DataFrame([[str(x) for x in row] for row in r], columns=[str(v) for v in r.vars])
            if e == "rdflib":
                signal.setitimer(signal.ITIMER_REAL, a.timeout)
            try:
                t, df = timed(f)
                if e == "pyoxigraph":
                    t, n = df
                else:
                    n = len(df)
                frames.setdefault(e, []).append((t, n))
            except Deadline:
                frames.setdefault(e, []).append((None, None))
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    print()
    print(f"| {a.rows:,}-row SELECT into a pandas DataFrame | rows | median s |")
    print("|---|---:|---:|")
    how = {"nearflow": "`to_pandas()` (Arrow)", "pyoxigraph": "CSV results → `pandas.read_csv`", "rdflib": "rows → `pandas.DataFrame`"}
    for e, runs in frames.items():
        ts = [t for t, _ in runs if t is not None]
        n = next((n for _, n in runs if n is not None), None)
        print(f"| {e}: {how[e]} | {n if n is not None else '—'} | {statistics.median(ts):.2f} |" if ts else f"| {e}: {how[e]} | — | stopped |")


if __name__ == "__main__":
    sys.exit(main())
