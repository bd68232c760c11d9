# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""kubeadm_config against the cluster: the kubeadm-config ConfigMap read, its ClusterConfiguration
changed by _kubeadm_config, a backup of the old text, and the ConfigMap written back (conditionally,
with the resourceVersion it was read with)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.dra.admin.plugins.module_utils.control_plane import kubeadm_config as kc
from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApiError
from ansible_collections.dra.admin.plugins.module_utils.access.files import DEFAULT_BACKUP_KEEP, backup_text

PATH = "/api/v1/namespaces/%s/configmaps/%s" % (kc.CONFIG_MAP_NAMESPACE, kc.CONFIG_MAP_NAME)
WHERE = "%s/%s %s" % (kc.CONFIG_MAP_NAMESPACE, kc.CONFIG_MAP_NAME, kc.DATA_KEY)


def replace(api, config_map, new_text):
    """PUT the ConfigMap with the new ClusterConfiguration and the resourceVersion it was read with."""
    body = copy.deepcopy(config_map)
    body["data"][kc.DATA_KEY] = new_text
    try:
        api.request("PUT", PATH, body=body, content_type="application/json")
    except DraApiError as exc:
        if exc.status == 409:
            raise DraApiError("%s changed while this task ran (someone else wrote it): nothing written; run the task "
                              "again" % WHERE, status=exc.status)
        raise


def update(api, params, result, check_mode=False, with_diff=False):
    """Merge extra_args and extra_volumes into the ClusterConfiguration, filling in result (changed, found,
    cluster_configuration, skipped_volumes, diff, backup_file) as it goes; nothing is read or written when
    the input is bad, nothing written in check mode. ManifestError, DraApiError, IOError and OSError are
    the caller's (result says how far it got)."""
    kc.normalize_args(params["extra_args"])  # bad input fails even where there is no ConfigMap
    kc.normalize_volumes(params["extra_volumes"])
    config_map = api.get_or_none(PATH)
    if config_map is None:
        return result
    text = (config_map.get("data") or {}).get(kc.DATA_KEY)
    new_text, changed, dummy, after, skipped = kc.edit_cluster_configuration_text(
        text, params["extra_args"], params["extra_volumes"], WHERE)
    result.update(changed=changed, found=True, cluster_configuration=after, skipped_volumes=skipped)
    if changed and with_diff:
        result["diff"] = dict(before=text, after=new_text, before_header=WHERE, after_header=WHERE)
    if changed and not check_mode:
        if params["backup"]:
            result["backup_file"] = backup_text(text, "%s.%s" % (kc.CONFIG_MAP_NAME, kc.DATA_KEY),
                                                params["backup_dir"], params.get("backup_keep", DEFAULT_BACKUP_KEEP))
        replace(api, config_map, new_text)
    return result


def skipped_volume_warnings(skipped_volumes):
    """One warning per volume left out because its component already mounts something else there."""
    return ["%s: volume %s left out: %s already mounts something else at %s"
            % (WHERE, volume["name"], component, volume["mountPath"])
            for component in sorted(skipped_volumes) for volume in skipped_volumes[component]]
