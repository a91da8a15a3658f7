"""Any ETDump as a Chrome trace (the Trace Event Format that Perfetto and chrome://tracing open).

Each profile event becomes a complete (``"X"``) event in microseconds, each run data block a
thread of its own (``tid``: the block's position, named after it), so loading and every run
show as separate rows, with the method spans enclosing their instructions.
"""

from __future__ import annotations

import json

from torchedge.schema import etdump as ed

__all__ = ["chrome_trace", "write_chrome_trace"]


def chrome_trace(etdump: ed.ETDump) -> dict:
    """The trace as a JSON-ready dict: ``{"traceEvents": [...], "displayTimeUnit": "ms"}``."""
    events: list[dict] = []
    origin = min(
        (e.profile_event.start_time for run in etdump.run_data or [] for e in run.events or [] if e.profile_event),
        default=0,
    )
    for tid, run in enumerate(etdump.run_data or []):
        events.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": f"{tid}: {run.name}"}})
        for event in run.events or []:
            profile = event.profile_event
            if profile is None or profile.name == "OPERATOR_CALL":
                continue
            args: dict[str, int | str] = {}
            if profile.chain_index >= 0:
                args["instruction_id"] = profile.instruction_id
            if profile.delegate_debug_id_int not in (None, -1):
                args["delegate_debug_id"] = profile.delegate_debug_id_int
            if profile.delegate_debug_id_str:
                args["delegate_debug_id"] = profile.delegate_debug_id_str
            events.append(
                {
                    "name": profile.name.removeprefix("native_call_"),
                    "cat": "delegate" if profile.name == "DELEGATE_CALL" else "operator" if args else "method",
                    "ph": "X",
                    "pid": 0,
                    "tid": tid,
                    "ts": (profile.start_time - origin) / 1000,
                    "dur": max(profile.end_time - profile.start_time, 0) / 1000,
                    "args": args,
                }
            )
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(etdump: ed.ETDump, path) -> None:
    with open(path, "w") as f:
        json.dump(chrome_trace(etdump), f)
