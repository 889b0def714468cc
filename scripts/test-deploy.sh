#!/usr/bin/env bash
# Tests scripts/deploy.sh without a cluster (part of `make deploy-check`): a recording
# kubectl renders with the real one and logs every other call. Checks that each overlay's
# rollout applies the render once, server-side, with no Job in it, then waits for every
# Deployment it rendered (and for nothing else), and that a failed rollout fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
real_kubectl=$(command -v kubectl)
cat >"$work/kubectl" <<STUB
#!/usr/bin/env bash
if [ "\$1" = kustomize ]; then exec "$real_kubectl" "\$@"; fi
echo "\$*" >>"$work/calls"
if [ "\$1" = apply ]; then
  file=\${@: -1}
  cp "\$file" "$work/applied.yaml"
fi
for argument in "\$@"; do
  if [ "\$argument" = "deployment/\${FAIL_ROLLOUT:-none}" ]; then exit 1; fi
done
exit 0
STUB
chmod +x "$work/kubectl"

expect() { # overlay deployment…
  local overlay=$1
  shift
  rm -f "$work/calls"
  KUBECTL="$work/kubectl" scripts/deploy.sh "deploy/kubernetes/overlays/$overlay" >/dev/null
  local expected
  expected="apply --server-side --force-conflicts --field-manager=inbound-deploy -f"
  head -n 1 "$work/calls" | grep -q "^$expected " || { echo "$overlay: first call is not the apply" >&2; cat "$work/calls" >&2; exit 1; }
  if grep -q '^kind: Job' "$work/applied.yaml"; then echo "$overlay: applies a Job" >&2; exit 1; fi
  local waited
  waited=$(sed -n 's/.*rollout status deployment\/\([^ ]*\) .*/\1/p' "$work/calls" | sort | tr '\n' ' ')
  local wanted
  wanted=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
  [ "$waited" = "$wanted" ] || { echo "$overlay: waited for '$waited', expected '$wanted'" >&2; exit 1; }
  grep -q -- "-n inbound rollout status" "$work/calls" || { echo "$overlay: rollout not in namespace inbound" >&2; exit 1; }
  echo "  $overlay: applied once, waited for $waited"
}

expect without-crds inbound-ingress inbound-worker
expect example inbound-ingress inbound-worker
expect console inbound-console inbound-ingress inbound-worker
expect split-dispatcher inbound-dispatcher inbound-ingress inbound-worker

if FAIL_ROLLOUT=inbound-worker KUBECTL="$work/kubectl" scripts/deploy.sh deploy/kubernetes/overlays/example >/dev/null 2>"$work/stderr"; then
  echo "a failed rollout did not fail scripts/deploy.sh" >&2
  exit 1
fi
grep -q "deployment/inbound-worker in inbound did not roll out" "$work/stderr" || { cat "$work/stderr" >&2; exit 1; }
echo "  a failed rollout fails the run and names the Deployment"
