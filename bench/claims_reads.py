#!/usr/bin/env python3
"""What dra_claims_info cannot go below: its imports, then the same LISTs read and parsed, and nothing else.

Run like a module (`python bench/claims_reads.py args.json`, the file holding ANSIBLE_MODULE_ARGS with
`kubeconfig`): it imports the collection's API client as every module does, then reads what
`claims.claims_service.gather_claim_views` reads for the whole cluster (discovery, nodes as metadata, the
ResourceSlices, the pods in the server's Table form, the ResourceClaims, in pages of the same size), parses each
page and drops it. No view is made and no Ansible result is returned: it prints the request count and the number
of claims read, as JSON, for bench/claims_info.py to time beside the module.
"""
import json
import sys

from kubernetes import config

from ansible_collections.dra.admin.plugins.module_utils.access.api import (
    METADATA_LIST_ACCEPT, TABLE_ACCEPT, DraApi,
)


def main():
    with open(sys.argv[1]) as fh:
        params = json.load(fh)["ANSIBLE_MODULE_ARGS"]
    api = DraApi(api_client=config.new_client_from_config(params["kubeconfig"]))
    version = api.resource_api_version()
    for path, query, accept in [("/api/v1/nodes", None, METADATA_LIST_ACCEPT),
                                (api.resource_path("resourceslices", version=version), None, "application/json"),
                                ("/api/v1/pods", {"includeObject": "Metadata"}, TABLE_ACCEPT)]:
        for _ in api.list_pages(path, query, accept=accept):
            pass
    claims = 0
    for page in api.list_pages(api.resource_path("resourceclaims", version=version)):
        claims += len(page.get("items") or [])
    print(json.dumps({"api_requests": api.requests, "totals": {"total": claims}}))


if __name__ == "__main__":
    main()
