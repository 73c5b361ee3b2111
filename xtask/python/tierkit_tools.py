"""xtask's Python side: what only Python packages can check or generate.

Run by xtask (xtask/src/util/pyenv.rs) with the venv's python, never by hand:

  tierkit_tools.py kcidb-validate FILE...
      Validates each KCIDB file with kcidb_io.schema.LATEST.validate() and
      checks that it declares that version. Prints one JSON object,
      {"FILE": null or "why it is invalid", ...}; exit status 0 when every
      file is valid, 1 otherwise.

  tierkit_tools.py lava-job SPEC.json OUT.yaml
      Generates a LAVA job definition with tuxlava's Job (device
      qemu-x86_64) from SPEC (kernel, initramfs, boot args, QEMU options,
      timeouts), then makes it boot tierkit's /init: see lava_job().

  tierkit_tools.py lava-check JOB.yaml
      Loads the YAML and checks the keys a LAVA QEMU job needs and that
      every file:// artifact it names exists. Prints the problems, one a
      line; exit status 1 if there are any.
"""

import json
import os
import sys
from urllib.parse import urlparse


def kcidb_validate(paths):
    import kcidb_io

    latest = kcidb_io.schema.LATEST
    problems = {}
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            latest.validate(data)
            version = data.get("version", {})
            want = {"major": latest.major, "minor": latest.minor}
            if version != want:
                raise ValueError(f"version is {version}, not {want}")
            problems[path] = None
        except Exception as e:  # noqa: BLE001 - every failure is a finding
            line = " ".join(str(e).split())
            problems[path] = f"{type(e).__name__}: {line[:400]}"
    print(json.dumps(problems))
    return 0 if all(p is None for p in problems.values()) else 1


def main(argv):
    if len(argv) >= 2 and argv[0] == "kcidb-validate":
        return kcidb_validate(argv[1:])
    if len(argv) == 3 and argv[0] == "lava-job":
        import tierkit_lava

        return tierkit_lava.lava_job(argv[1], argv[2])
    if len(argv) == 2 and argv[0] == "lava-check":
        import tierkit_lava

        return tierkit_lava.lava_check(argv[1])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main(sys.argv[1:]))
