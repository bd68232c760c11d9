# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""RFC 3339 times as the API writes them (``2026-11-23T17:06:50Z``), read and written in one way.

Pure functions: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def parse_time(text):
    """An RFC 3339 time (fractions and offsets allowed) as an aware UTC datetime; None for an empty value.

    Raises ValueError for anything else."""
    if not text:
        return None
    if isinstance(text, datetime.datetime):
        value = text
    else:
        raw = str(text).strip()
        if raw.endswith("Z") or raw.endswith("z"):
            raw = raw[:-1] + "+00:00"
        if "." in raw:  # fractions: Python before 3.11 takes only 3 or 6 digits
            head, tail = raw.split(".", 1)
            digits = tail[:len(tail) - len(tail.lstrip("0123456789"))]  # the fraction's digits, not the offset's
            raw = head + "." + (digits + "000000")[:6] + tail[len(digits):]
        value = datetime.datetime.fromisoformat(raw)
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value.astimezone(datetime.timezone.utc)


def format_time(value):
    """The API's form of an aware datetime (seconds, Z); None stays None."""
    return value.astimezone(datetime.timezone.utc).strftime(TIME_FORMAT) if value else None


def epoch_seconds(text):
    """Seconds since the epoch of an API time (None for an empty value)."""
    value = parse_time(text)
    return int(value.timestamp()) if value else None
