"""Write docs/settings.md from the settings' own descriptions.

    .venv/bin/python scripts/settings_doc.py

tests/test_docs.py fails when the page and the code disagree.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import BaseModel

from citewell.config import Settings

PAGE = Path(__file__).resolve().parents[1] / "docs" / "settings.md"

HEADER = """# Settings

Every setting is read from an environment variable `CITEWELL_<NAME>`; a setting inside a group
joins the group and the name with two underscores (`CITEWELL_RETRIEVE__EMBEDDER=use`). The
command line's `--data-dir`, `--host` and `--port` override their variables. No default reaches
the network. This page is generated from the code by `scripts/settings_doc.py`.

| variable | default | meaning |
|---|---|---|
"""


def rows(model: type[BaseModel], prefix: str) -> list[str]:
    out = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out.extend(rows(annotation, f"{prefix}{name.upper()}__"))
            continue
        if field.default_factory is not None:
            default = f"`{field.default_factory.__name__}()`"
        elif isinstance(field.default, Path):
            default = f"`{field.default}`"
        else:
            default = f"`{field.default!r}`"
        out.append(f"| `{prefix}{name.upper()}` | {default} | {field.description} |")
    return out


def render() -> str:
    return HEADER + "\n".join(rows(Settings, "CITEWELL_")) + "\n"


if __name__ == "__main__":
    PAGE.write_text(render())
    sys.stdout.write(f"wrote {PAGE}\n")
