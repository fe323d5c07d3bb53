#!/usr/bin/python3
"""Reads a TAP version 13 report of `minivmm test` strictly, and with a real consumer (tappy,
Debian's python3-tap, when it is installed), and checks that it holds every expected test once
with its verdict.

usage: check_tap.py REPORT [NAME=VERDICT]...

VERDICT is PASS, FAIL or SKIP. NAME is the test's name as minivmm knows it: the report escapes
'#' and '\\' in it (TAP's `\\#`) and shows a control character as '?', so NAME is compared
after the same mapping. Without NAME=VERDICT pairs only the grammar is checked. Every line must
be the version, the plan, a test line, or a line of a test's YAML block (which must parse as
YAML, a mapping); the plan's count and the numbers must agree. Exit 0 when all holds, 1 with
one line per problem otherwise.
"""
import re
import sys

TEST_LINE = re.compile(r"^(ok|not ok) (\d+) - (.*)$")


def unescape(desc):
    """The description before a directive, unescaped; the directive, if any."""
    out, i, directive = [], 0, None
    while i < len(desc):
        c = desc[i]
        if c == "\\" and i + 1 < len(desc) and desc[i + 1] in "#\\":
            out.append(desc[i + 1])
            i += 2
            continue
        if c == "#":
            directive = desc[i + 1:].strip()
            break
        out.append(c)
        i += 1
    return "".join(out).rstrip(), directive


def shown(name):
    return "".join("?" if ord(c) < 0x20 or ord(c) == 0x7f else c for c in name)


def strict(text):
    problems, tests = [], []
    if "\r" in text:
        problems.append("a carriage return in the report")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or lines[0] != "TAP version 13":
        problems.append("line 1 is not 'TAP version 13'")
        return problems, tests
    if len(lines) < 2 or not re.fullmatch(r"1\.\.\d+", lines[1]):
        problems.append(f"line 2 is not a plan: {lines[1] if len(lines) > 1 else ''!r}")
        return problems, tests
    planned = int(lines[1][3:])
    i = 2
    while i < len(lines):
        m = TEST_LINE.match(lines[i])
        if not m:
            problems.append(f"line {i + 1} is no test line: {lines[i]!r}")
            i += 1
            continue
        number = int(m.group(2))
        if number != len(tests) + 1:
            problems.append(f"line {i + 1}: test {number}, expected {len(tests) + 1}")
        name, directive = unescape(m.group(3))
        verdict = "FAIL" if m.group(1) == "not ok" else "PASS"
        if directive is not None:
            if directive.upper().startswith("SKIP"):
                verdict = "SKIP"
            elif not directive.upper().startswith("TODO"):
                # '#' starts a directive: a name holding one unescaped ends early.
                problems.append(f"line {i + 1}: unknown directive {directive!r}")
        tests.append((name, verdict))
        i += 1
        if i < len(lines) and lines[i] == "  ---":
            start = i + 1
            while i < len(lines) and lines[i] != "  ...":
                i += 1
            if i == len(lines):
                problems.append(f"line {start}: a YAML block without its '  ...'")
                break
            block = "\n".join(l[2:] if l.startswith("  ") else l for l in lines[start:i])
            try:
                import yaml

                if not isinstance(yaml.safe_load(block), dict):
                    problems.append(f"line {start}: the YAML block is no mapping")
            except ImportError:
                pass
            except Exception as e:  # noqa: BLE001 - any parse error is the finding
                problems.append(f"line {start}: the YAML block does not parse: {e}")
            i += 1
    if planned != len(tests):
        problems.append(f"the plan says {planned} tests, the report has {len(tests)}")
    return problems, tests


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        text = f.read()
    problems, tests = strict(text)

    try:
        from tap import parser as tappy

        # Without its optional imports tappy reads a TAP 13 report's YAML blocks as unknown
        # lines: the comparison would then be of a different reading, so it is a failure that
        # names what is missing (a machine without python3-more-itertools did exactly this).
        if not tappy.ENABLE_VERSION_13:
            problems.append("tappy here cannot read TAP 13 (python3-yaml and "
                            "python3-more-itertools missing; scripts/setup.sh installs them)")
        got = []
        # tappy's Unknown carries no text, so an unknown line is named by its place among
        # the lines tappy returned (a YAML block is one of them, with its test line).
        for place, line in enumerate(tappy.Parser().parse_text(text), 1):
            if line.category == "test":
                verdict = "SKIP" if line.skip else ("PASS" if line.ok else "FAIL")
                got.append(verdict)
            elif line.category == "unknown":
                problems.append(f"tappy: its line {place} is none of TAP's kinds")
        # tappy does not know TAP 13's `\#` (a '#' in a name, escaped): a line whose name
        # holds one is compared by the strict reader alone.
        ours = [v for _, v in tests]
        escaped = [i for i, l in enumerate(l for l in text.split("\n") if TEST_LINE.match(l))
                   if "\\#" in l]
        if len(got) != len(ours) or any(g != o for i, (g, o) in enumerate(zip(got, ours))
                                         if i not in escaped):
            problems.append(f"tappy reads the verdicts {got}, the strict reader {ours}")
    except ImportError:
        pass

    expected = {}
    for spec in argv[2:]:
        name, _, verdict = spec.partition("=")
        expected[shown(name)] = verdict
    if expected:
        seen = {}
        for name, verdict in tests:
            seen[name] = seen.get(name, 0) + 1
            if name not in expected:
                problems.append(f"{name!r}: in the report, not expected")
            elif expected[name] != verdict:
                problems.append(f"{name!r}: {verdict}, expected {expected[name]}")
        for name in expected:
            if seen.get(name, 0) != 1:
                problems.append(f"{name!r}: in the report {seen.get(name, 0)} times, expected once")
    for p in problems:
        print(p)
    if not problems:
        print(f"{len(tests)} tests, well-formed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
