# gradd's two entry points for a fresh machine: `make demo` and `make test`.
# Both install what is missing (scripts/install_deps.sh), then build.

BUILD ?= build
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")
# Expanded when used, after `deps` may have installed ccache.
LAUNCHER = $(shell command -v ccache >/dev/null 2>&1 && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
export CCACHE_SLOPPINESS := pch_defines,time_macros,include_file_mtime,include_file_ctime

PYTHON ?= python3

.PHONY: deps configure build demo test consumer pytest wheel python-install sanitize bench clean

deps:
	@scripts/install_deps.sh

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) -G "$(GENERATOR)" \
	  -DCMAKE_BUILD_TYPE=Release $(LAUNCHER)

build: configure
	@cmake --build $(BUILD) -j $$(nproc)

demo: build
	$(BUILD)/gradd_train
	PYTHONPATH=$(abspath $(BUILD))/python $(PYTHON) examples/train.py
	$(BUILD)/gradd launch --nproc 2 --config config/launch_demo.yaml -- \
	  $(BUILD)/gradd_rank config/launch_demo.yaml 3
	@$(MAKE) --no-print-directory python-install

test: build
	$(BUILD)/gradd_tests --reporter console
	@$(MAKE) --no-print-directory consumer
	@$(MAKE) --no-print-directory pytest
	@$(MAKE) --no-print-directory wheel
	@$(MAKE) --no-print-directory python-install

# `import gradd` in $(PYTHON) from any folder: a gradd.pth in its
# site-packages (or, where that is not writable, the user's) names
# $(BUILD)/python, where the package is built.
python-install: build
	@site=$$($(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
	  [ -w "$$site" ] || site=$$($(PYTHON) -m site --user-site); \
	  mkdir -p "$$site" && echo "$(abspath $(BUILD))/python" > "$$site/gradd.pth" && \
	  echo "gradd: $$site/gradd.pth -> $(abspath $(BUILD))/python"

# The Python package (python/), as built into $(BUILD)/python.
pytest: build
	PYTHONPATH=$(abspath $(BUILD))/python $(PYTHON) -m pytest -q -rs -p no:cacheprovider python/tests

# `pip install .` into a fresh virtual environment, and a backward there.
wheel: build
	@scripts/wheel_check.sh $(BUILD)

# gradd as a user's project sees it: install into a fresh staging prefix,
# build examples/consumer against the installed package, run it.
consumer: configure
	@cmake --build $(BUILD) -j $$(nproc) --target gradd
	@rm -rf $(BUILD)/install
	@cmake --install $(BUILD) --prefix $(abspath $(BUILD))/install >/dev/null
	@cmake -S examples/consumer -B $(BUILD)/consumer -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=Release \
	  $(LAUNCHER) -DCMAKE_PREFIX_PATH=$(abspath $(BUILD))/install >/dev/null
	@cmake --build $(BUILD)/consumer
	$(BUILD)/consumer/gradd_consumer

# The suite under AddressSanitizer (with LeakSanitizer) and
# UndefinedBehaviorSanitizer: gradd, its tests and their child programs are
# instrumented, libtorch is not. Not in CI (a second full build).
SANITIZE_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
sanitize: deps
	@test -f build-asan/CMakeCache.txt || cmake -S . -B build-asan -G "$(GENERATOR)" \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS="$(SANITIZE_FLAGS)" $(LAUNCHER)
	@cmake --build build-asan -j $$(nproc) --target gradd_tests
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 build-asan/gradd_tests

bench: build
	$(BUILD)/gradd-bench --model deep-mlp --device cpu --mode both

clean:
	rm -rf $(BUILD)
