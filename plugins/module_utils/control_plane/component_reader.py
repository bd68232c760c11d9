# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The identity that reads a control-plane component's /metrics and /configz after a change (role component_restart).

Pure functions; no IO:

* ``reader_objects``: the ServiceAccount, the ClusterRole that allows only ``get`` on the non-resource URLs
  ``/metrics`` and ``/configz``, and the ClusterRoleBinding between them;
* ``object_change``: what to send to make an existing object the wanted one (nothing, a create, or an update);
* ``token_seconds``: how long the reader's token lives (the restart's waits, with the API's 10-minute floor);
* ``token_request``: the TokenRequest body.

The components authorize these URLs with a SubjectAccessReview against kube-apiserver (kube-controller-manager,
kube-scheduler) or with their own RBAC (kube-apiserver), so this ClusterRole is all the reader can do.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.common.names import MANAGED_BY, MANAGED_BY_LABEL

READER_NAMESPACE = "kube-system"
READER_ACCOUNT = "dra-admin-component-reader"
READER_ROLE = "dra.admin:component-reader"
# The non-resource URLs the restart reads, and the only verb it needs on them.
READER_URLS = ("/metrics", "/configz")
READER_VERBS = ("get",)
RBAC_API = "rbac.authorization.k8s.io/v1"
# The API server refuses a TokenRequest below 10 minutes.
MIN_TOKEN_SECONDS = 600
# The restart's waits one token covers: the new process on /metrics, /configz, then health.
WAITS_PER_RESTART = 3
TOKEN_MARGIN_SECONDS = 60


class ReaderInputError(DraAdminError, ValueError):
    """An input of the component reader that cannot be used; the message names it and the fix."""


def reader_user(namespace=READER_NAMESPACE):
    """The user name the reader's token authenticates as."""
    return "system:serviceaccount:%s:%s" % (namespace, READER_ACCOUNT)


def _metadata(name, namespace=None):
    meta = {"name": name, "labels": {MANAGED_BY_LABEL: MANAGED_BY}}
    if namespace:
        meta["namespace"] = namespace
    return meta


def reader_objects(namespace=READER_NAMESPACE):
    """[ServiceAccount, ClusterRole, ClusterRoleBinding] of the reader, in the order they are made."""
    if not namespace:
        raise ReaderInputError("namespace: give the namespace of the reader's ServiceAccount, e.g. kube-system")
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(READER_ACCOUNT, namespace),
         "automountServiceAccountToken": False},
        {"apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": _metadata(READER_ROLE),
         "rules": [{"nonResourceURLs": list(READER_URLS), "verbs": list(READER_VERBS)}]},
        {"apiVersion": RBAC_API, "kind": "ClusterRoleBinding", "metadata": _metadata(READER_ROLE),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READER_ROLE},
         "subjects": [{"kind": "ServiceAccount", "name": READER_ACCOUNT, "namespace": namespace}]},
    ]


# The fields that make each kind what it is (metadata's labels are compared too).
_CONTENT = {"ServiceAccount": ("automountServiceAccountToken",), "ClusterRole": ("rules",),
            "ClusterRoleBinding": ("roleRef", "subjects")}


def object_change(current, wanted):
    """None when `current` already is `wanted` (its content and labels), "create" when there is none, "update"
    otherwise; a ClusterRoleBinding with another roleRef is "replace" (the API does not change a roleRef)."""
    if current is None:
        return "create"
    kind = wanted["kind"]
    labels = ((current.get("metadata") or {}).get("labels") or {})
    same_labels = all(labels.get(k) == v for k, v in wanted["metadata"]["labels"].items())
    different = [f for f in _CONTENT[kind] if current.get(f) != wanted.get(f)]
    if not different and same_labels:
        return None
    if kind == "ClusterRoleBinding" and "roleRef" in different:
        return "replace"
    return "update"


def updated(current, wanted):
    """`wanted` with `current`'s metadata (resourceVersion included) and the wanted labels added: an update body."""
    meta = dict(current.get("metadata") or {})
    meta["labels"] = dict(meta.get("labels") or {}, **wanted["metadata"]["labels"])
    body = dict(current)
    body.update((f, wanted[f]) for f in _CONTENT[wanted["kind"]] if f in wanted)
    body["metadata"] = meta
    return body


def token_seconds(wait_timeout, asked=None):
    """Seconds the reader's token lives: `asked` when given, else what one restart's waits can take
    (WAITS_PER_RESTART x wait_timeout and a margin); never below the API's MIN_TOKEN_SECONDS."""
    given = asked not in (None, "", 0)
    raw = asked if given else wait_timeout
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = None
    if value is None or math.isnan(value) or value <= 0:
        raise ReaderInputError("token_seconds: %r is not a number of seconds above 0; give e.g. 900, or leave it out "
                               "to cover the restart's waits (3 x its wait timeout and a minute)" % (raw,))
    if not given:
        value = WAITS_PER_RESTART * value + TOKEN_MARGIN_SECONDS
    return max(MIN_TOKEN_SECONDS, int(value + 0.999))


def token_request(seconds):
    """The TokenRequest body: a token of the reader's ServiceAccount for the API server's audience, `seconds` long."""
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": int(seconds)}}
