# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Whether the Kubernetes binaries a node upgrade installs are the release's: each one's sha256 against the digest
the release publishes beside it (dl.k8s.io/release/<version>/bin/linux/<arch>/<name>.sha256: the bare hex digest) or
the one the user gives.

Pure functions over the results of the stat and slurp tasks of role node_upgrade: no Ansible, no file IO.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import re

# The binaries role node_upgrade installs, in the order it installs them.
NODE_BINARIES = ("kubeadm", "kubelet", "kubectl")

_DIGEST_RE = re.compile(r"^[0-9a-f]{64}$")


def published_digest(text):
    """The digest of a .sha256 file: its first word (the release's files hold the digest alone; `sha256sum`'s output
    adds the file name after it), lower case; None when that is no sha256 digest."""
    words = str(text or "").split()
    digest = words[0].lower() if words else ""
    return digest if _DIGEST_RE.match(digest) else None


def _by_item(results):
    return dict((r.get("item"), r) for r in results or [] if isinstance(r, dict))


def checksum_problems(stats, published, given=None, names=NODE_BINARIES):
    """What keeps the binaries from being installed, one message per binary (empty when every one is checked).

    stats: the results of ansible.builtin.stat (checksum_algorithm sha256) looped over names; published: the results
    of ansible.builtin.slurp of each <name>.sha256 beside them (a failed read: no published digest); given: {name:
    sha256} the user's digests, which win over the published ones."""
    given = dict(given or {})
    stats, published = _by_item(stats), _by_item(published)
    problems = []
    for name in sorted(set(given) - set(names)):
        problems.append("dra_node_upgrade_checksums names %s, which is none of the binaries installed (%s)"
                        % (name, ", ".join(names)))
    for name in names:
        stat = (stats.get(name) or {}).get("stat") or {}
        if not stat.get("exists"):
            problems.append("%s: not found in dra_node_upgrade_binaries_dir" % name)
            continue
        if name in given:
            expected, source = published_digest(given[name]), "dra_node_upgrade_checksums.%s" % name
            if expected is None:
                problems.append("%s: dra_node_upgrade_checksums.%s %r is not a sha256 digest (64 hex digits)"
                                % (name, name, given[name]))
                continue
        else:
            read = published.get(name) or {}
            content = read.get("content")
            if read.get("failed") or content is None:
                problems.append("%s: no %s.sha256 beside it and no dra_node_upgrade_checksums.%s: download the "
                                "release's %s.sha256 with the binary (dl.k8s.io/release/<version>/bin/linux/<arch>/) or "
                                "give its digest" % (name, name, name, name))
                continue
            text = base64.b64decode(content).decode("utf-8", "replace") if read.get("encoding") == "base64" else content
            expected, source = published_digest(text), "%s.sha256" % name
            if expected is None:
                problems.append("%s: %s.sha256 holds no sha256 digest" % (name, name))
                continue
        if stat.get("checksum") != expected:
            problems.append("%s: sha256 %s is not the one %s gives (%s): this is not the release's binary; replace it "
                            "with the published one" % (name, stat.get("checksum"), source, expected))
    return problems
