# Thin wrapper over CMake. Build dirs: build/ (RelWithDebInfo), build-asan/
# (Debug + ASan/UBSan), build-fuzz/ (clang + libFuzzer).
#   make demo    build, then run scripts/demo.sh
#   make test    build, all tests, then unit + cli tests again under ASan/UBSan
#   make fuzz    libFuzzer target build-fuzz/fuzz_import
#   make rules   regenerate rules/taso.rules and prove it
#   make install PREFIX=DIR / make uninstall PREFIX=DIR   (docs/api.md)
.DEFAULT_GOAL := build
.PHONY: deps build test test-full asan demo fuzz fuzz-run fuzz-mutants clean bench rules install uninstall
PREFIX ?= /usr/local
FUZZ_SECONDS ?= 30

NPROC := $(shell nproc 2>/dev/null || echo 2)
CTEST_JOBS ?= 2
MAKEFLAGS += --no-print-directory
export UBSAN_OPTIONS ?= print_stacktrace=1:halt_on_error=1

# A build dir counts as configured once generation succeeded (a failed
# configure leaves a CMakeCache.txt but no build files).
configured = test -f $(1)/Makefile -o -f $(1)/build.ninja

deps:
	@bash scripts/deps.sh

build: deps
	@$(call configured,build) || cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build -j$(NPROC)

test: build
	ctest --test-dir build --output-on-failure -j$(CTEST_JOBS)
	@$(MAKE) --no-print-directory asan
	@$(MAKE) --no-print-directory fuzz-run

# Every zoo model at full size (and its batch-16 export) against ONNX Runtime.
test-full: build
	TSOPT_ZOO_FULL=1 ctest --test-dir build --output-on-failure -R '^models/zoo'

# Unit and command-line tests again, built with ASan + UBSan (leaks included).
# cli/generate (3-operator rule generation, minutes under ASan) is left out:
# unit/test_generate runs the same generator code under ASan at 1-2 operators.
asan: deps
	@$(call configured,build-asan) || cmake -S . -B build-asan -DTSOPT_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
	cmake --build build-asan -j$(NPROC)
	ctest --test-dir build-asan --output-on-failure -j$(CTEST_JOBS) -R '^(unit|cli)/' -E '^cli/generate$$'

# bin/tsopt, include/tsopt.h, lib/libtsopt.so*, lib/pkgconfig/tsopt.pc and
# the Python package (docs/api.md); uninstall removes what install put there.
install: build
	cmake --install build --prefix $(abspath $(PREFIX))

uninstall:
	bash scripts/uninstall.sh build $(abspath $(PREFIX))

demo: build
	bash scripts/demo.sh

# rules/taso.rules: the rules of up to 3 operators the generator keeps after
# its pruning (every dropped rule is derived from kept ones: 891 today),
# kept where `tsopt verify` proves it (docs/taso.md; 4 operators take
# minutes and 2 GB).  Seeded and thread-count independent: an unchanged
# generator rewrites the file byte for byte (git diff shows what changed).
# Verify exits non-zero if any rule fails, after writing the proved ones.
# The file is embedded in the library (ts_taso_rules): rebuilt after.
rules: build
	cd build && ./tsopt generate --max-ops 3 --threads 2 --seed 1 -o taso-3ops-raw.rules
	cd build && ./tsopt verify taso-3ops-raw.rules --threads 2 --keep-proved ../rules/taso.rules
	cmake --build build -j$(NPROC)

# tsopt vs ONNX Runtime on the zoo: writes BENCHMARKS.md and bench/ratios.png
# (BENCH_ARGS="--batch16" adds batch 16; extra ONNX files may be listed there).
# Then the real-model set (PyTorch exports cached in build/real_models,
# bench/real_models.py): the "Real models" section; BENCH_ARGS="--no-real"
# skips it, "--real-only" runs only it.
bench: build
	/usr/bin/python3 bench/bench.py $(BENCH_ARGS)

# The fuzzer's mutation score (docs/fuzz.md): 26 planted bugs, one build and
# one campaign each (a benchmark: up to ~2 hours on 2 cores).
fuzz-mutants: deps
	/usr/bin/python3 bench/fuzz_mutants.py $(MUTANT_ARGS)

fuzz: deps
	@$(call configured,build-fuzz) || cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang \
	  -DTSOPT_FUZZ=ON -DTSOPT_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
	cmake --build build-fuzz -j$(NPROC) --target fuzz_import
	@echo "run: build-fuzz/fuzz_import -max_total_time=60 CORPUS_DIR"

# A short fuzzing session of the importer, seeded with tests/fuzz/corpus.
fuzz-run: fuzz
	@mkdir -p build-fuzz/corpus && cp -n tests/fuzz/corpus/* build-fuzz/corpus/ 2>/dev/null || true
	@rc=0; build-fuzz/fuzz_import -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -malloc_limit_mb=1024 \
	  -print_final_stats=1 build-fuzz/corpus > build-fuzz/fuzz.log 2>&1 || rc=$$?; \
	  tail -n 12 build-fuzz/fuzz.log; exit $$rc

clean:
	rm -rf build build-asan build-fuzz
