# The two commands of the README: `make demo` and `make test`. Both first install what a fresh
# machine lacks (cmake, which pingora's zlib-ng build needs).

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup demo test check bench load-bench

setup:
	@command -v cmake >/dev/null 2>&1 || { \
		echo "installing cmake (needed to build pingora's zlib-ng)"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq cmake; }

demo: setup
	cargo run --release -- demo

test: setup
	cargo test

check: setup
	cargo run -q -- testbed --config conf/testbed.toml --prepare
	cargo run -q -- check --config conf/gateway.toml --config conf/testbed.toml

bench: setup
	cargo bench --bench scheme

load-bench: setup
	benches/load.sh
