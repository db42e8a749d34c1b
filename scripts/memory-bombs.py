#!/usr/bin/env python3
"""The memory rows of the hostile corpus against a `nearflow serve` binary, each case on a
fresh server over a fresh copy of one store: the status, the seconds, and how far the server's
resident peak (VmHWM) rose above its resident size once started.

    scripts/memory-bombs.py NEARFLOW [LIMIT_MIB]

The store: 40,000 subjects, each with a number, a name and a link to one hub (so a path's
closure both ways reaches every subject). A server that passes 8 GiB is stopped (the row
then says so), and a case not answered in 60 s is recorded as such."""
import os, shutil, signal, socket, subprocess, sys, tempfile, time, urllib.parse

BIN = sys.argv[1]
LIMIT = int(sys.argv[2]) if len(sys.argv) > 2 else 256
SUBJECTS = 40_000
CAP_KIB = 8 << 20


def doubling(steps):
    q = 'BIND("0123456789abcdef" AS ?x0) '
    for k in range(1, steps + 1):
        q += f"BIND(CONCAT(?x{k-1}, ?x{k-1}) AS ?x{k}) "
    return q


many = lambda v: ", ".join([v] * 2000)
rep7 = "?x"
for _ in range(7):
    rep7 = f'REPLACE({rep7}, ".", "$0$0$0$0")'
CASES = [
    ("CONCAT doubled 28 times", "query", f"SELECT (STRLEN(?x28) AS ?n) {{ {doubling(28)} }}"),
    ("2,000-argument CONCAT of a 1 MiB value", "query",
     f"SELECT (STRLEN(?y) AS ?n) {{ {doubling(16)} BIND(CONCAT({many('?x16')}) AS ?y) }}"),
    ("2,000-argument CONCAT per row", "query",
     f"SELECT (MAX(STRLEN(?y)) AS ?n) {{ ?s <http://ex/name> ?x BIND(CONCAT({many('?x')}) AS ?y) }}"),
    ("REPLACE growing a 1 MiB value a millionfold", "query",
     f'SELECT (STRLEN(?y) AS ?n) {{ {doubling(16)} BIND(REPLACE(?x16, ".", STR(?x16)) AS ?y) }}'),
    ("REPLACE ×4 seven times per row, upper-cased", "query",
     f"SELECT (MAX(STRLEN(?y)) AS ?n) {{ ?s <http://ex/name> ?x BIND(UCASE({rep7}) AS ?y) }}"),
    ("closure of a link both ways", "query",
     "SELECT (COUNT(*) AS ?n) { ?a (<http://ex/next>|^<http://ex/next>)* ?b }"),
    ("closure of negated sets both ways", "query",
     "SELECT (COUNT(*) AS ?n) { ?a (!<http://ex/none>|^!<http://ex/none>)* ?b }"),
    ("update: 480 k solutions, 4.8 M new quads", "update",
     "INSERT { " + " ".join(f"?s <http://ex/w{t}> ?k ." for t in range(10))
     + " } WHERE { ?s <http://ex/v> ?o VALUES ?k { " + " ".join(map(str, range(1, 13))) + " } }"),
    ("LOAD of 1.5 M statements", "update", "LOAD <file://{load}/big.nt>"),
]


def request(port, kind, text, wait):
    body = text.encode()
    ct = "application/sparql-query" if kind == "query" else "application/sparql-update"
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(wait)
    s.sendall(f"POST /{kind} HTTP/1.1\r\nHost: localhost\r\nContent-Type: {ct}\r\n"
              f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        return None
    finally:
        s.close()
    line = out.split(b"\r\n", 1)[0].decode(errors="replace")
    parts = line.split(" ")
    head, _, rest = out.partition(b"\r\n\r\n")
    return (parts[1] if len(parts) > 1 else "?"), rest[:160].decode(errors="replace")


def kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for l in f:
            if l.startswith(field):
                return int(l.split()[1])
    return 0


def main():
    work = tempfile.mkdtemp(prefix="nearflow-bombs-")
    load = os.path.join(work, "load")
    os.makedirs(load)
    with open(os.path.join(work, "s.nt"), "w") as f:
        for i in range(SUBJECTS):
            f.write(f'<http://ex/s{i}> <http://ex/v> "{i}"^^<http://www.w3.org/2001/XMLSchema#integer> .\n'
                    f'<http://ex/s{i}> <http://ex/name> "n{i}" .\n<http://ex/s{i}> <http://ex/next> <http://ex/hub> .\n')
    with open(os.path.join(load, "big.nt"), "w") as f:
        for i in range(1_500_000):
            f.write(f'<http://ex/l{i}> <http://ex/p> "value {i}" .\n')
    store = os.path.join(work, "base.nfs")
    subprocess.run([BIN, "load", "--quiet", "--save", store, os.path.join(work, "s.nt")], check=True)
    print(f"{BIN}, --memory-limit {LIMIT}MiB, --timeout 120s")
    print("| case | status | seconds | resident peak above start (MiB) |")
    print("|---|---|---:|---:|")
    for name, kind, text in CASES:
        d = os.path.join(work, "case")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        shutil.copy(store, os.path.join(d, "s.nfs"))
        with socket.socket() as p:
            p.bind(("127.0.0.1", 0))
            port = p.getsockname()[1]
        srv = subprocess.Popen([BIN, "serve", "--store", os.path.join(d, "s.nfs"), "--bind", f"127.0.0.1:{port}",
                                "--memory-limit", f"{LIMIT}MiB", "--timeout", "120s", "--load-dir", load],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(600):
            try:
                if request(port, "query", "ASK {}", 5):
                    break
            except OSError:
                time.sleep(0.05)
        start = kib(srv.pid, "VmRSS:")
        t = time.time()
        import threading
        got = {}
        th = threading.Thread(target=lambda: got.setdefault("r", request(port, kind, text.replace("{load}", load), 60)))
        th.start()
        capped = False
        while th.is_alive():
            th.join(0.1)
            if srv.poll() is not None:
                break
            if kib(srv.pid, "VmRSS:") > CAP_KIB:
                capped = True
                break
        took = time.time() - t
        peak = (kib(srv.pid, "VmHWM:") - start) >> 10 if srv.poll() is None else -1
        r = got.get("r")
        if capped:
            status = "stopped by the script past 8 GiB"
        elif srv.poll() is not None:
            status = f"the server died ({srv.returncode})"
        elif r is None:
            status = "no answer in 60 s"
        else:
            status = r[0] + (" memory limit" if "memory limit" in r[1] else " time limit" if "time limit" in r[1] else "")
        print(f"| {name} | {status} | {took:.1f} | {peak} |", flush=True)
        srv.send_signal(signal.SIGKILL)
        srv.wait()
    shutil.rmtree(work, ignore_errors=True)


main()
