"""Generated allocation scenarios: the objects of one scenario, from a seeded random generator.

Each scenario has a driver, a DeviceClass and slices of its own (so scenarios of a batch never share a device)
on the cluster's nodes: node-local pools, sometimes a pool offered to all nodes or a pool that is incomplete
(one of its two slices published), devices with attributes (model, index, version) and a memory capacity, some
tainted in their slice or by a DeviceTaintRule. Filler pods take chosen devices first (exhausted pools); then
one or two test pods, created with a scheduling gate, use claims with one or two requests (exact counts, All,
firstAvailable lists, selectors on attributes and capacity with the semver and quantity libraries, tolerations,
admin access, matchAttribute constraints), sometimes a claim two pods share, sometimes a required node affinity
or a toleration of the tainted node; where the release backs extended resources by DRA, sometimes the test pods
ask for the class's devices as an extended resource too (or instead of claims), with init containers and sidecars.
Then, from a generator of its own (so the draws above stay as they were), some first test pods get what the rest of
the scheduler checks (`build_pod_features`): cpu or memory requests in containers, init containers and sidecars
(small ones that fit; one larger than any node's allocatable; containers and sidecars, or a sidecar and the init
container after it, that only their sum makes too large; one pinned beside a neighbour pod of the scenario that
takes a tenth of its node, asking for more than that leaves), required pod affinity or anti-affinity to the
neighbour (or the neighbour's anti-affinity selecting the test pod), topology spread with DoNotSchedule, and a host
port the neighbour already holds.
`kinds` names what one scenario exercises, so that a smaller run can still take one of each (tests/integration/
tiers.py).
"""
import random

from ansible_collections.dra.admin.plugins.module_utils.kube.quantity import quantity

MODELS = ("a", "b", "c")
MEMORY = ("16Gi", "40Gi", "80Gi")
VERSIONS = ("1.2.0", "1.10.1", "2.0.0-rc.1")
DEVICE_TAINT = "explain.example.com/maint"
NODE_TAINT = {"key": "explain.example.com/reserved", "value": "x", "effect": "NoSchedule"}
GATE = "dra.admin.test/explain"
LABEL = "dra.admin.test/explain-batch"
IMAGE = "registry.k8s.io/pause:3.10"
SCENARIO_LABEL = "dra.admin.test/explain-scenario"
ROLE_LABEL = "dra.admin.test/explain-role"
HOSTNAME = "kubernetes.io/hostname"
HOST_PORT_BASE = 40000   # plus the scenario's index: no two neighbours of a run hold the same port
HOG_SHARE = 10           # a neighbour that hogs takes 1/HOG_SHARE of its node's cpu or memory
# What build_pod_features draws, each a kind of `kinds`; the first ones are resource requests.
REQUEST_KINDS = ("requests that fit", "requests over any node", "requests over what the neighbour leaves",
                 "init container requests", "sidecar requests", "sidecar and containers over a node",
                 "sidecar then init step over a node")
UNCHECKED_KINDS = ("pod anti-affinity", "anti-affinity of a bound pod", "pod affinity",
                   "topology spread DoNotSchedule", "host port")


def selectors_for(domain, semver):
    found = [
        f'device.attributes["{domain}"].model == "a"',
        f'device.attributes["{domain}"].model != "c"',
        f'device.capacity["{domain}"].memory.compareTo(quantity("40Gi")) >= 0',
        f'device.attributes["{domain}"].index % 2 == 0',
        f'"{domain}" in device.attributes && device.attributes["{domain}"].index < 2',
        f'device.capacity["{domain}"].memory.isLessThan(quantity("50Gi"))',
        f'device.attributes["{domain}"].model in ["a", "b"]',
        f'cel.bind(a, device.attributes["{domain}"], a.model == "b" || a.index == 0)',
        f'device.attributes["{domain}"].model.startsWith("b") || device.capacity["{domain}"].memory == quantity("80Gi")',
    ]
    if semver:
        found += [f'device.attributes["{domain}"].version.isGreaterThan(semver("1.5.0"))',
                  f'device.attributes["{domain}"].version.major() >= 2']
    return found


class Scenario:
    def __init__(self, index, rng, ctx):
        self.index = index
        self.rng = rng
        self.ctx = ctx
        self.driver = f"s{index}.explain.example.com"
        self.name = f"s{index}"
        self.devices = {}          # pool -> [(device name, attrs, tainted)]
        self.objects_first = []    # cluster-scoped and filler objects
        self.fillers = []          # filler pod names
        self.objects_then = []     # test claims and gated pods
        self.test_pods = []
        self.neighbours = []       # pods of the scenario bound before the test pods (build_pod_features)
        self.pod_kinds = {}        # test pod -> the kinds build_pod_features gave it

    # ---- cluster-scoped ----------------------------------------------------------------------------
    def meta(self, name, namespaced=False):
        m = {"name": name, "labels": {LABEL: self.ctx["batch"]}}
        if namespaced:
            m["namespace"] = self.ctx["namespace"]
        return m

    def device(self, pool, i, taint_ok=True):
        r = self.rng
        attrs = {"model": {"string": r.choice(MODELS)}, "index": {"int": i},
                 "version": {"version": r.choice(VERSIONS)}}
        dev = {"name": f"dev-{i}", "attributes": attrs, "capacity": {"memory": {"value": r.choice(MEMORY)}}}
        tainted = None
        if taint_ok and self.ctx["device_taints"] and r.random() < 0.15:
            tainted = {"key": DEVICE_TAINT, "value": "x", "effect": r.choice(("NoSchedule", "NoExecute"))}
            dev["taints"] = [tainted]
        self.devices.setdefault(pool, []).append((dev["name"], attrs, tainted))
        if self.ctx["api"] == "v1beta1":
            return {"name": dev.pop("name"), "basic": dev}
        return dev

    def slice(self, name, pool, devices, where, count=1, generation=1):
        spec = {"driver": self.driver, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
                "devices": devices}
        spec.update(where)
        return {"apiVersion": f"resource.k8s.io/{self.ctx['api']}", "kind": "ResourceSlice",
                "metadata": self.meta(f"explain-{self.name}-{name}"), "spec": spec}

    def build_devices(self):
        r = self.rng
        nodes = self.ctx["nodes"]
        chosen = [n for n in nodes if r.random() < 0.7] or [r.choice(nodes)]
        for node in chosen:
            n = r.randint(0, 4)
            self.objects_first.append(self.slice(node, node, [self.device(node, i) for i in range(n)],
                                                 {"nodeName": node}))
        if r.random() < 0.2:
            devices = [self.device("shared", i) for i in range(r.randint(1, 2))]
            self.objects_first.append(self.slice("shared", "shared", devices, {"allNodes": True}))
        if r.random() < 0.05:
            node = r.choice(nodes)
            devices = [self.device(f"{node}-half", i) for i in range(2)]
            self.objects_first.append(self.slice(f"{node}-half", f"{node}-half", devices, {"nodeName": node}, count=2))
        cls = {"apiVersion": f"resource.k8s.io/{self.ctx['api']}", "kind": "DeviceClass",
               "metadata": self.meta(f"explain-{self.name}"),
               "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{self.driver}"'}}]}}
        self.objects_first.append(cls)
        if self.ctx["taint_rules_api"] and r.random() < 0.15 and chosen:
            pool = r.choice(chosen)
            sel = {"driver": self.driver, "pool": pool}
            if self.devices.get(pool) and r.random() < 0.5:
                sel["device"] = r.choice(self.devices[pool])[0]
            self.objects_first.append({
                "apiVersion": f"resource.k8s.io/{self.ctx['taint_rules_api']}", "kind": "DeviceTaintRule",
                "metadata": self.meta(f"explain-{self.name}"),
                "spec": {"deviceSelector": sel, "taint": {"key": DEVICE_TAINT, "value": "rule", "effect": "NoSchedule"}}})
            self.rule_selector = sel

    # ---- claims and pods ---------------------------------------------------------------------------
    def request_body(self, count=None, mode=None, selectors=(), tolerate=False, admin=False):
        body = {"deviceClassName": f"explain-{self.name}"}
        if mode == "All":
            body["allocationMode"] = "All"
        else:
            body["count"] = count or 1
        if selectors:
            body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
        if tolerate:
            # With the effect named: the device taint eviction counts only tolerations naming NoExecute.
            body["tolerations"] = [{"key": DEVICE_TAINT, "operator": "Exists", "effect": e} for e in tolerate]
        if admin:
            body["adminAccess"] = True
        return body

    def tolerations(self):
        """The device taint effects a request tolerates: none, NoSchedule only, or both."""
        return self.rng.choice(((), (), ("NoSchedule",), ("NoSchedule", "NoExecute")))

    def pick(self):
        """Zero to two selectors of the list."""
        return self.rng.sample(selectors_for(self.driver, self.ctx["semver"]), self.rng.choice((0, 0, 1, 1, 2)))

    def request(self, name, tolerate=None):
        r, ctx = self.rng, self.ctx
        pick = self.pick
        tolerate = self.tolerations() if tolerate is None else tolerate
        if ctx["prioritized_list"] and r.random() < 0.2:
            subs = [dict(self.request_body(r.randint(1, 3), None, pick(), tolerate), name="first"),
                    dict(self.request_body(1, None, pick(), tolerate), name="second")]
            return {"name": name, "firstAvailable": subs}
        mode = "All" if r.random() < 0.08 else None
        admin = ctx["admin_access"] and r.random() < 0.1
        body = self.request_body(r.choice((1, 1, 2, 3)), mode, pick(), tolerate, admin)
        if ctx["api"] == "v1beta1":
            return dict(body, name=name)
        return {"name": name, "exactly": body}

    def claim(self, name, requests, constraints=()):
        spec = {"devices": {"requests": requests}}
        if constraints:
            spec["devices"]["constraints"] = list(constraints)
        return {"apiVersion": f"resource.k8s.io/{self.ctx['api']}", "kind": "ResourceClaim",
                "metadata": self.meta(name, True), "spec": spec}

    def pod(self, name, claims, gated, node_selector=None, affinity_nodes=None, tolerate_node=False):
        spec = {"resourceClaims": [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)],
                "containers": [{"name": "c", "image": IMAGE,
                                "resources": {"claims": [{"name": f"c{i}"} for i in range(len(claims))]}}],
                "terminationGracePeriodSeconds": 0}
        if gated:
            spec["schedulingGates"] = [{"name": GATE}]
        if node_selector:
            spec["nodeSelector"] = node_selector
        if affinity_nodes:
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": sorted(affinity_nodes)}]}]}}}
        if tolerate_node:
            spec["tolerations"] = [{"key": NODE_TAINT["key"], "operator": "Exists"}]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": self.meta(name, True), "spec": spec}

    def build_fillers(self):
        r = self.rng
        pools = [p for p, devs in self.devices.items() if devs and p in self.ctx["nodes"]]
        if not pools or r.random() < 0.5:
            return
        pool = r.choice(pools)
        free = [d for d in self.devices[pool] if not d[2]]
        take = r.sample(free, min(len(free), r.randint(1, 3)))
        if not take:
            return
        exprs = ["device.attributes[\"%s\"].index in [%s]" % (self.driver, ", ".join(
            str(d[1]["index"]["int"]) for d in take))]
        body = self.request_body(len(take), None, exprs, tolerate=("NoSchedule", "NoExecute"))
        req = dict(body, name="r") if self.ctx["api"] == "v1beta1" else {"name": "r", "exactly": body}
        name = f"{self.name}-filler"
        self.objects_first.append(self.claim(name, [req]))
        self.objects_first.append(self.pod(name, [name], gated=False,
                                           node_selector={"kubernetes.io/hostname": pool}, tolerate_node=True))
        self.fillers.append(name)

    def build_tests(self):
        r = self.rng
        claims = []
        for c in range(2 if r.random() < 0.2 else 1):
            names = ["r0", "r1"] if r.random() < 0.3 else ["r0"]
            tolerate = self.tolerations()
            requests = [self.request(n, tolerate) for n in names]
            constraints = [{"requests": names, "matchAttribute": f"{self.driver}/model"}] \
                if len(names) == 2 and r.random() < 0.5 else []
            name = f"{self.name}-claim{c}"
            self.objects_then.append(self.claim(name, requests, constraints))
            claims.append(name)
        affinity = None
        if r.random() < 0.25:
            affinity = r.sample(self.ctx["nodes"], r.randint(1, len(self.ctx["nodes"]) - 1))
        tolerate_node = r.random() < 0.5
        pods = [f"{self.name}-pod"]
        if r.random() < 0.1:
            pods.append(f"{self.name}-pod-shared")
        for p in pods:
            self.objects_then.append(self.pod(p, claims, gated=True, affinity_nodes=affinity,
                                              tolerate_node=tolerate_node))
            self.test_pods.append(p)

    def build_extended(self, r):
        """Where extended resources are backed by DRA: sometimes the test pods also (or only) ask for the class's
        devices as an extended resource - its explicit name or its implicit one - from the container, and from
        init containers and a sidecar. Drawn from its own generator `r`, so the rest of the scenario is the same
        with the feature on or off."""
        if not self.ctx.get("extended_resource") or r.random() >= 0.3:
            return
        cls = next(o for o in self.objects_first if o["kind"] == "DeviceClass")
        if r.random() < 0.5:
            resource = f"explain.example.com/{self.name}"
            cls["spec"]["extendedResourceName"] = resource
        else:
            resource = f"deviceclass.resource.kubernetes.io/{cls['metadata']['name']}"
        only_extended = r.random() < 0.4
        for pod in [o for o in self.objects_then if o["kind"] == "Pod"]:
            spec = pod["spec"]
            if only_extended:
                spec.pop("resourceClaims", None)
                spec["containers"][0]["resources"].pop("claims", None)
            asks = {resource: str(r.randint(1, 3))}
            spec["containers"][0]["resources"].update(requests=dict(asks), limits=dict(asks))
            inits = []
            if r.random() < 0.3:
                side = str(r.randint(1, 2))
                inits.append({"name": "side", "image": IMAGE, "restartPolicy": "Always",
                              "resources": {"requests": {resource: side}, "limits": {resource: side}}})
            for i in range(r.choice((0, 0, 1, 2))):
                more = str(r.randint(1, 4))
                inits.append({"name": f"init{i}", "image": IMAGE,
                              "resources": {"requests": {resource: more}, "limits": {resource: more}}})
            if inits:
                r.shuffle(inits)
                spec["initContainers"] = inits

    # ---- the rest of the pod -----------------------------------------------------------------------

    def allocatable(self, node, resource):
        """The node's allocatable `resource` (cpu in cores, memory in bytes), as a Fraction."""
        return quantity(self.ctx["allocatable"][node][resource])

    def neighbour(self, node, requests):
        """A pod of the scenario bound to `node` before the test pods are created, asking for `requests`."""
        name = f"{self.name}-neighbour"
        pod = self.pod(name, [], gated=False, node_selector={HOSTNAME: node}, tolerate_node=True)
        pod["metadata"]["labels"].update({SCENARIO_LABEL: self.name, ROLE_LABEL: "neighbour"})
        pod["spec"].pop("resourceClaims")
        pod["spec"]["containers"][0]["resources"] = {"requests": requests}
        self.objects_first.append(pod)
        self.neighbours.append(name)
        return pod

    def build_pod_features(self, r):
        """Sometimes the first test pod gets resource requests, pod (anti-)affinity, topology spread or a host port
        (the module's docstring), drawn from its own generator `r`. Requests that fit are small (the pods of a
        batch share the nodes: the sum of all of them stays far below a node); the others are refused whatever
        else is bound, so no order of binding changes the answer."""
        if r.random() >= 0.6:
            return
        pod = next(o for o in self.objects_then if o["kind"] == "Pod")
        spec = pod["spec"]
        pod["metadata"]["labels"].update({SCENARIO_LABEL: self.name, ROLE_LABEL: "test"})
        kinds = self.pod_kinds.setdefault(pod["metadata"]["name"], set())
        nodes = self.ctx["nodes"]
        node = r.choice(nodes)
        resource = r.choice(("cpu", "memory"))
        unit = {"cpu": "m", "memory": "Mi"}[resource]
        largest = max(self.allocatable(n, resource) for n in nodes)
        scale = 1000 if resource == "cpu" else 2 ** 20

        def amount(value):
            return f"{int(value * scale)}{unit}" if resource == "cpu" else f"{int(value // scale)}{unit}"

        def ask(container, value):
            container.setdefault("resources", {}).setdefault("requests", {})[resource] = value

        def init(name, value, sidecar=False):
            container = {"name": name, "image": IMAGE, "resources": {"requests": {resource: value}}}
            if sidecar:
                container["restartPolicy"] = "Always"
            spec.setdefault("initContainers", []).append(container)

        neighbour = {"cpu": "10m"}
        if r.random() < 0.7:
            mode = r.choice(REQUEST_KINDS)
            kinds.add(mode)
            small = f"{r.randint(10, 100)}{unit}"
            if mode == "requests that fit":
                ask(spec["containers"][0], small)
            elif mode == "requests over any node":
                ask(spec["containers"][0], amount(largest + (1 if resource == "cpu" else 2 ** 30)))
            elif mode == "requests over what the neighbour leaves":
                # The neighbour's tenth is bound before: at most nine tenths are left, whatever else is there.
                own = self.allocatable(node, resource)
                neighbour = {resource: amount(own / HOG_SHARE)}
                ask(spec["containers"][0], amount(own - own / (2 * HOG_SHARE)))
                spec["nodeSelector"] = {HOSTNAME: node}
            elif mode in ("init container requests", "sidecar requests"):
                ask(spec["containers"][0], small)
                init("init-small", f"{r.randint(10, 200)}{unit}", sidecar=mode == "sidecar requests")
            else:
                # Each part below every node, their sum above: what the scheduler adds up decides.
                part = amount(largest * 3 / 5)
                ask(spec["containers"][0], part if mode == "sidecar and containers over a node" else small)
                init("side-large", part, sidecar=True)
                if mode == "sidecar then init step over a node":
                    init("init-large", part)
        if r.random() < 0.3:
            term = {"labelSelector": {"matchLabels": {SCENARIO_LABEL: self.name, ROLE_LABEL: "neighbour"}},
                    "topologyKey": HOSTNAME}
            choice = r.choice(("pod anti-affinity", "pod anti-affinity", "pod affinity",
                               "anti-affinity of a bound pod"))
            kinds.add(choice)
            if choice == "anti-affinity of a bound pod":
                term["labelSelector"]["matchLabels"][ROLE_LABEL] = "test"
                neighbour_affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
            else:
                neighbour_affinity = None
                kind = "podAntiAffinity" if choice == "pod anti-affinity" else "podAffinity"
                spec.setdefault("affinity", {})[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        else:
            neighbour_affinity = None
        if r.random() < 0.25:
            kinds.add("topology spread DoNotSchedule")
            spec["topologySpreadConstraints"] = [{
                "maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {SCENARIO_LABEL: self.name}}}]
        port = None
        if r.random() < 0.25:
            kinds.add("host port")
            port = HOST_PORT_BASE + self.index
            spec["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": port}]
        if not kinds:
            return
        held = self.neighbour(node, neighbour)
        if neighbour_affinity:
            held["spec"]["affinity"] = neighbour_affinity
        if port:
            held["spec"]["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": port}]


def generate(index, seed, ctx):
    scenario = Scenario(index, random.Random(f"{seed}-{index}"), ctx)
    scenario.rule_selector = None
    scenario.build_devices()
    scenario.build_fillers()
    scenario.build_tests()
    scenario.build_extended(random.Random(f"{seed}-{index}-extended"))
    if ctx.get("allocatable"):
        scenario.build_pod_features(random.Random(f"{seed}-{index}-pod"))
    return scenario


def _request_kinds(request, selectors):
    """The kinds of one test request (v1 with `exactly` or a firstAvailable list, or v1beta1's flat request)."""
    out = {"firstAvailable list"} if "firstAvailable" in request else set()
    for body in request.get("firstAvailable") or [request.get("exactly", request)]:
        out.add("allocationMode All" if body.get("allocationMode") == "All" else
                "count 1" if body.get("count", 1) == 1 else "count above 1")
        out.update(f"selector {selectors.index(s['cel']['expression'])}" for s in body.get("selectors", ()))
        out.update(f"tolerates device taint {t['effect']}" for t in body.get("tolerations", ()))
        if body.get("adminAccess"):
            out.add("admin access")
    return out


def kinds(scenario):
    """What `scenario` exercises, read from its objects: the kinds of pools, device taints, DeviceTaintRules, fillers,
    requests (per selector of the list), claims, pods and extended resources the generator can draw."""
    selectors = selectors_for(scenario.driver, scenario.ctx["semver"])
    out = {"filler pod"} if scenario.fillers else set()
    cls = next(o for o in scenario.objects_first if o["kind"] == "DeviceClass")
    named = "explicit name" if cls["spec"].get("extendedResourceName") else "implicit name"
    for obj in scenario.objects_first:
        spec = obj["spec"]
        if obj["kind"] == "ResourceSlice":
            out.add("pool for all nodes" if spec.get("allNodes") else
                    "incomplete pool" if spec["pool"]["resourceSliceCount"] > 1 else
                    "node pool" if spec["devices"] else "node pool without devices")
            taints = [t for d in spec["devices"] for t in d.get("basic", d).get("taints", ())]
            out.update("device taint " + t["effect"] for t in taints)
        elif obj["kind"] == "DeviceTaintRule":
            out.add("DeviceTaintRule on a " + ("device" if "device" in spec["deviceSelector"] else "pool"))
    claims = [o for o in scenario.objects_then if o["kind"] == "ResourceClaim"]
    pods = [o for o in scenario.objects_then if o["kind"] == "Pod"]
    out.add("two claims" if len(claims) > 1 else "one claim")
    for claim in claims:
        devices = claim["spec"]["devices"]
        out.add("two requests" if len(devices["requests"]) > 1 else "one request")
        if devices.get("constraints"):
            out.add("matchAttribute")
        for request in devices["requests"]:
            out |= _request_kinds(request, selectors)
    if len(pods) > 1:
        out.add("claim shared by two pods")
    for pod in pods:
        spec = pod["spec"]
        if "nodeAffinity" in spec.get("affinity", {}):
            out.add("node affinity")
        if spec.get("tolerations"):
            out.add("tolerates the tainted node")
        if "limits" in spec["containers"][0]["resources"]:
            out.add("extended resource, " + named)
            out.add("extended resource and claims" if spec.get("resourceClaims") else "extended resource alone")
        for init in spec.get("initContainers", ()):
            if "limits" in init["resources"]:
                out.add("extended resource, " + ("sidecar" if init.get("restartPolicy") == "Always" else "init"))
    for found in scenario.pod_kinds.values():
        out |= found
    return out
