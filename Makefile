# cinfer top-level Makefile: wraps CMake/ctest. See README.md.
#   make run   - set-up + Release build + `cinfer serve` on the default model (prints a curl command)
#   make test  - set-up + every test: Release ctest (unit + integration),
#                the unit tests again under ASan+UBSan, and the fuzzers briefly
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 20
CMAKE ?= cmake

.PHONY: all deps pydeps build run test test-release test-asan fuzz bench clean

all: build

deps:
	@scripts/setup-deps.sh

pydeps: deps
	@scripts/setup-python.sh

build: deps
	$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
	$(CMAKE) --build build -j$(JOBS)

run: build
	@scripts/run-server.sh

test: deps pydeps test-release test-asan fuzz
	@echo "make test: all suites passed"

test-release: build pydeps
	ctest --test-dir build --output-on-failure -j$(JOBS)

test-asan: deps
	$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCINFER_SANITIZE=ON >/dev/null
	$(CMAKE) --build build-asan -j$(JOBS) --target unit_tests
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir build-asan --output-on-failure -j$(JOBS) -L unit -LE kv_variant

fuzz: deps
	CC=clang $(CMAKE) -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCINFER_FUZZ=ON >/dev/null
	$(CMAKE) --build build-fuzz -j$(JOBS) --target fuzzers
	scripts/run-fuzzers.sh build-fuzz $(FUZZ_SECONDS) $(JOBS)

clean:
	rm -rf build build-asan build-fuzz
