#!/usr/bin/env python3
"""Checks rendered Deployments against what the binaries promise (make deploy-check).

- Every probe uses the port named `metrics`: the ops port has its own small connection
  budget and is not reachable from outside, so a flood of slow public connections can
  neither fail the probes (and restart healthy pods) nor make the pod ping the database.
- Every container's memory limit covers the worst case of the memory formula in
  docs/operations.md, computed from the flags it runs with (the binaries' defaults
  otherwise). Keep the constants here equal to the ones there and in the code.
"""
import sys

import yaml

MIB = 1024 * 1024
# docs/operations.md, "Memory": what each role holds at worst.
BASE_MIB = 24                      # runtime, pool, metrics, TLS roots
HEAD_BYTES = 16 * 1024             # ingress: a connection's read buffer at most
BATCH_PAYLOAD_BYTES = 4 * MIB      # ingress: one group-commit statement's payload
DECODED_FACTOR = 16                # worker: payload text + decoded values, at worst
EFFECT_PAYLOAD_BYTES = 2 * MIB     # worker: one effect in flight (data and request)

DEFAULTS = {
    "inbound-ingress": {"--body-budget-bytes": 32 * MIB, "--max-connections": 1024,
                        "--commit-concurrency": 2},
    "inbound-worker": {"--payload-budget-bytes": 4 * MIB, "--effect-concurrency": 8},
}


def flags(container, binary):
    values = dict(DEFAULTS[binary])
    args = container.get("args", [])
    for name, value in zip(args, args[1:]):
        if name in values:
            values[name] = int(value)
    return values


def worst_case_bytes(binary, values):
    if binary == "inbound-ingress":
        return (BASE_MIB * MIB + values["--body-budget-bytes"]
                + values["--max-connections"] * HEAD_BYTES
                + values["--commit-concurrency"] * 2 * BATCH_PAYLOAD_BYTES)
    return (BASE_MIB * MIB + values["--payload-budget-bytes"] * DECODED_FACTOR
            + values["--effect-concurrency"] * EFFECT_PAYLOAD_BYTES)


def parse_quantity(text):
    units = {"Ki": 1024, "Mi": MIB, "Gi": 1024 * MIB}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return int(text[: -len(suffix)]) * factor
    return int(text)


problems = []
for document in yaml.safe_load_all(open(sys.argv[1])):
    if not document or document.get("kind") != "Deployment":
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
        worst = worst_case_bytes(binary, flags(container, binary))
        limit = container.get("resources", {}).get("limits", {}).get("memory")
        if limit is None or parse_quantity(limit) < worst:
            problems.append(f"{name}: memory limit {limit} is below the formula's {worst / MIB:.0f} MiB")
        else:
            print(f"  {name}: worst case {worst / MIB:.0f} MiB within its {limit} limit")
if problems:
    sys.exit("\n".join(problems))
