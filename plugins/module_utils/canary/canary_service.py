# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A canary run against the API: read what decides the probes, create each probe's template and pod, look at
them until every probe is done, delete them (always, also on failure) and wait until their claims are gone.

Every decision is canary.canary's; this module reads, writes and waits."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import random
import string
import time

from ansible_collections.dra.admin.plugins.module_utils.canary.canary import (
    RUN_LABEL, advance, failed_pools, would_probe, canary_pod, claim_template, latest_warning, metrics_text,
    new_state, object_name, owned_by, plan_probes, probe_result, summary_lines, wanted_pools, published_pools,
    device_class_errors, waiting_pods,
)
from ansible_collections.dra.admin.plugins.module_utils.claims.claims_service import (
    device_taint_rules,
)
from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApiError
from ansible_collections.dra.admin.plugins.module_utils.common.errors import InputError

TAINT_RULES = "devicetaintrules"


def read_plan(api, drivers=(), pools=(), classes=None, skip_waited_pools=True, on_nodes=()):
    """(resource.k8s.io version, plan_probes' plan) from the cluster's slices, claims, DeviceClasses, Nodes,
    DeviceTaintRules (where served) and version. InputError (nothing written) for drivers, pools or
    DeviceClasses asked for that the cluster does not have. skip_waited_pools: the pools Pending pods may wait
    for are skipped (one more LIST: the Pending pods)."""
    version = api.resource_api_version()
    server_version = (api.server_version() or {}).get("gitVersion")
    rules, _read = device_taint_rules(api, api.versions_by_resource().get(TAINT_RULES))
    slices = list(api.list_items(api.resource_path("resourceslices", version=version)))
    claims = list(api.list_items(api.resource_path("resourceclaims", version=version)))
    classes_listed = list(api.list_items(api.resource_path("deviceclasses", version=version)))
    nodes = dict(((n.get("metadata") or {}).get("name"), n) for n in api.list_items("/api/v1/nodes"))
    errors = (wanted_pools(published_pools(slices), drivers, pools) + device_class_errors(classes_listed, classes)
              + ["nodes: the cluster has no node %s: give names `kubectl get nodes` shows" % n
                 for n in on_nodes if n not in nodes])
    if errors:
        raise InputError("; ".join(errors))
    waiting = None
    if skip_waited_pools:
        pending = api.list_items("/api/v1/pods", {"fieldSelector": "status.phase=Pending"})
        waiting = waiting_pods(pending, claims, classes_listed)
    return version, plan_probes(slices, claims, classes_listed, nodes, server_version, rules, drivers, pools, classes,
                                waiting, on_nodes)


def _run_id():
    return "".join(random.choice(string.ascii_lowercase + string.digits) for _index in range(5))


class Canary(object):
    """One run: `options` {namespace, image, expect_env, expect_paths, tolerations, timeouts {allocation,
    prepare, unprepare}, sleep}."""

    def __init__(self, api, options, clock=time.monotonic, sleep=time.sleep, wall=time.time):
        self.api, self.options = api, options
        self.clock, self.sleep, self.wall = clock, sleep, wall
        self.run_id = _run_id()
        self.version = None
        self.created = []  # (path of the collection, name)

    def path(self, kind, name=None):
        namespace = self.options["namespace"]
        if kind == "pods":
            base = "/api/v1/namespaces/%s/pods" % namespace
        else:
            base = self.api.resource_path(kind, namespace=namespace, version=self.version)
        return base + ("/" + name if name else "")

    def selector(self):
        return {"labelSelector": "%s=%s" % (RUN_LABEL, self.run_id)}

    def check_namespace(self):
        if self.api.get_or_none("/api/v1/namespaces/%s" % self.options["namespace"]) is None:
            raise InputError("namespace: %s does not exist; create it (role dra.admin.canary does) or name another"
                             % self.options["namespace"])

    def create(self, probes):
        """Each probe's template and pod; its state from the moment its pod exists."""
        states = {}
        for index, probe in enumerate(probes):
            name = object_name(self.run_id, index)
            probe["pod"] = name
            template = claim_template(self.version, name, self.options["namespace"], self.run_id, probe)
            self.api.request("POST", self.path("resourceclaimtemplates"), body=template)
            self.created.append((self.path("resourceclaimtemplates"), name))
            pod = canary_pod(name, self.options["namespace"], self.run_id, probe, self.options["image"],
                             self.options["expect_paths"], self.options["tolerations"])
            self.api.request("POST", self.path("pods"), body=pod)
            self.created.append((self.path("pods"), name))
            states[name] = new_state(self.clock())
        return states

    def look(self):
        """({pod name: pod}, [claims]) of this run: two LISTs by the run's label."""
        pods = dict(((p.get("metadata") or {}).get("name"), p)
                    for p in self.api.list_items(self.path("pods"), self.selector()))
        return pods, list(self.api.list_items(self.path("resourceclaims"), self.selector()))

    def delete(self, path, name):
        try:
            self.api.request("DELETE", "%s/%s" % (path, name))
        except DraApiError as exc:
            if exc.status != 404:
                raise

    def end_probe(self, probe, state, claim):
        """Delete the probe's pod, its claim and its template (never forced: the claim goes once unprepared)."""
        phase = state["phases"].get(state["phase"])
        if phase and not phase["ok"] and state["phase"] in ("allocation", "prepare"):
            events = self.api.list_items("/api/v1/namespaces/%s/events" % self.options["namespace"],
                                         {"fieldSelector": "involvedObject.name=%s" % probe["pod"]})
            warning = latest_warning(list(events))
            phase["detail"] += ("; last warning: %s" % warning) if warning else ""
        self.delete(self.path("pods"), probe["pod"])
        if claim is not None:
            self.delete(self.path("resourceclaims"), claim["metadata"]["name"])
        self.delete(self.path("resourceclaimtemplates"), probe["pod"])
        state["deleted_at"] = state["since"] = self.clock()

    def wait(self, probes, states):
        timeouts, expect = self.options["timeouts"], {"env": self.options["expect_env"],
                                                      "paths": self.options["expect_paths"]}
        while not all(s["done"] for s in states.values()):
            pods, claims = self.look()
            now = self.clock()
            for probe in probes:
                state = states[probe["pod"]]
                if state["done"]:
                    continue
                pod = pods.get(probe["pod"])
                claim = next((c for c in claims if owned_by(c, "Pod", probe["pod"])), None)
                if pod is None and state["deleted_at"] is None:
                    state["phases"][state["phase"]] = {"ok": False, "seconds": round(now - state["since"], 3),
                                                       "detail": "the pod disappeared"}
                    state["delete"] = True
                else:
                    advance(state, probe, pod, claim, now, timeouts, expect)
                if state["delete"] and state["deleted_at"] is None:
                    self.end_probe(probe, state, claim)
            if not all(s["done"] for s in states.values()):
                self.sleep(self.options["sleep"])

    def clean_up(self):
        """After an error: delete whatever this run created (best effort; the error that stopped it counts)."""
        for path, name in reversed(self.created):
            try:
                self.delete(path, name)
            except DraApiError:
                continue
        try:
            for claim in self.api.list_items(self.path("resourceclaims"), self.selector()):
                self.delete(self.path("resourceclaims"), claim["metadata"]["name"])
        except DraApiError:
            pass

    def run(self, drivers=(), pools=(), classes=None, check_mode=False, skip_waited_pools=True, on_nodes=()):
        """The run's report: {resource_api_version, run_id, namespace, results, skipped_pools, summary, metrics_text,
        ok, failed_pools, check_mode}."""
        self.version, plan = read_plan(self.api, drivers, pools, classes, skip_waited_pools, on_nodes)
        report = {"resource_api_version": self.version, "run_id": self.run_id, "namespace": self.options["namespace"],
                  "planned": plan["probes"], "skipped_pools": plan["skipped"], "results": [], "check_mode": check_mode}
        if check_mode:
            report.update(summary=would_probe(plan["probes"]) + summary_lines([], plan["skipped"]), metrics_text="",
                          ok=True, failed_pools=[])
            return report
        self.check_namespace()
        try:
            states = self.create(plan["probes"])
            self.wait(plan["probes"], states)
        except Exception:
            self.clean_up()
            raise
        results = [probe_result(p, states[p["pod"]]) for p in plan["probes"]]
        report.update(results=results, summary=summary_lines(results, plan["skipped"]),
                      metrics_text=metrics_text(results, plan["skipped"], self.wall()),
                      ok=all(r["ok"] for r in results),
                      failed_pools=failed_pools(results))
        return report


def run_canary(api, options, drivers=(), pools=(), classes=None, check_mode=False, skip_waited_pools=True,
               on_nodes=()):
    """One canary run: Canary(api, options).run."""
    return Canary(api, options).run(drivers, pools, classes, check_mode, skip_waited_pools, on_nodes)
