# Two commands do all the set-up on a fresh machine with Python 3.11 and git:
#   make run    installs what is missing (.venv) and runs the full pipeline on the embedded data
#   make test   installs what is missing (.venv) and runs the test suite
# (make test-fast: the tests not marked slow, for the edit loop; make test-timed: make test, timed,
#  into reports/bench/test_suite.json)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# Quiet, bounded, offline-friendly defaults (override on the command line).
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS ?= 120
export PREFECT_LOGGING_LEVEL ?= WARNING
export DO_NOT_TRACK ?= 1
export MLFLOW_DISABLE_TELEMETRY ?= true
export DVC_NO_ANALYTICS ?= 1
export OMP_NUM_THREADS ?= 2
# One OpenBLAS thread: its thread count enters results (tasks/numerics.py pins the CPU code paths too).
export OPENBLAS_NUM_THREADS ?= 1
# One MKL thread (torch's BLAS): with two, GCA cells run side by side in threads differ in their
# last bits from the same cells run alone (tasks/numerics.py).
export MKL_NUM_THREADS ?= 1
export NUMBA_NUM_THREADS ?= 2
# No transparent-huge-page hint from numpy: with the kernel's THP defrag at "madvise" (these machines)
# a process's first touch of a large array can wait on memory compaction; the stage and test
# processes are short-lived, so they pay it often (benchmarks/bench_hugepages.py ->
# reports/bench/numpy_hugepages.json). Memory placement only: no result changes.
export NUMPY_MADVISE_HUGEPAGE ?= 0

.PHONY: run test test-fast test-timed install install-browser bench bench-quick clean-outputs data reproduce

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first, pinned: an unpinned torch pulls a multi-GB CUDA build.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[test,text,ratings,flower]"
	# warm numba's cache once (the first `import umap` compiles for ~50 s)
	$(BIN)/python -c "import umap" 2>/dev/null || true
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/veilbench run

# Headless Chromium (Debian's package) for the browser tests of the HTML report and of the offline
# `dvc plots show` page; those tests skip with a message where it is missing (no root, no registry).
install-browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  ((apt-get install -y -q chromium || (apt-get update -q && apt-get install -y -q chromium)) >/dev/null 2>&1) || \
	  echo "install-browser: could not install chromium; the browser tests will be skipped"

# The suite on pytest-xdist workers, one test file per worker at a time (module-scoped fixtures are
# built once); tests/conftest.py orders the files, those with slow tests first (kept by
# --no-loadscope-reorder). `make test` runs TEST_WORKERS = 3 workers on the 2 cores: its end-to-end
# tests spend much of their time waiting on servers and background processes (Prefect, DVC's queue
# worker, Ray, Flower), and with two workers the CPU stood idle about a tenth of the run
# (benchmarks/bench_test_suite.py records both). `make test-fast` (CPU-bound unit tests) runs FAST_WORKERS = 2.
TEST_WORKERS ?= 3
FAST_WORKERS ?= 2
# Python writes its bytecode caches, as in a user's shell, even where the environment turns that off
# (PYTHONDONTWRITEBYTECODE, common in containers): the end-to-end tests then check that DVC ignores
# them (.dvcignore), and the suite's ~100 Python processes do not each recompile the project.
PYTEST = PYTHONDONTWRITEBYTECODE= PREFECT_HOME=$$(mktemp -d) $(BIN)/python -m pytest -q --dist loadfile --no-loadscope-reorder

test: $(STAMP)
	-@$(MAKE) --no-print-directory install-browser
	$(PYTEST) -n $(TEST_WORKERS)

# The edit loop: every test not marked slow.
test-fast: $(STAMP)
	$(PYTEST) -n $(FAST_WORKERS) -m "not slow"

# `make test` timed, with pytest's tally: reports/bench/test_suite.json (benchmarks/bench_test_suite.py).
test-timed: $(STAMP)
	$(BIN)/python benchmarks/bench_test_suite.py

# Real data for params.paper.yaml, from Debian's archive (nothing is downloaded at run time):
# dataset-fashion-mnist (Zalando's Fashion-MNIST, licence Expat/MIT) → /usr/share/datasets/fashion-mnist.
FASHION_DIR := /usr/share/datasets/fashion-mnist
data:
	@if [ -f $(FASHION_DIR)/train-images-idx3-ubyte.gz ]; then echo "Fashion-MNIST present in $(FASHION_DIR)"; \
	elif [ -e data/raw/fashion_mnist ] || [ -e data/raw/fashion_mnist.npz ]; then echo "Fashion-MNIST present in data/raw/"; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist; \
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo apt-get update -qq && sudo apt-get install -y -qq dataset-fashion-mnist; \
	else echo "make data: installing Debian's dataset-fashion-mnist needs root (run: sudo apt-get install dataset-fashion-mnist)," \
	  "or put the four Fashion-MNIST IDX files (train-images-idx3-ubyte.gz, ...) in data/raw/fashion_mnist/" >&2; exit 1; fi

# The papers' settings on real data (params.paper.yaml) into runs/paper/, one sweep at a time, each
# sweep's CPU hours into runs/paper/cpu.json (flows/paper_reproduce.py); hours on 2 cores. A rerun
# continues where an interrupted one stopped (finished cells are reused). FAMILIES="dc anchornoise"
# or SWEEPS="paper-dc-fmnist-rq4 …" select sweeps (default: all); WORKERS=N local Dask processes;
# DASK_ADDRESS=tcp://host:8786 sends the cells to an existing Dask cluster.
WORKERS ?= 2
DASK_ADDRESS ?=
FAMILIES ?=
SWEEPS ?=
reproduce: $(STAMP) data
	$(BIN)/python -m flows.paper_reproduce --params params.paper.yaml --root runs/paper --workers $(WORKERS) \
	  $(foreach f,$(FAMILIES),--family $(f)) $(foreach s,$(SWEEPS),--sweep $(s)) \
	  $(if $(DASK_ADDRESS),--dask-address $(DASK_ADDRESS))

# Benchmarks write JSON to reports/bench/. Full sizes take hours on 2 cores; bench-quick takes minutes.
bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done
	# the FL engines on unequal clients too (reports/bench/fl_rounds_longtail.json; Flower's rows are the IID file's)
	$(BIN)/python benchmarks/bench_fl_rounds.py --partition longtail --no-flower

# Quick runs write to reports/bench/quick/, never over the full-size results in reports/bench/.
bench-quick: $(STAMP)
	for b in benchmarks/bench_*.py; do n=$$(basename $$b .py); \
	  case $$b in *overhead*) ;; *) $(BIN)/python $$b --quick --out reports/bench/quick/$${n#bench_}.json || exit 1 ;; esac; done

# What a run writes that git does not track: the DVC-cached stage outputs (CACHED_OUTS, the `outs` of
# dvc.yaml's cached stages; each folder keeps the .gitignore DVC wrote there, which git tracks), evaluate's
# timings, the MLflow store with its artifacts (mlruns/), the run log and DVC's plots page. The committed
# records (reports/) and the DVC cache (.dvc/cache) stay; `dvc checkout` restores the outputs from it.
# tests/test_papercuts.py checks CACHED_OUTS against dvc.yaml.
CACHED_OUTS := data/prepare data/embed data/release data/integrate data/attack
RUN_FILES := data/evaluate mlflow.db mlruns reports/run.log reports/compare dvc_plots
clean-outputs:
	for d in $(CACHED_OUTS); do if [ -d $$d ]; then find $$d -mindepth 1 -maxdepth 1 ! -name .gitignore -exec rm -rf {} +; fi; done
	rm -rf $(RUN_FILES)
