#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_metrics_advice
short_description: Diagnose DRA control plane and node performance from the metrics the good practices page names
version_added: 0.1.0
description:
  - Measures every metric the Kubernetes page "Good practices for Dynamic Resource Allocation as a Cluster
    Admin" names, with the page's queries, either from a Prometheus HTTP API or, without Prometheus, by scraping
    the components' C(/metrics) endpoints twice O(interval) seconds apart.
  - "Applies the page's two diagnosis rules to the ResourceClaim workqueue of kube-controller-manager:
    (a) low add rate with a high depth, and/or a high work duration, means the controller is not performing:
    tune its client QPS and burst and its CPU/memory; (b) high add rate and high depth with a reasonable work
    duration means its hard-coded concurrency is insufficient: reduce the pod creation rate."
  - Also checks the scheduler's end-to-end and algorithm latency, kubelet's PrepareResources/UnprepareResources
    latency and the DRA kubeletplugin's NodePrepareResources/NodeUnprepareResources gRPC latency.
  - Every finding carries its evidence (the numbers and thresholds) and concrete advice, for example
    "raise kube-controller-manager --kube-api-qps from 20 to 75 and --kube-api-burst from 30 to 150",
    with a pointer to the role that applies it.
  - A metric that is missing, a source that cannot be reached, or a window without data is reported as a
    finding of that kind; RV(healthy) is only true when every needed metric had data and nothing crossed a
    threshold.
  - Read-only; the same answer in check mode.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - dra.admin.attributes
  - dra.admin.attributes.info_module
options:
  prometheus_url:
    description:
      - Base URL of a Prometheus (or compatible) HTTP API, for example V(http://prometheus.monitoring:9090).
      - The page's queries are evaluated as instant queries (their windows are 5m).
      - Mutually exclusive with O(scrape).
    type: str
  bearer_token:
    description:
      - Bearer token sent to O(prometheus_url).
    type: str
  headers:
    description:
      - Extra HTTP headers sent to O(prometheus_url) (for example a tenant header).
    type: dict
    default: {}
  validate_certs:
    description:
      - Verify the TLS certificate of O(prometheus_url).
    type: bool
    default: true
  ca_path:
    description:
      - CA bundle to verify O(prometheus_url) with.
    type: path
  scrape:
    description:
      - Instead of Prometheus, scrape these C(/metrics) endpoints twice, O(interval) seconds apart, and
        compute the page's rates and quantiles over that interval.
      - Mutually exclusive with O(prometheus_url).
    type: list
    elements: dict
    suboptions:
      url:
        description: Full URL of the endpoint, for example V(https://127.0.0.1:10257/metrics).
        type: str
        required: true
      component:
        description:
          - Which component the endpoint belongs to. It plays the role of Prometheus' C(endpoint) target label
            (the page selects kube-controller-manager's workqueue depth by it).
        type: str
        required: true
        choices: [kube-controller-manager, kube-scheduler, kubelet, dra-kubeletplugin]
      bearer_token:
        description: Bearer token for the endpoint.
        type: str
      client_cert:
        description: PEM client certificate for the endpoint.
        type: path
      client_key:
        description: PEM private key of O(scrape[].client_cert).
        type: path
      ca_path:
        description: CA bundle to verify the endpoint with.
        type: path
      validate_certs:
        description: Verify the endpoint's TLS certificate.
        type: bool
        default: true
  interval:
    description:
      - Seconds between the two scrapes in O(scrape) mode. Rates and quantiles cover this interval instead
        of the page's 5m; it should be long enough to see work (at least one scrape interval of your
        workload).
      - A finite number above 0.
    type: float
    default: 30
  timeout:
    description:
      - Seconds to wait for each HTTP request; a finite number above 0.
    type: float
    default: 10
  checks:
    description:
      - Which groups of metrics are needed and checked. V(controller) is the ResourceClaim workqueue of
        kube-controller-manager, V(scheduler) kube-scheduler's latencies, V(kubelet) kubelet's DRA operations,
        V(plugin) the DRA driver's kubeletplugin gRPC operations.
    type: list
    elements: str
    choices: [controller, scheduler, kubelet, plugin]
    default: [controller, scheduler, kubelet, plugin]
  thresholds:
    description:
      - Overrides of the thresholds; the defaults are those of role C(dra.admin.monitoring), which documents why.
      - "Keys: C(workqueue_add_rate_high) (items/s, default 10), C(workqueue_depth_high) (items, 10),
        C(workqueue_work_duration_p99_high) (s, 1), C(scheduler_e2e_p99_high) (s, 5),
        C(scheduler_algorithm_p99_high) (s, 1), C(kubelet_prepare_p99_high), C(kubelet_unprepare_p99_high),
        C(plugin_prepare_p99_high), C(plugin_unprepare_p99_high) (s, 5 each)."
    type: dict
    default: {}
  current_qps:
    description:
      - The current C(--kube-api-qps) of kube-controller-manager, so the advice can say "from X to Y".
    type: float
  current_burst:
    description:
      - The current C(--kube-api-burst) of kube-controller-manager.
    type: float
  workqueue_depth_selector:
    description:
      - Target matchers, besides C(name="resource_claim"), that select kube-controller-manager's
        C(workqueue_depth) in O(prometheus_url) mode. The page uses V(endpoint="kube-controller-manager");
        with kube-prometheus-stack use V(job="kube-controller-manager"); an empty string matches every target.
      - Ignored in O(scrape) mode, where the endpoint's O(scrape[].component) is used.
    type: str
    default: endpoint="kube-controller-manager"
notes:
  - The thresholds and queries are the same as those of the alerts of role C(dra.admin.monitoring).
  - In O(scrape) mode a counter that went down between the scrapes is taken as reset, and a series that
    appears in the second scrape only as starting from zero.
seealso:
  - name: Good practices for Dynamic Resource Allocation as a Cluster Admin
    description: The page whose metrics and diagnosis rules this module applies.
    link: https://kubernetes.io/docs/concepts/cluster-administration/dra/
"""

EXAMPLES = r"""
- name: Diagnose from Prometheus
  dra.admin.dra_metrics_advice:
    prometheus_url: http://prometheus.monitoring.svc:9090
    workqueue_depth_selector: job="kube-controller-manager"
    current_qps: 20
    current_burst: 30
  register: advice

- name: Show what to change
  ansible.builtin.debug:
    msg: "{{ advice.findings | map(attribute='advice') | list }}"
  when: not advice.healthy

- name: Without Prometheus, scrape the control plane twice 60s apart
  dra.admin.dra_metrics_advice:
    checks: [controller, scheduler]
    interval: 60
    scrape:
      - url: https://127.0.0.1:10257/metrics
        component: kube-controller-manager
        bearer_token: "{{ metrics_reader_token }}"
        ca_path: /etc/kubernetes/pki/ca.crt
      - url: https://127.0.0.1:10259/metrics
        component: kube-scheduler
        bearer_token: "{{ metrics_reader_token }}"
        ca_path: /etc/kubernetes/pki/ca.crt
  register: advice

- name: Stricter thresholds for a latency-sensitive cluster
  dra.admin.dra_metrics_advice:
    prometheus_url: http://localhost:9090
    thresholds:
      scheduler_e2e_p99_high: 2
      workqueue_work_duration_p99_high: 0.5
"""

RETURN = r"""
healthy:
  description:
    - True only when every metric of the selected O(checks) had data and no finding was made.
  returned: always
  type: bool
findings:
  description: Problems found, and metrics that could not be measured.
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description:
        - The check, for example C(resource-claim-controller-not-performing),
          C(resource-claim-controller-concurrency-insufficient), C(scheduler-binding-slow),
          C(scheduler-algorithm-slow), C(kubelet-prepare-resources-slow); or C(<kind>-<query id>) for a metric
          that could not be measured.
      type: str
      returned: always
    kind:
      description: C(problem), C(missing-metric), C(no-data), C(unreachable) or C(query-error).
      type: str
      returned: always
    severity:
      description: C(warning) for problems, C(unknown) when a metric could not be measured.
      type: str
      returned: always
    summary:
      description: One sentence with the numbers.
      type: str
      returned: always
    evidence:
      description: The measured values and the thresholds they were compared with, or the query and why it had no value.
      type: dict
      returned: always
    advice:
      description: What to change, with numbers where the page gives them.
      type: str
      returned: always
    role:
      description: The dra.admin role that applies the advice, or null.
      type: str
      returned: always
  sample:
    - id: resource-claim-controller-not-performing
      kind: problem
      severity: warning
      summary: "The ResourceClaim controller in kube-controller-manager is not keeping up: ResourceClaim workqueue
        work duration (p99) 9.1 (>= 1 s)."
      evidence: {workqueue_work_duration_p99: 9.1, workqueue_work_duration_p99_high: 1.0, window: 5m}
      advice: "raise kube-controller-manager --kube-api-qps from 2 to 75 and --kube-api-burst from 3 to 150
        (role dra.admin.control_plane_tuning), and check kube-controller-manager's CPU and memory: ..."
      role: dra.admin.control_plane_tuning
measurements:
  description: Every query of the page, by id, with its value or why it has none.
  returned: always
  type: dict
  sample:
    workqueue_depth:
      value: 42.0
      state: ok
      detail: ""
      window: 5m
      query: sum(workqueue_depth{endpoint="kube-controller-manager", name="resource_claim"})
      component: kube-controller-manager
      unit: items
source:
  description: C(prometheus) or C(scrape).
  returned: always
  type: str
thresholds:
  description: The thresholds applied (defaults merged with O(thresholds)).
  returned: always
  type: dict
api_requests:
  description: Number of HTTP requests the module made (to Prometheus's HTTP API, or to the scraped metrics
    endpoints), under the same name as the collection's other modules' request counts.
  returned: always
  type: int
"""

import json
import math
import time
from urllib.parse import urlencode

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dra.admin.plugins.module_utils.metrics import diagnosis
from ansible_collections.dra.admin.plugins.module_utils.common.http import Http, SourceError
from ansible_collections.dra.admin.plugins.module_utils.common.waits import wait_parameter_errors


def argument_spec():
    return dict(
        prometheus_url=dict(type="str"),
        bearer_token=dict(type="str", no_log=True),
        headers=dict(type="dict", default={}),
        validate_certs=dict(type="bool", default=True),
        ca_path=dict(type="path"),
        scrape=dict(type="list", elements="dict", options=dict(
            url=dict(type="str", required=True),
            component=dict(type="str", required=True, choices=list(diagnosis.SCRAPED_COMPONENTS)),
            bearer_token=dict(type="str", no_log=True),
            client_cert=dict(type="path"),
            client_key=dict(type="path", no_log=False),
            ca_path=dict(type="path"),
            validate_certs=dict(type="bool", default=True),
        )),
        interval=dict(type="float", default=30),
        timeout=dict(type="float", default=10),
        checks=dict(type="list", elements="str", choices=list(diagnosis.GROUPS), default=list(diagnosis.GROUPS)),
        thresholds=dict(type="dict", default={}),
        current_qps=dict(type="float"),
        current_burst=dict(type="float"),
        workqueue_depth_selector=dict(type="str", default='endpoint="kube-controller-manager"'),
    )


class QueryError(Exception):
    """Prometheus answered but rejected a query."""


def _auth_headers(token, extra=None):
    headers = dict(extra or {})
    if token:
        headers["Authorization"] = "Bearer %s" % token
    return headers


class Prometheus(object):
    def __init__(self, http, url, token=None, headers=None, validate_certs=True, ca_path=None):
        self.http = http
        self.url = url.rstrip("/")
        self.headers = _auth_headers(token, headers)
        self.validate_certs = validate_certs
        self.ca_path = ca_path

    def _api(self, path, params=None):
        url = self.url + path + ("?" + urlencode(params) if params else "")
        try:
            text = self.http.get(url, self.headers, self.validate_certs, self.ca_path)
        except SourceError as exc:
            # Prometheus answers a query it rejects with 400/422 and a JSON error.
            if exc.status in (400, 422) and exc.body:
                text = exc.body
            else:
                raise
        try:
            body = json.loads(text)
        except ValueError:
            raise SourceError("GET %s did not return JSON; is %s a Prometheus HTTP API?" % (url, self.url))
        if body.get("status") != "success":
            raise QueryError("%s: %s" % (body.get("errorType"), body.get("error")))
        return body["data"]

    def metric_names(self):
        return set(self._api("/api/v1/label/__name__/values"))

    def instant(self, query):
        data = self._api("/api/v1/query", {"query": query})
        if data.get("resultType") == "scalar":
            return [float(data["result"][1])]
        return [float(item["value"][1]) for item in data.get("result") or []]


def _failed(state, detail, window):
    return diagnosis.measurement(state=state, detail=detail, window=window)


def measure_prometheus(prom, queries, depth_selector):
    window = "5m"
    try:
        names = prom.metric_names()
    except (SourceError, QueryError) as exc:
        return dict((q["id"], _failed("unreachable", "Prometheus: %s" % exc, window)) for q in queries)
    results = {}
    for query in queries:
        expr = diagnosis.expression(query, depth_selector)
        try:
            values = prom.instant(expr)
            if values and not math.isnan(values[0]):
                results[query["id"]] = diagnosis.measurement(values[0], window=window)
                continue
            if diagnosis.series_name(query) not in names:
                results[query["id"]] = _failed("missing-metric", diagnosis.missing_detail(query, names), window)
                continue
            selector = diagnosis.selector_for_prometheus(query, depth_selector)
            if not prom.instant("count(%s)" % selector):
                results[query["id"]] = _failed(
                    "missing-metric", "%s is stored but no current series matches %s" % (
                        diagnosis.series_name(query), selector), window)
                continue
            results[query["id"]] = _failed(
                "no-data", "%s has no observations (or too few samples) in the last %s" % (query["metric"], window),
                window)
        except QueryError as exc:
            results[query["id"]] = _failed("query-error", "%s: %s" % (expr, exc), window)
        except SourceError as exc:
            results[query["id"]] = _failed("unreachable", "Prometheus: %s" % exc, window)
    return results


def scrape_once(http, endpoints):
    """One round over every endpoint: {index: (samples, time) or error text}."""
    round_ = {}
    for index, endpoint in enumerate(endpoints):
        try:
            text = http.get(endpoint["url"], _auth_headers(endpoint.get("bearer_token")),
                            endpoint.get("validate_certs", True), endpoint.get("ca_path"),
                            endpoint.get("client_cert"), endpoint.get("client_key"))
            samples = diagnosis.parse_text(text).samples
        except (SourceError, diagnosis.ParseError) as exc:
            round_[index] = str(exc)
            continue
        for sample in samples:
            sample.labels["endpoint"] = endpoint["component"]
            sample.labels["instance"] = endpoint["url"]
        round_[index] = (samples, time.time())
    return round_


def measure_scrape_rounds(endpoints, first, second, queries):
    """Measurements from two scrape rounds (see scrape_once)."""
    ok = [i for i in range(len(endpoints))
          if not isinstance(first.get(i), str) and not isinstance(second.get(i), str)]
    before = [s for i in ok for s in first[i][0]]
    after = [s for i in ok for s in second[i][0]]
    elapsed = [second[i][1] - first[i][1] for i in ok]
    interval = sum(elapsed) / len(elapsed) if elapsed else 0.0
    results = {}
    for query in queries:
        mine = [i for i, e in enumerate(endpoints) if e["component"] == query["component"]]
        if not mine:
            results[query["id"]] = _failed(
                "missing-metric", "no %s endpoint was given in scrape" % query["component"], None)
            continue
        answered = [i for i in mine if i in ok]
        if not answered:
            errors = [first.get(i) if isinstance(first.get(i), str) else second.get(i) for i in mine]
            results[query["id"]] = _failed("unreachable", "; ".join(errors), None)
            continue
        results[query["id"]] = diagnosis.measure_scrapes(query, before, after, interval)
    return results


def advise(params, http, sleep=time.sleep):
    queries = diagnosis.needed_queries(params["checks"])
    if params.get("prometheus_url"):
        prom = Prometheus(http, params["prometheus_url"], params.get("bearer_token"), params.get("headers"),
                          params.get("validate_certs", True), params.get("ca_path"))
        measured = measure_prometheus(prom, queries, params.get("workqueue_depth_selector"))
        source = "prometheus"
    else:
        endpoints = params["scrape"]
        first = scrape_once(http, endpoints)
        sleep(params["interval"])
        second = scrape_once(http, endpoints)
        measured = measure_scrape_rounds(endpoints, first, second, queries)
        source = "scrape"
    findings = diagnosis.diagnose(measured, params.get("thresholds"), params.get("current_qps"),
                                  params.get("current_burst"), groups=params["checks"])
    thresholds = dict(diagnosis.DEFAULT_THRESHOLDS)
    thresholds.update(dict((k, float(v)) for k, v in (params.get("thresholds") or {}).items()))
    measurements = {}
    for query in queries:
        entry = dict(measured[query["id"]])
        entry.update(query=diagnosis.expression(query, params.get("workqueue_depth_selector"))
                     if source == "prometheus" else query["expression"],
                     component=query["component"], unit=query["unit"])
        measurements[query["id"]] = entry
    return {
        "healthy": not findings and all(m["state"] == "ok" for m in measurements.values()),
        "findings": findings,
        "measurements": measurements,
        "source": source,
        "thresholds": thresholds,
    }


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True,
                           mutually_exclusive=[("prometheus_url", "scrape")],
                           required_one_of=[("prometheus_url", "scrape")])
    params = module.params
    errors = wait_parameter_errors(params, timeouts=("timeout",), intervals=("interval",))
    if errors:
        module.fail_json(msg="; ".join(errors))
    if params["scrape"] is not None and not params["scrape"]:
        module.fail_json(msg="scrape is empty: give at least one metrics endpoint, or prometheus_url")
    unknown = set(params["thresholds"]) - set(diagnosis.DEFAULT_THRESHOLDS)
    if unknown:
        module.fail_json(msg="unknown threshold(s) %s; known: %s" % (
            ", ".join(sorted(unknown)), ", ".join(sorted(diagnosis.DEFAULT_THRESHOLDS))))
    for key, value in params["thresholds"].items():
        try:
            float(value)
        except (TypeError, ValueError):
            module.fail_json(msg="threshold %s is %r, not a number" % (key, value))
    http = Http(params["timeout"])
    result = advise(params, http)
    module.exit_json(changed=False, api_requests=http.requests, **result)


if __name__ == "__main__":
    main()
