# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Prometheus's text exposition format, as the Kubernetes components serve it on /metrics: parsing it into
samples, selecting samples by name and label matchers, and writing a label value (the textfile metrics of the
capacity report and the canary, and the PromQL selectors of the diagnosis rules, escape values alike).

Pure: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError

# ---------------------------------------------------------------------------
# Text exposition format
# ---------------------------------------------------------------------------

_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


class ParseError(DraAdminError, ValueError):
    """A line of metrics text that is not in the exposition format."""


class Sample(object):
    """One sample: metric name, labels (a dict) and value (a float)."""

    __slots__ = ("name", "labels", "value")

    def __init__(self, name, labels, value):
        self.name = name
        self.labels = labels
        self.value = value

    def key(self):
        return (self.name, tuple(sorted(self.labels.items())))

    def __repr__(self):
        return "Sample(%r, %r, %r)" % (self.name, self.labels, self.value)


class Scrape(object):
    """Parsed metrics text: the samples, and the declared type of each family."""

    def __init__(self, samples, types):
        self.samples = samples
        self.types = types

    def names(self):
        return set(s.name for s in self.samples)

    def family_names(self):
        """Metric family names: histogram series count under their family name too."""
        names = set(self.types)
        for name in self.names():
            names.add(name)
            for suffix in HISTOGRAM_SUFFIXES + ("_total",):
                if name.endswith(suffix):
                    names.add(name[:-len(suffix)])
        return names


def parse_value(text):
    lowered = text.lower()
    if lowered in ("+inf", "inf"):
        return float("inf")
    if lowered == "-inf":
        return float("-inf")
    if lowered == "nan":
        return float("nan")
    return float(text)


def _parse_labels(line, pos, lineno):
    """Parse ``{a="b",...}`` starting at ``line[pos] == '{'``; return (labels, position after '}')."""
    labels = {}
    pos += 1
    length = len(line)
    while True:
        while pos < length and line[pos] in " \t":
            pos += 1
        if pos < length and line[pos] == "}":
            return labels, pos + 1
        match = _LABEL_NAME_RE.match(line, pos)
        if not match:
            raise ParseError("line %d: expected a label name at column %d: %s" % (lineno, pos + 1, line))
        name = match.group(0)
        pos = match.end()
        while pos < length and line[pos] in " \t":
            pos += 1
        if pos >= length or line[pos] != "=":
            raise ParseError("line %d: expected = after label %s: %s" % (lineno, name, line))
        pos += 1
        while pos < length and line[pos] in " \t":
            pos += 1
        if pos >= length or line[pos] != '"':
            raise ParseError("line %d: expected a quoted value of label %s: %s" % (lineno, name, line))
        pos += 1
        chars = []
        while True:
            if pos >= length:
                raise ParseError("line %d: unterminated value of label %s: %s" % (lineno, name, line))
            char = line[pos]
            if char == "\\" and pos + 1 < length:
                chars.append(_ESCAPES.get(line[pos + 1], "\\" + line[pos + 1]))
                pos += 2
                continue
            if char == '"':
                pos += 1
                break
            chars.append(char)
            pos += 1
        labels[name] = "".join(chars)
        while pos < length and line[pos] in " \t":
            pos += 1
        if pos < length and line[pos] == ",":
            pos += 1
        elif pos < length and line[pos] == "}":
            return labels, pos + 1
        else:
            raise ParseError("line %d: expected , or } after label %s: %s" % (lineno, name, line))


def parse_text(text, names=None):
    """Parse Prometheus (or OpenMetrics) text exposition into a Scrape.

    `names` (metric names): only their samples are parsed and kept; every other sample line is passed over
    unread (an API server's /metrics holds tens of thousands of samples, a reader of one family needs a few)."""
    samples = []
    types = {}
    wanted = tuple(names) if names is not None else None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3].strip()
            continue
        if wanted is not None and not line.startswith(wanted):
            continue
        match = _NAME_RE.match(line)
        if not match:
            raise ParseError("line %d: expected a metric name: %s" % (lineno, line))
        name = match.group(0)
        if wanted is not None and name not in wanted:
            continue
        pos = match.end()
        labels = {}
        if pos < len(line) and line[pos] == "{":
            labels, pos = _parse_labels(line, pos, lineno)
        rest = line[pos:].split(" # ", 1)[0].split()
        if not rest:
            raise ParseError("line %d: no value: %s" % (lineno, line))
        try:
            value = parse_value(rest[0])
        except ValueError:
            raise ParseError("line %d: value %r is not a number: %s" % (lineno, rest[0], line))
        samples.append(Sample(name, labels, value))
    return Scrape(samples, types)


# ---------------------------------------------------------------------------
# Selection, rates and quantiles
# ---------------------------------------------------------------------------

def _matches(labels, matchers):
    for label, op, value in matchers:
        actual = labels.get(label, "")
        if op == "=" and actual != value:
            return False
        if op == "!=" and actual == value:
            return False
        if op in ("=~", "!~"):
            hit = re.match("(?:%s)$" % value, actual) is not None
            if hit != (op == "=~"):
                return False
    return True


def select(samples, name, matchers=()):
    """Samples named ``name`` whose labels satisfy every (label, op, value) matcher."""
    return [s for s in samples if s.name == name and _matches(s.labels, matchers)]


def label_value(value):
    """A label value quoted and escaped for the text format and PromQL (backslash, newline, double quote)."""
    return '"%s"' % str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def labels_text(**labels):
    """``{a="1",b="2"}`` of the labels, sorted by name."""
    return "{%s}" % ",".join("%s=%s" % (k, label_value(v)) for k, v in sorted(labels.items()))


# The gauge every Kubernetes component reports its feature gates in (1 on, 0 off), label name.
FEATURE_ENABLED = "kubernetes_feature_enabled"


def enabled_gates(samples):
    """{gate: bool} a component reports on /metrics (kubernetes_feature_enabled)."""
    return dict((s.labels.get("name"), s.value == 1) for s in select(samples, FEATURE_ENABLED) if s.labels.get("name"))
