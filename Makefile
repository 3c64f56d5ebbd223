# The two commands of the README: `make demo` and `make test`. Both first install what a fresh
# machine lacks: cmake (pingora's zlib-ng build needs it), and for the tests the real parts they
# start: redis-server.

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup test-setup demo test check bench load-bench

# Debian packages: the command that must exist, then the package that brings it.
define need
	@missing=""; \
	set -- $(1); \
	while [ $$# -gt 1 ]; do command -v "$$1" >/dev/null 2>&1 || missing="$$missing $$2"; shift 2; done; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
endef

setup:
	$(call need,cmake cmake)

test-setup: setup
	$(call need,redis-server redis-server)

demo: setup
	cargo run --release -- demo

test: test-setup
	cargo test

check: setup
	cargo run -q -- testbed --config conf/testbed.toml --prepare
	cargo run -q -- check --config conf/gateway.toml --config conf/testbed.toml

bench: setup
	cargo bench --bench scheme

load-bench: setup
	benches/load.sh
