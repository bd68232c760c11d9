"""Discovery of what the cluster serves in resource.k8s.io (api.DraApi), on canned discovery documents."""
from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApi, DraApiError

GROUP = {"kind": "APIGroup", "name": "resource.k8s.io",
         "versions": [{"groupVersion": "resource.k8s.io/v1", "version": "v1"},
                      {"groupVersion": "resource.k8s.io/v1beta2", "version": "v1beta2"},
                      {"groupVersion": "resource.k8s.io/v1alpha3", "version": "v1alpha3"}]}
V1 = {"kind": "APIResourceList", "groupVersion": "resource.k8s.io/v1",
      "resources": [{"name": "deviceclasses"}, {"name": "resourceclaims"}, {"name": "resourceclaims/status"},
                    {"name": "resourceslices"}]}
V1BETA2 = {"kind": "APIResourceList", "groupVersion": "resource.k8s.io/v1beta2",
           "resources": [{"name": "deviceclasses"}, {"name": "devicetaintrules"}]}


class DiscoveryApi(DraApi):
    """DraApi answering GETs from a dict of path -> document (a missing path is a 404)."""

    def __init__(self, documents):
        super(DiscoveryApi, self).__init__(api_client=object())
        self.documents = documents
        self.asked = []

    def get(self, path, query=None, accept="application/json"):
        self.requests += 1
        self.asked.append(path)
        if path not in self.documents:
            raise DraApiError("GET %s failed: HTTP 404: not found" % path, status=404)
        return self.documents[path]


def test_served_resources_are_the_union_over_every_served_version():
    api = DiscoveryApi({"/apis/resource.k8s.io": GROUP, "/apis/resource.k8s.io/v1": V1,
                        "/apis/resource.k8s.io/v1beta2": V1BETA2})
    assert api.served_resources() == ["deviceclasses", "devicetaintrules", "resourceclaims",
                                      "resourceclaims/status", "resourceslices"]
    # The group once, then each served version once (v1alpha3 answered 404: left out).
    assert api.asked == ["/apis/resource.k8s.io", "/apis/resource.k8s.io/v1", "/apis/resource.k8s.io/v1beta2",
                         "/apis/resource.k8s.io/v1alpha3"]
    assert api.requests == 4


def test_a_cluster_without_resource_k8s_io_serves_nothing():
    api = DiscoveryApi({})
    assert api.served_resources() == [] and api.requests == 1
