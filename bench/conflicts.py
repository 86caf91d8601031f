"""What looking for sources that disagree costs an answer: p50 and p95 of whole answers with
``CITEWELL_READ__CONFLICTS`` on and off, question by question in turn, in one process.

Data: ``citewell eval conflicts``'s questions (``evaluate.loaders.load_conflicts``: planted older
copies of XQuAD and SQuAD 2.0 paragraphs, RGB's counterfactual pairs, ordinary XQuAD questions),
the first ``--limit`` per language, their documents ingested with their effective dates into a
fresh library (e5-small, 1 thread, the trained reader). Both engines read the same store; each
question is asked of one, then the other, so that the machine's noise falls on both alike.

    .venv/bin/python bench/conflicts.py --limit 40
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import time
from pathlib import Path

import anyio

from citewell.config import ReadSettings, RetrieveSettings, Settings
from citewell.engine import Engine
from citewell.evaluate.loaders import load_conflicts, uploadable
from citewell.events import Question
from citewell.library import Library
from citewell.model import Agent, Answer, Principal
from common import evaldata_dir, machine, percentile, reproduce_line, table


async def ask(engine: Engine, question: Question) -> Answer:
    return await engine.ask(question, agent=Agent(), principal=Principal.local())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=40, help="questions per language")
    args = parser.parse_args()
    print(f"# bench/conflicts.py — {time.strftime('%Y-%m-%d')} — {machine()}")
    data = load_conflicts(evaldata_dir(), "dev").select(limit=args.limit)
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(
            data_dir=Path(folder),
            retrieve=RetrieveSettings(threads=1),
            read=ReadSettings(reader="citewell-reader", threads=1),
        )
        with Library.open(settings) as library:
            ids = {}
            for slug in sorted({bucket for bucket, _ in data.documents}):
                ids[slug] = library.create_bucket(slug).id
            for (slug, filename), document in sorted(data.documents.items()):
                date = document.effective_date
                library.ingest(
                    uploadable(document.text).encode(),
                    filename=filename,
                    bucket=slug,
                    media_type="text/plain",
                    effective_date=dt.date.fromisoformat(date) if date else None,
                )
            off = settings.model_copy(
                update={"read": settings.read.model_copy(update={"conflicts": False})}
            )
            with Library.open(off) as unread:
                engines = {"on": Engine.open(library), "off": Engine.open(unread)}
                times: dict[str, list[float]] = {"on": [], "off": []}
                flagged = 0
                for case in data.cases:
                    question = Question(case.question, bucket_ids=(ids[case.bucket],))
                    for name, engine in engines.items():
                        started = time.perf_counter()
                        answer = anyio.run(ask, engine, question)
                        times[name].append((time.perf_counter() - started) * 1000)
                        if name == "on":
                            flagged += bool(answer.conflict_sides())
    rows = [
        [name, len(ms), round(percentile(ms, 50), 1), round(percentile(ms, 95), 1)]
        for name, ms in times.items()
    ]
    print(table(rows, ["conflict detection", "answers", "p50 ms", "p95 ms"]))
    ratio = percentile(times["on"], 50) / percentile(times["off"], 50)
    found = f"answers with a conflict found: {flagged} of {len(data.cases)}"
    print(f"\np50 on / off: {ratio:.3f}; {found}")
    print("\n" + reproduce_line())


if __name__ == "__main__":
    main()
