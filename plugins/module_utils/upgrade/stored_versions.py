# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""resource.k8s.io versions where users keep them: manifest files, the
``kubectl.kubernetes.io/last-applied-configuration`` annotation of the cluster's objects, and the manifests of
installed Helm releases.

kube-apiserver converts every object it serves, so a cluster's objects never "are" in an old version; the version
only matters where something will send it again: ``kubectl apply -f`` of a file or of a git checkout, a later
``kubectl apply`` (which diffs against the last-applied annotation), ``helm upgrade`` and ``helm rollback`` (which
apply the release's stored manifest). Each document found there whose ``apiVersion`` the target (or the release
after it) no longer serves is one entry: where (file and line, document index, or object, or Helm release),
kind/name, the apiVersion, the release that drops it (``catalog.api_removed_in``) and the version to write instead.

Helm keeps each release in a Secret (labels ``owner=helm``, ``status``, ``name``, ``version``) whose ``release``
value is base64 of gzip of the release JSON; its ``manifest`` is the rendered YAML stream. Read through the API,
the Secret's data is base64 once more.

Pure: no Ansible, no network, no files (checks_service reads them).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import gzip
import io
import json

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - PyYAML is a requirement of the module
    HAS_YAML = False

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.releases import catalog

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
HELM_OWNER_SELECTOR = "owner=helm,status=deployed"
GZIP_MAGIC = b"\x1f\x8b"
RESOURCES = {"DeviceClass": "deviceclasses", "ResourceClaim": "resourceclaims",
             "ResourceClaimTemplate": "resourceclaimtemplates", "ResourceSlice": "resourceslices",
             "DeviceTaintRule": "devicetaintrules", "ResourcePoolStatusRequest": "resourcepoolstatusrequests"}
# Newest first: the version to write instead is the first of these the target serves by default.
REPLACEMENTS = ("v1", "v1beta2", "v1beta1", "v1alpha3")
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


class SourceError(DraAdminError, ValueError):
    """A document that cannot be read; the message names where."""


def documents(text, origin):
    """[(index, line, document)] of a YAML or JSON stream (1-based line of each document's start; the items of
    a ``kind: List`` count as documents of their own, index ``<n>.items[<i>]``). SourceError names `origin`."""
    if not HAS_YAML:
        raise SourceError("%s: PyYAML is needed to read manifests" % origin)
    found = []
    try:
        for index, node in enumerate(yaml.compose_all(text, Loader=yaml.SafeLoader)):
            if node is None:
                continue
            doc = yaml.SafeLoader("").construct_document(node)
            line = node.start_mark.line + 1
            if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
                found.extend(("%d.items[%d]" % (index, i), line, item) for i, item in enumerate(doc["items"]))
            else:
                found.append((str(index), line, doc))
    except yaml.YAMLError as exc:
        raise SourceError("%s: not YAML or JSON (%s)" % (origin, str(exc).replace("\n", " ")))
    return found


def replacement(target, resource):
    """The resource.k8s.io version to write for `resource` on release `target` (its newest version served by
    default, else the newest served at all), or None when the target serves none."""
    minor = catalog.require_upgrade_target(target)
    if resource == "devicetaintrules" and minor < 37:
        return catalog.device_taint_rule_support(target)["api_version"]
    served = [v for v in REPLACEMENTS if catalog.api_serving(target, v, resource)]
    default = [v for v in served if catalog.api_serving(target, v, resource) == "default"]
    return (default or served or [None])[0]


def version_use(doc, where, target_minor):
    """The entry for one document (dict) when its resource.k8s.io version goes in the target or the release after
    it, else None. `where`: {"source", "document", "line"} (what applies the document, and where in it)."""
    if not isinstance(doc, dict):
        return None
    group, _sep, version = str(doc.get("apiVersion") or "").partition("/")
    if group != catalog.RESOURCE_GROUP or not version:
        return None
    resource = RESOURCES.get(doc.get("kind"))
    removed = catalog.api_removed_in(version, resource)
    if removed is None or removed > target_minor + 1:
        return None
    meta = doc.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName") or "<no name>"
    if meta.get("namespace"):
        name = "%s/%s" % (meta["namespace"], name)
    return dict(where, kind=doc.get("kind"), name=name, api_version="%s/%s" % (group, version),
                removed_in="1.%d" % removed, resource=resource)


def text_uses(text, source, target_minor):
    """The entries of one manifest file's text (`source`: its path)."""
    uses = []
    for index, line, doc in documents(text, source):
        use = version_use(doc, {"source": source, "document": index, "line": line}, target_minor)
        if use:
            uses.append(use)
    return uses


def last_applied_uses(objects, target_minor):
    """The entries of the last-applied-configuration annotations of cluster objects (what the next
    ``kubectl apply`` diffs against); an annotation that is not JSON is left out."""
    uses = []
    for obj in objects or []:
        meta = obj.get("metadata") or {}
        text = (meta.get("annotations") or {}).get(LAST_APPLIED)
        if not text:
            continue
        try:
            doc = json.loads(text)
        except ValueError:
            continue
        names = [n for n in (meta.get("namespace"), meta.get("name")) if n]
        owner = "%s %s" % (obj.get("kind") or "object", "/".join(names))
        use = version_use(doc, {"source": "%s annotation %s" % (owner, LAST_APPLIED), "document": "0",
                                "line": None}, target_minor)
        if use:
            uses.append(use)
    return uses


def helm_release(secret):
    """The release JSON (dict) of a Helm release Secret as the API returns it; SourceError naming the Secret."""
    meta = secret.get("metadata") or {}
    where = "Secret %s/%s" % (meta.get("namespace"), meta.get("name"))
    raw = (secret.get("data") or {}).get("release")
    if not raw:
        raise SourceError("%s: no release in its data" % where)
    try:
        data = base64.b64decode(raw)
        if not data.startswith(GZIP_MAGIC):  # the API's base64 around Helm's own base64
            data = base64.b64decode(data)
        if data.startswith(GZIP_MAGIC):
            data = gzip.GzipFile(fileobj=io.BytesIO(data)).read()
        return json.loads(data.decode("utf-8"))
    except (binascii.Error, ValueError, OSError, EOFError) as exc:
        raise SourceError("%s: not a Helm release (%s)" % (where, exc))


def helm_uses(secrets, target_minor):
    """(entries, errors) of the manifests of the deployed Helm releases among `secrets` (owner=helm)."""
    uses, errors = [], []
    for secret in secrets or []:
        try:
            release = helm_release(secret)
            source = "Helm release %s/%s (revision %s)" % (release.get("namespace"), release.get("name"),
                                                           release.get("version"))
            uses.extend(text_uses(release.get("manifest") or "", source, target_minor))
        except SourceError as exc:
            errors.append(str(exc))
    return uses, errors
