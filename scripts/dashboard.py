#!/usr/bin/env python3
"""Writes deploy/grafana/inbound.json, the Grafana dashboard, and its copy for Grafana's
dashboard sidecar (deploy/kubernetes/components/grafana-dashboard/inbound.json).

    python3 scripts/dashboard.py          # regenerate both
    python3 scripts/dashboard.py --check  # fail when either differs (make deploy-check)

Every query is scoped to the `namespace` and `job` variables, so one Grafana shows one
installation (or several) among others.
"""
import json
import sys

SCOPE = 'namespace=~"$namespace", job=~"$job"'
OUTPUTS = ["deploy/grafana/inbound.json", "deploy/kubernetes/components/grafana-dashboard/inbound.json"]


def scoped(expr):
    """Adds the dashboard scope to every inbound_ / process_ selector of `expr`."""
    out, index = [], 0
    while index < len(expr):
        starts = [position for position in (expr.find("inbound_", index), expr.find("process_", index)) if position >= 0]
        if not starts:
            out.append(expr[index:])
            break
        start = min(starts)
        if start > 0 and (expr[start - 1].isalnum() or expr[start - 1] in "_:"):
            out.append(expr[index:start + 1])
            index = start + 1
            continue
        end = start
        while end < len(expr) and (expr[end].isalnum() or expr[end] == "_"):
            end += 1
        out.append(expr[index:end])
        if end < len(expr) and expr[end] == "{":
            out.append("{" + SCOPE + ", ")
            index = end + 1
        else:
            out.append("{" + SCOPE + "}")
            index = end
    return "".join(out)


PANELS = [
    # (title, unit, [(expr, legend)])
    ("Webhooks answered by outcome", "reqps",
     [("sum by (outcome) (rate(inbound_ingress_requests_total[5m]))", "{{outcome}}")]),
    ("Webhooks per integration", "reqps",
     [("sum by (integration) (rate(inbound_ingress_requests_total[5m]))", "{{integration}}")]),
    ("Unauthorized (401) per integration", "reqps",
     [('sum by (integration) (rate(inbound_ingress_requests_total{outcome="unauthorized"}[5m]))', "{{integration}}")]),
    ("Ingress latency (p99) per integration", "s",
     [("histogram_quantile(0.99, sum by (le, integration) (rate(inbound_ingress_request_duration_seconds_bucket[5m])))", "{{integration}}"),
      ("0.5 * max by (integration) (inbound_integration_provider_timeout_seconds)", "{{integration}} alert line (half the provider's timeout)")]),
    ("Receipts per group commit (p50, p99)", "none",
     [("histogram_quantile(0.5, sum by (le) (rate(inbound_ingress_commit_batch_size_bucket[5m])))", "p50"),
      ("histogram_quantile(0.99, sum by (le) (rate(inbound_ingress_commit_batch_size_bucket[5m])))", "p99")]),
    ("Since the last verified delivery", "s",
     [("time() - max by (integration) (max_over_time(inbound_ingress_last_delivery_timestamp_seconds[7d]))", "{{integration}}")]),
    ("Longest claimable wait (scales workers)", "s",
     [("max by (integration) (inbound_oldest_pending_age_seconds)", "{{integration}}")]),
    ("Oldest receipt retrying in backoff", "s",
     [("max by (integration) (inbound_oldest_waiting_age_seconds)", "{{integration}}")]),
    ("Receipts by state", "none",
     [("max by (state) (inbound_receipts)", "{{state}}")]),
    ("Receipts needing a person", "none",
     [("max by (integration, state) (inbound_receipts_for_review)", "{{integration}} {{state}}")]),
    ("Accept → done latency (p50, p99)", "s",
     [("histogram_quantile(0.99, sum by (le) (rate(inbound_accept_to_done_seconds_bucket[5m])))", "p99"),
      ("histogram_quantile(0.5, sum by (le) (rate(inbound_accept_to_done_seconds_bucket[5m])))", "p50")]),
    ("Receipt attempt outcomes", "ops",
     [("sum by (outcome) (rate(inbound_receipt_attempts_total[5m]))", "{{outcome}}")]),
    ("Business transactions by mode", "ops",
     [("sum by (mode) (rate(inbound_worker_batches_total[5m]))", "{{mode}}")]),
    ("Lease reclaims", "ops",
     [("sum(rate(inbound_lease_reclaims_total[5m]))", "reclaims")]),
    ("Open effects by sink and state", "none",
     [("max by (sink, state) (inbound_effects)", "{{sink}} {{state}}")]),
    ("Effect attempt outcomes", "ops",
     [("sum by (sink, outcome) (rate(inbound_effect_attempts_total[5m]))", "{{sink}} {{outcome}}")]),
    ("Sink answer time (p50, p99)", "s",
     [("histogram_quantile(0.99, sum by (le, sink) (rate(inbound_effect_delivery_seconds_bucket[5m])))", "{{sink}} p99"),
      ("histogram_quantile(0.5, sum by (le, sink) (rate(inbound_effect_delivery_seconds_bucket[5m])))", "{{sink}} p50")]),
    ("Oldest undelivered effect age", "s",
     [("max by (sink) (inbound_oldest_effect_age_seconds)", "{{sink}}")]),
    ("Database connections in use", "none",
     [("sum by (pod) (inbound_db_pool_connections{state=\"in_use\"})", "{{pod}}"),
      ("max(inbound_db_pool_max_connections)", "pool size")]),
    ("Waiting for a database connection (p99)", "s",
     [("histogram_quantile(0.99, sum by (le, pod) (rate(inbound_db_pool_acquire_seconds_bucket[5m])))", "{{pod}}")]),
    ("CPU per pod", "percentunit",
     [("sum by (pod) (rate(process_cpu_seconds_total[5m]))", "{{pod}}")]),
    ("Memory per pod", "bytes",
     [("max by (pod) (process_resident_memory_bytes)", "{{pod}}")]),
    ("Running versions", "none",
     [("count by (version, role) (inbound_build_info)", "{{role}} {{version}}")]),
]

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def dashboard():
    panels = []
    for index, (title, unit, targets) in enumerate(PANELS):
        panels.append({
            "id": index + 1,
            "type": "timeseries",
            "title": title,
            "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
            "datasource": DATASOURCE,
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
            "targets": [{"refId": chr(ord("A") + number), "expr": scoped(expr), "legendFormat": legend,
                         "datasource": DATASOURCE} for number, (expr, legend) in enumerate(targets)],
        })
    variable = lambda name, query: {  # noqa: E731
        "name": name, "label": name, "type": "query", "datasource": DATASOURCE,
        "query": {"query": query, "refId": name}, "definition": query, "refresh": 2,
        "includeAll": True, "multi": True, "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
    }
    return {
        "title": "inbound", "uid": "inbound", "schemaVersion": 39, "version": 2, "editable": True,
        "time": {"from": "now-6h", "to": "now"}, "refresh": "30s", "tags": ["inbound", "webhooks"],
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
            variable("namespace", "label_values(inbound_build_info, namespace)"),
            variable("job", 'label_values(inbound_build_info{namespace=~"$namespace"}, job)'),
        ]},
        "panels": panels,
    }


text = json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"
if "--check" in sys.argv[1:]:
    stale = [path for path in OUTPUTS if open(path, encoding="utf-8").read() != text]
    if stale:
        sys.exit(f"{', '.join(stale)} differ from scripts/dashboard.py: run python3 scripts/dashboard.py")
    print("  dashboard and its sidecar copy are current")
else:
    for path in OUTPUTS:
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
