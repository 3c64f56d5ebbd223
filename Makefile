# The two commands of the README: `make demo` and `make test`. Both first install what a fresh
# machine lacks: cmake (pingora's zlib-ng build needs it) and OpenSSL's headers (the JOSE crate's
# encryption), and for the tests the real parts they start: redis-server, HAProxy, nginx (in front
# of the decision service), curl and jq (the client guide's examples), headless Chromium with its
# WebDriver (Debian's chromium and chromium-driver), podman, runc and mmdebstrap (the container
# image), Prometheus and promtool (the alert rules and the dashboard), and python-ishare and an
# OpenAPI schema validator (from PyPI, in a virtual environment). `make docs` builds the manual
# (mdBook, installed into target/tools/ when missing); `make image` builds the container image;
# `make install` installs the binary.

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup test-setup container-setup image monitoring-check kubernetes-check demo cluster test check conformance bench load-bench docs install

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
	$(call need,cmake cmake pkg-config pkg-config)
	@pkg-config --exists openssl 2>/dev/null || { \
		echo "installing libssl-dev"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libssl-dev; }

# python-ishare, a client library of the scheme, for tests/interop.rs, the validator of the
# scheme's OpenAPI schemas, and the validators of the Kubernetes manifests.
INTEROP_VENV := target/interop-venv

test-setup: setup container-setup $(INTEROP_VENV)/installed
	$(call need,redis-server redis-server haproxy haproxy nginx nginx-light curl curl jq jq chromium chromium chromedriver chromium-driver prometheus prometheus promtool prometheus)

$(INTEROP_VENV)/installed: tests/interop/requirements.txt
	$(call need,python3 python3)
	@python3 -c 'import ensurepip' 2>/dev/null || { \
		echo "installing python3-venv"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; }
	@[ -x $(INTEROP_VENV)/bin/python ] || python3 -m venv $(INTEROP_VENV)
	$(INTEROP_VENV)/bin/python -m pip install -q --disable-pip-version-check -r tests/interop/requirements.txt
	@touch $@

# The container image (Containerfile): podman builds and runs it, with runc and cgroupfs, and limits
# of its own, which also work where crun or raising limits is refused (containers inside
# containers); mmdebstrap builds its base images where no image registry answers; strip (binutils)
# strips a binary built outside (`deploy/container/image --binary`).
PODMAN ?= podman --runtime runc --cgroup-manager=cgroupfs
CONTAINER_LIMITS ?= --ulimit nofile=1024:1024 --ulimit nproc=1024:1024
IMAGE ?= ishare-gateway:latest

container-setup:
	$(call need,podman podman runc runc mmdebstrap mmdebstrap strip binutils)

# The multi-stage build: a release build inside the image, then the slim runtime.
image: container-setup
	PODMAN="$(PODMAN)" CONTAINER_LIMITS="$(CONTAINER_LIMITS)" deploy/container/image $(IMAGE)

# The alert rules: their syntax, and their unit tests (deploy/prometheus/alerts.test.yml).
monitoring-check:
	$(call need,promtool prometheus)
	promtool check rules deploy/prometheus/alerts.yml
	promtool test rules deploy/prometheus/alerts.test.yml

# The Kubernetes manifests: each kustomization rendered by kubectl and validated offline.
kubernetes-check: $(INTEROP_VENV)/installed
	$(call need,kubectl kubernetes-client)
	$(INTEROP_VENV)/bin/python deploy/kubernetes/validate

demo: setup
	cargo run --release -- demo

# Several instances: Redis, the testbed, two gateways sharing Redis, and HAProxy in front.
cluster: setup
	$(call need,redis-server redis-server haproxy haproxy)
	cargo run --release -- cluster

# Every test runs, whatever fails first (the library's, the binary's and the integration suite's),
# so that one run names every failure.
test: test-setup
	cargo test --no-fail-fast

check: setup
	cargo run -q -- testbed --config conf/testbed.toml --prepare
	cargo run -q -- testbed --config conf/testbed-3.0.toml --prepare
	cargo run -q -- check --config conf/gateway.toml --config conf/gateway-3.0.toml --config conf/egress.toml --config conf/testbed.toml --config conf/testbed-3.0.toml
	cargo run -q -- test --config conf/gateway.toml
	cargo run -q -- test --config conf/gateway-3.0.toml

# The conformance checker against the shipped gateway and every testbed participant.
conformance: setup
	$(call need,curl curl)
	.ci/conformance

bench: setup
	cargo bench --bench scheme --bench gateway

# The load benchmark's tools; `make load-bench LOAD_ARGS="--cores 1,2,4"` passes options on.
load-bench: setup
	$(call need,wrk wrk nginx nginx-light haproxy haproxy redis-server redis-server curl curl openssl openssl python3 python3)
	benches/load.sh $(LOAD_ARGS)

# The manual, an mdBook in docs/, built into docs/book/. mdBook is pinned and built from crates.io
# into target/tools/ (the search feature only: no live server), so that every machine builds the
# book alike.
MDBOOK_VERSION := 0.5.4
MDBOOK := target/tools/mdbook-$(MDBOOK_VERSION)/bin/mdbook

docs: $(MDBOOK)
	$(MDBOOK) build docs
	@echo "the book: docs/book/index.html"

$(MDBOOK):
	cargo install mdbook --locked --version $(MDBOOK_VERSION) --no-default-features \
		--features search --root target/tools/mdbook-$(MDBOOK_VERSION)

# The binary, as the systemd unit expects it: /usr/local/bin/ishare-gateway, stripped of its
# line tables and symbols (which target/release keeps for profiles and backtraces).
PREFIX ?= /usr/local

install: setup
	cargo build --release --locked
	install -D -s -m 0755 target/release/ishare-gateway $(DESTDIR)$(PREFIX)/bin/ishare-gateway
