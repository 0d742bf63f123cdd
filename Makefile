# Tandem's make targets are the interface users, CI and checks rely on.
#   make run     install what is missing, build, fetch the default model, serve it on
#                127.0.0.1:8080 (HOST, PORT, SERVE_FLAGS="--config config/tenants.example.yaml")
#   make test    the same set-up, then every test through CTest
#   make build   build/bin/tandem (Release)
#   make model   fetch the default model (SmolLM2-135M-Instruct Q4_1) once
#   make bench   benchmarks (slow; not part of `make test`; LLAMA_BENCH=path adds the architectures')
#   make test-slow  the slow checks (`tandem quantize` against llama-quantize for every file type)
#   make fuzz    build the libFuzzer targets; fuzz the GGUF reader, HTTP parser, WebSocket frames,
#                OpenAI request parser and image decoding, FUZZ_SECONDS each
#   make sanitize  unit and runtime tests under ASan+UBSan (build-asan), actor tests under TSan (build-tsan)
#   make soak    256 streaming clients for SOAK_SECONDS with disconnects and cancels; figures to docs/benchmarks.md
#   make format  clang-format every C++ file in place (.clang-format; the generated table excepted)
#   make install build, then install into PREFIX (default /usr/local; DESTDIR is honoured):
#                binary, libraries, headers, CMake package, service unit, config (docs/deploy.md)
#   make deb     build, then $(BUILD_DIR)/tandem_<version>_<arch>.deb (cpack; docs/deploy.md)

BUILD_DIR    ?= build
BUILD_TYPE   ?= Release
JOBS         ?= $(shell nproc)
CMAKE_FLAGS  ?=
TANDEM_HOME  ?= $(HOME)/.cache/tandem
FUZZ_SECONDS ?= 600
SOAK_SECONDS ?= 600
# Tests that drive actors (the runtime, the server, the streamers): the TSan run's set.
ACTOR_TESTS  ?= 'Runtime|GenerationJob'
TSAN_TESTS   ?= runtime_test speculative_runtime_test cluster_runtime_test net_replies_test
HOST         ?= 127.0.0.1
PORT         ?= 8080
PREFIX       ?= /usr/local
SERVE_FLAGS  ?=
LLAMA_BENCH  ?=
comma := ,
export TANDEM_HOME

TANDEM := $(BUILD_DIR)/bin/tandem

.PHONY: all deps build model test-data test test-slow run bench bench-cluster fuzz sanitize soak format install deb clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

build: deps $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j $(JOBS)

model:
	@scripts/fetch-model.sh

# Data the tests need besides the default model: vocabularies of other tokenizer families,
# the real Gemma 3 270M file (gemma3 architecture), and llama.cpp's corpus of chat templates.
test-data: model
	@scripts/fetch-test-vocab.sh
	@scripts/fetch-gemma3.sh
	@scripts/fetch-chat-templates.sh
	@scripts/install-deps.sh --python

test: build test-data
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

test-slow: build test-data
	cd $(BUILD_DIR) && TANDEM_SLOW_TESTS=1 ctest --output-on-failure -R 'QuantizeFile\.' -j 1

run: build model
	@echo
	@echo "Tandem serves the default model on http://$(HOST):$(PORT) (chat page at /). Try:"
	@echo "  curl http://$(HOST):$(PORT)/v1/chat/completions -H 'Content-Type: application/json' -d '{\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}],\"max_tokens\":64}'"
	@echo
	$(TANDEM) serve --host $(HOST) --port $(PORT) $(SERVE_FLAGS)

# Every benchmark, each writing its section of docs/benchmarks.md (and a plot where it helps);
# kv_attention_bench and runtime_bench's kv-dtype part print the figures its KV cache section quotes.
# Cluster mode (docs/cluster.md): the router's cost per decision against 1-64 simulated nodes,
# then a router and 1-3 node processes on this machine, kv-aware vs round-robin.
bench-cluster: build model
	@scripts/install-deps.sh --bench
	$(BUILD_DIR)/bin/routing_bench
	$(BUILD_DIR)/bin/router_sim_bench
	python3 bench/cluster_bench.py --build $(BUILD_DIR)

bench: build model
	@scripts/install-deps.sh --bench
	$(BUILD_DIR)/bin/tokenizer_bench
	$(BUILD_DIR)/bin/vector_pipe_bench
	python3 bench/run_sampler_bench.py --build $(BUILD_DIR)
	$(BUILD_DIR)/bin/kv_attention_bench
	$(BUILD_DIR)/bin/matmul_bench --threads 1
	$(BUILD_DIR)/bin/runtime_bench default 64 0 kv-dtype
	python3 bench/run_grammar_bench.py --build $(BUILD_DIR)
	python3 bench/grammar_serve_bench.py --build $(BUILD_DIR)
	python3 bench/compare_llama_cpp.py --build $(BUILD_DIR)
	@scripts/fetch-gemma3.sh
	@if [ -n "$(LLAMA_BENCH)" ]; then \
	  python3 bench/compare_architectures.py --build $(BUILD_DIR) --llama-bench $(LLAMA_BENCH) --threads 1,2; \
	  python3 bench/compare_moe.py --build $(BUILD_DIR) --llama-bench $(LLAMA_BENCH) --threads 2 \
	    $(if $(IK_BENCH),--ik-bench $(IK_BENCH)); \
	  $(if $(IK_BENCH),python3 bench/compare_ik.py --build $(BUILD_DIR) --llama-bench $(LLAMA_BENCH) \
	    --ik-bench $(IK_BENCH) --threads 1$(comma)2;) \
	else echo "bench: LLAMA_BENCH=path/to/llama-bench runs bench/compare_architectures.py (gemma3, qwen2)" \
	  "and bench/compare_moe.py (qwen3moe, gpt-oss; IK_BENCH=path/to/ik's llama-bench adds ik_llama.cpp and bench/compare_ik.py)"; fi
	@if [ -n "$(LLAMA_SERVER)" ]; then \
	  python3 bench/compare_embeddings.py --build $(BUILD_DIR) --llama-server $(LLAMA_SERVER) --threads 2; \
	  python3 bench/compare_lora.py --build $(BUILD_DIR) --llama-server $(LLAMA_SERVER) || true; \
	else echo "bench: LLAMA_SERVER=path/to/llama-server runs bench/compare_embeddings.py" \
	  "(embeddings/s against llama-server, issue 52) and bench/compare_lora.py (LoRA greedy output, issue 54)"; fi
	python3 bench/run_lora_bench.py --build $(BUILD_DIR)
	@if [ -n "$(LLAMA_MTMD_CLI)" ]; then \
	  python3 bench/compare_vision.py --build $(BUILD_DIR) --mtmd-cli $(LLAMA_MTMD_CLI) --threads 2 && \
	  python3 bench/compare_vision.py --build $(BUILD_DIR) --mtmd-cli $(LLAMA_MTMD_CLI) --family qwen2.5vl --threads 2 && \
	  python3 bench/compare_vision.py --build $(BUILD_DIR) --mtmd-cli $(LLAMA_MTMD_CLI) --family idefics3 --threads 2; \
	else echo "bench: LLAMA_MTMD_CLI=path/to/llama-mtmd-cli runs bench/compare_vision.py" \
	  "(image encode time against libmtmd, issue 55)"; fi
	python3 bench/run_runtime_bench.py
	python3 bench/run_speculative_bench.py
	python3 bench/serve_bench.py
	@mkdir -p $(BUILD_DIR)/bench-models
	@test -f $(BUILD_DIR)/bench-models/smollm2-135m-Q4_K_M.gguf || $(BUILD_DIR)/bin/tandem quantize \
	  --allow-requantize -q default $(BUILD_DIR)/bench-models/smollm2-135m-Q4_K_M.gguf Q4_K_M
	python3 bench/serve_bench.py --model $(BUILD_DIR)/bench-models/smollm2-135m-Q4_K_M.gguf --name q4_k_m \
	  --mix-rounds 1 --rates 0.5

fuzz:
	@scripts/install-deps.sh --fuzz
	cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
	  -DCMAKE_CXX_COMPILER=clang++ -DTANDEM_FUZZ=ON -DTANDEM_BUILD_TESTS=OFF -DTANDEM_CUDA=OFF
	cmake --build build-fuzz -j $(JOBS) --target fuzz_gguf fuzz_http fuzz_ws fuzz_openai fuzz_image
	for t in gguf http ws openai image; do \
	  mkdir -p build-fuzz/corpus/$$t && \
	  build-fuzz/bin/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=2048 \
	    -print_final_stats=1 build-fuzz/corpus/$$t tests/fuzz/seeds/$$t || exit 1; \
	done

# Sanitizer builds sit beside the regular one; the Python serving suites, the llama.cpp
# fidelity comparisons and the package builds are left out (the unit and runtime tests drive
# the same code paths in-process; those run 2-10x slower here and add no new code paths).
# Tests are listed when ctest runs (PRE_TEST), not at link time: a sanitized binary that
# fails to start then shows up as a failing test with its report, not as a broken build.
SANITIZE_CMAKE = -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_CUDA=OFF -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST
sanitize: deps model
	cmake -S . -B build-asan $(SANITIZE_CMAKE) \
	  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
	  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -LE 'serve|chat|cli|grammar' \
	    -E 'QuantizeFile|QuantizeMatchesLlamaQuantize|Gpu|Fidelity|package_|embed_'
	scripts/build-caf-tsan.sh build-tsan-caf
	cmake -S . -B build-tsan $(SANITIZE_CMAKE) -DCMAKE_PREFIX_PATH=$(CURDIR)/build-tsan-caf \
	  -DCAF_INCLUDE_DIR=$(CURDIR)/build-tsan-caf/include -DCAF_CORE_LIBRARY=$(CURDIR)/build-tsan-caf/lib/libcaf_core.so \
	  -DCAF_IO_LIBRARY=$(CURDIR)/build-tsan-caf/lib/libcaf_io.so \
	  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread"
	cmake --build build-tsan -j $(JOBS) --target $(TSAN_TESTS)
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ctest --output-on-failure -j 1 -R $(ACTOR_TESTS)

soak: build model
	@scripts/install-deps.sh --soak
	python3 bench/soak.py --build $(BUILD_DIR) --seconds $(SOAK_SECONDS)

format:
	git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' '*.inl' | grep -v unicode_data_table | xargs clang-format -i

install: build
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)

deb: build
	cd $(BUILD_DIR) && cpack -G DEB

clean:
	rm -rf $(BUILD_DIR) build-fuzz
