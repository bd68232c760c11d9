# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""dra_driver_plan_info on data: the driver role's inputs checked and completed, the nodes the driver
goes to, its update strategy, and what to install (the built-in template's objects, or a chart's values
and the checks of what it rendered).

Pure functions on the inputs and the objects read from the API (by driver_plan.py); the pieces are
_driver_inputs', _driver_nodes', _driver_upgrade's, _driver_manifests', _driver_charts', _driver_checks'
and _rbac's.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.drivers.charts import (
    KNOWN_CHARTS, chart_device_class_names, chart_kind, chart_node_terms, chart_values, default_release_name,
    helm_template_argv, is_hook, local_chart_version_problem, post_renderer_script, release_manifest, with_handover,
)
from ansible_collections.dra.admin.plugins.module_utils.drivers.checks import check_daemonset, daemonsets_in
from ansible_collections.dra.admin.plugins.module_utils.drivers.inputs import (
    DriverInputError, default_daemonset_name, validate_inputs,
)
from ansible_collections.dra.admin.plugins.module_utils.drivers.manifests import (
    build_daemonset, build_device_classes, object_labels,
)
from ansible_collections.dra.admin.plugins.module_utils.drivers.nodes import (
    NoSelectedNodesError, node_affinity, select_nodes,
)
from ansible_collections.dra.admin.plugins.module_utils.drivers.upgrade import (
    DEFAULT_HANDOVER_SECONDS, decide_strategy, kubelet_version,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import with_exclusion
from ansible_collections.dra.admin.plugins.module_utils.rbac.personas import granular_status, kubelet_plugin_objects
from ansible_collections.dra.admin.plugins.module_utils.rbac.guardrails import KINDS as POLICY_KINDS
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import (
    VersionError, admission_policy_api_version, newest_admission_policy_api_version,
)


def rendered_documents(rendered):
    """Manifests from helm_template output: a YAML string (several documents) or a list."""
    if rendered is None:
        return []
    if isinstance(rendered, list):
        return [d for d in rendered if isinstance(d, dict)]
    import yaml
    return [d for d in yaml.safe_load_all(str(rendered)) if isinstance(d, dict)]


def prepared(params, local_chart):
    """The inputs checked and completed: (params, chart kind or None, whether the driver does seamless upgrades).

    local_chart(chart_ref): the Chart.yaml (a mapping) of a chart directory on this host, or None; its version
    must be chart_version, and its name tells the chart's kind when chart_ref does not."""
    params = dict(params)
    params["daemonset_name"] = params.get("daemonset_name") or default_daemonset_name(params.get("driver"))
    problems = validate_inputs(params)
    chart_yaml = local_chart(params["chart_ref"]) if params.get("method") == "helm" and params.get("chart_ref") else None
    problem = local_chart_version_problem(params.get("chart_ref"), chart_yaml, params.get("chart_version"))
    if problem:
        problems.append(problem)
    if problems:
        raise DriverInputError(problems)
    params["service_account"] = params["daemonset_name"]
    kind = None
    if params["method"] == "helm" and params["chart_kind"] != "other":
        kind = chart_kind(params.get("chart_ref"), params["chart_kind"]) or chart_kind((chart_yaml or {}).get("name"))
    supports = params.get("supports_seamless_upgrade")
    if supports is None:
        supports = KNOWN_CHARTS[kind]["seamless"] if kind else params["method"] == "template"
    return params, kind, supports


def selection(nodes, params, kind):
    """(nodeSelectorTerms without the exclusion label, selected node names, {excluded: reason})."""
    terms = params["node_affinity"]
    if params["method"] == "helm" and kind and not terms:
        terms = chart_node_terms(kind, params["chart_values"])
    full_terms = with_exclusion(terms, params["exclusion_label"])
    selected, excluded = select_nodes(nodes, params["node_selector"], full_terms, params["tolerations"])
    if not selected:
        raise NoSelectedNodesError(
            "no node matches the driver's selection (node_selector %s, node_affinity %s, exclusion label %s, "
            "tolerations %s); nothing was installed. Nodes and why they were left out: %s"
            % (params["node_selector"] or "{}", terms or "[]", params["exclusion_label"],
               params["tolerations"] or "[]",
               "; ".join("%s: %s" % (k, v) for k, v in sorted(excluded.items())) or "the cluster has no nodes"))
    return terms, selected, excluded


def placement(nodes, params, kind, supports):
    """Where the driver goes and how it is updated: a dict with terms, selected, excluded, kubelet_versions,
    decision (decide_strategy's) and warnings."""
    terms, selected, excluded = selection(nodes, params, kind)
    by_name = dict((n["metadata"]["name"], n) for n in nodes)
    decision = decide_strategy([by_name[name] for name in selected], params["seamless_upgrade"], supports,
                               params["max_unavailable"],
                               params.get("seamless_min_ready_seconds", DEFAULT_HANDOVER_SECONDS))
    warnings = [decision["warning"]] if decision["warning"] else []
    if params["method"] == "helm" and not kind:
        warnings.append("chart %s has no known values layout: the role cannot set its update strategy, node "
                        "affinity or health port; the rendered DaemonSet is checked instead (set chart_kind, or "
                        "those values in chart_values)" % params["chart_ref"])
    return dict(terms=terms, selected=selected, excluded=excluded, decision=decision, warnings=warnings,
                kubelet_versions=dict((name, kubelet_version(by_name[name])) for name in selected))


def rendered_problems(documents, params, kind, health_ports, strategy):
    """(the rendered DaemonSet's name or None, what is wrong with what the chart rendered)."""
    daemonsets = daemonsets_in(documents)
    if not daemonsets:
        return None, ["the chart rendered no DaemonSet"]
    problems = []
    if len(daemonsets) > 1:
        problems.append("the chart rendered %d DaemonSets (%s): the role handles one driver DaemonSet per "
                        "release" % (len(daemonsets), ", ".join(x["metadata"]["name"] for x in daemonsets)))
    for daemonset in daemonsets:
        problems.extend(check_daemonset(daemonset, params["exclusion_label"], health_ports if kind else [],
                                        strategy if kind else None))
    return daemonsets[0]["metadata"]["name"], problems


def policy_api_version(version):
    """The ValidatingAdmissionPolicy apiVersion of the cluster's release (a release newer than the catalog: the
    newest it knows)."""
    try:
        return admission_policy_api_version(version)
    except VersionError:
        return newest_admission_policy_api_version()


def template_plan(result, params, terms, decision, version, served):
    """The built-in template's objects (kubelet-plugin RBAC and the DaemonSet) into result."""
    params["node_affinity"] = terms
    daemonset = build_daemonset(params, decision["strategy"], decision["min_ready_seconds"])
    rbac = kubelet_plugin_objects(params["driver"], params["namespace"], params["service_account"], served,
                                  granular_status(version), object_labels(params["daemonset_name"], params["driver"]),
                                  policy_api_version(version), params.get("cluster_slices", False))
    result["policies"] = [o for o in rbac if o["kind"] in POLICY_KINDS]
    result["manifests"] = [o for o in rbac if o["kind"] not in POLICY_KINDS] + [daemonset]
    result["health_ports"] = [int(params["health_port"])]
    return result


def chart_plan(result, params, kind, decision):
    """A chart's values, how to render it and, with rendered, the checks of what it rendered, into result."""
    strategy = decision["strategy"]
    values, health_ports = chart_values(kind, params["chart_values"], params, strategy)
    release = params.get("release_name") or default_release_name(params["driver"])
    result["chart"] = {"kind": kind, "values": values, "health_ports": health_ports, "release_name": release,
                       "render_argv": helm_template_argv(params.get("helm_binary"), release, params["chart_ref"],
                                                         params["namespace"], params.get("chart_version"),
                                                         params.get("chart_repo_url"), params.get("kubeconfig"),
                                                         params.get("context")),
                       "device_classes": []}
    result["health_ports"] = health_ports
    if params.get("rendered") is not None:
        documents = rendered_documents(params["rendered"])
        if kind:
            with_handover(documents, decision["min_ready_seconds"])
        name, result["rendered_problems"] = rendered_problems(documents, params, kind, health_ports, strategy)
        result["daemonset_name"] = name or result["daemonset_name"]
        from_chart = chart_device_class_names(documents)
        result["chart"]["device_classes"] = from_chart
        # What the install applies: this rendering, through the post-renderer (Helm's own is dropped).
        result["chart"]["manifest"] = release_manifest(documents)
        result["chart"]["post_renderer"] = post_renderer_script()
        result["chart"]["hooks"] = ["%s %s" % (d.get("kind"), (d.get("metadata") or {}).get("name"))
                                    for d in documents if is_hook(d)]
        result["device_classes"] = [c for c in result["device_classes"] if c["metadata"]["name"] not in from_chart]
    return result


def plan_result(params, kind, placed, version, served, api_version):
    """The module's result: placement (placement's), the cluster's version, the resource names it serves
    and its resource.k8s.io version."""
    decision = placed["decision"]
    result = {
        "kubernetes_version": version, "resource_api_version": api_version,
        "daemonset_name": params["daemonset_name"], "namespace": params["namespace"],
        "selected_nodes": placed["selected"], "excluded_nodes": placed["excluded"],
        "kubelet_versions": placed["kubelet_versions"],
        "strategy": decision["strategy"], "seamless": decision["seamless"], "strategy_reason": decision["reason"],
        "min_ready_seconds": decision["min_ready_seconds"],
        "warnings_list": placed["warnings"], "affinity": node_affinity(placed["terms"], params["exclusion_label"]),
        "manifests": [], "policies": [], "chart": {},
        "device_classes": build_device_classes(params["driver"], params["device_classes"], api_version),
    }
    if params["method"] == "template":
        return template_plan(result, params, placed["terms"], decision, version, served)
    return chart_plan(result, params, kind, decision)
