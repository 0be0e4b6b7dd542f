"""Ask pip whether every pinned set of a manifest is complete, and pinned as its index serves it.

    .venv/bin/python -m tools.check_pins [--manifest builds/manifest.json] [--build CHANNEL@ID ...] [--jobs 3] [--out DIR]

For each (build, platform, Python) set, ``resolve.check_set`` has pip's resolver install the set's pins as
requirements over the index, for that platform and Python (``pip install --dry-run --report`` with the target's
markers: metadata only, no wheel downloaded). A package pip would add is one the set lacks; a file or sha256 other
than the index's is a pin the index does not serve. A set pinned before builds were resolved per Python (release
2.13.0 and 2.14.1) is checked under each Python its torch wheels name, with the wheels whose tags admit it.

Needs the network (PyPI, or --index). One line per set as it finishes, with the time left; the totals at the end;
with --out, check-pins.json there. Exit status 1 if any set is incomplete or differs from its index.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from packaging import tags, utils

from mpsbench.builds import manifest as mf
from mpsbench.builds import resolve
from mpsbench.core.errors import UserError


def _fits(filename: str, python: str) -> bool:
    version = (3, int(python[3:]))
    runs = {
        (tag.interpreter, tag.abi)
        for tag in (*tags.cpython_tags(version), *tags.compatible_tags(version))
    }
    return any(
        (tag.interpreter, tag.abi) in runs for tag in utils.parse_wheel_filename(filename)[3]
    )


def sets(
    manifest: mf.Manifest, refs: Sequence[str] = ()
) -> list[tuple[str, str, str, list[mf.Pin], bool]]:
    """(build, platform, python, pins, pinned before sets) for every set of the manifest, or of ``refs``."""
    found = []
    for channel in manifest.channels:
        for build in channel.builds:
            ref = f"{channel.name}@{build.id}"
            if refs and ref not in refs:
                continue
            for platform in sorted(build.pins):
                for python, pins in sorted(build.sets(platform).items()):
                    if python:
                        found.append((ref, platform, python, pins, False))
                        continue
                    torch_tags = (
                        utils.parse_wheel_filename(p.filename)[3] for p in pins if p.name == "torch"
                    )
                    for each in sorted({tag.interpreter for found in torch_tags for tag in found}):
                        found.append(
                            (
                                ref,
                                platform,
                                each,
                                [p for p in pins if _fits(p.filename, each)],
                                True,
                            )
                        )
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.check_pins", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--manifest", type=Path, default=Path("builds/manifest.json"))
    parser.add_argument(
        "--build", action="append", default=[], metavar="CHANNEL@ID", help="only these builds"
    )
    parser.add_argument(
        "--index", default=resolve.PYPI, help="PEP 503 index the pins came from (default PyPI)"
    )
    parser.add_argument("--jobs", type=int, default=3, help="pip resolutions at once (default 3)")
    parser.add_argument("--out", type=Path, help="write check-pins.json in this folder")
    args = parser.parse_args(argv)
    todo = sets(mf.load(args.manifest), args.build)
    started, rows = time.monotonic(), list[dict[str, Any]]()
    print(
        f"checking {len(todo)} sets of {args.manifest} against {args.index} with pip, {args.jobs} at a time",
        flush=True,
    )
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        running = {
            pool.submit(resolve.check_set, pins, platform, python, args.index): (
                ref,
                platform,
                python,
                pins,
                old,
            )
            for ref, platform, python, pins, old in todo
        }
        for done, future in enumerate(as_completed(running), 1):
            ref, platform, python, pins, old = running[future]
            try:
                problems = future.result()
            except UserError as exc:
                problems = [f"pip could not resolve it: {exc}"]
            rows.append(
                {
                    "build": ref,
                    "platform": platform,
                    "python": python,
                    "wheels": len(pins),
                    "pinned_before_sets": old,
                    "problems": problems,
                }
            )
            left = (time.monotonic() - started) / done * (len(todo) - done)
            verdict = (
                "complete, as the index serves it"
                if not problems
                else f"{len(problems)} problems: {problems[0]}"
            )
            print(
                f"[{done}/{len(todo)}, about {left / 60:.0f} min left] {ref} {platform} {python}: {len(pins)} wheels,"
                f" {verdict}",
                flush=True,
            )
    rows.sort(key=lambda row: (row["build"], row["platform"], row["python"]))
    complete = [row for row in rows if not row["problems"]]
    wheels = {pin.sha256 for _, _, _, pins, _ in todo for pin in pins}
    print(
        f"{len(complete)} of {len(rows)} sets complete and as the index serves them; {len(wheels)} distinct wheels;"
        f" {time.monotonic() - started:.0f} s"
    )
    for row in rows:
        if row["problems"]:
            print(
                f"  {row['build']} {row['platform']} {row['python']}: " + "; ".join(row["problems"])
            )
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "check-pins.json").write_text(
            json.dumps(
                {"manifest": str(args.manifest), "index": args.index, "sets": rows}, indent=1
            )
            + "\n"
        )
    return 0 if len(complete) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
