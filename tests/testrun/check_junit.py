#!/usr/bin/python3
"""Reads a JUnit report of `minivmm test` with a real consumer (junitparser) and checks that it
holds every expected test with its verdict and a time.

usage: check_junit.py REPORT NAME=VERDICT[:REASON-PART]...

VERDICT is PASS, FAIL or SKIP; REASON-PART, when given, must be part of the failure's or skip's
message. Every test in the report must be expected, and every expected test must be there
once. Exit 0 when all holds, 1 with one line per problem otherwise.
"""
import sys

from junitparser import Error, Failure, JUnitXml, Skipped


def verdict_of(case):
    kinds = {type(r) for r in case.result}
    if Failure in kinds or Error in kinds:
        return "FAIL"
    if Skipped in kinds:
        return "SKIP"
    return "PASS"


def message_of(case):
    return " ".join((r.message or "") for r in case.result)


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    expected = {}
    for spec in argv[2:]:
        name, _, want = spec.partition("=")
        verdict, _, reason = want.partition(":")
        expected[name] = (verdict, reason)

    xml = JUnitXml.fromfile(argv[1])
    problems = []
    seen = {}
    for suite in xml:
        for case in suite:
            seen[case.name] = seen.get(case.name, 0) + 1
            if case.name not in expected:
                problems.append(f"{case.name}: in the report, not expected")
                continue
            verdict, reason = expected[case.name]
            got = verdict_of(case)
            if got != verdict:
                problems.append(f"{case.name}: {got}, expected {verdict} ({message_of(case)})")
            if reason and reason not in message_of(case):
                problems.append(f"{case.name}: message '{message_of(case)}' lacks '{reason}'")
            if case.time is None or case.time < 0:
                problems.append(f"{case.name}: no time")
    for name in expected:
        if seen.get(name, 0) != 1:
            problems.append(f"{name}: in the report {seen.get(name, 0)} times, expected once")
    for p in problems:
        print(p)
    if not problems:
        print(f"{len(expected)} tests with their verdicts and times")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
