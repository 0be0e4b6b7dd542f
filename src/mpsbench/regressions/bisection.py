"""``mpsbench bisect GOOD BAD -b BENCH``: the first build between two that made one combination slower.

First ``compare`` confirms the endpoints: BAD must be slower than GOOD, or the
command refuses in one line (exit 2). Then a binary search over the builds from
GOOD to BAD along BAD's line of descent (its channel, and the channels it forks
from). Each step measures the middle build afresh beside both endpoints, in
interleaved rounds of three processes, only for the one combination asked for:
the middle build is bad when it is slower than GOOD, good when BAD is slower
than it and it is not (yet) slower than GOOD. It names the first bad build with the
evidence of every step and the upstream PyTorch commit range to read (or says
that both builds are of one upstream commit). Nothing is written into the
recorded results. Exit 0: found; 3: a step stayed undecided (the table says
which); 2: bad input or unconfirmed endpoints. With ``--nightlies [N]``, two
adjacent builds with PyTorch nightlies between them get (at most N of) those
nightlies on a bisection channel, and the search goes on among them (nightlies.py).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

from mpsbench.builds import history, timeline
from mpsbench.builds import manifest as mf
from mpsbench.regressions import compare, fresh, nightlies, verdict


def _path(manifest: mf.Manifest, good: fresh.Named, bad: fresh.Named) -> list[str]:
    """The builds after GOOD up to and including BAD, oldest first, or a one-line refusal."""
    if good.name == bad.name:
        raise fresh.FreshError(f"GOOD and BAD are the same build ({good.name}): name two builds")
    line = fresh.lineage(manifest, bad.name)
    if good.name not in line:
        if bad.name in fresh.lineage(manifest, good.name):
            raise fresh.FreshError(f"{bad.name} comes before {good.name}: give GOOD (older) first, then BAD")
        raise fresh.FreshError(
            f"{good.name} is not an ancestor of {bad.name} on any channel: bisect along one line of builds"
        )
    return line[line.index(good.name) + 1:]


FIRST_BAD = "first bad build: {first} (the build before it, {before}, is good)"  # scripts/nightly bisect reads it


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:.3f}"


def cmd_bisect(args: argparse.Namespace) -> int:
    manifest, (good, bad) = fresh.name_builds([args.good, args.bad], args.manifest, args.timeline)
    between = _path(manifest, good, bad)
    generated = timeline.compute(manifest, args.timeline)
    named = {name: fresh.Named(name, generated.commits[name], manifest.find(name)) for name in between}
    gaps = nightlies.Gaps(args, manifest, generated)  # refuses a bad --nightlies before anything runs
    regression = compare.regression_factor(args)
    rows = [["build", "role", "median ms", "vs GOOD", "interval", "p", "vs BAD", "verdict"]]
    with compare.session(args, [good, bad]) as measuring:
        combination = measuring.check_bench(good.commit)
        print(f"bisect {combination}: GOOD {good.name}, BAD {bad.name}, {len(between) - 1} builds between,"
              f" machine {measuring.machine}, factor {regression:g}")
        print(f"confirming: is {bad.name} slower than {good.name}?")
        confirm = compare.measure(measuring, [good, bad], [(good.name, bad.name)], regression,
                                  args.min_rounds, args.max_rounds)
        for line in compare.summary(confirm, good.name, bad.name):
            print("  " + line)
        endpoint = confirm.verdicts[(good.name, bad.name)]
        if endpoint.decision != verdict.SLOWER:
            raise fresh.FreshError(
                f"{bad.name} is not confirmed slower than {good.name} ({endpoint.reason}): nothing to bisect"
            )
        rows.append([good.name, "GOOD", _ms(confirm.medians[good.name]), "1", "", "", "", "endpoint"])
        rows.append([bad.name, "BAD", _ms(confirm.medians[bad.name]), f"{endpoint.ratio:.3f}",
                     f"[{endpoint.low:.3f}, {endpoint.high:.3f}]", f"{endpoint.p_value:.4f}", "1", "confirmed slower"])
        low, high = -1, len(between) - 1  # between[low] is good (-1: GOOD itself), between[high] is bad
        while True:
            if high - low == 1:  # adjacent: --nightlies may add the nightlies between them, and the search goes on
                added = gaps.fill(between[low] if low >= 0 else good.name, between[high])
                if not added:
                    break
                between[high:high] = [build.name for build in added]
                named.update((build.name, build) for build in added)
                high += len(added)
            middle = named[between[(low + high) // 2]]
            print(f"step: {middle.name} ({high - low - 1} candidates left)")
            pairs = [(good.name, middle.name), (middle.name, bad.name)]
            step = compare.measure(measuring, [good, middle, bad], pairs, regression,
                                   args.min_rounds, args.max_rounds, done=_step_decided(pairs))
            vs_good, vs_bad = step.verdicts[pairs[0]], step.verdicts[pairs[1]]
            found = _classify(vs_good, vs_bad)
            rows.append([middle.name, "step", _ms(step.medians[middle.name]), f"{vs_good.ratio:.3f}",
                         f"[{vs_good.low:.3f}, {vs_good.high:.3f}]", f"{vs_good.p_value:.4f}",
                         f"{vs_bad.ratio:.3f}", found or "undecided"])
            if found is None:
                print(_table(rows))
                print(f"undecided at {middle.name}: against GOOD {vs_good.reason}; against BAD {vs_bad.reason}")
                return 3
            if found == "bad":
                high = (low + high) // 2
            else:
                low = (low + high) // 2
    first = between[high]
    before = between[low] if low >= 0 else good.name
    manifest, generated = gaps.manifest, gaps.generated  # with the nightlies --nightlies added
    print(_table(rows))
    print(FIRST_BAD.format(first=first, before=before))
    old, new = manifest.find(before), manifest.find(first)
    if old.git_version == new.git_version:
        print(f"{before} and {first} share the upstream commit {new.git_version[:12]}: the change is in the builds"
              f" themselves, not in PyTorch's history (torch {old.torch_version} -> {new.torch_version})")
    else:
        print("PyTorch commits to read: " + history.upstream_range(manifest, generated, before, first))
    return 0


def _step_decided(pairs: list[compare.Pair]) -> Callable[[dict[compare.Pair, verdict.Verdict]], bool]:
    """A step may stop as soon as the middle build is classified either way."""
    return lambda verdicts: _classify(verdicts[pairs[0]], verdicts[pairs[1]]) is not None


def _classify(vs_good: verdict.Verdict, vs_bad: verdict.Verdict) -> str | None:
    """'bad', 'good' or None (undecided) for a middle build, from its verdicts against both endpoints."""
    if vs_good.decision == verdict.SLOWER:
        return "bad"
    if vs_bad.decision == verdict.SLOWER:  # and not slower than GOOD (else it would be bad above)
        return "good"
    return None


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[col]) for row in rows) for col in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows)


def add_subcommand(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = commands.add_parser(
        "bisect", help="the first build between GOOD and BAD that made one combination slower, measured afresh",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("good", help="the last known good build: CHANNEL@ID, a timeline hash (prefix) or a tag")
    parser.add_argument("bad", help="a later build on the same line of builds that is slower")
    compare.options(parser)
    nightlies.add_options(parser)
    parser.set_defaults(func=cmd_bisect)
