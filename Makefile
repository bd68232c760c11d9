# dra.admin — developer entry points. See README.md.
#
#   make demo         build what one kind cluster runs, bring it up (real nodes), run playbooks/site.yml
#   make demo-kwok    the same on the KWOK cluster (fake nodes, control plane as host processes)
#   make test         ansible-lint + ansible-test sanity + unit (newest and oldest Ansible line) + the artifact's
#                     checks + integration (KWOK) + real-node tests (kind) + gate matrix + molecule's kind scenario:
#                     the whole suite on the default release, what differs by release on the others (docs/testing.md)
#   make test-full    every test on every pinned release (the full tier)
#   make gate-matrix  the catalog's feature-gate verdicts against kube-apiserver 1.32+ (docs/gate-matrix.md)
#   make gate-matrix-test  the same on the pinned releases, all four components (pytest)

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
CACHE ?= $(HOME)/.cache/dra-admin
# The tested lines (README.md, "Install"; docs/decisions.md, "The Ansible lines tested"): the newest
# (requirements-dev.txt, Python 3.12 or newer: every test) and the oldest meta/runtime.yml admits
# (tests/requirements-oldest.txt, Python 3.11: sanity and unit tests). hack/find-python picks each
# line's Python from PATH or pyenv's versions; set PYTHON / OLDEST_PYTHON to choose another.
ifndef PYTHON
PYTHON := $(shell $(ROOT)/hack/find-python 3.12)
endif
ifndef OLDEST_PYTHON
OLDEST_PYTHON := $(shell $(ROOT)/hack/find-python 3.11 3.11)
endif
REQ_HASH := $(shell cat $(ROOT)/requirements.txt $(ROOT)/requirements-dev.txt | sha256sum | cut -c1-12)
PY_TAG := $(shell $(PYTHON) -c 'import sys; print("%d%d" % sys.version_info[:2])' 2>/dev/null)
VENV ?= $(CACHE)/venv-$(REQ_HASH)-py$(PY_TAG)
BIN := $(VENV)/bin
OLDEST_HASH := $(shell cat $(ROOT)/requirements.txt $(ROOT)/tests/requirements-oldest.txt | sha256sum | cut -c1-12)
OLDEST_VENV ?= $(CACHE)/venv-oldest-$(OLDEST_HASH)
# galaxy-importer and antsibull-docs pin their own dependencies: a venv of their own (tests/requirements-publish.txt).
PUBLISH_HASH := $(shell cat $(ROOT)/tests/requirements-publish.txt | sha256sum | cut -c1-12)
PUBLISH_VENV ?= $(CACHE)/venv-publish-$(PUBLISH_HASH)
# awx.awx (playbooks/awx_configure.yml) at the version requirements-awx.yml names, from PyPI
# (hack/install-awx-collection): beside the link to this checkout on the collections path.
AWX_COLLECTIONS := $(CACHE)/collections-awx-$(shell sed -n 's/^ *version: *"*\([0-9.]*\)"*/\1/p' $(ROOT)/requirements-awx.yml)
# The collection is looked up as ansible_collections/dra/admin: a link to this checkout.
COLLECTIONS := $(ROOT)/.tmp/collections
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS):$(AWX_COLLECTIONS)
export ANSIBLE_CONFIG := $(ROOT)/ansible.cfg
export PATH := $(BIN):$(PATH)
CLUSTER_NAME ?= dra-admin
K8S_VERSION ?=
NODES ?= 3
STATE ?= $(CACHE)/state
K8S_DEFAULT := $(shell sed -n 's/^K8S_VERSIONS=\([^ ]*\).*/\1/p' $(ROOT)/hack/cluster/versions.env)
# The newest pinned release (a release replaces its pre-release in K8S_VERSIONS, so version order is enough).
K8S_NEWEST := $(shell sed -n 's/^K8S_VERSIONS=//p' $(ROOT)/hack/cluster/versions.env | tr ' ' '\n' | sort -V | tail -n 1)
KUBE_BIN := $(CACHE)/kubernetes-$(K8S_DEFAULT)/bin

.PHONY: help venv venv-oldest venv-publish sanity-oldest unit-oldest publish-check build-kind-one build build-kind kind-deps up down up-kwok down-kwok demo demo-kwok site site-kwok lint sanity \
	test-deps unit integration build-release build-kind-release test-full integration-kind integration-kind-nodes integration-readme molecule molecule-kind test collection-link clean gate-matrix \
	gate-matrix-test build-kind-upgrade integration-kind-upgrade

KIND_WORKERS ?= 2
# podman settings of the kind backend come from the project's own file, never from the host's.
export CONTAINERS_CONF := $(ROOT)/hack/cluster/kind/containers.conf

help:
	@sed -n '1,10p' $(MAKEFILE_LIST)

# The venv path carries a hash of the requirements: a change makes a new venv, an unchanged one is reused.
$(VENV)/.installed:
	@test -n "$(PYTHON)" || { echo "no Python 3.12 or newer for the default line (hack/find-python 3.12)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

venv: $(VENV)/.installed

$(OLDEST_VENV)/.installed:
	@test -n "$(OLDEST_PYTHON)" || { echo "no Python 3.11 for the oldest line (hack/find-python 3.11 3.11)"; exit 1; }
	$(OLDEST_PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/pip install --quiet --upgrade pip
	$(OLDEST_VENV)/bin/pip install --quiet -r tests/requirements-oldest.txt
	touch $@

venv-oldest: $(OLDEST_VENV)/.installed

$(PUBLISH_VENV)/.installed:
	$(PYTHON) -m venv $(PUBLISH_VENV)
	$(PUBLISH_VENV)/bin/pip install --quiet --upgrade pip
	$(PUBLISH_VENV)/bin/pip install --quiet -r tests/requirements-publish.txt
	touch $@

venv-publish: $(PUBLISH_VENV)/.installed

collection-link: $(AWX_COLLECTIONS)/.installed
	@mkdir -p $(COLLECTIONS)/ansible_collections/dra
	@ln -sfn $(ROOT) $(COLLECTIONS)/ansible_collections/dra/admin

$(AWX_COLLECTIONS)/.installed:
	$(PYTHON) $(ROOT)/hack/install-awx-collection $(ROOT)/requirements-awx.yml $(AWX_COLLECTIONS)

build:
	$(ROOT)/hack/cluster/build

# What one release's KWOK suite runs (KWOK_RELEASE; every pinned release when unset).
build-release:
	$(ROOT)/hack/cluster/build $(if $(KWOK_RELEASE),--k8s-version $(KWOK_RELEASE))

# What one release's real-node tests run (KIND_RELEASE; every pinned release when unset).
build-kind-release:
	$(ROOT)/hack/cluster/build --kind $(if $(KIND_RELEASE),--k8s-version $(KIND_RELEASE))

# The kind backend's programs, cluster images, node images (one per Kubernetes version) and driver image.
build-kind:
	$(ROOT)/hack/cluster/build --kind

# What one kind cluster of one release runs (K8S_VERSION, default the first pinned): `make up` and `make demo`.
build-kind-one:
	$(ROOT)/hack/cluster/build --kind --kind-only --k8s-version $(or $(K8S_VERSION),$(K8S_DEFAULT))

# Debian packages the kind backend needs on this host (podman, runc, aardvark-dns, debootstrap).
kind-deps:
	$(ROOT)/hack/install-kind-deps

up: build-kind-one
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

demo: venv kind-deps up site

demo-kwok: venv build up-kwok site-kwok

lint: venv collection-link
	cd $(ROOT) && $(BIN)/ansible-lint --offline --profile production

sanity: venv
	$(ROOT)/hack/sanity $(BIN)

# The oldest line meta/runtime.yml admits: sanity and unit tests (docs/decisions.md, "The Ansible lines tested").
sanity-oldest: venv-oldest
	$(ROOT)/hack/sanity $(OLDEST_VENV)/bin

unit-oldest: venv-oldest collection-link test-deps
	cd $(ROOT) && $(OLDEST_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/unit

# What Galaxy and Automation Hub run on upload (galaxy-importer) and antsibull-docs' lint, on the built artifact.
publish-check: venv venv-publish collection-link
	$(ROOT)/hack/publish-check $(PUBLISH_VENV)/bin $(BIN)

# System tools the tests need (promtool from Debian's prometheus); skipped when present.
test-deps:
	$(ROOT)/hack/install-test-deps

unit: venv collection-link test-deps
	cd $(ROOT) && $(BIN)/python -m pytest -q tests/unit

# KWOK_RELEASE=v1.37.2: that release's suite alone (`make test` runs one job per release); KWOK_SHARD=1/2 or 2/2 with
# it: half of its test files, on a cluster of its own (tests/integration/shards.py).
integration: venv collection-link build-release test-deps
	cd $(ROOT) && DRA_IT_RELEASE=$(KWOK_RELEASE) DRA_IT_SHARD=$(KWOK_SHARD) \
		$(ROOT)/hack/integration-per-version integration $(BIN)/python tests/integration \
		--ignore-glob='*/test_kind_*' --ignore=tests/integration/test_gate_matrix.py --durations=0 --durations-min=1

# The gate-matrix test on the pinned releases (all four components): the catalog against each release's own
# binaries (docs/decisions.md, "Gate matrix"); `make test` runs it per release once that release is built.
# RELEASE=v1.37.2: that release alone (`make test` runs one job per pinned release).
gate-matrix-test: venv collection-link
	$(ROOT)/hack/cluster/build $(if $(RELEASE),--k8s-version $(RELEASE))
	cd $(ROOT) && $(BIN)/python -m pytest -q tests/integration/test_gate_matrix.py $(if $(RELEASE),-k "$(RELEASE)") \
		--durations=10

# Tests on real nodes: a kind cluster per Kubernetes version, one after the other (each 3-node cluster
# takes about 50 of the host's 128 inotify instances, and `make test` runs a second kind cluster beside).
integration-kind: integration-kind-nodes integration-readme

# KIND_RELEASE=v1.37.2: only that release's cluster (`make test` runs one job per release). The device health test
# installs a second driver on the shared nodes: it runs last, so the node doctor's tests see the example driver's
# node state alone (on 1.33 they failed when it ran before them).
KIND_LAST := tests/integration/test_kind_device_health.py
integration-kind-nodes: venv venv-oldest collection-link kind-deps build-kind-release
	cd $(ROOT) && DRA_IT_KUBESPRAY_VENV=$(OLDEST_VENV) $(BIN)/python -m pytest -q \
		$(filter-out %/test_kind_readme.py %/test_kind_upgrade_minor.py $(KIND_LAST),$(wildcard tests/integration/test_kind_*.py)) $(KIND_LAST) \
		$(if $(KIND_RELEASE),-k "$(KIND_RELEASE)") --durations=20

# A kubeadm upgrade of a kind cluster from K8S_UPGRADE_FROM to the newest pinned release (hack/cluster/versions.env),
# with playbooks/upgrade.yml; out of `make test` for its time (docs/decisions.md, "The upgrade test on real nodes").
build-kind-upgrade:
	$(ROOT)/hack/cluster/build --kind --kind-only --k8s-version $(K8S_NEWEST) --k8s-version \
		$(shell sed -n 's/^K8S_UPGRADE_FROM=//p' $(ROOT)/hack/cluster/versions.env)

integration-kind-upgrade: venv collection-link kind-deps build-kind-upgrade
	cd $(ROOT) && $(BIN)/python -m pytest -q -s tests/integration/test_kind_upgrade_minor.py --durations=10

# The README's commands as written and the AWX job templates under ansible-runner, on the installed
# artifact: one kind cluster of the default release (test_kind_readme.py).
integration-readme: venv collection-link kind-deps build-kind-one
	cd $(ROOT) && $(BIN)/python -m pytest -q tests/integration/test_kind_readme.py --durations=20

molecule: venv collection-link build
	cd $(ROOT) && PATH=$(KUBE_BIN):$$PATH MOLECULE_KUBECONFIG=$(STATE)/molecule-dra/kubeconfig \
		$(ROOT)/hack/molecule-test $(BIN)/molecule $(KUBE_BIN)/kubectl $(STATE)/molecule-dra/kubeconfig

molecule-kind: venv collection-link kind-deps build-kind-one
	cd $(ROOT) && K8S_VERSION=$(or $(K8S_VERSION),$(K8S_DEFAULT)) $(BIN)/molecule test -s kind

# Every test, scheduled by lanes (hack/test-all): the full depth on the default release, what differs by
# release on the others (docs/testing.md). CI's test command.
test:
	DRA_TEST_TIER=ci $(ROOT)/hack/test-all

# The same jobs at full depth: every test on every pinned release, generative tests at their full counts.
test-full:
	DRA_TEST_TIER=full $(ROOT)/hack/test-all

# Not part of `test`: builds kube-apiserver of every release that is not pinned (once) and takes
# longer; run it when plugins/module_utils/releases/catalog.py changes and commit docs/gate-matrix.md.
gate-matrix: venv collection-link build
	cd $(ROOT) && $(BIN)/python hack/gate-matrix

clean:
	rm -rf $(ROOT)/.tmp $(ROOT)/tests/output
