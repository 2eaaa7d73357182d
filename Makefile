# Top-level entry points. README's two commands: `make demo` (the main job) and `make test`.
# Each installs what it needs first (scripts/install-deps.sh is idempotent).
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
CTEST_JOBS ?= 2

RELEASE_BUILD ?= build-release
CLANG_BUILD ?= build-clang
DEMO_BUILD ?= build-demo

.PHONY: all deps build test test-asan check-builds demo gpu-bundle gpu-check clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

# Every test this machine can run: unit, multi-process and fuzz tests (GPU tests skip (77) here),
# then the Python package's (scripts/python-test.sh: a venv in $(BUILD)/pyenv, pytest).
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(CTEST_JOBS)
	scripts/python-test.sh $(BUILD)

# The CPU tests again in an AddressSanitizer/UBSan build without CUDA (CI runs this too).
test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DMSCCLPP_USE_CUDA=OFF -DMSCCLPP_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(CTEST_JOBS) -L 'unit|mp|fuzz'

# The builds that must stay clean under -Werror besides the two above (CI builds them): gcc Release
# (GPU code included where nvcc is found) and clang (CPU-only; RelWithDebInfo).
check-builds:
	@scripts/install-deps.sh clang
	cmake -S . -B $(RELEASE_BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)
	cmake --build $(RELEASE_BUILD) -j $(JOBS)
	cmake -S . -B $(CLANG_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMSCCLPP_USE_CUDA=OFF \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ $(CMAKE_FLAGS)
	cmake --build $(CLANG_BUILD) -j $(JOBS)

# The main job (examples/collectives_demo.c): 4 ranks (GPU ranks where GPUs are present, CPU ranks
# otherwise) run allreduce, allgather and reducescatter of floats at 4 KiB, 1 MiB and 16 MiB, check
# every element and print a table of times. scripts/demo.sh builds only what the demo needs: without
# a GPU the CPU library alone, in Release, in $(DEMO_BUILD); with one the full library in $(BUILD).
demo: deps
	@JOBS=$(JOBS) scripts/demo.sh $(BUILD) $(DEMO_BUILD)

# GPU runs: build here, `make gpu-bundle` (copies what a GPU machine needs to .gpu/build), carry
# .gpu to the GPU machine and run `make gpu-check` there: every GPU test and the key
# measurements, logs under $$OUT (or gpu-logs/), a short table last.
gpu-bundle: build
	scripts/gpu-bundle.sh $(BUILD) .gpu/build

gpu-check:
	scripts/gpu-check.sh $(if $(wildcard .gpu/build),.gpu/build,$(BUILD))

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(RELEASE_BUILD) $(CLANG_BUILD) $(DEMO_BUILD)

# Installs the build (cmake --install; docs/install.md): headers, libraries, tools, tuning tables,
# pkg-config files and the CMake package under $(PREFIX). DESTDIR=... stages it (cmake reads it).
PREFIX ?= /usr/local
.PHONY: install
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)
