# Thin wrapper: scripts/setup installs, CMake builds, CTest tests.
BUILD ?= build
JOBS  ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release -DFPGUARD_WERROR=ON

.PHONY: all setup configure build cli run install test bench bench-real format clean
all: build

setup:
	@scripts/setup $(BUILD)

configure: setup
	@cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS) >/dev/null

# Everything: the CLI, the tests and the benchmarks.
build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Only the CLI (what `make run` and `make install` need: no test or bench target).
cli: configure
	@cmake --build $(BUILD) -j $(JOBS) --target fpguard

# The main job on a shipped example: where does float16 break this model, and why?
# Then the fix: plan which nodes stay float32, convert, and check the converted model.
# (check exits 1 for a FAIL verdict, which is the expected first diagnosis here.)
EXAMPLE = examples/superres
run: cli
	$(BUILD)/fpguard check $(EXAMPLE)/model.onnx --inputs $(EXAMPLE)/inputs \
	  --precision float16,bfloat16 || test $$? -eq 1
	$(BUILD)/fpguard plan $(EXAMPLE)/model.onnx --inputs $(EXAMPLE)/inputs --precision float16 \
	  -o $(BUILD)/example.plan.json
	$(BUILD)/fpguard convert $(EXAMPLE)/model.onnx --plan $(BUILD)/example.plan.json \
	  --keep-io-types --inputs $(EXAMPLE)/inputs -o $(BUILD)/example_fp16.onnx
	$(BUILD)/fpguard check $(BUILD)/example_fp16.onnx --inputs $(EXAMPLE)/inputs --precision float16

# `fpguard` into $(PREFIX)/bin and, where pybind11 is installed, the Python package into
# $(PREFIX)/lib/python3.X/site-packages/fpguard (for the default prefix that is Debian
# python3's user site: `import fpguard` just works; docs/python.md). No root needed for the
# default; for a system-wide copy see docs/python.md.
PREFIX ?= $(HOME)/.local
install: configure
	@cmake --build $(BUILD) -j $(JOBS) --target installables
	@cmake --install $(BUILD) --prefix $(PREFIX)

test: build
	cd $(BUILD) && ctest --output-on-failure --no-tests=error -j $(JOBS) --timeout 1500

bench: build
	bench/run $(BUILD)

# fpguard run against ONNX Runtime on the real-architecture set (bench/make_real_models.py:
# ResNet-50, MobileNetV3, DBNet, CRNN, U-Net, BERT-base and GPT-2-small at 128 and 512),
# 2 threads each, 10 runs each in 5 alternating rounds. Opt-in, not part of `make bench`:
# the models take 2.2 GB and minutes to generate (once, into REAL_MODELS; gpt2_512 is the
# last one written) and the comparison takes minutes (bench/README.md).
REAL_MODELS ?= $(BUILD)/bench/real
bench-real: cli
	@test -f $(REAL_MODELS)/gpt2_512/model.onnx || /usr/bin/python3 bench/make_real_models.py $(REAL_MODELS)
	NODE_PATH=$(BUILD)/ort-node/node_modules bench/ort_compare.js $(BUILD) 2 --models $(REAL_MODELS) \
	  --repeat 10 --rounds 5

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp' '*.h')

clean:
	rm -rf $(BUILD)

# Hostile input (docs/reliability.md). `make fuzz` runs every libFuzzer harness for
# FUZZ_SECONDS each (clang, build-fuzz); `make test-sanitize` runs the tests under
# ASan+UBSan (build-asan).
FUZZ_SECONDS ?= 60
.PHONY: fuzz test-sanitize
fuzz: setup
	@FUZZ_SECONDS=$(FUZZ_SECONDS) fuzz/run

test-sanitize: setup
	@JOBS=$(JOBS) scripts/test-sanitize
