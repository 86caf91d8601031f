"""Schemathesis against a real server: every operation of the OpenAPI spec, 0 server errors.

A server is started on an empty data folder (``citewell serve --demo --port 0``, the fast
embedder) and given something to find: the demo bucket, a stored answer, an uploaded file, a key
and a signed link, whose ids go to schemathesis as parameter values, so that requests reach past
the 404s. Schemathesis then runs its coverage, fuzzing and stateful phases with the
``not_a_server_error`` check. The requests are counted on the server's side, from its access log:
by status class, and by route for the signed-link route. Exits non-zero on any 5xx.

    make fuzz                                  # installs schemathesis, then runs this
    .venv/bin/python bench/fuzz.py --max-examples 100
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from common import machine, reproduce_line, table

CITEWELL = str(Path(sys.executable).with_name("citewell"))
SCHEMATHESIS = str(Path(sys.executable).with_name("st"))
_ACCESS = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})')


def start(folder: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The server, its output (access log included) going to ``log``, and its URL."""
    env = {**os.environ, "CITEWELL_RETRIEVE__EMBEDDER": "use"}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [CITEWELL, "serve", "--demo", "--port", "0", "--data-dir", str(folder / "data")],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if found := re.search(r"citewell is serving at (\S+)", log.read_text()):
            return process, found.group(1)
        time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"the server did not start:\n{log.read_text()}")


def known_values(url: str) -> dict[str, str]:
    """Ids of real objects, for the operations' path parameters."""
    with httpx.Client(base_url=url, timeout=120) as client:
        found = client.post("/v1/search", json={"query": "refund", "buckets": ["demo"]}).json()
        hit = found["data"][0]
        answer = client.post("/v1/responses", json={"input": "What is the refund policy?"}).json()
        file = client.post(
            "/v1/files",
            files={"file": ("note.txt", b"Lockers close at ten.")},
            data={"purpose": "assistants"},
        ).json()
        key = client.post("/v1/keys", json={"permissions": ["ask"], "name": "fuzz"}).json()
    return {
        "bucket": "demo",
        "vector_store_id": hit["bucket_id"],
        "source_id": hit["source_id"],
        "response_id": answer["id"],
        "file_id": file["id"],
        "key_id": key["id"],
        "token": hit["access_url"].rsplit("/", 1)[1],
        "name": "citewell-agent",
        "model": "citewell-agent",
    }


def schemathesis(
    url: str, folder: Path, parameters: dict[str, str], max_examples: int, workers: int
) -> subprocess.CompletedProcess[str]:
    """One run over every operation; ``parameters`` fixes path parameters to real ids (none:
    schemathesis makes them up, which is how signed-link tokens get mangled)."""
    lines = [f"generation.max-examples = {max_examples}", "[parameters]"]
    lines += [f'"{name}" = "{value}"' for name, value in parameters.items()]
    config = folder / "schemathesis.toml"
    config.write_text("\n".join(lines) + "\n")
    command = [SCHEMATHESIS, "--config-file", str(config), "run", f"{url}/openapi.json"]
    command += ["--checks", "not_a_server_error", "--workers", str(workers)]
    command += ["--request-timeout", "120", "--suppress-health-check", "all"]
    return subprocess.run(command, capture_output=True, text=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-examples", type=int, default=60, help="per operation and phase")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="citewell-fuzz-") as name:
        folder = Path(name)
        log = folder / "server.log"
        process, url = start(folder, log)
        runs: list[tuple[str, subprocess.CompletedProcess[str], float]] = []
        try:
            values = known_values(url)
            for label, parameters in (("known ids", values), ("generated ids", {})):
                started = time.perf_counter()
                run = schemathesis(url, folder, parameters, args.max_examples, args.workers)
                runs.append((label, run, time.perf_counter() - started))
        finally:
            process.terminate()
            process.wait(timeout=60)
        text = log.read_text()
        requests = [m for m in map(_ACCESS.search, text.splitlines()) if m]
        traceback = "Traceback" in text
    statuses = Counter(m["status"][0] + "xx" for m in requests)
    links = Counter(m["status"] for m in requests if m["path"].startswith("/v1/links/"))
    server_errors = [
        f"{m['method']} {m['path'][:80]} {m['status']}" for m in requests if m["status"] >= "500"
    ]
    print(machine())
    rows = [
        ["requests", len(requests)],
        *([f"{kind} responses", statuses[kind]] for kind in ("2xx", "3xx", "4xx", "5xx")),
        ["signed-link route (by status)", dict(sorted(links.items()))],
        ["tracebacks in the server log", "yes" if traceback else "none"],
        *(
            [f"schemathesis, {label}: exit code, seconds", f"{run.returncode}, {seconds:.0f}"]
            for label, run, seconds in runs
        ),
    ]
    print(table(rows, ["figure", "value"]))
    for line in server_errors[:20]:
        print("5xx:", line)
    for label, run, _ in runs:
        summary = [
            line for line in run.stdout.splitlines() if "generated" in line or "rror" in line
        ]
        print(f"{label}:", " / ".join(line.strip() for line in summary[-4:]))
    print(reproduce_line())
    sys.exit(1 if server_errors or traceback else 0)


if __name__ == "__main__":
    main()
