# Thin wrapper: scripts/setup installs, CMake builds, CTest tests.
BUILD ?= build
JOBS  ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release -DFPGUARD_WERROR=ON

.PHONY: all setup build run test bench format clean
all: build

setup:
	@scripts/setup

build: setup
	@cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The main job on a shipped example (for now: the table of every format).
run: build
	$(BUILD)/fpguard finfo --all

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 1500

bench: build
	bench/run $(BUILD)

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp')

clean:
	rm -rf $(BUILD)
