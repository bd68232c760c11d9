# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""dra_node_drain's parameters checked before anything is read or written. Pure."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.common.names import label_errors, object_ref_error, subdomain_error
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import exclusion_label_error
from ansible_collections.dra.admin.plugins.module_utils.common.waits import since_error, wait_parameter_errors


def input_errors(params, spec=None):
    """Every problem of the parameters, each naming the option and the fix; checked before anything is read
    or written."""
    errors = wait_parameter_errors(params, spec=spec)
    errors.append(subdomain_error("node", params["node"], "gpu-node-7"))
    errors.append(exclusion_label_error(params["exclusion_label"]))
    if params["grace_period"] is not None and params["grace_period"] < 0:
        errors.append("grace_period must be 0 or more seconds, got %s" % params["grace_period"])
    if params["device_driver"]:  # device_pool and device need it: the module's required_by
        errors.append(subdomain_error("device_driver", params["device_driver"]))
    if not params["wait"] and (params["state"] != "drained" or params["device_driver"]):
        errors.append("wait=false is for state=drained of the node drain (no device_driver); the return to service "
                      "and the device mode wait in their call")
    if params.get("preview") and (params["state"] != "drained" or params["device_driver"]):
        errors.append("preview is for state=drained of the node drain (no device_driver); for devices, use "
                      "dra_device_taint's dry run")
    errors.append(since_error(params, "drain"))
    errors.extend(object_ref_error("driver_daemonsets", ref) for ref in params["driver_daemonsets"])
    errors.extend(label_errors("driver_pod_labels", params["driver_pod_labels"]))
    for option in ("drivers", "drivers_not_in_pods"):
        errors.extend(subdomain_error("%s entry" % option, name) for name in params[option])
    return [e for e in errors if e]
