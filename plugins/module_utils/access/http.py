# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Plain HTTP GETs (a Prometheus HTTP API, a component's /metrics) through ansible's open_url, counted.

The API server is reached through api.py only; this is for the endpoints that are not the API:
client certificate, bearer token, CA bundle and certificate checking as the caller gives them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from urllib.parse import unquote, urlsplit, urlunsplit

from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.urls import open_url

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError


class SourceError(DraAdminError):
    """A metrics source could not be read; the message says which and why."""

    def __init__(self, message, status=None, body=""):
        super(SourceError, self).__init__(message)
        self.status = status
        self.body = body


def url_credentials(url):
    """The secrets a URL carries in its user info (https://user:password@host/): the password (raw and decoded)
    and the whole user info, for a module's no_log_values; [] without."""
    try:
        parts = urlsplit(str(url or ""))
    except ValueError:
        return []
    if "@" not in parts.netloc:
        return []
    userinfo = parts.netloc.rsplit("@", 1)[0]
    secrets = [userinfo]
    if ":" in userinfo:
        password = userinfo.split(":", 1)[1]
        secrets += [password, unquote(password)]
    return [s for s in secrets if s]


def hide_url_credentials(module, urls):
    """Make Ansible mask the credentials of these URLs wherever they would show (the result, its invocation,
    messages, -vvv): a module's no_log_values."""
    for url in urls:
        module.no_log_values.update(url_credentials(url))


def shown_url(url):
    """The URL as messages show it: user info replaced by ***."""
    try:
        parts = urlsplit(str(url or ""))
    except ValueError:
        return "<unreadable URL>"
    if "@" not in parts.netloc:
        return str(url)
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


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
            reason = str(exc).replace(str(url), shown_url(url))
            raise SourceError("GET %s failed: %s%s" % (shown_url(url), reason, (": " + body[:300]) if body else ""),
                              status=getattr(exc, "code", None), body=body)
