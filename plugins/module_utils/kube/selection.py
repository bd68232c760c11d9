# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""NodeSelector and LabelSelector matching, whether a pod may run on a node, and the drain's exclusion label: the
collection's one implementation.

Used for claim allocations (``status.allocation.nodeSelector``), ResourceSlice node selectors, DaemonSet node
affinity and the allocation explainer's node filter. A node is given as its name and its labels (or, for
``pod_refusal``, as the Node object). Pure functions over plain dicts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible_collections.dra.admin.plugins.module_utils.common.names import qualified_name_error
from ansible_collections.dra.admin.plugins.module_utils.kube.tolerations import tolerates

DEFAULT_EXCLUSION_LABEL = "dra.admin/driver-excluded"
# The node taints that keep pods off (PreferNoSchedule only steers), and the taint a cordon stands for.
REFUSING_TAINT_EFFECTS = ("NoSchedule", "NoExecute")
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
AFFINITY_REFUSAL = "no required node affinity term matches"
EXCLUSION_VALUE = "true"


def requirement_matches(requirement, present, value):
    """One NodeSelectorRequirement against a label (or field) that is `present` with `value`."""
    operator = requirement.get("operator")
    values = [str(v) for v in requirement.get("values") or []]
    if operator == "In":
        return present and value in values
    if operator == "NotIn":
        return not present or value not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and values:
        number, bound = go_parse_int(value), go_parse_int(values[0])
        if number is None or bound is None:
            return False
        return number > bound if operator == "Gt" else number < bound
    return False


_GO_INT = re.compile(r"^[+-]?[0-9]+$")


def go_parse_int(text):
    """The int64 Go's strconv.ParseInt(text, 10, 64) reads (as kube-scheduler reads Gt/Lt), else None: decimal
    digits with an optional sign, nothing else (no underscores, no spaces, as Python's int() allows), within
    int64."""
    if not isinstance(text, str) or not _GO_INT.match(text):
        return None
    number = int(text)
    return number if -2 ** 63 <= number < 2 ** 63 else None


def term_matches(term, name, labels):
    """One NodeSelectorTerm: every matchExpression (labels) and matchField (metadata.name) holds.

    An empty term matches no node.
    """
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    labels = labels or {}
    for expression in expressions:
        key = expression.get("key")
        if not requirement_matches(expression, key in labels, labels.get(key)):
            return False
    for field in fields:
        if not requirement_matches(field, field.get("key") == "metadata.name", name):
            return False
    return True


def selector_matches(node_selector, name, labels):
    """A NodeSelector (terms ORed) admits the node."""
    return any(term_matches(t, name, labels) for t in (node_selector or {}).get("nodeSelectorTerms") or [])


def label_selector_matches(label_selector, labels):
    """A LabelSelector (matchLabels and matchExpressions ANDed; a PodDisruptionBudget's, a workload's) selects an
    object of these labels. An empty selector selects every object, a null one none (as policy/v1 PDBs read it)."""
    if label_selector is None:
        return False
    labels = labels or {}
    if any(labels.get(k) != v for k, v in (label_selector.get("matchLabels") or {}).items()):
        return False
    return all(requirement_matches(e, e.get("key") in labels, labels.get(e.get("key")))
               for e in label_selector.get("matchExpressions") or [])


def node_label_map(nodes):
    """{name: labels} of Node objects (whole or metadata only): what the matchers here read of a node."""
    return dict(((n.get("metadata") or {}).get("name"), (n.get("metadata") or {}).get("labels") or {})
                for n in nodes)


def matching_nodes(node_selector, node_labels):
    """Sorted names of the nodes ({name: labels}) a NodeSelector admits."""
    return sorted(name for name, labels in node_labels.items() if selector_matches(node_selector, name, labels))


def pinned_nodes(node_selector):
    """Node names pinned with matchFields ``metadata.name In [...]`` in every term, or None when not pinned."""
    names = []
    for term in (node_selector or {}).get("nodeSelectorTerms") or []:
        fields = [f for f in term.get("matchFields") or [] if f.get("key") == "metadata.name"]
        if not fields or term.get("matchExpressions") or len(fields) != 1 or fields[0].get("operator") != "In":
            return None
        names.extend(fields[0].get("values") or [])
    return sorted(set(names)) if names else None


# --- the exclusion label --------------------------------------------------------------------

def exclusion_label_error(label, field="exclusion_label"):
    """Why `label` cannot be the exclusion label (a label key as Kubernetes defines it), or None."""
    return qualified_name_error(field, label, DEFAULT_EXCLUSION_LABEL)


def node_excluded(labels, label):
    """Whether a node's labels carry the exclusion label with the value DaemonSets exclude (``true``)."""
    return (labels or {}).get(label) == EXCLUSION_VALUE


def expression_excludes(expression, label):
    """Whether a matchExpression keeps nodes labelled ``label=true`` out (DoesNotExist, or NotIn [true])."""
    if expression.get("key") != label:
        return False
    operator = expression.get("operator")
    return operator == "DoesNotExist" or (
        operator == "NotIn" and EXCLUSION_VALUE in [str(v) for v in expression.get("values") or []])


def term_excludes(term, label):
    return any(expression_excludes(e, label) for e in term.get("matchExpressions") or [])


def terms_exclude(terms, label):
    """Every term excludes the label (terms are ORed: one term without it would still admit the node)."""
    return bool(terms) and all(term_excludes(t, label) for t in terms)


def exclusion_expression(label):
    return {"key": label, "operator": "DoesNotExist"}


def with_exclusion(terms, label):
    """nodeSelectorTerms where every term excludes `label` (``DoesNotExist`` added where a term does not
    already exclude it). No terms -> one term with only the exclusion."""
    result = []
    for term in terms or []:
        term = copy.deepcopy(term)
        if not term_excludes(term, label):
            term.setdefault("matchExpressions", []).append(exclusion_expression(label))
        result.append(term)
    return result or [{"matchExpressions": [exclusion_expression(label)]}]


def required_terms(pod_spec):
    """The required node affinity's nodeSelectorTerms of a pod spec (None when it has none)."""
    affinity = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
    return (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")


def untolerated_taints(taints, tolerations):
    """The NoSchedule/NoExecute taints none of the tolerations matches."""
    return [t for t in taints or [] if t.get("effect") in REFUSING_TAINT_EFFECTS
            and not any(tolerates(x, t) for x in tolerations or [])]


def taint_text(taint):
    return "%s=%s:%s" % (taint.get("key"), taint.get("value") or "", taint.get("effect"))


def pod_refusal(node, pod_spec, added_tolerations=()):
    """Why a pod with this spec cannot run on the node as kube-scheduler's node filters (and the DaemonSet
    controller's) see it, or None: its nodeName, nodeSelector, required node affinity, the cordon, the node's
    NoSchedule/NoExecute taints against its tolerations plus ``added_tolerations`` (a controller's own).
    CPU, memory and other resources are not read."""
    meta, spec = node.get("metadata") or {}, node.get("spec") or {}
    name, labels = meta.get("name"), meta.get("labels") or {}
    if pod_spec.get("nodeName") and pod_spec["nodeName"] != name:
        return "the pod names node %s" % pod_spec["nodeName"]
    node_selector = pod_spec.get("nodeSelector") or {}
    wrong = sorted(k for k, v in node_selector.items() if labels.get(k) != str(v))
    if wrong:
        return "nodeSelector %s does not match" % ", ".join("%s=%s" % (k, node_selector[k]) for k in wrong)
    terms = required_terms(pod_spec)
    if terms is not None and not any(term_matches(t, name, labels) for t in terms):
        return AFFINITY_REFUSAL
    tolerations = list(pod_spec.get("tolerations") or []) + list(added_tolerations)
    if spec.get("unschedulable") and untolerated_taints([UNSCHEDULABLE_TAINT], tolerations):
        return "the node is cordoned (unschedulable)"
    taints = untolerated_taints(spec.get("taints"), tolerations)
    if taints:
        return "node taint %s not tolerated" % ", ".join(taint_text(t) for t in taints)
    return None


def is_cordoned(node):
    """Whether the node is cordoned (spec.unschedulable)."""
    return bool((node.get("spec") or {}).get("unschedulable"))


def daemonset_excludes(daemonset, label):
    """Whether a DaemonSet's required node affinity keeps its pods off nodes labelled ``label=true``."""
    pod_spec = (((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {})
    return terms_exclude(required_terms(pod_spec), label)
