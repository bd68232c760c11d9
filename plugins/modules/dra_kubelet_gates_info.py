#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_kubelet_gates_info
short_description: Read the kubelet's feature gates on its own host, for the upgrade check
version_added: 0.1.0
description:
  - Runs on a node. Finds the running kubelet (the process named C(kubelet)), reads its command line
    (C(/proc/<pid>/cmdline)), the KubeletConfiguration file of its C(--config) and the C(*.conf) files of its
    C(--config-dir), and merges their feature gates as the kubelet does - the drop-ins over the file, then
    C(--feature-gates) over both, gate by gate.
  - The result is what M(dra.admin.dra_upgrade_check_info) takes as O(dra.admin.dra_upgrade_check_info#module:kubelet_host_gates)
    (playbook C(upgrade_check.yml) gathers it from every node host). Nothing is asked of the API server, and the
    kubelet's API (C(nodes/proxy)) is not needed.
  - A host where no kubelet runs, or whose files cannot be read, gets RV(error) and no RV(gates), never a guess;
    the task does not fail, so the check names that node instead.
  - Read-only; the same answer in check mode.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - dra.admin.attributes
  - dra.admin.attributes.info_module
  - dra.admin.attributes.platform
options:
  node_name:
    description:
      - The Kubernetes Node of this host; by default the kubelet's C(--hostname-override), else the host name in
        lower case (as the kubelet names its Node).
    type: str
  config_file:
    description:
      - The KubeletConfiguration file; by default the running kubelet's C(--config).
    type: path
attributes:
  platform:
    support: full
    platforms: posix
    details:
      - Runs on each node, as a user that may read the kubelet's configuration file (usually root).
notes:
  - The command line is the running kubelet's. A flag written to C(/var/lib/kubelet/kubeadm-flags.env) or
    C(/etc/default/kubelet) since it started counts only once the kubelet is restarted; the files are read as they
    are now, which is what the kubelet starts with.
"""

EXAMPLES = r"""
- name: The kubelet's gates on every node
  dra.admin.dra_kubelet_gates_info:
  become: true
  register: kubelet_gates
"""

RETURN = r"""
node:
  description: The Node this host's kubelet registers as.
  returned: always
  type: str
  sample: worker-1
pid:
  description: The kubelet's process id (null when none runs).
  returned: always
  type: int
gates:
  description: The kubelet's feature gates as it merges them, name to value as written; null when they could not be
    read (see RV(error)).
  returned: always
  type: dict
  sample: {DRADeviceTaints: true}
from_flags:
  description: The gates of C(--feature-gates) on its command line.
  returned: always
  type: dict
from_files:
  description: The gates of its C(--config) file and C(--config-dir) drop-ins, merged.
  returned: always
  type: dict
sources:
  description: Where they were read, C(command_line), C(config_file), C(config_dir_files).
  returned: always
  type: dict
  sample: {command_line: /proc/812/cmdline, config_file: /var/lib/kubelet/config.yaml, config_dir_files: []}
error:
  description: Why the gates could not be read (empty when they were).
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dra.admin.plugins.module_utils.common.errors import fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.upgrade.kubelet_gates_service import read


def argument_spec():
    return dict(
        node_name=dict(type="str"),
        config_file=dict(type="path"),
    )


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    with fails_on_error(module):
        result = read(module.params["node_name"], module.params["config_file"])
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
