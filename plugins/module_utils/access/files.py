# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Files on the host a module runs on: the collection's one way to read them (component_flags,
kubelet_config, a local chart's Chart.yaml), and for the modules that edit node files a backup
first, then an atomic write. (nodes.hardware reads sysfs and procfs its own lenient way.)"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import shutil
import tempfile
import time

# Where the modules that change a node's files keep their backups (component_flags, kubelet_config; the
# feature_gates and control_plane_tuning roles' *_backup_dir defaults repeat it, checked by a unit test), and
# where kubeadm_config keeps the ClusterConfiguration it changes, on the host the module runs on.
NODE_BACKUP_DIR = "/etc/kubernetes/dra-admin-backups"
CONTROLLER_BACKUP_DIR = "~/.dra-admin/backups"


# How many backups of one file a backup directory keeps (the option backup_keep); 0 keeps every one.
DEFAULT_BACKUP_KEEP = 10


def backup_options(default_dir):
    """The argument spec entries of the backup options (plugins/doc_fragments/backup.py documents them)."""
    return dict(backup=dict(type="bool", default=True), backup_dir=dict(type="path", default=default_dir),
                backup_keep=dict(type="int", default=DEFAULT_BACKUP_KEEP))


# The name _backup_target gives a backup: the file's name, the UTC time to the second, its microseconds.
_STAMP = r"\.\d{8}T\d{6}\.\d{6}$"


def backups_to_prune(names, name, keep):
    """Of the file names in a backup directory, the backups of `name` (only those this collection wrote: `name` and
    its time stamp) beyond the `keep` newest; none when keep is 0."""
    if not keep:
        return []
    pattern = re.compile("^" + re.escape(name) + _STAMP)
    own = sorted(n for n in names if pattern.match(n))
    return own[:-keep] if len(own) > keep else []


def prune_backups(name, backup_dir, keep):
    """Remove the backups of `name` in `backup_dir` beyond the `keep` newest (backups_to_prune); return their paths."""
    removed = []
    for old in backups_to_prune(os.listdir(backup_dir), name, keep):
        path = os.path.join(backup_dir, old)
        if os.path.isfile(path) and not os.path.islink(path):
            os.remove(path)
            removed.append(path)
    return removed


def read_text(path):
    """The UTF-8 text of the file `path`."""
    with open(path, "rb") as handle:
        return handle.read().decode("utf-8")


def read_regular_file(path, missing, not_a_file, error):
    """read_text of `path` when it is a regular file; otherwise raise error(missing % path) when it does not
    exist, error(not_a_file % path) when it is something else."""
    if not os.path.exists(path):
        raise error(missing % path)
    if not os.path.isfile(path):
        raise error(not_a_file % path)
    return read_text(path)


def _backup_target(name, backup_dir):
    """A timestamped path for a backup of `name` in `backup_dir` (created 0700)."""
    if not os.path.isdir(backup_dir):
        os.makedirs(backup_dir, 0o700)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + ".%06d" % (int(time.time() * 1e6) % 1000000)
    return os.path.join(backup_dir, "%s.%s" % (name, stamp))


def backup_file(path, backup_dir, keep=DEFAULT_BACKUP_KEEP):
    """Copy `path` into `backup_dir` (created 0700) under a timestamped name, keeping the `keep` newest backups of
    that file (0: every one); return the copy's path."""
    target = _backup_target(os.path.basename(path), backup_dir)
    shutil.copy2(path, target)
    prune_backups(os.path.basename(path), backup_dir, keep)
    return target


def move_to_backup(path, backup_dir):
    """Move `path` (a file or a socket) into `backup_dir` (created 0700) under a timestamped name, so that moving
    it back undoes the change; return where it went."""
    target = _backup_target(os.path.basename(path), backup_dir)
    shutil.move(path, target)
    return target


def backup_text(text, name, backup_dir, keep=DEFAULT_BACKUP_KEEP):
    """Save `text` (something that is not a host file, such as a ConfigMap's data) into `backup_dir` as a
    timestamped file named after `name`, readable by its owner only, keeping the `keep` newest backups of `name`
    (0: every one); return its path."""
    target = _backup_target(name, backup_dir)
    handle = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(handle, "wb") as out:
        out.write(text.encode("utf-8"))
    prune_backups(name, backup_dir, keep)
    return target


def write_atomically(module, path, text):
    """Write through a temporary file in the module's own temp dir (never beside the target, where the
    kubelet would read a manifest directory), then atomic_move over the target."""
    handle, temp = tempfile.mkstemp(dir=module.tmpdir)
    with os.fdopen(handle, "wb") as out:
        out.write(text.encode("utf-8"))
    module.atomic_move(temp, path)
