#!/usr/bin/env python3
"""Every bad plan must be rejected (exit 1) with an error that contains its expected substring.

    check_bad.py MSCCLPP_PLAN EXPECT_TSV"""
import subprocess
import sys


def main():
    tool, expect = sys.argv[1], sys.argv[2]
    failed = 0
    n = 0
    with open(expect) as f:
        for line in f:
            path, want = line.rstrip("\n").split("\t")
            n += 1
            r = subprocess.run([tool, "validate", path], capture_output=True, text=True,
                               env={"MSCCLPP_LOG_LEVEL": "none"})
            if r.returncode != 1 or want not in r.stdout:
                print("FAIL %s: exit %d, wanted '%s' in: %s" % (path, r.returncode, want, r.stdout.strip()))
                failed += 1
    print("%d bad plans, %d not rejected as expected" % (n, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
