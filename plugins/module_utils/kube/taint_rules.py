# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""DeviceTaintRules as Kubernetes reads them: the resource, the taint effects, and which devices a rule selects.

Which devices a rule selects is answered here once, for every reader of the collection (the capacity report,
the canary's free device, the allocation explainer, device maintenance and health). Two Kubernetes components
read a rule, and they do not read it alike:

- kube-scheduler's allocator (``k8s.io/dynamic-resource-allocation/resourceslice/tracker``): a rule without
  ``deviceSelector`` selects every device up to 1.37.0, and no device from 1.37.1 and 1.38 on
  (``allocator_reader``, ``catalog.TAINT_RULE_NO_SELECTOR_NONE_FROM``; an empty ``deviceSelector: {}`` still
  selects every device); each of ``driver``, ``pool`` and ``device`` that is set must equal
  the device's. On 1.33 and 1.34 the selector may also name a DeviceClass and CEL selectors, and then every
  selector of the class and of the rule must match too (1.35 dropped both fields).
- kube-controller-manager's device-taint-eviction controller: from 1.35 it matches a claim's allocated devices
  itself (``ruleMatchesDevice``), and a rule without ``deviceSelector`` selects no device there; before 1.35 it
  read the tracker, as the allocator does.

So a rule without a selector keeps every device from new allocations but evicts nobody on 1.35 to 1.37.0, and
from 1.37.1 and 1.38 on it does nothing at all: the callers that ask what the scheduler does pass
``reader=allocator_reader(version)`` (``ALLOCATOR``, the reading before the change, when the release is unknown),
those that ask whom the eviction controller evicts pass ``eviction_reader(minor)``.

Pure: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.kube.cel import class_expressions, selector_expressions
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import (
    TAINT_RULE_NO_SELECTOR_NONE_FROM, has_patch_change,
)

RESOURCE = "devicetaintrules"
KIND = "DeviceTaintRule"

EFFECT_NONE = "None"
NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
EFFECTS = (EFFECT_NONE, NO_SCHEDULE, NO_EXECUTE)
# The effects that keep new allocations off a device, and so a device out of service (NoExecute also evicts);
# None, and an effect this release does not know, only reports. The capacity report, device health, device
# maintenance and the allocation explainer read it.
KEEPS_ALLOCATIONS_OFF = (NO_SCHEDULE, NO_EXECUTE)

ALLOCATOR = "allocator"
# kube-scheduler's allocator from 1.37.1 and 1.38: as ALLOCATOR, except that a rule without selector selects nothing.
ALLOCATOR_NO_SELECTOR_NONE = "allocator-no-selector-none"
EVICTION = "eviction"
# The readers for which a rule without deviceSelector selects every device.
NO_SELECTOR_SELECTS_ALL = (ALLOCATOR,)
# From this release the device-taint-eviction controller matches rules itself (a rule without selector: none).
OWN_EVICTION_MATCH_FROM = 35
SELECTOR_FIELDS = ("driver", "pool", "device")


def eviction_reader(minor):
    """The reader whose answer the device-taint-eviction controller of release 1.<minor> gives."""
    return EVICTION if minor is None or minor >= OWN_EVICTION_MATCH_FROM else ALLOCATOR


def allocator_reader(version):
    """The reader whose answer kube-scheduler's allocator of `version` gives (ALLOCATOR when None: unknown)."""
    if version is None or not has_patch_change(TAINT_RULE_NO_SELECTOR_NONE_FROM, version):
        return ALLOCATOR
    return ALLOCATOR_NO_SELECTOR_NONE


def rule_effect(rule):
    return (((rule or {}).get("spec") or {}).get("taint") or {}).get("effect")


def keeps_allocations_off(rule):
    """Whether the rule's taint keeps new allocations off the devices it selects (NoSchedule, NoExecute)."""
    return rule_effect(rule) in KEEPS_ALLOCATIONS_OFF


def rule_expressions(selector, classes=None):
    """The CEL expressions a 1.33/1.34 selector adds: its DeviceClass's selectors, then its own."""
    selector = selector or {}
    own = selector_expressions(selector.get("selectors"))
    if not selector.get("deviceClassName"):
        return own
    return class_expressions((classes or {}).get(selector["deviceClassName"])) + own


def fields_match(selector, driver, pool, device):
    """Each of driver, pool and device that the selector sets equals the device's."""
    return all(not selector.get(k) or selector[k] == v for k, v in zip(SELECTOR_FIELDS, (driver, pool, device)))


def rule_selects(rule, driver, pool, device, reader=ALLOCATOR, evaluate=None, classes=None):
    """Whether a DeviceTaintRule selects one device for ``reader`` (selector_selects of its deviceSelector)."""
    return selector_selects(((rule or {}).get("spec") or {}).get("deviceSelector"), driver, pool, device,
                            reader, evaluate, classes)


def selector_selects(selector, driver, pool, device, reader=ALLOCATOR, evaluate=None, classes=None):
    """Whether a rule's deviceSelector selects one device for ``reader``: True, False, or None when only CEL can
    tell (a 1.33/1.34 selector with a DeviceClass or CEL selectors) and no ``evaluate`` was given.

    evaluate: expressions -> True/False (the device's CEL verdict; the allocator's tracker fails on an error,
    so a caller answers True there: the device may be kept off); classes: {name: DeviceClass}.
    """
    if selector is None:
        return reader in NO_SELECTOR_SELECTS_ALL
    if not fields_match(selector, driver, pool, device):
        return False
    if not selector.get("deviceClassName") and not selector.get("selectors"):
        return True
    return evaluate(rule_expressions(selector, classes)) if evaluate is not None else None
