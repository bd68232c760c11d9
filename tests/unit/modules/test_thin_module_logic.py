"""The logic the modules call in module_utils, tested without a module: the driver plan and status,
the slice reports, dra_metrics_advice's input checks and component_flags' plan pieces."""
import pytest

from ansible_collections.dra.admin.plugins.module_utils.control_plane import component_flags
from ansible_collections.dra.admin.plugins.module_utils.drivers import plan
from ansible_collections.dra.admin.plugins.module_utils.drivers import status
from ansible_collections.dra.admin.plugins.module_utils.control_plane import manifest
from ansible_collections.dra.admin.plugins.module_utils.metrics import advice
from ansible_collections.dra.admin.plugins.module_utils.metrics import diagnosis
from ansible_collections.dra.admin.plugins.module_utils.claims import slice_reports
from ansible_collections.dra.admin.plugins.module_utils.drivers.inputs import DriverInputError
from ansible_collections.dra.admin.plugins.module_utils.drivers.nodes import NoSelectedNodesError
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import DEFAULT_EXCLUSION_LABEL
from ansible_collections.dra.admin.plugins.modules import dra_driver_plan_info

KWOK_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}


def node(name, kubelet="v1.37.2", labels=None):
    return {"metadata": {"name": name, "labels": dict({"kubernetes.io/hostname": name}, **(labels or {}))},
            "spec": {"taints": [KWOK_TAINT]}, "status": {"nodeInfo": {"kubeletVersion": kubelet}}}


def plan_params(**extra):
    params = dict((name, option.get("default")) for name, option in dra_driver_plan_info.argument_spec().items())
    params.update(driver="gpu.example.com", image="registry.example/driver:v1", tolerations=[KWOK_TOLERATION])
    params.update(extra)
    return params


# --- plan ------------------------------------------------------------------------------

def test_prepared_completes_the_names_and_asks_for_no_chart_name_on_the_template_path():
    asked = []
    params, kind, supports = plan.prepared(plan_params(), asked.append)
    assert params["daemonset_name"] == params["service_account"] == "gpu-example-com-kubeletplugin"
    assert kind is None and supports is True and asked == []


def test_prepared_reads_a_local_chart_and_takes_its_kind_from_its_name():
    asked = []

    def local_chart(ref):
        asked.append(ref)
        return {"name": "dra-example-driver", "version": "0.1.0"}

    dummy, kind, dummy = plan.prepared(plan_params(method="helm", chart_ref="./charts/x", chart_version="0.1.0",
                                                   image=None), local_chart)
    assert asked == ["./charts/x"] and kind == "dra-example-driver"


def test_a_chart_needs_its_version_and_a_local_chart_must_be_that_version():
    with pytest.raises(DriverInputError, match="chart_version is required with method helm"):
        plan.prepared(plan_params(method="helm", chart_ref="repo/dra-example-driver", image=None), lambda ref: None)
    with pytest.raises(DriverInputError, match=r"chart_version 0.2.0 is not the version of the chart at ./x "
                                               r"\(its Chart.yaml says 0.1.0\)"):
        plan.prepared(plan_params(method="helm", chart_ref="./x", chart_version="0.2.0", image=None),
                      lambda ref: {"name": "x", "version": "0.1.0"})


def test_a_seamless_plan_reports_and_applies_its_handover_time_and_a_fallback_none():
    import yaml
    params, kind, supports = plan.prepared(plan_params(), lambda ref: None)
    result = plan.plan_result(params, kind, plan.placement([node("kwok-node-0")], params, kind, supports), "v1.37.2",
                              ["resourceslices"], "v1")
    daemonset = [m for m in result["manifests"] if m["kind"] == "DaemonSet"][0]
    assert result["seamless"] and result["min_ready_seconds"] == daemonset["spec"]["minReadySeconds"] == 5
    params, kind, supports = plan.prepared(plan_params(seamless_min_ready_seconds=0), lambda ref: None)
    result = plan.plan_result(params, kind, plan.placement([node("kwok-node-0")], params, kind, supports), "v1.37.2",
                              ["resourceslices"], "v1")
    assert result["min_ready_seconds"] == 0
    assert "minReadySeconds" not in [m for m in result["manifests"] if m["kind"] == "DaemonSet"][0]["spec"]
    # A known chart: the handover time goes into the checked rendering Helm applies.
    params, kind, supports = plan.prepared(plan_params(method="helm", chart_ref="repo/dra-example-driver",
                                                       chart_version="0.4.0", image=None), lambda ref: None)
    placed = plan.placement([node("kwok-node-0", kubelet="v1.32.9"), node("kwok-node-1")], params, kind, supports)
    params["rendered"] = yaml.safe_dump({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"},
                                         "spec": {}})
    chart = plan.plan_result(params, kind, placed, "v1.37.2", ["resourceslices"], "v1")["chart"]
    assert "minReadySeconds" not in yaml.safe_load(chart["manifest"])["spec"], "no surge on a 1.32 kubelet"
    placed = plan.placement([node("kwok-node-0")], params, kind, supports)
    chart = plan.plan_result(params, kind, placed, "v1.37.2", ["resourceslices"], "v1")["chart"]
    assert yaml.safe_load(chart["manifest"])["spec"]["minReadySeconds"] == 5


def test_the_checked_rendering_is_what_the_post_renderer_hands_helm(tmp_path):
    import subprocess
    import yaml
    params, kind, supports = plan.prepared(plan_params(method="helm", chart_ref="repo/other", chart_version="1.0.0",
                                                       chart_kind="other", image=None), lambda ref: None)
    placed = plan.placement([node("kwok-node-0")], params, kind, supports)
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"}, "spec": {}}
    hook = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pre", "annotations": {"helm.sh/hook": "pre-install"}}}
    params["rendered"] = yaml.safe_dump_all([daemonset, hook])
    chart = plan.plan_result(params, kind, placed, "v1.37.2", ["resourceslices"], "v1")["chart"]
    assert list(yaml.safe_load_all(chart["manifest"])) == [daemonset] and chart["hooks"] == ["Job pre"]
    script = tmp_path / "post-render"
    script.write_text(chart["post_renderer"])
    script.chmod(0o700)
    (tmp_path / "manifest.yaml").write_text(chart["manifest"])
    # Helm's own (different) rendering on stdin is dropped: the checked one comes out.
    out = subprocess.run([str(script)], input="kind: Secret\n", capture_output=True, text=True, check=True).stdout
    assert list(yaml.safe_load_all(out)) == [daemonset]


def test_prepared_refuses_bad_inputs_before_anything_else():
    with pytest.raises(DriverInputError):
        plan.prepared(plan_params(health_port=0), lambda ref: None)


def test_placement_without_a_selected_node_names_why_each_node_was_left_out():
    with pytest.raises(NoSelectedNodesError, match="kwok-node-0"):
        plan.placement([node("kwok-node-0")], plan_params(node_selector={"gpu": "true"}), None, True)


def test_plan_result_of_the_template_has_rbac_and_the_daemonset():
    params, kind, supports = plan.prepared(plan_params(), lambda ref: None)
    placed = plan.placement([node("kwok-node-0"), node("kwok-node-1")], params, kind, supports)
    assert placed["selected"] == ["kwok-node-0", "kwok-node-1"] and placed["warnings"] == []
    result = plan.plan_result(params, kind, placed, "v1.37.2", ["resourceslices"], "v1")
    assert result["seamless"] is True and result["kubelet_versions"]["kwok-node-1"] == "v1.37.2"
    assert result["manifests"][-1]["kind"] == "DaemonSet" and result["health_ports"] == [51515]
    assert result["chart"] == {}


def test_rendered_documents_and_their_problems():
    assert plan.rendered_documents(None) == []
    assert plan.rendered_documents("a: 1\n---\n- x\n---\nb: 2\n") == [{"a": 1}, {"b": 2}]
    assert plan.rendered_documents([{"a": 1}, "x"]) == [{"a": 1}]
    assert plan.rendered_problems([{"kind": "ConfigMap"}], plan_params(), None, [], None) == \
        (None, ["the chart rendered no DaemonSet"])


# --- status ----------------------------------------------------------------------------

def seen(done=True, selected=("a", "b"), without=()):
    return {"rollout": {"done": done, "text": "2/2 pods updated, 2/2 available"}, "selected_nodes": list(selected),
            "nodes_with_slices": [n for n in selected if n not in without], "nodes_without_slices": list(without)}


def status_params(**extra):
    params = {"driver": "gpu.example.com", "namespace": "dra-system", "daemonset_name": "gpu-example-com-kubeletplugin",
              "wait": True, "wait_timeout": 30}
    params.update(extra)
    return params


def test_progress_and_done():
    assert status.progress_state(seen(without=["b"])) == \
        "rollout 2/2 pods updated, 2/2 available; slices on 1/2 selected nodes (waiting for b)"
    assert status.is_done(seen()) and not status.is_done(seen(selected=()))
    assert not status.is_done(seen(done=False))
    assert status.final_line(status_params(), seen(without=["b"])) == "stopped waiting (wait_timeout 30s)"


def test_failure_names_what_is_missing():
    result = dict(seen(done=False, without=["b"]), daemonset_problems=[], done=False)
    message = status.failure(status_params(), result)
    assert "rollout not complete" in message and "gpu.example.com: b" in message and "after 30s" in message
    assert status.failure(status_params(wait=False), result) is None
    assert status.failure(status_params(), dict(result, daemonset_problems=["no probe"])) == \
        "DaemonSet dra-system/gpu-example-com-kubeletplugin: no probe"


def test_status_drops_the_daemonset_and_adds_its_problems():
    daemonset = {"metadata": {"name": "d"}, "spec": {"updateStrategy": {"type": "OnDelete"}}}
    out = status.status(dict(seen(), daemonset=daemonset),
                        {"exclusion_label": DEFAULT_EXCLUSION_LABEL, "health_ports": [],
                         "require_startup_probe": False}, ["0s x"], 1.26, 1700000000.0)
    assert "daemonset" not in out and out["update_strategy"] == {"type": "OnDelete"}
    assert out["done"] is True and out["elapsed"] == 1.3 and out["progress"] == ["0s x"]
    assert out["started"] == 1700000000.0 and out["pending"] == []


# --- slice_reports ----------------------------------------------------------------------------

def test_driver_totals_count_nodes_devices_and_pools():
    by_node = {"n1": {"d": {"devices": 2, "pools": ["p1"]}}, "<all-nodes>": {"d": {"devices": 3, "pools": ["p2", "p3"]}}}
    assert slice_reports.driver_totals(by_node, {"n1": ["d"], "n2": ["d", "e"]}) == {
        "d": {"nodes": 2, "devices": 5, "pools": 3}, "e": {"nodes": 1, "devices": 0, "pools": 0}}


def test_slice_and_node_queries():
    assert slice_reports.slice_query(None) == {}
    assert slice_reports.slice_query("d") == {"fieldSelector": "spec.driver=d"}
    assert slice_reports.node_query({"node": "n1", "node_selector": "gpu=true"}) == {
        "labelSelector": "gpu=true", "fieldSelector": "metadata.name=n1"}
    assert slice_reports.node_query({"node": None, "node_selector": None}) == {}


def test_problems_message():
    message = slice_reports.problems_message({"incomplete_pools": ["d/p"], "nodes_without_slices": ["n2"]}, "d")
    assert message.startswith("incomplete pools (fewer slices than resourceSliceCount): d/p; nodes publishing no "
                              "slice of d: n2.")


def test_device_class_summary():
    classes = [{"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": "true"}}]}},
               {"metadata": {"name": "any"}}]
    assert slice_reports.device_class_summary(classes) == [{"name": "gpu", "selectors": ["true"]},
                                                           {"name": "any", "selectors": []}]


# --- advice ---------------------------------------------------------------------------

def advice_params(**extra):
    params = {"timeout": 10, "interval": 30, "scrape": None, "thresholds": {}}
    params.update(extra)
    return params


@pytest.mark.parametrize("extra,expected", [
    ({}, None),
    ({"scrape": []}, "scrape is empty"),
    ({"thresholds": {"nonsense": 1}}, "unknown threshold(s) nonsense"),
    ({"interval": 0}, "interval"),
])
def test_metrics_advice_input_error(extra, expected):
    error = advice.input_error(advice_params(**extra))
    assert error is None if expected is None else expected in error


def test_a_threshold_that_is_no_number_is_refused():
    key = sorted(diagnosis.DEFAULT_THRESHOLDS)[0]
    assert advice.input_error(advice_params(thresholds={key: "many"})) == \
        "threshold %s is 'many', not a number" % key


def test_scrape_rounds_without_an_endpoint_of_the_component():
    query = {"id": "q", "component": "kube-scheduler"}
    out = advice.measure_scrape_rounds([{"component": "kube-controller-manager"}], {0: "down"}, {0: "down"},
                                       [query])
    assert out["q"]["state"] == "missing-metric"


# --- component_flags ---------------------------------------------------------------------------

def test_config_flag_given_twice_or_empty_is_refused():
    assert component_flags.current_config_flag({}, "m") is None
    assert component_flags.current_config_flag({"config": "/etc/x.yaml"}, "m") == "/etc/x.yaml"
    with pytest.raises(manifest.ManifestError, match="several times"):
        component_flags.current_config_flag({"config": ["/a", "/b"]}, "m")
    with pytest.raises(manifest.ManifestError, match="without a file"):
        component_flags.current_config_flag({"config": None}, "m")


def test_a_new_config_path_must_be_given_and_absolute():
    with pytest.raises(manifest.ManifestError, match="give config_file.path"):
        component_flags.new_config_path({}, "m")
    with pytest.raises(manifest.ManifestError, match="not an absolute path"):
        component_flags.new_config_path({"path": "etc/x.yaml"}, "m")


def test_config_flag_errors_add_config_and_refuse_scheduler_rate_flags():
    params = {"path": "m", "remove_flags": []}
    wanted = {"kube-api-qps": 10}
    config = {"errors": [], "add_flag": True, "path": "/etc/kubernetes/s.yaml"}
    errors = component_flags.config_flag_errors(wanted, config, {}, params, "kube-scheduler")
    assert wanted["config"] == "/etc/kubernetes/s.yaml"
    assert len(errors) == 1 and "ignores --kube-api-qps" in errors[0]


def test_map_value_joins_repeated_flags():
    assert component_flags.map_value({"feature-gates": ["A=true", "B=false"]}, "feature-gates") == \
        {"A": "true", "B": "false"}
    assert component_flags.map_value({}, "runtime-config") == {}


@pytest.mark.parametrize("ready, last_line", [
    (True, "0s done: rolled out, every selected node publishes its slices"),
    (False, "0s rollout 2/2 pods updated, 2/2 available; slices on 1/2 selected nodes (waiting for b)"),
])
def test_a_look_without_waiting_ends_its_progress_with_the_done_line_only_when_ready(monkeypatch, ready, last_line):
    from ansible_collections.dra.admin.plugins.module_utils.drivers import status_service
    daemonset = {"metadata": {"name": "d"}, "spec": {"updateStrategy": {"type": "RollingUpdate"}}}
    look = seen() if ready else seen(without=["b"])
    monkeypatch.setattr(status_service, "observe", lambda api, params: dict(look, daemonset=daemonset))
    params = status_params(wait=False, exclusion_label=DEFAULT_EXCLUSION_LABEL, health_ports=[],
                           require_startup_probe=False, wait_sleep=1)
    out = status_service.run(None, params, clock=lambda: 100.0, sleep=lambda s: None)
    assert out["progress"][-1] == last_line and out["done"] is ready
    assert out["pending"] == ([] if ready else ["node b (no complete ResourceSlices)"])
