# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""dra_claims_doctor's run: the claims examined, the fixes asked for carried out (not in check mode)
and what is left waited on, through doctor.py; the findings and fixes are _doctor's."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.claims.doctor_service import carry_out, examine, unresolved
from ansible_collections.dra.admin.plugins.module_utils.claims.doctor import claim_diff, counts, plan


def treat(api, params, check_mode):
    """(result without api_requests, diffs, warnings): the findings, the fixes made (or that check mode would
    make) and the findings left after them."""
    found = examine(api, params["namespaces"], force=params["force"])
    todo = plan(found["findings"], params["fix"])
    actions, diffs, warnings = [], [], []
    for finding in todo:
        meta = found["metas"].get(finding["claim"]) or {}
        before, after = claim_diff(finding, meta)
        diffs.append({"before": before, "after": after, "before_header": finding["claim"],
                      "after_header": finding["claim"]})
        actions.append({"kind": finding["kind"], "claim": finding["claim"], "action": finding["action"]})
        if finding.get("warning"):
            warnings.append("%s: %s" % (finding["claim"], finding["warning"]))
        if not check_mode:
            carry_out(api, found["version"], finding, meta)
    findings, left = found["findings"], []
    if todo and not check_mode:
        findings, left = unresolved(api, params["namespaces"], todo, params["force"],
                                    params["wait_timeout"] if params["wait"] else 0, params["wait_sleep"])
    result = dict(changed=bool(todo), resource_api_version=found["version"], findings=findings,
                  counts=counts(findings), actions=actions, unresolved=left, warnings_issued=warnings)
    return result, diffs, warnings
