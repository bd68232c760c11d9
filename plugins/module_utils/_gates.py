# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The version catalog: the only place in the collection that knows versions.

For each supported Kubernetes minor release it says which resource.k8s.io API
versions exist, which of them the API server serves by default, and what must
be switched on (feature gates, ``--runtime-config``) for DRA to work.

Pure data and pure functions: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

RESOURCE_GROUP = "resource.k8s.io"

SUPPORTED_MINORS = tuple(range(30, 38))

# minor -> resource.k8s.io versions the release has, newest first.
_API_VERSIONS = {
    30: ("v1alpha2",),
    31: ("v1alpha3",),
    32: ("v1beta1", "v1alpha3"),
    33: ("v1beta2", "v1beta1", "v1alpha3"),
    34: ("v1", "v1beta2", "v1beta1", "v1alpha3"),
    35: ("v1", "v1beta2", "v1beta1", "v1alpha3"),
    36: ("v1", "v1beta2", "v1beta1", "v1alpha3"),
    37: ("v1", "v1beta2", "v1beta1", "v1alpha3"),
}

# minor -> the resource.k8s.io versions DRA needs switched on with --runtime-config
# (empty when the release serves a usable version by default).
_RUNTIME_CONFIG_NEEDED = {
    30: ("v1alpha2",),
    31: ("v1alpha3",),
    32: ("v1beta1",),
    33: ("v1beta1", "v1beta2"),
}

# Versions the collection's own API calls understand, best first.
CLIENT_API_PREFERENCE = ("v1", "v1beta2", "v1beta1")


class VersionError(ValueError):
    """A Kubernetes version the catalog cannot answer for."""


def parse_minor(version):
    """Return the minor number of a Kubernetes version string such as 'v1.33.2'."""
    match = re.match(r"^v?1\.(\d+)(?:\.\d+)?(?:[-+].*)?$", str(version).strip())
    if not match:
        raise VersionError(
            "cannot read Kubernetes version %r: expected a form like v1.33 or 1.33.2" % (version,))
    return int(match.group(1))


def require_supported(version):
    """Return the minor of a supported version, or raise naming the supported ones."""
    minor = parse_minor(version)
    if minor not in SUPPORTED_MINORS:
        raise VersionError(
            "Kubernetes %s is not supported: supported releases are 1.%d to 1.%d"
            % (version, SUPPORTED_MINORS[0], SUPPORTED_MINORS[-1]))
    return minor


def resource_api_versions(version):
    """The resource.k8s.io API versions a release has, newest first."""
    return _API_VERSIONS[require_supported(version)]


def default_served_api_versions(version):
    """resource.k8s.io versions served without any --runtime-config."""
    return ("v1",) if require_supported(version) >= 34 else ()


def runtime_config_for_dra(version):
    """The --runtime-config entries DRA needs on this release, as a dict."""
    needed = _RUNTIME_CONFIG_NEEDED.get(require_supported(version), ())
    return dict(("%s/%s" % (RESOURCE_GROUP, v), "true") for v in needed)


def gates_for_dra(version):
    """The feature gates DRA needs on this release (all four components), as a dict."""
    return {} if require_supported(version) >= 34 else {"DynamicResourceAllocation": True}


def preferred_api_version(served_versions):
    """The newest resource.k8s.io version that is both served and understood, or None."""
    for candidate in CLIENT_API_PREFERENCE:
        if candidate in served_versions:
            return candidate
    return None
