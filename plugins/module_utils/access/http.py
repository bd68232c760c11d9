# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Plain HTTP GETs (a Prometheus HTTP API, a component's /metrics) through ansible's open_url, counted.

The API server is reached through api.py only; this is for the endpoints that are not the API:
client certificate, bearer token, CA bundle and certificate checking as the caller gives them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.urls import open_url

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError


class SourceError(DraAdminError):
    """A metrics source could not be read; the message says which and why."""

    def __init__(self, message, status=None, body=""):
        super(SourceError, self).__init__(message)
        self.status = status
        self.body = body


class Http(object):
    """GETs through ansible's open_url, counting requests."""

    def __init__(self, timeout):
        self.timeout = timeout
        self.requests = 0

    def get(self, url, headers=None, validate_certs=True, ca_path=None, client_cert=None, client_key=None):
        self.requests += 1
        try:
            response = open_url(url, method="GET", headers=headers or {}, validate_certs=validate_certs,
                                ca_path=ca_path, client_cert=client_cert, client_key=client_key,
                                timeout=self.timeout)
            return to_text(response.read(), errors="surrogate_or_strict")
        except Exception as exc:  # open_url raises HTTPError, URLError, SSL and socket errors alike
            body = ""
            if hasattr(exc, "read"):
                try:
                    body = to_text(exc.read())
                except Exception:  # pylint: disable=broad-except
                    body = ""
            raise SourceError("GET %s failed: %s%s" % (url, exc, (": " + body[:300]) if body else ""),
                              status=getattr(exc, "code", None), body=body)
