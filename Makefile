# dra.admin — developer entry points. See README.md.
#
#   make demo         set up everything, bring the local kind cluster up (real nodes), run playbooks/site.yml
#   make test         ansible-lint + ansible-test sanity + unit + integration (KWOK clusters) + real-node tests
#                     and molecule's kind scenario (kind clusters on podman)
#   make demo-kwok    the same on the KWOK cluster (fake nodes, control plane as host processes)
#   make gate-matrix  the catalog's feature-gate verdicts against kube-apiserver 1.32+ (docs/gate-matrix.md)
#   make gate-matrix-test  the same on the pinned releases, all four components (pytest)

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
CACHE ?= $(HOME)/.cache/dra-admin
PYTHON ?= python3
REQ_HASH := $(shell cat $(ROOT)/requirements.txt $(ROOT)/requirements-dev.txt | sha256sum | cut -c1-12)
VENV ?= $(CACHE)/venv-$(REQ_HASH)
BIN := $(VENV)/bin
# The collection is looked up as ansible_collections/dra/admin: a link to this checkout.
COLLECTIONS := $(ROOT)/.tmp/collections
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)
export ANSIBLE_CONFIG := $(ROOT)/ansible.cfg
export PATH := $(BIN):$(PATH)
CLUSTER_NAME ?= dra-admin
K8S_VERSION ?=
NODES ?= 3
STATE ?= $(CACHE)/state
K8S_DEFAULT := $(shell sed -n 's/^K8S_VERSIONS=\([^ ]*\).*/\1/p' $(ROOT)/hack/cluster/versions.env)
KUBE_BIN := $(CACHE)/kubernetes-$(K8S_DEFAULT)/bin

.PHONY: help venv build build-kind kind-deps up down up-kwok down-kwok demo demo-kwok site site-kwok lint sanity \
	test-deps unit integration integration-kind integration-kind-nodes integration-readme molecule molecule-kind test collection-link clean gate-matrix \
	gate-matrix-test

KIND_WORKERS ?= 2
# podman settings of the kind backend come from the project's own file, never from the host's.
export CONTAINERS_CONF := $(ROOT)/hack/cluster/kind/containers.conf

help:
	@sed -n '1,8p' $(MAKEFILE_LIST)

# The venv path carries a hash of the requirements: a change makes a new venv, an unchanged one is reused.
$(VENV)/.installed:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

venv: $(VENV)/.installed

collection-link:
	@mkdir -p $(COLLECTIONS)/ansible_collections/dra
	@ln -sfn $(ROOT) $(COLLECTIONS)/ansible_collections/dra/admin

build:
	$(ROOT)/hack/cluster/build

# The kind backend's programs, cluster images, node images (one per Kubernetes version) and driver image.
build-kind:
	$(ROOT)/hack/cluster/build --kind

# Debian packages the kind backend needs on this host (podman, runc, aardvark-dns, debootstrap).
kind-deps:
	$(ROOT)/hack/install-kind-deps

up: build-kind
	$(ROOT)/hack/cluster/kind-up --name $(CLUSTER_NAME) --workers $(KIND_WORKERS) \
		$(if $(K8S_VERSION),--k8s-version $(K8S_VERSION))

down:
	$(ROOT)/hack/cluster/kind-down --name $(CLUSTER_NAME)

up-kwok: build
	$(ROOT)/hack/cluster/up --name $(CLUSTER_NAME) --nodes $(NODES) $(if $(K8S_VERSION),--k8s-version $(K8S_VERSION))

down-kwok:
	$(ROOT)/hack/cluster/down --name $(CLUSTER_NAME)

site: venv collection-link
	K8S_AUTH_KUBECONFIG=$(STATE)/$(CLUSTER_NAME)/kubeconfig \
	  $(BIN)/ansible-playbook -i $(ROOT)/inventory/local.yml $(ROOT)/playbooks/site.yml

site-kwok: venv collection-link
	K8S_AUTH_KUBECONFIG=$(STATE)/$(CLUSTER_NAME)/kubeconfig \
	  $(BIN)/ansible-playbook -i $(ROOT)/inventory/kwok.yml $(ROOT)/playbooks/site.yml

demo: venv kind-deps build-kind up site

demo-kwok: venv build up-kwok site-kwok

lint: venv collection-link
	cd $(ROOT) && $(BIN)/ansible-lint --offline --profile production

sanity: venv
	$(ROOT)/hack/sanity $(BIN)

# System tools the tests need (promtool from Debian's prometheus); skipped when present.
test-deps:
	$(ROOT)/hack/install-test-deps

unit: venv collection-link test-deps
	cd $(ROOT) && $(BIN)/python -m pytest -q tests/unit

# KWOK_RELEASE=v1.37.2: that release's suite alone (`make test` runs one per release, each followed by its kind tests).
integration: venv collection-link build test-deps
	cd $(ROOT) && DRA_IT_RELEASE=$(KWOK_RELEASE) $(ROOT)/hack/integration-per-version integration $(BIN)/python tests/integration \
		--ignore-glob='*/test_kind_*' --ignore=tests/integration/test_gate_matrix.py --durations=30

# The gate-matrix test on the pinned releases (all four components); out of `make test` for time
# (docs/decisions.md, "Gate matrix").
gate-matrix-test: venv collection-link build
	cd $(ROOT) && $(BIN)/python -m pytest -q tests/integration/test_gate_matrix.py --durations=10

# Tests on real nodes: a kind cluster per Kubernetes version, one after the other (each 3-node cluster
# takes about 50 of the host's 128 inotify instances, and `make test` runs a second kind cluster beside).
integration-kind: integration-kind-nodes integration-readme

# KIND_RELEASE=v1.37.2: only that release's cluster (`make test` runs one job per release).
integration-kind-nodes: venv collection-link kind-deps build-kind
	cd $(ROOT) && $(BIN)/python -m pytest -q $(filter-out %/test_kind_readme.py,$(wildcard tests/integration/test_kind_*.py)) \
		$(if $(KIND_RELEASE),-k "$(KIND_RELEASE)") --durations=20

# The README's commands as written and the AWX job templates under ansible-runner, on the installed
# artifact: one kind cluster of the default release (test_kind_readme.py).
integration-readme: venv collection-link kind-deps build-kind
	cd $(ROOT) && $(BIN)/python -m pytest -q tests/integration/test_kind_readme.py --durations=20

molecule: venv collection-link build
	cd $(ROOT) && PATH=$(KUBE_BIN):$$PATH MOLECULE_KUBECONFIG=$(STATE)/molecule-dra/kubeconfig \
		$(ROOT)/hack/molecule-test $(BIN)/molecule $(KUBE_BIN)/kubectl $(STATE)/molecule-dra/kubeconfig

molecule-kind: venv collection-link kind-deps build-kind
	cd $(ROOT) && K8S_VERSION=$(or $(K8S_VERSION),$(K8S_DEFAULT)) $(BIN)/molecule test -s kind

# Every test, in phases that run a waiting job beside a computing one (hack/test-all says which).
test:
	$(ROOT)/hack/test-all $(if $(K8S_VERSION),K8S_VERSION=$(K8S_VERSION))

# Not part of `test`: builds kube-apiserver of every release that is not pinned (once) and takes
# longer; run it when plugins/module_utils/releases/catalog.py changes and commit docs/gate-matrix.md.
gate-matrix: venv collection-link build
	cd $(ROOT) && $(BIN)/python hack/gate-matrix

clean:
	rm -rf $(ROOT)/.tmp $(ROOT)/tests/output
