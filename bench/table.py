#!/usr/bin/env python3
"""Renders `make bench` figures as one table and writes it into BENCHMARKS.md between the
`<!-- bench:begin -->` and `<!-- bench:end -->` markers (added under the title if absent).

usage: bench-table.py RESULTS.json MACHINE DATE PENDING BENCHMARKS.md
"""

import json
import sys

BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def render(figures, machine, date, pending):
    worker_ceiling = float(figures["worker_ceiling"])
    rounds = [json.loads(figures[f"ingress_round_{n}"])
              for n in range(1, int(figures["ingress_rounds"]) + 1)]
    half = json.loads(figures["ingress_half"])
    growth_ingress = float(figures["growth_full_ingress"]) / float(figures["growth_empty_ingress"])
    growth_worker = float(figures["growth_full_worker"]) / float(figures["growth_empty_worker"])

    def span(values, digits=0, unit=""):
        low, high = min(values), max(values)
        if f"{low:.{digits}f}" == f"{high:.{digits}f}":
            return f"{low:.{digits}f}{unit}"
        return f"{low:.{digits}f}–{high:.{digits}f}{unit}"

    runs = len(rounds)
    cores = figures.get("machine_cores", "2")
    rows = [
        (f"ceiling (physical limit): pgbench -M prepared, one ~1 KB `INSERT … ON CONFLICT DO NOTHING` "
         f"per transaction into (source_scope, event_id) PRIMARY KEY, event_type, jsonb payload, "
         f"received_at; -c 32 ({runs} runs)",
         span([r["physical_ceiling"] for r in rounds], unit=" tx/s"), "1.00"),
        (f"ceiling (schema): pgbench, one receipt through inbound's tables as the ingress writes it "
         f"(key claimed, row, payload, queue row), simple protocol, -c 32 ({runs} runs)",
         span([r["schema_ceiling"] for r in rounds], unit=" tx/s"), ""),
    ]
    if all("physical" in r for r in rounds):
        rows.append((
            f"… where the machine's CPU went in the physical limit, per transaction ({runs} runs; "
            f"/proc over the run)",
            f"pgbench {span([r['physical']['client_cpu_us_per_tx'] for r in rounds], 1)} µs + "
            f"PostgreSQL and the rest {span([r['physical']['rest_cpu_us_per_tx'] for r in rounds], 1)} µs "
            f"(busy {span([r['physical']['busy_cores'] for r in rounds], 2)} of {cores} cores; stolen "
            f"{span([100 * r['physical']['steal_share'] for r in rounds], 1)} %)",
            "",
        ))
    if figures.get("fsync_us") not in (None, "", "null"):
        rows.append(("the WAL disk: one 8 kB write + fdatasync (pg_test_fsync, in PostgreSQL's "
                     "file system; it sets the physical limit)",
                     f"{float(figures['fsync_us']):.0f} µs", ""))
    for key, label in (("run32", "32"), ("run128", "128")):
        accepted = [r[key]["accepted_per_sec"] for r in rounds]
        rows.append((
            f"ingress accepted/s, {label} connections (~20 % redeliveries; {runs} runs)",
            f"{span(accepted)} /s (all answers {span([r[key]['requests_per_sec'] for r in rounds])} /s; "
            f"503: {sum(r[key]['unavailable_503'] for r in rounds)}, "
            f"errors: {sum(r[key]['connection_errors'] for r in rounds)}; "
            f"p50 {span([r[key]['p50_ms'] for r in rounds], 1)} ms, "
            f"p99 {span([r[key]['p99_ms'] for r in rounds], 1)} ms)",
            f"{span([r[key]['accepted_per_sec'] / r['physical_ceiling'] for r in rounds], 2)} × physical limit, "
            f"{span([r[key]['accepted_per_sec'] / r['schema_ceiling'] for r in rounds], 2)} × schema ceiling",
        ))
        rows.append((
            f"ingress CPU per answered request, {label} connections ({runs} runs; /proc utime + stime)",
            f"{span([r[key]['ingress_cpu_us_per_answer'] for r in rounds], 1)} µs "
            f"(ingress {span([r[key]['ingress_cores'] for r in rounds], 2)} cores; "
            f"stolen by the hypervisor: {span([100 * r[key].get('steal_share', 0) for r in rounds], 1)} % of the machine)",
            "target ≤ 20 µs",
        ))
        if all("loadgen_cpu_us_per_answer" in r[key] for r in rounds):
            rows.append((
                f"… where the machine's CPU went, {label} connections, per answered request ({runs} runs)",
                f"ingress {span([r[key]['ingress_cpu_us_per_answer'] for r in rounds], 1)} µs + "
                f"loadgen {span([r[key]['loadgen_cpu_us_per_answer'] for r in rounds], 1)} µs + "
                f"PostgreSQL and the rest {span([r[key]['rest_cpu_us_per_answer'] for r in rounds], 1)} µs "
                f"(busy {span([r[key]['busy_cores'] for r in rounds], 2)} of {cores} cores)",
                f"the machine's CPU per accepted receipt {span([r[key]['machine_cpu_us_per_accepted'] for r in rounds], 1)} µs, "
                f"per physical-limit transaction {span([r['physical']['machine_cpu_us_per_tx'] for r in rounds], 1)} µs "
                f"(each with its load generator)",
            ))
        if key == "run32" and all("floor32" in r for r in rounds):
            rows.append((
                f"HTTP floor: ingress CPU per answered 404 (unknown integration: no body read, no "
                f"verification, no database), open loop at the rate of the run above ({runs} runs)",
                f"{span([r['floor32']['ingress_cpu_us_per_answer'] for r in rounds], 1)} µs "
                f"at {span([r['floor32']['requests_per_sec'] for r in rounds])} /s",
                f"receipt path {span([r['run32']['ingress_cpu_us_per_answer'] / max(r['floor32']['ingress_cpu_us_per_answer'], 0.1) for r in rounds], 2)} × the floor",
            ))
    rows += [
        (f"ingress latency at half the peak ({half['rate_target']} req/s, open loop, "
         f"{half['connections']} connections)",
         f"p50 {half['p50_ms']:.1f} ms, p99 {half['p99_ms']:.1f} ms "
         f"(CPU {half['ingress_cpu_us_per_answer']} µs per answered request)", "target p99 ≤ 10 ms"),
    ]
    if figures.get("ingress_half_floor"):
        floor = json.loads(figures["ingress_half_floor"])
        rows.append(("… the same open loop answered 404 (the HTTP path and the load generator's "
                     "own timer)", f"p50 {floor['p50_ms']:.1f} ms, p99 {floor['p99_ms']:.1f} ms", ""))
    if figures.get("physical_half"):
        physical = json.loads(figures["physical_half"])
        rows.append(("… the physical limit throttled to the same rate (pgbench -R, -c 32; latency "
                     "from the schedule)", f"p50 {physical['p50_ms']:.1f} ms, p99 {physical['p99_ms']:.1f} ms", ""))
    rows += [
        ("ingress commits per request (32 connections)",
         span([r["commits_per_request"] for r in rounds], 3), ""),
        ("ingress peak RSS", f"{figures['ingress_rss']} MiB", "target ≤ 64 MiB"),
        ("ceiling (worker): pgbench, claim + `orders.mark_paid` + done, 50 receipts per transaction, -c 8",
         f"{worker_ceiling:.0f} receipts/s", "1.00"),
    ]
    for key, label in (
        ("worker8", "--concurrency 8"),
        ("worker32", "--concurrency 32"),
        ("worker32_unbatched", "--concurrency 32 --batch-size 1"),
        ("worker32_batch16", "--concurrency 32 --batch-size 16"),
    ):
        rows.append((
            f"worker receipts applied/s, {pending} pending, {label}",
            f"{float(figures[key]):.0f} /s ({figures[key + '_commits']} commits per receipt, "
            f"peak RSS {figures[key + '_rss']} MiB)",
            f"{float(figures[key]) / worker_ceiling:.2f} × worker ceiling",
        ))
    if "graphile" in figures:
        rows.append((
            f"graphile-worker 0.18 jobs/s, the same {pending} payments and business UPDATE, "
            f"32 concurrent jobs (bench/graphile.sh)",
            f"{float(figures['graphile']):.0f} /s ({figures['graphile_commits']} commits per job, "
            f"peak RSS {figures['graphile_rss']} MiB)",
            f"worker --concurrency 32: {float(figures['worker32']) / float(figures['graphile']):.2f} × graphile-worker",
        ))
    rows += [
        (f"SIGKILL of a loaded worker (lease 5 s) → its {figures['orphaned']} claimed receipts done by another",
         f"{figures['recovery_secs']} s (orders applied: {figures['recovery_applied']} of {figures['recovery_backlog']})", ""),
        ("dispatcher: effects delivered/s to a local 200 sink, --effect-concurrency 32",
         f"{float(figures['dispatcher']):.0f} /s (peak RSS {figures['dispatcher_rss']} MiB)", ""),
        (f"history: ingress accepted/s at 32 connections, {int(figures['growth_rows']):,} receipts "
         f"over 90 days vs empty",
         f"{float(figures['growth_full_ingress']):.0f} vs {float(figures['growth_empty_ingress']):.0f} /s",
         f"{growth_ingress:.2f} (target ≥ 0.95)"),
        (f"history: worker applied/s at --concurrency 32, {int(figures['growth_rows']):,} receipts vs empty",
         f"{float(figures['growth_full_worker']):.0f} vs {float(figures['growth_empty_worker']):.0f} /s",
         f"{growth_worker:.2f} (target ≥ 0.95)"),
        (f"history: the console's overview, {int(figures['growth_rows']):,} receipts, "
         f"{int(figures['history_pending']):,} pending (median of 10)",
         f"{figures['history_overview_ms']} ms", "target ≤ 200 ms"),
        (f"history: `inboundctl status` (a process), the same database (median of 10)",
         f"{figures['history_status_ms']} ms", "target ≤ 200 ms"),
        (f"retention: a day's payloads leave (one DROP per day, ~{int(figures['history_day_rows']):,} "
         f"rows a day; slowest of {figures['history_days_dropped']} days, round trip included)",
         f"{float(figures['history_drop_day_ms']):.1f} ms", "target < 1 s"),
        (f"retention: a key period leaves — receipts, effects, keys (slowest of "
         f"{figures['history_periods_dropped']}; up to ~{int(figures['history_period_rows']):,} receipts)",
         f"{float(figures['history_drop_period_ms']):.1f} ms", "target < 1 s"),
        (f"retention: the previous key period, full, leaves as if the next had begun (~{int(figures['history_full_period_rows']):,} "
         f"receipts; {figures['history_full_period_carried']} kept and carried; locked, carried, detached)",
         f"{float(figures['history_drop_full_period_ms']):.1f} ms, then its files {float(figures['history_drop_files_ms']):.1f} ms "
         f"(slowest table, no lock a writer needs)", "target < 1 s"),
        ("memory: bytes per receipt of the indexes an insert writes at a random place "
         "(receipt key, event id)",
         f"{figures['history_key_index_bytes']} B", "docs/operations.md, the memory rule"),
    ]
    if "ingress_chunked_rss" in figures:
        rows += [
            ("ingress peak RSS, 16 concurrent 1 MB bodies sent in 1-byte chunks "
             f"(answered {figures['ingress_chunked_answers']}; idle {figures['ingress_idle_rss']} MiB)",
             f"{figures['ingress_chunked_rss']} MiB", "target ≤ 64 MiB"),
            (f"worker peak RSS draining 2,000 pending receipts of ~{figures['worker_payload_kib']} KiB, default flags",
             f"{figures['worker_large_rss']} MiB ({figures['worker_large_secs']} s)", "target ≤ 64 MiB"),
        ]
    schemes = ["stripe", "github", "slack", "shopify", "paddle", "zoom", "standard",
               "standard_v1a", "standard_v1a_170", "hmac_sha256", "hmac_sha512", "token"]
    for body, label in (("1048576", "1 MiB"), ("61440", "60 KB")):
        if f"forged_stripe_{body}_ms" not in figures:
            continue
        for scheme in schemes:
            key = f"forged_{scheme}_{body}"
            before = figures.get(f"{key}_ms_before")
            rows.append((
                f"ingress CPU per forged request, {scheme.replace('_', '-')}, {label} body, "
                f"16 KiB head (answers {figures[f'{key}_answers']})",
                f"{float(figures[f'{key}_ms']):.3f} ms"
                + (f" (before: {float(before):.3f} ms)" if before else ""),
                "target ≤ 1 ms"))
    lines = [
        BEGIN,
        f"## Latest `make bench` ({date}; {machine}; everything on this one machine)",
        "",
        "| measure | value | ratio |",
        "|---|---|---|",
    ]
    lines += [f"| {measure} | {value} | {ratio} |" for measure, value, ratio in rows]
    lines.append(END)
    return "\n".join(lines)


def main():
    results, machine, date, pending, path = sys.argv[1:6]
    table = render(json.load(open(results)), machine, date, pending)
    print(table)
    try:
        text = open(path).read()
    except FileNotFoundError:
        text = "# Benchmarks\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + table + rest.split(END, 1)[1]
    else:
        title, _, body = text.partition("\n")
        text = f"{title}\n\n{table}\n{body}"
    open(path, "w").write(text)


if __name__ == "__main__":
    main()
