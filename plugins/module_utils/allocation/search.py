# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Can a pod's unallocated claims be allocated on one node, and why not: the scheduler's allocator, per
device with a reason.

The search is the structured allocator's (k8s.io/dynamic-resource-allocation/structured): claims in the
pod's order, requests in the claim's order, for a firstAvailable list one subrequest after the other, devices
one after the other with backtracking, so a fit is found whenever one exists. A device is usable for a
request when its pool is complete, it matches the DeviceClass's and the request's selectors, it is offered to
the node, it is not allocated to another claim (admin access may share it), its taints (its own and the
DeviceTaintRules') are tolerated and its pool's shared counters have room; matchAttribute constraints hold
across the requests they name.

Each device gets the first reason that rules it out, in the order of ``REASONS`` (the most lasting first:
a device that matches no selector is reported so even when it is also allocated). A selector that fails
with an error, or that this environment cannot evaluate, makes the verdict "cannot tell" unless no fit
exists even if every such device were usable; a fit is only reported when proven.

Pure: no Ansible, no network (CEL through ``kube.cel``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import itertools
import json
import math
import re

from ansible_collections.dra.admin.plugins.module_utils.allocation import model
from ansible_collections.dra.admin.plugins.module_utils.kube.cel import SelectorError, Unsupported, class_expressions
from ansible_collections.dra.admin.plugins.module_utils.claims import capacity
from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.kube.tolerations import tolerates
from ansible_collections.dra.admin.plugins.module_utils.kube.taint_rules import KEEPS_ALLOCATIONS_OFF, rule_selects
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import ALLOCATION_RESULTS_MAX_SIZE

FITS = "fits"
DOES_NOT_FIT = "does_not_fit"
CANNOT_TELL = "cannot_tell"
ERROR = "error"
# kube-scheduler's filters look at every node up to this many (minFeasibleNodesToFind); beyond, it may stop
# before the node where the allocator would fail.
ALL_NODES_CHECKED_UP_TO = 100

POOL_INCOMPLETE = "pool_incomplete"
POOL_INVALID = "pool_invalid"
FEATURE_OFF = "feature_off"
CLASS_SELECTOR = "class_selector"
REQUEST_SELECTOR = "request_selector"
SELECTOR_ERROR = "selector_error"
CANNOT_EVALUATE = "cannot_evaluate"
NOT_ON_NODE = "not_offered_to_node"
IN_USE = "allocated"
TAINTED = "tainted"
AVAILABLE = "available"
REASONS = (POOL_INCOMPLETE, POOL_INVALID, FEATURE_OFF, CLASS_SELECTOR, REQUEST_SELECTOR, SELECTOR_ERROR, CANNOT_EVALUATE,
           NOT_ON_NODE, IN_USE, TAINTED, AVAILABLE)
UNCERTAIN = (SELECTOR_ERROR, CANNOT_EVALUATE)
# The reasons the allocator finds only after it checks a device's node (per-device node selection): a device of
# another node with one of these is reported not offered to the node instead.
AFTER_THE_NODE = frozenset(REASONS[REASONS.index(NOT_ON_NODE) + 1:])
MAX_STEPS = 200000
# The usual DeviceClass selector, answered without CEL (the same answer: a device's driver is always a string).
DRIVER_ONLY = re.compile(r'^\s*device\.driver\s*==\s*"([^"\\]+)"\s*$')


class Context:
    """What every node's search shares: the CEL environment, classes, pools, allocated devices, taint rules,
    the scheduler's features."""

    def __init__(self, env, classes, pools, allocated, rules, features, pool_rules=None):
        self.env = env
        self.classes = classes
        self.pools = pools
        self.allocated = allocated
        self.rules = rules
        self.features = features
        self.pool_rules = pool_rules or model.pool_rules(None)
        self.index = model.PoolIndex(pools, features, self.pool_rules)
        self.pools_in_order = model.pools_in_order(self.pool_rules.get("release"), features)
        self.limit_unwinds = model.limit_unwinds(self.pool_rules.get("release"), features)
        self._activations = {}
        self._matches = {}
        self._reasons = {}

    def allocate(self, key, owner):
        """Count a device as allocated (a placed workload's); the cached reasons are stale then."""
        self.allocated[key] = owner
        self._reasons = {}

    def release(self, key):
        self.allocated.pop(key, None)
        self._reasons = {}

    def reason(self, request, pool, device):
        """static_reason without the node, cached per request signature, device entry and its pool's state (pods
        ask alike; one device name may be published by two generations of a pool, each for other nodes)."""
        key = (request.signature, device.entry, pool.status, pool.allocatable)
        if key not in self._reasons:
            self._reasons[key] = static_reason(self, request, pool, device)
        return self._reasons[key]

    def activation(self, device):
        if device.entry not in self._activations:
            self._activations[device.entry] = self.env.device_activation(device.driver, device.fields)
        return self._activations[device.entry]

    def selectors_match(self, expressions, device):
        """True/False, or the reason (SELECTOR_ERROR / CANNOT_EVALUATE) with its message."""
        for expression in expressions:
            cache_key = (expression, device.entry)
            if cache_key not in self._matches:
                self._matches[cache_key] = self._evaluate(expression, device)
            found = self._matches[cache_key]
            if found is not True:
                return found
        return True

    def _evaluate(self, expression, device):
        driver = DRIVER_ONLY.match(expression or "")
        if driver:
            return device.driver == driver.group(1)
        try:
            return self.env.matches(expression, self.activation(device))
        except SelectorError as exc:
            return (SELECTOR_ERROR, "%s: %s" % (expression, exc))
        except Unsupported as exc:
            return (CANNOT_EVALUATE, "%s: %s" % (expression, exc))

    def device_taints(self, device):
        """The device's taints and those of the DeviceTaintRules selecting it (when the cluster has taints)."""
        if model.DEVICE_TAINTS not in self.features:
            return []
        taints = list(device.taints)
        for rule in self.rules:
            if self._rule_selects(rule, device):
                taints.append((rule.get("spec") or {}).get("taint") or {})
        return taints

    def _rule_selects(self, rule, device):
        """kube.taint_rules.rule_selects as kube-scheduler of the release reads the rule (the pool rules'
        ``taint_reader``: a rule without selector selects every device up to 1.37.0, none from 1.37.1); a selector
        that errs or cannot be evaluated here counts as selecting (the tracker fails on an error: the device is
        not offered)."""
        return rule_selects(rule, device.driver, device.pool, device.name, reader=self.pool_rules["taint_reader"],
                            classes=self.classes,
                            evaluate=lambda expressions: self.selectors_match(expressions, device) is not False)


def static_reason(ctx, request, pool, device):
    """(reason, detail) of one device for one request, before its node, constraints, counts and counters."""
    if pool.status == model.POOL_INVALID:
        return POOL_INVALID, "pool %s is invalid (%s)" % (pool.label, pool.invalid_reason)
    if not pool.allocatable:
        return POOL_INCOMPLETE, "pool %s is being updated (not every slice of its generation is published)" % pool.label
    feature = _feature_reason(ctx, device)
    if feature:
        return feature
    for reason, expressions in ((CLASS_SELECTOR, class_expressions(ctx.classes.get(request.class_name))),
                                (REQUEST_SELECTOR, request.selectors)):
        found = ctx.selectors_match(expressions, device)
        if found is False:
            return reason, None
        if found is not True:
            return found
    capacity_reason = _capacity_reason(ctx, device)
    if capacity_reason:
        return capacity_reason
    if not request.admin and device.key in ctx.allocated:
        return IN_USE, "allocated to claim %s" % ctx.allocated[device.key]
    untolerated = [t for t in ctx.device_taints(device) if t.get("effect") in KEEPS_ALLOCATIONS_OFF
                   and not request.tolerates(t)]
    if untolerated:
        return TAINTED, ", ".join("%s=%s:%s" % (t.get("key"), t.get("value") or "", t.get("effect")) for t in untolerated)
    return AVAILABLE, None


def _feature_reason(ctx, device):
    """(reason, detail) when a feature decides about the device before its selectors, else None."""
    if device.binding_conditions:
        off = [g for g in model.BINDING_GATES if g not in ctx.features]
        if off:
            return FEATURE_OFF, "the device has binding conditions and %s is off" % " and ".join(off)
    if device.consumes and model.PARTITIONABLE not in ctx.features:
        return FEATURE_OFF, "the device consumes shared counters and %s is off" % model.PARTITIONABLE
    return None


# What "cannot tell" names where consumable capacity (multiple allocations of a device, capacity requests) decides.
CONSUMABLE_CAPACITY_UNMODELLED = "consumable capacity is not modelled"


def _capacity_reason(ctx, device):
    """(reason, detail) for a device the allocator checks for capacity after its selectors, else None."""
    if device.multiple and model.CONSUMABLE_CAPACITY in ctx.features:
        return CANNOT_EVALUATE, "the device allows multiple allocations (%s)" % CONSUMABLE_CAPACITY_UNMODELLED
    return None


def request_error(ctx, request):
    """Why the scheduler's allocator stops with an error on the request (None when it does not)."""
    if request.admin and model.ADMIN_ACCESS not in ctx.features:
        return "admin access is requested, but %s is off" % model.ADMIN_ACCESS
    if request.class_name not in ctx.classes:
        return "DeviceClass %s does not exist" % request.class_name
    if any(not e for e in request.selectors):
        return "a selector has no CEL expression"
    return None


def all_devices_error(pools):
    """(index, why) of the first pool gathered on the node (whatever its driver) that stops a request for all
    devices there: one being updated or invalid; None when there is none."""
    for index, pool in enumerate(pools):
        if not pool.complete:
            return index, "asks for all devices, but pool %s is being updated" % pool.label
        if pool.status == model.POOL_INVALID:
            return index, "asks for all devices, but pool %s is invalid (%s)" % (pool.label, pool.invalid_reason)
    return None


MIXED_SUBREQUESTS = ("its firstAvailable list has a request for all devices after another subrequest that selects "
                     "otherwise: before 1.36 the allocator files one subrequest's selector results under the other's "
                     "(kube-scheduler's own mix-up), which is not modelled")


def mixed_subrequests(alternatives):
    """Whether a firstAvailable list has, after its first, a request for all devices whose class or selectors differ
    from the subrequest before it: the releases before 1.36 check the devices of each such pair with the other's
    cached selector results."""
    return any(b.mode == "All" and (a.class_name, a.selectors) != (b.class_name, b.selectors)
               for a, b in zip(alternatives, alternatives[1:]))


def request_unmodelled(request):
    """What of the request this search does not model (None when it models all of it)."""
    if request.capacity:
        return "capacity requests (%s)" % CONSUMABLE_CAPACITY_UNMODELLED
    return None


class Candidates:
    """For one request on one node: every device in the allocator's search order with its reason (``ordered``),
    the usable ones, and for a request for all devices the devices it needs. Such a request is checked before
    any search, as the allocator validates it: a pool being updated or invalid, or a selector failing on any
    device of the node's pools, stops the allocator with an error (``error``); a selector this environment cannot
    evaluate there leaves the answer open (``all_unknown``)."""

    def __init__(self, ctx, request, pools, node_name, labels):
        self.request = request
        self.usable = []
        self.reasons = {}
        self.uncertain = []
        self.ordered = []
        self.error = request_error(ctx, request)
        # A pool being updated or invalid under a request for all devices: the node only, from 1.38, where the
        # allocator meets that pool (it judges the devices of the pools before it first).
        self.refusal = None
        refused_at = len(pools)
        if self.error is None and request.mode == "All":
            problem = all_devices_error(pools)
            if problem and ctx.pool_rules["all_pool_problem_node_only"]:
                self.refusal, refused_at = problem[1], problem[0]
            elif problem:
                self.error = problem[1]
        self.unmodelled = request_unmodelled(request)
        self.all_devices = [] if request.mode == "All" else None
        self.all_unknown = None
        for index, pool in enumerate(pools):
            if pool.status == model.POOL_INVALID:  # where the search meets the pool (before 1.35 it stops there)
                self.ordered.append((pool, None, POOL_INVALID, pool.invalid_reason))
            for device in pool.devices:
                reason, detail = ctx.reason(request, pool, device)
                if reason in AFTER_THE_NODE and not model.device_offered_to(device, node_name, labels):
                    # A device of another node in a slice with per-device node selection: the allocator evaluates
                    # its selectors before its node (an error there stops it too).
                    reason, detail = NOT_ON_NODE, None
                self.reasons[device.key] = (reason, detail)
                self.ordered.append((pool, device, reason, detail))
                self._sort(ctx, request, pool, device, reason, detail, index < refused_at)
        if self.refusal and (self.error or self.all_unknown):
            self.refusal = None  # a device of an earlier pool stops it first, or may

    def _sort(self, ctx, request, pool, device, reason, detail, judged_for_all=True):
        if reason in UNCERTAIN and (request.admin or device.key not in ctx.allocated):
            self.uncertain.append((pool, device, reason))
        if reason == AVAILABLE:
            self.usable.append((pool, device))
        if self.all_devices is None or not pool.allocatable or not judged_for_all:
            return
        if reason == SELECTOR_ERROR and self.error is None:
            self.error = "selector error: %s" % detail
        elif reason == CANNOT_EVALUATE and self.all_unknown is None:
            self.all_unknown = detail
        elif reason in (AVAILABLE, IN_USE, TAINTED):
            self.all_devices.append((pool, device, reason))


def counters_left(pool, allocated_keys):
    """{counter set key: {counter: Fraction}} of a pool's shared counters after the allocated devices took
    theirs (claims.capacity's rules)."""
    left = capacity.counters_left(pool.counter_sets, {})
    for device in pool.counted_devices:
        if device.key in allocated_keys:
            _take(left, device)
    return left


def _take(left, device, sign=1):
    for set_key, counters in device.consumes.items():
        have = left.setdefault(set_key, {})
        for name, value in counters.items():
            have[name] = have.get(name, 0) - sign * value


def fits_counters(left, device, per_pool):
    return capacity.counters_fit(device.consumes, left, per_pool)


class SearchLimit(DraAdminError):
    """The search took more steps than MAX_STEPS: the verdict is "cannot tell"."""


class OverTheLimit(DraAdminError):
    """A slot would take the claim past its device limit, where the allocator unwinds the search
    (model.LIMIT_UNWINDS_FROM): caught at the claim's nearest firstAvailable list or before the claim."""


class AllocatorStops(DraAdminError):
    """The allocator stops with an error where the search is now (a device of an All request that a claim
    constraint refuses: such a claim can never get all its devices)."""


class Claim:
    """A claim to allocate: its label ("namespace/name"), its requests and its matchAttribute constraints."""

    def __init__(self, label, spec):
        self.label = label
        self.spec_key = json.dumps(spec or {}, sort_keys=True)
        self.requests = model.claim_requests(spec)
        self.constraints = model.claim_constraints(spec)


def constraint_value(value, without_build):
    """An attribute's value as the release's constraints compare it: `without_build` (pool_rules'
    versions_without_build, from 1.38) versions by semver equality, which ignores build metadata (1.0.0+a is
    1.0.0+b); else as written."""
    if without_build and value and isinstance(value.get("version"), str):
        return {"version": value["version"].split("+", 1)[0]}
    return value


def attribute_value(device, name):
    """A device's attribute by fully qualified name (the driver's own domain also by bare identifier)."""
    attributes = device.fields.get("attributes") or {}
    if name in attributes:
        return attributes[name]
    domain, dummy, ident = name.rpartition("/")
    return attributes.get(ident) if domain == device.driver else None


class NodeSearch:
    """The allocator's backtracking search for a pod's claims on one node."""

    def __init__(self, ctx, claims, node_name, labels, pools=None):
        self.ctx = ctx
        self.claims = claims
        self.pools = ctx.index.for_node(node_name, labels) if pools is None else pools
        self.candidates = {}
        for ci, claim in enumerate(claims):
            for ri, alternatives in enumerate(claim.requests):
                for ai, request in enumerate(alternatives):
                    self.candidates[(ci, ri, ai)] = Candidates(ctx, request, self.pools, node_name, labels)
        # The allocator checks the requests in order and stops at the first that it refuses: with an error, or
        # (a request for all devices and a pool of the node being updated or invalid, from 1.38) for this node.
        self.stop = self._first_refusal()
        self.unmodelled = ["%s request %s: %s" % (claims[k[0]].label, c.request.label, c.unmodelled)
                           for k, c in sorted(self.candidates.items()) if c.unmodelled]
        self.mixed = [] if ctx.pool_rules["subrequest_selections_apart"] else [
            "%s request %s: %s" % (claim.label, alternatives[0].base, MIXED_SUBREQUESTS)
            for claim in claims for alternatives in claim.requests if mixed_subrequests(alternatives)]
        self.uncertain = any(c.uncertain for c in self.candidates.values())
        self.kept_results = not ctx.pool_rules["all_devices_undone"] and any(
            c.all_devices is not None for c in self.candidates.values())
        self.stops_at_invalid = not ctx.pool_rules["pools_skipped"] and any(
            p.status == model.POOL_INVALID for p in self.pools)

    def _first_refusal(self):
        """(ERROR or DOES_NOT_FIT, why) for the first request the allocator refuses before any search, in its
        order: claim after claim, request after request (each subrequest of a firstAvailable list), and the claim's
        device limit (each request's count, its devices for All, the fewest of a firstAvailable list's) after each
        request from CLAIM_LIMIT_PER_REQUEST_FROM, after the claim's last request before; None when it refuses
        none."""
        per_request = self.ctx.pool_rules["claim_limit_per_request"]
        for ci, claim in enumerate(self.claims):
            total = 0
            for ri, alternatives in enumerate(claim.requests):
                for ai in range(len(alternatives)):
                    candidates = self.candidates[(ci, ri, ai)]
                    if candidates.error or candidates.refusal:
                        return (ERROR if candidates.error else DOES_NOT_FIT, "%s request %s: %s" % (
                            claim.label, candidates.request.label, candidates.error or candidates.refusal))
                needed = min(self._needed(self.candidates[(ci, ri, ai)]) for ai in range(len(alternatives)))
                if per_request and needed > ALLOCATION_RESULTS_MAX_SIZE - total:
                    return ERROR, "claim %s request %s: adding %d devices exceeds the %d one claim may hold, with " \
                        "%d already asked for" % (claim.label, alternatives[0].base, needed,
                                                  ALLOCATION_RESULTS_MAX_SIZE, total)
                total += needed
            if total > ALLOCATION_RESULTS_MAX_SIZE:
                return ERROR, "claim %s asks for at least %d devices, more than the %d one claim may hold" % (
                    claim.label, total, ALLOCATION_RESULTS_MAX_SIZE)
        return None

    def order_matters(self):
        """Whether the pools' order can change the answer: a request for all devices (its devices are kept or a
        constraint stops the allocator where the search meets them), a device whose selector fails or cannot be
        evaluated, or an invalid pool the search may meet."""
        return any(c.all_devices is not None or c.uncertain for c in self.candidates.values()) or any(
            p.status == model.POOL_INVALID for p in self.pools)

    def run(self):
        """The chosen devices [(claim label, Request, Device)] of the first solution, or None."""
        self.reached_unknown = None
        self.steps = 0
        self.taken = {}
        self.counters = {}
        self.values = [[None] * len(c.constraints) for c in self.claims]
        self.chosen = []
        self.results = [0] * len(self.claims)
        return list(self.chosen) if self._claim(0) else None

    def _claim(self, ci):
        return ci == len(self.claims) or self._request(ci, 0)

    def _request(self, ci, ri):
        if ri == len(self.claims[ci].requests):
            try:
                return self._claim(ci + 1)
            except OverTheLimit:
                return False  # the next claim's limit: other devices here may still let it fit another way
        alternatives = self.claims[ci].requests[ri]
        if not alternatives[0].parent:
            return self._devices(ci, ri, 0, 0)
        every_one_over = True
        for ai in range(len(alternatives)):
            try:
                if self._devices(ci, ri, ai, 0):
                    return True
                every_one_over = False
            except OverTheLimit:
                continue  # the next subrequest may ask for fewer devices
        if every_one_over:
            raise OverTheLimit()
        return False

    def _needed(self, candidates):
        if candidates.all_devices is not None:
            return len(candidates.all_devices)
        return candidates.request.count

    def _devices(self, ci, ri, ai, di, start=0):
        """Fill slot `di` of the request with an option from `start` on: the devices of one request are a set, so
        each slot takes a later option than the one before it (the same first fit as trying every order)."""
        candidates = self.candidates[(ci, ri, ai)]
        needed = self._needed(candidates)
        if candidates.all_devices is not None and not needed:
            return False
        if di >= needed:
            return self._request(ci, ri + 1)
        if self.results[ci] + needed - di > ALLOCATION_RESULTS_MAX_SIZE:
            # The claim's limit (a firstAvailable list's larger subrequest, and in 1.33 the results of a request for
            # all devices the search backtracked past, which that allocator keeps).
            if self.ctx.limit_unwinds:
                raise OverTheLimit()
            return False
        if candidates.all_devices is not None:
            pool, device, reason = candidates.all_devices[di]
            return reason == AVAILABLE and self._try(ci, ri, ai, di, pool, device, di + 1)
        request = candidates.request
        if (not candidates.uncertain and len(candidates.usable) < needed - di and not self.stops_at_invalid
                and not self._repeats(request)):
            return False  # never enough: nothing on the way can stop the allocator either
        for index in range(start, len(candidates.ordered)):
            pool, device, reason, detail = candidates.ordered[index]
            if device is None:  # an invalid pool: skipped from 1.35, before the allocator stops there
                if not self.ctx.pool_rules["pools_skipped"]:
                    raise AllocatorStops("pool %s is invalid (%s)" % (pool.label, detail))
                continue
            # The allocator's order: pools it skips, then devices in use, then the selectors.
            if not pool.allocatable or self._in_use(ci, request, device):
                continue
            if reason == SELECTOR_ERROR:
                raise AllocatorStops("selector error: %s" % detail)
            if reason == CANNOT_EVALUATE:
                self.reached_unknown = self.reached_unknown or detail
                continue
            if reason != AVAILABLE:
                continue
            if self._try(ci, ri, ai, di, pool, device, self._next_start(request, index)):
                return True
        return False

    def _next_start(self, request, index):
        """Where the next slot of the request starts looking: after this device (the same first fit as trying every
        order, with fewer steps); at it where one device may fill several slots; at the first device, as 1.33's
        allocator does, where the order of steps changes the answer (it keeps the results of requests for all
        devices it backtracks past, which count against the claim's limit)."""
        if self.kept_results:
            return 0
        return index if self._repeats(request) else index + 1

    def _repeats(self, request):
        """Whether the search does not hold what the request gets (admin access before 1.34): one device may then
        fill more than one of its slots."""
        return request.admin and not self.ctx.pool_rules["admin_holds_device"]

    def _in_use_here(self, ci, request, device):
        """Taken by this search for this request: admin access shares a device, but not within its claim (before
        1.34 within its claim too: that allocator does not check it)."""
        holders = self.taken.get(device.key, ())
        if request.admin:
            return ci in holders and self.ctx.pool_rules["admin_holds_device"]
        return bool(holders)

    def _in_use(self, ci, request, device):
        """In use for this request where the allocator looks first: by this claim for admin access, else
        allocated to another claim or taken by this search."""
        return self._in_use_here(ci, request, device) or (not request.admin and device.key in self.ctx.allocated)

    def _try(self, ci, ri, ai, di, pool, device, next_start):
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise SearchLimit()
        request = self.candidates[(ci, ri, ai)].request
        undo = self._add(ci, request, pool, device)
        if undo is None:
            return False
        if request.mode == "All" and ai and not self.ctx.pool_rules["all_subrequest_kept"]:
            ai, next_start = 0, 0  # that release's allocator goes on in the list's first subrequest
        try:
            if self._devices(ci, ri, ai, di + 1, next_start):
                return True
        except OverTheLimit:
            undo()
            raise
        if request.mode == "All" and not self.ctx.pool_rules["all_devices_undone"]:
            return False  # kept for the rest of the attempt, as that release's allocator keeps them
        undo()
        return False

    def _add(self, ci, request, pool, device):
        if self._in_use_here(ci, request, device):
            return None
        left = self._pool_counters(pool) if device.consumes else None
        if left is not None and not fits_counters(left, device, pool.per_pool):
            return None
        set_values = self._constrain(ci, request, device)
        if set_values is None:
            if request.mode == "All":
                raise AllocatorStops("claim %s request %s: cannot add device %s because a claim constraint would "
                                     "not be satisfied" % (self.claims[ci].label, request.label, device.label))
            return None
        holds = not self._repeats(request)  # before 1.34 an admin-access device is not held, nor its counters
        if left is not None and holds:
            _take(left, device)
        if holds:
            self.taken.setdefault(device.key, set()).add(ci)
        self.chosen.append((self.claims[ci].label, request, device))
        self.results[ci] += 1

        def undo():
            self.chosen.pop()
            self.results[ci] -= 1
            if holds:
                self.taken[device.key].discard(ci)
            if left is not None and holds:
                _take(left, device, -1)
            for index, value in set_values:
                self.values[ci][index] = _without(self.values[ci][index], value, self.claims[ci].constraints[index][2])
        return undo

    def _pool_counters(self, pool):
        if pool.key not in self.counters:
            self.counters[pool.key] = counters_left(pool, self.ctx.allocated)
        return self.counters[pool.key]

    def _constrain(self, ci, request, device):
        """[(constraint index, the device's value)] added, or None when a constraint does not hold. A constraint
        counts what was added (the value and how many devices have it; the distinct values), so taking one device
        back leaves the others' part, as the allocator's constraints do (1.33 keeps the devices of a request for
        all devices it backtracks past, and their part in the constraints with them)."""
        changed = []
        for index, (names, attribute, distinct) in enumerate(self.claims[ci].constraints):
            if names and request.base not in names and request.label not in names:
                continue
            value = constraint_value(attribute_value(device, attribute) if attribute else None,
                                     self.ctx.pool_rules["versions_without_build"])
            current = self.values[ci][index]
            if distinct:
                holds = value is not None and value not in (current or ())
                new_value = tuple(current or ()) + (value,)
            else:
                holds = value is not None and (current is None or current[0] == value)
                new_value = (value, (current or (None, 0))[1] + 1)
            if not holds:
                for i, previous, dummy in changed:
                    self.values[ci][i] = previous
                return None
            changed.append((index, current, value))
            self.values[ci][index] = new_value
        return [(index, value) for index, dummy, value in changed]


def _without(current, value, distinct):
    """A constraint's state with one device of this value taken back."""
    if distinct:
        values = list(current or ())
        values.remove(value)
        return tuple(values) or None
    count = current[1] - 1
    return (current[0], count) if count else None


# Where the release goes through a node's pools (and their slices) in a random order, the search is run in every
# order up to this many (the orders of 4 pools of one slice each); with more, an answer that may depend on the
# order is "cannot tell".
ORDERS_TRIED_UP_TO = 24


def node_verdict(ctx, claims, node_name, labels):
    """(verdict, detail, search) of the claims on one node; detail: the chosen devices when it fits, else
    why not (or why it cannot tell).

    ERROR: the allocator certainly stops with an error here (a request it refuses, a pool being updated or
    invalid under a request for all devices, a failing selector or a claim constraint refusing a device of a
    request for all devices where its search meets them), which fails the pod's whole scheduling attempt.
    Before 1.36 the allocator goes through the node's pools in a random order (a Go map's): where the answer
    may depend on it, the search is run in every order and a verdict is only given when all agree.
    ``search.may_error``: cannot tell here, and the allocator may stop with an error on this node (a selector
    it meets that this environment cannot evaluate, or an order that errs), which would fail the whole attempt
    even where another node fits."""
    search = NodeSearch(ctx, claims, node_name, labels)
    search.may_error = False
    if search.mixed:  # even a request's error is not certain then: the allocator checks it with mixed results
        search.may_error = True
        return CANNOT_TELL, "; ".join(search.mixed), search
    if search.stop:
        return search.stop[0], search.stop[1], search
    if search.unmodelled:
        return CANNOT_TELL, "; ".join(search.unmodelled), search
    unknown = [c.all_unknown for c in search.candidates.values() if c.all_unknown]
    if unknown:
        search.may_error = True
        return CANNOT_TELL, "a request for all devices meets a selector this environment cannot evaluate: %s" % (
            unknown[0]), search
    orders = search_orders(ctx, search)
    if orders is None:
        verdict, detail = _searched_once(ctx, search)
        return verdict, detail, search
    if orders > ORDERS_TRIED_UP_TO:
        return CANNOT_TELL, ("the answer may depend on the order in which the scheduler goes through the node's %d "
                             "pools and their slices (%d orders), which is random on this release"
                             % (len(search.pools), orders)), search
    outcomes = []
    for order in pool_orders(search.pools):
        one = NodeSearch(ctx, claims, node_name, labels, pools=order)
        outcomes.append((_searched_once(ctx, one), one))
    kinds = set(verdict for (verdict, dummy), dummy2 in outcomes)
    if len(kinds) > 1:
        search.may_error = ERROR in kinds or any(one.may_error for dummy, one in outcomes)
        return CANNOT_TELL, ("the answer depends on the order in which the scheduler goes through the node's pools "
                             "and their slices, which is random on this release (%s)" % ", ".join(sorted(kinds))), search
    (verdict, detail), one = outcomes[0]
    return verdict, detail, one


def _slices_of(pool):
    names = []
    for device in pool.devices:
        if device.entry[0] not in names:
            names.append(device.entry[0])
    return names


def search_orders(ctx, search):
    """How many orders of the node's pools, and of each pool's slices, the search must try where the release's
    allocator goes through them in a random order and the order can change the answer; None where one search
    answers."""
    if ctx.pools_in_order or not search.order_matters():
        return None
    count = math.factorial(len(search.pools))
    for pool in search.pools:
        count *= math.factorial(len(_slices_of(pool)))
    return count if count > 1 else None


def pool_orders(pools):
    """Every order of the pools, each with every order of its slices: [[Pool, ...], ...]."""
    each = [[pool.with_slices_in(names) for names in itertools.permutations(_slices_of(pool))] for pool in pools]
    for variants in itertools.product(*each):
        for order in itertools.permutations(variants):
            yield list(order)


def _searched_once(ctx, search):
    """(verdict, detail) of one search in its pools' order (``search.may_error`` set where it meets a selector
    this environment cannot evaluate)."""
    invalid = [p for p in search.pools if p.status == model.POOL_INVALID]
    search.may_error = False
    try:
        chosen = search.run()
    except SearchLimit:
        return CANNOT_TELL, "the search took more than %d steps" % MAX_STEPS
    except OverTheLimit:  # unwound past the first claim: the allocator returns it as its error
        return ERROR, "allocation max size exceeded (the %d devices one claim may hold)" % ALLOCATION_RESULTS_MAX_SIZE
    except AllocatorStops as exc:
        if search.reached_unknown:  # the allocator may have taken a device skipped on the way, and not got here
            search.may_error = True
            return CANNOT_TELL, "%s, after a device this environment cannot judge (%s)" % (exc, search.reached_unknown)
        return ERROR, str(exc)
    if search.reached_unknown:
        search.may_error = True
        return CANNOT_TELL, ("the scheduler's search meets a selector this environment cannot evaluate: %s"
                             % search.reached_unknown)
    if chosen is not None:
        return FITS, chosen
    if invalid:
        return DOES_NOT_FIT, "no fit, and pool %s is invalid (%s): the node is unschedulable" % (
            invalid[0].label, invalid[0].invalid_reason)
    return DOES_NOT_FIT, None


def eviction_warnings(ctx, chosen):
    """Chosen devices with a NoExecute taint their request tolerates only through a toleration without the
    NoExecute effect: allocation takes them (any effect matches), but kube-controller-manager's device taint
    eviction counts only tolerations naming NoExecute and evicts the pod."""
    out = []
    for claim, request, device in chosen:
        for taint in ctx.device_taints(device):
            if taint.get("effect") != "NoExecute" or not request.tolerates(taint):
                continue
            if not any(t.get("effect") == "NoExecute" and tolerates(t, taint) for t in request.tolerations):
                out.append("device %s of %s request %s has taint %s=%s:NoExecute, tolerated only by a toleration "
                           "without effect NoExecute: the device taint eviction would evict the pod"
                           % (device.label, claim, request.label, taint.get("key"), taint.get("value") or ""))
    return out
