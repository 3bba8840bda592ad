# The two commands of the README. Each does all set-up on a fresh machine (scripts/setup.sh).
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: run test sanitize-test build setup gpu-test multigpu-test clean

run: build
	./$(BUILD)/tools/flexattn bench --suite quick

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)
	JOBS=$(JOBS) scripts/sanitize_test.sh

# The host tests again under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/).
sanitize-test: setup
	JOBS=$(JOBS) scripts/sanitize_test.sh

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_BUILD_PYTHON=ON >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

setup:
	@scripts/setup.sh

gpu-test:
	scripts/gpu_test.sh

# Context parallelism on several GPUs of one host (a stub until the ring can run; docs/cp.md §4).
multigpu-test:
	scripts/multigpu_test.sh

clean:
	rm -rf $(BUILD) build-asan
