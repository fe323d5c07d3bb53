#!/usr/bin/env python3
"""Prints the key paths of a --stats report (one per line: path, then the JSON type), the form
tests/integration/report_keys/*.txt pins. Arrays are not entered; the unmapped ports' keys
(the port numbers a guest touched) are one <port> entry.

  dump_keys.py REPORT.json > tests/integration/report_keys/CONFIG.txt
"""
import json
import sys


def kind(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def walk(v, path, out):
    out.add(f"{path} {kind(v)}")
    if isinstance(v, dict):
        for k, child in v.items():
            if path == "/devices/unmapped_ports":
                k = "<port>"
            walk(child, f"{path}/{k}", out)


keys = set()
walk(json.load(open(sys.argv[1])), "", keys)
print("\n".join(sorted(keys)))
