#!/usr/bin/env python3
"""Two `nearflow serve` binaries over one store, side by side: the SP²Bench queries sent to
each in interleaved rounds (the order of the two reversed every round), each answer read
whole; per query, the ratio NEW ÷ OLD of each round's times and its median, and whether the
two answers had as many rows.

    scripts/compare-servers.py OLD NEW STORE [ROUNDS] [QUERIES_DIR]

Both servers open STORE read-only (`--read-only`), on loopback, with their default limits.
Queries a server refuses or times out are reported as such, not timed."""
import http.client, os, socket, statistics, subprocess, sys, time

OLD, NEW, STORE = sys.argv[1:4]
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 7
QDIR = sys.argv[5] if len(sys.argv) > 5 else os.path.join(
    os.path.dirname(__file__), "..", "..", "shared", "data", "sp2bench", "queries")


def port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ask(p, text, wait=600):
    c = http.client.HTTPConnection("127.0.0.1", p, timeout=wait)
    t = time.perf_counter()
    c.request("POST", "/query", body=text.encode(),
              headers={"Content-Type": "application/sparql-query", "Accept": "text/csv"})
    r = c.getresponse()
    body = r.read()
    took = time.perf_counter() - t
    c.close()
    # The answer's rows (CSV lines), as the two servers' answers are compared.
    return str(r.status), took, body.count(b"\n")


def start(binary):
    p = port()
    proc = subprocess.Popen([binary, "serve", "--store", STORE, "--read-only", "--bind", f"127.0.0.1:{p}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(1200):
        try:
            if ask(p, "ASK {}", 5)[0] == "200":
                return proc, p
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{binary} did not start")


def main():
    names = sorted(f[:-7] for f in os.listdir(QDIR) if f.endswith(".sparql"))
    queries = {n: open(os.path.join(QDIR, n + ".sparql")).read() for n in names}
    servers = [start(OLD), start(NEW)]
    try:
        for n, q in queries.items():  # one warm-up each
            for _, p in servers:
                ask(p, q)
        times = {n: ([], []) for n in names}
        sizes = {n: set() for n in names}
        bad = {}
        for r in range(ROUNDS):
            order = [0, 1] if r % 2 == 0 else [1, 0]
            for n, q in queries.items():
                for i in order:
                    status, took, size = ask(servers[i][1], q)
                    if status != "200":
                        bad[n] = status
                        continue
                    times[n][i].append(took)
                    sizes[n].add(size)
        print(f"old {OLD}\nnew {NEW}\nstore {STORE}, {ROUNDS} interleaved rounds\n")
        print("| query | old median (ms) | new median (ms) | new ÷ old, median of rounds (range) | same rows |")
        print("|---|---:|---:|---:|---|")
        for n in names:
            if n in bad:
                print(f"| {n} | | | status {bad[n]} | |")
                continue
            o, w = times[n]
            ratios = [b / a for a, b in zip(o, w)]
            print(f"| {n} | {statistics.median(o)*1e3:.1f} | {statistics.median(w)*1e3:.1f} | "
                  f"{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f}) | "
                  f"{'yes' if len(sizes[n]) == 1 else 'no: ' + str(sorted(sizes[n]))} |", flush=True)
    finally:
        for proc, _ in servers:
            proc.kill()
            proc.wait()


main()
