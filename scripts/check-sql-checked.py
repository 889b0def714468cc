#!/usr/bin/env python3
"""Every statement the product runs is checked against the schema at compile time
(`sqlx::query!` and its family, with the offline cache in .sqlx/), except where the SQL
can only be known at run time (a schema chosen by configuration, DDL, which takes no
parameters): each such call carries a `// Runtime SQL: <why>` comment on one of the three
lines above it. This lists the calls that have neither; test code is exempt (every one of
its statements runs in `make test`)."""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# A call of the unchecked API: sqlx::query(…), query_as::<…>(…), raw_sql(…), or
# Executor::execute/fetch_* handed a string literal.
UNCHECKED = re.compile(
    r"sqlx::(query|query_as|query_scalar|query_with|query_as_with|query_scalar_with|raw_sql)\s*(\(|::<)"
    r"|\.(execute|fetch_one|fetch_optional|fetch_all|fetch)\(\s*\""
)


def test_code(path: pathlib.Path, lines: list[str], index: int) -> bool:
    if path.name in ("tests.rs",) or "tests" in path.parts[path.parts.index("src"):]:
        return True
    # Inside a `#[cfg(test)] mod`: clippy's items_after_test_module (denied by `make lint`)
    # keeps such a module last in its file.
    return any(
        line.strip() == "#[cfg(test)]" and lines[number + 1].lstrip().startswith("mod ")
        for number, line in enumerate(lines[:index])
    )


def main() -> int:
    offenders = []
    for path in sorted(ROOT.glob("crates/*/src/**/*.rs")):
        lines = path.read_text().splitlines()
        for index, line in enumerate(lines):
            if line.lstrip().startswith("//") or not UNCHECKED.search(line):
                continue
            if test_code(path, lines, index):
                continue
            above = lines[max(0, index - 3):index]
            if any("// Runtime SQL:" in text for text in above):
                continue
            offenders.append(f"{path.relative_to(ROOT)}:{index + 1}: {line.strip()}")
    if offenders:
        print("statements not checked at compile time (use sqlx::query! and its family, "
              "or say why above the call with `// Runtime SQL: …`):", file=sys.stderr)
        print("\n".join(offenders), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
