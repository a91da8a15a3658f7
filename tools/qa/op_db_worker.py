"""A worker process of the op_db sweep: reads requests, runs cases, writes results.

Protocol, one JSON object per line: a request ``{"op", "dtype", "start", "stop", "timeout"}``
on stdin; on the result stream one `CaseResult` dict per case, then ``{"done": true,
"maxrss_mb": ...}``. The result stream is the original stdout; what operators or libraries
print goes to stderr, so it cannot corrupt the protocol. Run with
``python -m tools.qa.op_db_worker`` from the repository root (`op_db_pool` does).
"""

from __future__ import annotations

import json
import os
import resource
import sys

__all__ = ["main"]


def main() -> None:
    results = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    from tools.qa.op_db_sweep import run_samples

    for line in sys.stdin:
        request = json.loads(line)
        for result in run_samples(
            request["op"], request["dtype"], request["start"], request["stop"], request.get("timeout")
        ):
            results.write(json.dumps(result.to_dict()) + "\n")
        maxrss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        results.write(json.dumps({"done": True, "maxrss_mb": maxrss_mb}) + "\n")


if __name__ == "__main__":
    main()
