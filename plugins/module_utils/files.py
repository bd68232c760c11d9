# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Host file writes shared by the modules that edit node files: a backup first, then an atomic write."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import tempfile
import time


def read_text(path, missing, not_a_file, error):
    """The UTF-8 text of the regular file `path`; raise error(missing % path) or error(not_a_file % path)."""
    if not os.path.exists(path):
        raise error(missing % path)
    if not os.path.isfile(path):
        raise error(not_a_file % path)
    with open(path, "rb") as handle:
        return handle.read().decode("utf-8")


def backup_file(path, backup_dir):
    """Copy `path` into `backup_dir` (created 0700) under a timestamped name; return the copy's path."""
    if not os.path.isdir(backup_dir):
        os.makedirs(backup_dir, 0o700)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + ".%06d" % (int(time.time() * 1e6) % 1000000)
    target = os.path.join(backup_dir, "%s.%s" % (os.path.basename(path), stamp))
    shutil.copy2(path, target)
    return target


def write_atomically(module, path, text):
    """Write through a temporary file in the module's own temp dir (never beside the target, where the
    kubelet would read a manifest directory), then atomic_move over the target."""
    handle, temp = tempfile.mkstemp(dir=module.tmpdir)
    with os.fdopen(handle, "wb") as out:
        out.write(text.encode("utf-8"))
    module.atomic_move(temp, path)
