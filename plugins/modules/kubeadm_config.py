#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kubeadm_config
short_description: Keep kubeadm's ClusterConfiguration (the kubeadm-config ConfigMap) in step with the manifests
version_added: 0.1.0
description:
  - C(kubeadm upgrade) renders the control-plane static Pod manifests from the ClusterConfiguration in the
    C(kube-system/kubeadm-config) ConfigMap, so a flag or hostPath volume written only into a manifest is gone
    after the next upgrade. This module merges flags into a component's C(extraArgs) and hostPath volumes into
    its C(extraVolumes).
  - C(extraArgs) is a map in C(kubeadm.k8s.io/v1beta3) and a list of C(name)/C(value) items in C(v1beta4); the
    module keeps the form the ConfigMap has. Entries already there keep their place, so running it again with the
    same request changes nothing, and flags or volumes it is not asked about stay as they are.
  - A volume whose C(mountPath) the component already mounts under another name is left out (two mounts at one
    path stop the Pod) and listed in RV(skipped_volumes).
  - Only the top-level entries of the ClusterConfiguration that change are rewritten; the rest keeps its text.
  - A cluster without the ConfigMap (not set up by kubeadm) is left alone (RV(found) is false).
  - The write is a replace with the C(resourceVersion) read, so a change made meanwhile by someone else fails
    the task instead of being overwritten. Before writing, the previous ClusterConfiguration is saved into
    O(backup_dir) on the host the module runs on.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.actiongroup_k8s
  - dra.admin.backup.controller
  - dra.admin.backup.keep
options:
  extra_args:
    description:
      - Flags per component (V(kube-apiserver), V(kube-controller-manager), V(kube-scheduler)), flag name (with or
        without the leading C(--)) to value.
      - A mapping value is a map flag such as C(feature-gates) or C(runtime-config) and is written as
        C(A=true,B=false); an empty mapping leaves the flag as it is. A null value removes the flag.
    type: dict
    default: {}
  extra_volumes:
    description:
      - hostPath volumes per component, each with C(name), C(hostPath), C(mountPath) and optionally C(readOnly)
        and C(pathType), as kubeadm's C(extraVolumes) items. A volume of the same name is replaced.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    details:
      - Reports what would change and the diff; writes nothing.
  diff_mode:
    support: full
    details:
      - The ClusterConfiguration's text before and after.
"""

EXAMPLES = r"""
- name: Carry the kube-controller-manager client QPS and Burst into kubeadm-config
  dra.admin.kubeadm_config:
    extra_args:
      kube-controller-manager:
        kube-api-qps: "75"
        kube-api-burst: "150"

- name: Carry the API server's feature gates and the scheduler's configuration file
  dra.admin.kubeadm_config:
    extra_args:
      kube-apiserver:
        feature-gates: {DynamicResourceAllocation: "true"}
      kube-scheduler:
        config: /etc/kubernetes/kube-scheduler-config.yaml
    extra_volumes:
      kube-scheduler:
        - name: kube-scheduler-config
          hostPath: /etc/kubernetes/kube-scheduler-config.yaml
          mountPath: /etc/kubernetes/kube-scheduler-config.yaml
          readOnly: true
          pathType: File
"""

RETURN = r"""
changed:
  description: Whether the ClusterConfiguration changed (or would change, in check mode).
  returned: always
  type: bool
found:
  description: Whether the cluster has the C(kube-system/kubeadm-config) ConfigMap with a ClusterConfiguration.
  returned: always
  type: bool
cluster_configuration:
  description: The ClusterConfiguration after the change (empty when RV(found) is false).
  returned: always
  type: dict
  sample: {apiVersion: kubeadm.k8s.io/v1beta4, kind: ClusterConfiguration,
           controllerManager: {extraArgs: [{name: kube-api-qps, value: "75"}]}}
skipped_volumes:
  description: Per component, the volumes left out because the component already mounts something else at
    their C(mountPath).
  returned: always
  type: dict
  sample: {}
backup_file:
  description: The saved ClusterConfiguration from before the change.
  returned: changed and backup and not check mode
  type: str
  sample: /root/.dra-admin/backups/kubeadm-config.ClusterConfiguration.20250101T120000.000000
api_requests:
  description: Number of API requests the module made.
  returned: always
  type: int
"""

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError, fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.access.files import CONTROLLER_BACKUP_DIR, backup_options
from ansible_collections.dra.admin.plugins.module_utils.control_plane.manifest import HAS_YAML
from ansible_collections.dra.admin.plugins.module_utils.access.api import (
    AnsibleK8SModule, DraApi, auth_argument_spec,
)
from ansible_collections.dra.admin.plugins.module_utils.control_plane.kubeadm_config_service import skipped_volume_warnings, update


def argument_spec():
    spec = auth_argument_spec()
    spec.update(
        extra_args=dict(type="dict", default={}),
        extra_volumes=dict(type="dict", default={}),
        **backup_options(CONTROLLER_BACKUP_DIR)
    )
    return spec


def main():
    module = AnsibleK8SModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    host_error = ("saving the backup into %s failed: {error} (nothing written; set backup_dir to a writable "
                  "directory)" % params["backup_dir"])
    with fails_on_error(module, host_error=host_error) as failure:
        if not HAS_YAML:
            raise DraAdminError("PyYAML is required (pip install PyYAML)")
        api = DraApi(module)
        result = dict(changed=False, found=False, cluster_configuration={}, skipped_volumes={})
        failure.keep(result, api_requests=lambda: api.requests)
        update(api, params, result, module.check_mode, module._diff)
    for warning in skipped_volume_warnings(result["skipped_volumes"]):
        module.warn(warning)
    module.exit_json(api_requests=api.requests, **result)


if __name__ == "__main__":
    main()
