# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The backup options of the modules that change a file or an object (their argument spec:
plugins/module_utils/access/files.backup_options; the defaults: NODE_BACKUP_DIR, CONTROLLER_BACKUP_DIR)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    # Files of the node the module runs on (static Pod manifests, kubelet and scheduler configuration).
    DOCUMENTATION = r"""
options:
  backup:
    description:
      - Copy each file into O(backup_dir) before changing it, named after the file with the UTC time of the copy
        (see RV(backup_file)).
    type: bool
    default: true
  backup_dir:
    description:
      - Where backups go, on the node. Created when missing.
    type: path
    default: /etc/kubernetes/dra-admin-backups
"""

    # An API object saved on the host the module runs on (the controller, or a delegated host).
    CONTROLLER = r"""
options:
  backup:
    description:
      - Save the object into O(backup_dir) before changing it, named after the object with the UTC time of the copy
        (see RV(backup_file)).
    type: bool
    default: true
  backup_dir:
    description:
      - Where backups go, on the host the module runs on. Created when missing.
    type: path
    default: ~/.dra-admin/backups
"""

    # The retention both kinds of backup share (access/files: only this collection's backups of the same file are
    # pruned); a module lists it beside dra.admin.backup or dra.admin.backup.controller.
    KEEP = r"""
options:
  backup_keep:
    description:
      - How many backups of each file O(backup_dir) keeps - after a backup, the oldest of that file's backups beyond
        this many are removed. Only backups this collection wrote of the same file are counted and removed (the
        file's name followed by its time stamp); other files in O(backup_dir) are left alone. V(0) keeps every
        backup.
    type: int
    default: 10
"""
