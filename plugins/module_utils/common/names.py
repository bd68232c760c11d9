# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The syntax Kubernetes requires of names, label keys and label values, as apimachinery's validation
defines it (IsQualifiedName, IsValidLabelValue, IsDNS1123Subdomain, IsDNS1123Label).

Each check returns why a text is refused (a message naming the field, with an example) or None, so a module
can collect every problem of its input before it changes anything. Pure functions: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# How the collection marks the objects it makes (driver DaemonSets and their RBAC, persona RBAC,
# DeviceTaintRules, capacity requests): the recommended managed-by label with the collection's name.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "dra.admin"

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_LABEL = re.compile(r"^%s$" % _DNS_LABEL)
DNS_SUBDOMAIN = re.compile(r"^%s(\.%s)*$" % (_DNS_LABEL, _DNS_LABEL))
NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")

MAX_NAME_PART = 63
MAX_SUBDOMAIN = 253


def qualified_name_error(field, text, example="example.com/name"):
    """Why `text` is not a qualified name ([prefix/]name, as label keys, annotation keys and taint keys are),
    or None."""
    text = "" if text is None else str(text)
    prefix, sep, name = text.rpartition("/")
    if not name or len(name) > MAX_NAME_PART or not NAME_PART.match(name):
        return ("%s %r: the name part must be 1-63 characters, alphanumeric at both ends, with '-', '_' or '.' "
                "between (for example %s)" % (field, text, example))
    if sep and (not prefix or len(prefix) > MAX_SUBDOMAIN or not DNS_SUBDOMAIN.match(prefix)):
        return ("%s %r: the prefix before '/' must be a DNS subdomain such as example.com (for example %s)"
                % (field, text, example))
    return None


def label_value_error(field, text):
    """Why `text` is not a label value (at most 63 characters, alphanumeric at both ends, or empty), or None."""
    text = "" if text is None else str(text)
    if len(text) > MAX_NAME_PART or not LABEL_VALUE.match(text):
        return ("%s %r must be at most 63 characters, alphanumeric at both ends, with '-', '_' or '.' between "
                "(or empty)" % (field, text))
    return None


def subdomain_error(field, text, example="gpu.example.com"):
    """Why `text` is not a DNS subdomain (object names such as nodes', driver names), or None."""
    text = "" if text is None else str(text)
    if not text or len(text) > MAX_SUBDOMAIN or not DNS_SUBDOMAIN.match(text):
        return ("%s %r must be a DNS subdomain: lowercase letters, digits, '-' and '.', at most 253 characters "
                "(for example %s)" % (field, text, example))
    return None


def dns_label_error(field, text, example="dra-system"):
    """Why `text` is not a DNS label (namespace names), or None."""
    text = "" if text is None else str(text)
    if not text or len(text) > MAX_NAME_PART or not DNS_LABEL.match(text):
        return ("%s %r must be a DNS label: lowercase letters, digits and '-', at most 63 characters "
                "(for example %s)" % (field, text, example))
    return None


def label_errors(field, labels):
    """Every problem of a {key: value} label map, each naming the key."""
    errors = []
    for key in sorted(labels or {}, key=str):
        errors.append(qualified_name_error("%s key" % field, key))
        errors.append(label_value_error("%s[%s]" % (field, key), labels[key]))
    return [e for e in errors if e]


def object_ref_error(field, ref):
    """Why `ref` is not a namespace/name reference to a namespaced object, or None."""
    text = "" if ref is None else str(ref)
    if text.count("/") != 1 or not all(text.split("/")):
        return "%s entry %r must be namespace/name (for example dra-system/gpu-driver)" % (field, text)
    namespace, name = text.split("/")
    return (dns_label_error("%s entry %r: namespace" % (field, text), namespace)
            or subdomain_error("%s entry %r: name" % (field, text), name, "gpu-driver"))
