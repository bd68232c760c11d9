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
  - dra.admin.prometheus
options:
  prometheus_url:
    description:
      - Base URL of a Prometheus (or compatible) HTTP API, for example V(http://prometheus.monitoring:9090).
      - The page's queries are evaluated as instant queries (their windows are 5m).
      - Mutually exclusive with O(scrape).
    type: str
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

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dra.admin.plugins.module_utils.common.errors import fails_on_error, raise_input_errors
from ansible_collections.dra.admin.plugins.module_utils.metrics import diagnosis
from ansible_collections.dra.admin.plugins.module_utils.metrics.advice import input_error
from ansible_collections.dra.admin.plugins.module_utils.access.http import Http, hide_url_credentials
from ansible_collections.dra.admin.plugins.module_utils.access.prometheus import connection_options
from ansible_collections.dra.admin.plugins.module_utils.metrics.prometheus_service import advise


def argument_spec():
    return dict(
        prometheus_url=dict(type="str"),
        **connection_options(),
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


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True,
                           mutually_exclusive=[("prometheus_url", "scrape")],
                           required_one_of=[("prometheus_url", "scrape")])
    hide_url_credentials(module, [module.params["prometheus_url"]] + [
        (e or {}).get("url") for e in module.params["scrape"] or [] if isinstance(e, dict)])
    with fails_on_error(module):
        raise_input_errors([input_error(module.params)])
        http = Http(module.params["timeout"])
        result = advise(module.params, http)
    module.exit_json(changed=False, api_requests=http.requests, **result)


if __name__ == "__main__":
    main()
