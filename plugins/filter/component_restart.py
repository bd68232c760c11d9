# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filters dra.admin.component_endpoint, dra.admin.tuning_written, dra.admin.manifest_image and
dra.admin.reader_token_seconds: what the steps
around a control-plane component change compute (see their .yml documentation next to this file)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.control_plane import component_reader, restart


def _wrap(name, function, *args):
    try:
        return function(*args)
    except DraAdminError as error:
        raise AnsibleFilterError("dra.admin.%s: %s" % (name, error))


def component_endpoint_filter(flags, component, endpoints, endpoint_host, ca_file=None):
    return _wrap("component_endpoint", restart.component_endpoint, component, flags, endpoints,
                 endpoint_host, ca_file)


def reader_token_seconds_filter(wait_timeout, asked=None):
    return _wrap("reader_token_seconds", component_reader.token_seconds, wait_timeout, asked)


def tuning_written_filter(result, component):
    return _wrap("tuning_written", restart.tuning_written, component, result)


def manifest_image_filter(text, container):
    return _wrap("manifest_image", restart.manifest_image, text, container)


class FilterModule(object):
    def filters(self):
        return {"component_endpoint": component_endpoint_filter, "tuning_written": tuning_written_filter,
                "manifest_image": manifest_image_filter, "reader_token_seconds": reader_token_seconds_filter}
