#!/usr/bin/env bash
# The documented rollout (docs/operations.md, "Deploy"):
#   scripts/deploy.sh OVERLAY        e.g. deploy/kubernetes/overlays/mine
# renders the kustomization, applies it server-side (the autoscalers keep owning the
# replica counts), then waits for every Deployment it rendered to finish rolling out. Each
# new pod migrates the database before it starts (its init container), so there is no
# separate migration step: a failed migration leaves the new pods in Init, the old ones
# serving, and this script exits non-zero naming the Deployment.
# KUBECTL (default kubectl) and ROLLOUT_TIMEOUT (default 10m) may be set.
set -euo pipefail

overlay=${1:?usage: scripts/deploy.sh OVERLAY_DIRECTORY}
kubectl=${KUBECTL:-kubectl}
timeout=${ROLLOUT_TIMEOUT:-10m}
rendered=$(mktemp)
trap 'rm -f "$rendered"' EXIT

"$kubectl" kustomize "$overlay" >"$rendered"
# namespace/name of each Deployment, from the render itself (never a label selector that
# could select nothing).
deployments=$(python3 - "$rendered" <<'PY'
import sys, yaml
for document in yaml.safe_load_all(open(sys.argv[1])):
    if document and document.get("kind") == "Deployment":
        metadata = document["metadata"]
        # No namespace in the render: an empty part, no -n below (the kubectl context decides).
        print(f'{metadata.get("namespace", "")}/{metadata["name"]}')
PY
)
if [ -z "$deployments" ]; then
  echo "$overlay renders no Deployment: nothing to roll out" >&2
  exit 1
fi

# --force-conflicts: this overlay is the truth; fields someone changed by hand (an
# on-call `kubectl set image`, say) are taken back rather than failing the deploy.
"$kubectl" apply --server-side --force-conflicts --field-manager=inbound-deploy -f "$rendered"
for deployment in $deployments; do
  namespace=${deployment%%/*}
  name=${deployment#*/}
  scope=()
  [ -n "$namespace" ] && scope=(-n "$namespace")
  if ! "$kubectl" "${scope[@]}" rollout status "deployment/$name" --timeout="$timeout"; then
    echo "deployment/$name in ${namespace:-the current namespace} did not roll out within $timeout; its new pods:" >&2
    "$kubectl" "${scope[@]}" get pods -l "app.kubernetes.io/name=$name" >&2 || true
    echo "a pod stuck in Init failed to migrate: kubectl ${scope[*]} logs <pod> -c migrate" >&2
    exit 1
  fi
done
echo "rolled out: $(echo "$deployments" | tr '\n' ' ')"
