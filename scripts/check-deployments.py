#!/usr/bin/env python3
"""Checks rendered Deployments against what the binaries promise (make deploy-check).

- Every probe uses the port named `metrics`: the ops port has its own small connection
  budget and is not reachable from outside, so a flood of slow public connections can
  neither fail the probes (and restart healthy pods) nor make the pod ping the database.
- Every container's memory limit covers the worst case of the memory formula in
  docs/operations.md, computed from the flags it runs with (`--flag value`,
  `--flag=value` or the INBOUND_* environment twin; the binaries' defaults otherwise) and
  from the largest `max_body_bytes` of the configuration in the rendered ConfigMap. Keep
  the constants here equal to the ones there and in the code.
- Every selector selects what it is meant for: a Service, PodMonitor, PodDisruptionBudget
  or NetworkPolicy (its own pods, and peers in its namespace) matches the pod template of
  at least one workload; a Deployment's selector matches its own template; an HPA or a
  ScaledObject targets a workload that exists, which sets no `replicas` of its own (each
  apply would reset the autoscaler's count); every workload serving a port a PodMonitor
  scrapes is selected by one. (A selector that matches nothing fails silently in a
  cluster: nothing scraped, nothing protected, nothing scaled.)
- Migrations run on every apply: every pod running an inbound process first runs
  `migrate --accept-newer` (the worker's, or inboundctl's) with its own image (an init
  container; a rollback's pods run on a database the newer release migrated), and no Job is rendered (a
  Job's template is immutable: the next apply with a new image fails).
- The public entrance fits the ingress: an Ingress's backend is a Service port that
  exists; its body limit is at least the largest `max_body_bytes` (a smaller one answers
  413 for deliveries inbound would accept, and the provider retries them until it gives
  up), and its proxy timeouts exceed the ingress's request timeout (a proxy giving up
  first answers 504 for a commit that may still succeed).
- Every ConfigMap a pod mounts or reads exists in the render (a generated one's name
  carries a hash a component cannot know), and every image names a registry and a tag
  (the bare placeholder `inbound` is for kustomize to replace, and cannot be pulled).
- Every namespaced object of an overlay that sets a namespace is in one namespace (an
  object a later layer adds without it lands in `default`, away from its Secret).
- With `--core-only`: no object needs a CRD (the base and overlays/without-crds apply to
  any cluster).
"""
import sys
import tomllib

import yaml

MIB = 1024 * 1024
# docs/operations.md, "Memory": what each role holds at worst.
BASE_MIB = 24                      # runtime, pool, metrics, TLS roots
HEAD_BYTES = 16 * 1024             # ingress: a connection's read buffer at most
BATCH_PAYLOAD_BYTES = 4 * MIB      # ingress: one group-commit statement's payload
DECODED_FACTOR = 18                # worker: rendered text (≤ 2×) and decoded values (≤ 16×)
EFFECT_PAYLOAD_BYTES = 2 * MIB     # worker: one effect in flight (data and request)
DEFAULT_MAX_BODY_BYTES = MIB       # an integration's default max_body_bytes
DEFAULT_REQUEST_TIMEOUT_SECS = 10  # inbound-ingress --request-timeout-secs

DEFAULTS = {
    "inbound-ingress": {"--body-budget-bytes": 32 * MIB, "--max-connections": 1024,
                        "--commit-concurrency": 2,
                        "--request-timeout-secs": DEFAULT_REQUEST_TIMEOUT_SECS},
    "inbound-worker": {"--payload-budget-bytes": 4 * MIB, "--effect-concurrency": 8},
}


def flags(container, binary):
    """The flags that matter for memory, as the container sets them."""
    values = dict(DEFAULTS[binary])
    for variable in container.get("env", []):
        flag = "--" + variable["name"].removeprefix("INBOUND_").lower().replace("_", "-")
        if variable["name"].startswith("INBOUND_") and flag in values and "value" in variable:
            values[flag] = int(variable["value"])
    args = container.get("args", [])
    for index, arg in enumerate(args):
        name, equals, value = arg.partition("=")
        if name in values:
            values[name] = int(value if equals else args[index + 1])
    return values


def worst_case_bytes(binary, values, largest_body):
    if binary == "inbound-ingress":
        return (BASE_MIB * MIB + values["--body-budget-bytes"]
                + values["--max-connections"] * HEAD_BYTES
                + values["--commit-concurrency"] * 2 * max(BATCH_PAYLOAD_BYTES, largest_body))
    # A receipt larger than the budget is claimed alone: the budget or one body.
    claimed = max(values["--payload-budget-bytes"], largest_body)
    return (BASE_MIB * MIB + claimed * DECODED_FACTOR
            + values["--effect-concurrency"] * max(EFFECT_PAYLOAD_BYTES, 2 * largest_body))


def parse_quantity(text):
    units = {"Ki": 1024, "Mi": MIB, "Gi": 1024 * MIB}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return int(text[: -len(suffix)]) * factor
    return int(text)


CORE_API_GROUPS = {"", "apps", "batch", "autoscaling", "policy", "networking.k8s.io",
                   "rbac.authorization.k8s.io"}

documents = [document for document in yaml.safe_load_all(open(sys.argv[1])) if document]
core_only = "--core-only" in sys.argv[2:]
largest_body = DEFAULT_MAX_BODY_BYTES
for document in documents:
    if document.get("kind") == "ConfigMap" and "config.toml" in document.get("data", {}):
        config = tomllib.loads(document["data"]["config.toml"])
        for integration in config.get("integration", []):
            largest_body = max(largest_body, integration.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES))

problems = []
for document in documents:
    if document.get("kind") != "Deployment":
        continue
    for container in document["spec"]["template"]["spec"]["containers"]:
        name = f'{document["metadata"]["name"]}/{container["name"]}'
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            port = container.get(probe, {}).get("httpGet", {}).get("port")
            if probe in container and port != "metrics":
                problems.append(f"{name}: {probe} uses port {port!r}, not the ops port 'metrics'")
        binary = container.get("command", [""])[0].rsplit("/", 1)[-1]
        if binary not in DEFAULTS:
            continue
        worst = worst_case_bytes(binary, flags(container, binary), largest_body)
        limit = container.get("resources", {}).get("limits", {}).get("memory")
        if limit is None or parse_quantity(limit) < worst:
            problems.append(f"{name}: memory limit {limit} is below the formula's {worst / MIB:.0f} MiB")
        else:
            print(f"  {name}: worst case {worst / MIB:.0f} MiB within its {limit} limit")


def matches(selector, labels):
    """Whether a label selector (matchLabels and matchExpressions, or a plain map as a
    Service writes it) selects `labels`."""
    if selector is None:
        return False
    match_labels = selector.get("matchLabels", {}) if (
        "matchLabels" in selector or "matchExpressions" in selector) else selector
    if any(labels.get(key) != value for key, value in match_labels.items()):
        return False
    for expression in selector.get("matchExpressions", []) if isinstance(selector, dict) else []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        present = key in labels
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


workloads = {}  # (kind, name) -> pod template labels
for document in documents:
    if document.get("kind") in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        labels = document["spec"]["template"].get("metadata", {}).get("labels", {})
        workloads[(document["kind"], document["metadata"]["name"])] = labels
        own = document["spec"].get("selector")
        if document["kind"] != "Job" and not matches(own, labels):
            problems.append(f'{document["kind"]} {document["metadata"]["name"]}: its selector {own} '
                            f"does not match its own pod template's labels {labels}")


def selects_a_pod(selector):
    return any(matches(selector, labels) for labels in workloads.values())


selectors_checked = 0
for document in documents:
    kind, name = document.get("kind"), document.get("metadata", {}).get("name")
    spec = document.get("spec", {})
    wanted = []
    if kind == "Service" and spec.get("selector"):
        wanted.append(("spec.selector", spec["selector"]))
    elif kind in ("PodMonitor", "PodDisruptionBudget"):
        wanted.append(("spec.selector", spec.get("selector")))
    elif kind == "NetworkPolicy":
        wanted.append(("spec.podSelector", spec.get("podSelector")))
        for direction, peers_key in (("ingress", "from"), ("egress", "to")):
            for rule in spec.get(direction, []):
                for peer in rule.get(peers_key, []):
                    if "podSelector" in peer and "namespaceSelector" not in peer:
                        wanted.append((f"spec.{direction}[].{peers_key}[].podSelector", peer["podSelector"]))
    elif kind in ("HorizontalPodAutoscaler", "ScaledObject"):
        target = spec.get("scaleTargetRef", {})
        target_kind = target.get("kind", "Deployment")
        selectors_checked += 1
        if (target_kind, target.get("name")) not in workloads:
            problems.append(f"{kind} {name}: scaleTargetRef {target_kind}/{target.get('name')} does not exist")
        # An autoscaler owns the replica count: a `replicas` in the manifest resets it on
        # every apply (a deploy would scale the workload down to it mid-incident).
        for owned in documents:
            if (owned.get("kind"), owned.get("metadata", {}).get("name")) == (target_kind, target.get("name")) \
                    and "replicas" in owned.get("spec", {}):
                problems.append(f"{target_kind} {target.get('name')}: sets replicas although {kind} {name} "
                                "scales it (each apply would reset the count)")
    for where, selector in wanted:
        selectors_checked += 1
        if not selects_a_pod(selector):
            problems.append(f"{kind} {name}: {where} {selector} selects no pod template")
# Every workload that serves metrics is scraped: some PodMonitor selects its pods and
# names the port.
monitors = [(document["spec"].get("selector"),
             {endpoint.get("port") for endpoint in document["spec"].get("podMetricsEndpoints", [])})
            for document in documents if document.get("kind") == "PodMonitor"]
for document in documents:
    if document.get("kind") not in ("Deployment", "StatefulSet", "DaemonSet"):
        continue
    template = document["spec"]["template"]
    labels = template.get("metadata", {}).get("labels", {})
    ports = {port.get("name") for container in template["spec"]["containers"]
             for port in container.get("ports", [])}
    for port in ports & {port for _, ports in monitors for port in ports}:
        selectors_checked += 1
        if not any(matches(selector, labels) and port in endpoints for selector, endpoints in monitors):
            problems.append(f'{document["kind"]} {document["metadata"]["name"]}: serves {port!r} '
                            f"but no PodMonitor selects its pods {labels}")
print(f"  {selectors_checked} selectors and scale targets checked against the workloads")

# Migrations on every apply.
migrating = 0
for document in documents:
    kind, name = document.get("kind"), document.get("metadata", {}).get("name")
    if kind == "Job":
        problems.append(f"Job {name}: a Job's pod template is immutable, so the next apply with a new "
                        "image fails; migrations run as each pod's init container instead")
    if kind != "Deployment":
        continue
    spec = document["spec"]["template"]["spec"]
    for container in spec["containers"]:
        binary = container.get("command", [""])[0].rsplit("/", 1)[-1]
        if binary not in DEFAULTS:
            continue
        # The worker's own `migrate` (inbound's schema and the worker's business tables;
        # a team's image runs its worker's), or `inboundctl migrate` (inbound's alone).
        migrators = [init for init in spec.get("initContainers", [])
                     if "migrate" in init.get("command", [])[1:2]]
        if not migrators:
            problems.append(f"Deployment {name}: {container['name']} starts without migrating first "
                            "(no init container running `<worker> migrate` or `inboundctl migrate`)")
        elif "--accept-newer" not in migrators[0].get("command", []):
            problems.append(f"Deployment {name}: its migrate init container lacks --accept-newer "
                            "(a rollback's pods would stay in Init on a database the newer release migrated)")
        elif migrators[0].get("image") != container.get("image"):
            problems.append(f"Deployment {name}: its migrate init container runs {migrators[0].get('image')}, "
                            f"not its own image {container.get('image')}")
        else:
            migrating += 1
print(f"  {migrating} containers migrate before they start")

# The public entrance.
services = {document["metadata"]["name"]: document for document in documents if document.get("kind") == "Service"}
request_timeout = max([flags(container, "inbound-ingress")["--request-timeout-secs"]
                       for document in documents if document.get("kind") == "Deployment"
                       for container in document["spec"]["template"]["spec"]["containers"]
                       if container.get("command", [""])[0].endswith("/inbound-ingress")]
                      or [DEFAULT_REQUEST_TIMEOUT_SECS])


def nginx_size(text):
    """An ingress-nginx size in bytes; 0 means unlimited (None when it cannot be read)."""
    text = str(text).strip().lower()
    factor = {"k": 1024, "m": MIB, "g": 1024 * MIB}.get(text[-1:], 1)
    try:
        size = float(text.rstrip("kmg")) * factor
    except ValueError:
        return None
    return float("inf") if size == 0 else size


for document in documents:
    if document.get("kind") != "Ingress":
        continue
    name = document["metadata"]["name"]
    annotations = document["metadata"].get("annotations", {})
    for rule in document["spec"].get("rules", []):
        for path in rule.get("http", {}).get("paths", []):
            backend = path["backend"].get("service", {})
            service = services.get(backend.get("name"))
            port = backend.get("port", {})
            if service is None:
                problems.append(f"Ingress {name}: backend Service {backend.get('name')} does not exist")
            elif not any(port.get("name") == p.get("name") or port.get("number") == p.get("port")
                         for p in service["spec"].get("ports", [])):
                problems.append(f"Ingress {name}: Service {backend.get('name')} has no port {port}")
    body = annotations.get("nginx.ingress.kubernetes.io/proxy-body-size")
    if body is None or (nginx_size(body) or 0) < largest_body:
        problems.append(f"Ingress {name}: proxy-body-size {body} is below the largest max_body_bytes "
                        f"({largest_body} bytes)")
    for timeout in ("proxy-read-timeout", "proxy-send-timeout"):
        value = annotations.get(f"nginx.ingress.kubernetes.io/{timeout}")
        if value is None or not str(value).isdigit() or int(value) <= request_timeout:
            problems.append(f"Ingress {name}: {timeout} {value} does not exceed the ingress's request "
                            f"timeout ({request_timeout} s)")
    if not document["spec"].get("tls"):
        problems.append(f"Ingress {name}: no TLS (providers sign, but the payloads are customer data)")
    print(f"  Ingress {name}: body limit {body}, timeouts above {request_timeout} s, TLS")

# What pods refer to exists, and their images can be pulled.
config_maps = {document["metadata"]["name"] for document in documents if document.get("kind") == "ConfigMap"}
def pod_spec(document):
    """The pod template's spec of a workload (a CronJob's through its job template)."""
    if document.get("kind") == "CronJob":
        return document["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return document["spec"]["template"]["spec"]


for document in documents:
    if document.get("kind") not in ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"):
        continue
    name = f'{document["kind"]} {document["metadata"]["name"]}'
    pod = pod_spec(document)
    referenced = {volume["configMap"]["name"] for volume in pod.get("volumes", []) if "configMap" in volume}
    for container in pod.get("containers", []) + pod.get("initContainers", []):
        referenced |= {source["configMapRef"]["name"] for source in container.get("envFrom", [])
                       if "configMapRef" in source}
        image = container.get("image", "")
        if "/" not in image or not (":" in image.rsplit("/", 1)[-1] or "@" in image):
            problems.append(f"{name}: container {container['name']} runs image {image!r}, which names "
                            "no registry or tag (kustomize's `images` did not reach it)")
    for missing in sorted(referenced - config_maps):
        problems.append(f"{name}: mounts or reads ConfigMap {missing}, which the render does not hold")
    for container in pod.get("containers", []):
        if not container.get("resources", {}).get("limits", {}).get("memory"):
            problems.append(f"{name}: container {container['name']} has no memory limit")

CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
namespaces = {document["metadata"].get("namespace") for document in documents
              if document.get("kind") not in CLUSTER_SCOPED}
if len(namespaces) > 1:
    for document in documents:
        if document.get("kind") not in CLUSTER_SCOPED and document["metadata"].get("namespace") is None:
            problems.append(f"{document['kind']} {document['metadata']['name']}: no namespace, while the "
                            f"others are in {sorted(n for n in namespaces if n)} (it would land in `default`)")

if core_only:
    for document in documents:
        group = document.get("apiVersion", "").rpartition("/")[0]
        if group not in CORE_API_GROUPS:
            problems.append(f"{document.get('kind')} {document.get('metadata', {}).get('name')}: "
                            f"needs a CRD ({document.get('apiVersion')}) in a kustomization meant for any cluster")

if problems:
    sys.exit("\n".join(problems))
