"""``mpsbench bisect GOOD BAD -b BENCH``: the first build between two that made one combination slower.

Each pass measures GOOD, BAD and up to PER_PASS candidates between them in ONE interleaved asv run, judged by
compare's rule; the first pass must confirm BAD slower than GOOD. Exit 0: found; 3: a candidate stayed undecided;
2: bad input or unconfirmed endpoints. ``--nightlies [N]``: nightlies.py (docs/bisect.md).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from mpsbench.builds import history
from mpsbench.builds import manifest as mf
from mpsbench.core import text
from mpsbench.regressions import compare, fresh, nightlies, verdict

PER_PASS = 4  # candidates measured beside GOOD and BAD in one pass: six processes a round at most


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


@dataclass(frozen=True)
class Found:
    """What a bisection names: the first slow build, the good one before it, and where to read the change."""

    first: str  # CHANNEL@ID
    before: str
    upstream: str  # the PyTorch commits to read, or that both builds share one upstream commit


def _ms(values: list[float]) -> str:
    return f"{verdict.fast_mode(values) * 1e3:.3f}"


def _row(name: str, role: str, times: list[float], vs_good: verdict.Verdict, vs_bad: str, found: str) -> list[str]:
    interval = f"[{vs_good.low:.3f}, {vs_good.high:.3f}]"
    return [name, role, _ms(times), f"{vs_good.ratio:.3f}", interval, f"{vs_good.p_value:.4f}", vs_bad, found]


def bisect(args: argparse.Namespace) -> Found | None:
    """Measure and search as ``args`` (bisect's options) ask, printing each pass; None when a candidate stayed undecided."""
    manifest, generated, (good, bad) = fresh.name_builds([args.good, args.bad], args.manifest, args.timeline)
    between = _path(manifest, good, bad)
    named = {name: fresh.Named(name, generated.commits[name]) for name in between}
    gaps = nightlies.Gaps(args, manifest, generated)  # refuses a bad --nightlies before anything runs
    rows = [["build", "role", "fast ms", "vs GOOD", "interval", "p", "vs BAD", "verdict"]]
    low, high = -1, len(between) - 1  # between[low] is good (-1: GOOD itself), between[high] is bad
    confirmed = False
    with fresh.Session(args, [good, bad]) as measuring:
        combination = measuring.check_bench(good.commit)
        print(f"bisect {combination}: GOOD {good.name}, BAD {bad.name}, {len(between) - 1} builds between,"
              f" machine {measuring.machine}, factor {measuring.factor:g}, {compare.measured_as(args)}")
        while True:
            if confirmed and high - low == 1:  # adjacent: --nightlies may add the nightlies between them
                added = gaps.fill(between[low] if low >= 0 else good.name, between[high])
                if not added:
                    break
                between[high:high] = [build.name for build in added]
                named.update((build.name, build) for build in added)
                high += len(added)
            candidates = _spread(between[low + 1:high])
            middles = [named[name] for name in candidates]
            print(("confirming: is BAD slower than GOOD? " if not confirmed else "")
                  + f"pass over {', '.join(candidates) or 'the endpoints'} ({high - low - 1} candidates left)")
            pairs = [(good.name, bad.name)] + [pair for m in middles for pair in ((good.name, m.name), (m.name, bad.name))]
            step = compare.measure(measuring, [good, *middles, bad], pairs,
                                   done=_pass_decided(good.name, bad.name, candidates, confirmed))
            endpoint = step.verdicts[(good.name, bad.name)]
            if not confirmed:
                for line in compare.summary(step, good.name, bad.name):
                    print("  " + line)
                if endpoint.decision != verdict.SLOWER:
                    raise fresh.FreshError(
                        f"{bad.name} is not confirmed slower than {good.name} ({endpoint.reason}): nothing to bisect"
                    )
                confirmed = True
                rows.append([good.name, "GOOD", _ms(step.times[good.name]), "1", "", "", "", "endpoint"])
                rows.append(_row(bad.name, "BAD", step.times[bad.name], endpoint, "1", "confirmed slower"))
            against = {name: (step.verdicts[(good.name, name)], step.verdicts[(name, bad.name)]) for name in candidates}
            found = {name: _classify(*against[name]) for name in candidates}
            rows += [_row(name, "step", step.times[name], vs_good, f"{vs_bad.ratio:.3f}", found[name] or "undecided")
                     for name, (vs_good, vs_bad) in against.items()]
            for name in candidates:  # oldest first: every good one moves low up, the first bad one is high
                if found[name] is None:
                    print(text.table(rows, rule=False))
                    vs_good, vs_bad = against[name]
                    print(f"undecided at {name}: against GOOD {vs_good.reason}; against BAD {vs_bad.reason}")
                    return None
                if found[name] == "bad":
                    high = between.index(name)
                    break
                low = between.index(name)
    first = between[high]
    before = between[low] if low >= 0 else good.name
    manifest, generated = gaps.manifest, gaps.generated  # with the nightlies --nightlies added
    print(text.table(rows, rule=False))
    old, new = manifest.find(before), manifest.find(first)
    if old.git_version == new.git_version:
        upstream = (f"{before} and {first} share the upstream commit {new.git_version[:12]}: the change is in the builds"
                    f" themselves, not in PyTorch's history (torch {old.torch_version} -> {new.torch_version})")
    else:
        upstream = "PyTorch commits to read: " + history.upstream_range(manifest, generated, before, first)
    return Found(first, before, upstream)


def cmd_bisect(args: argparse.Namespace) -> int:
    found = bisect(args)
    if found is None:
        return 3
    print(f"first bad build: {found.first} (the build before it, {found.before}, is good)")
    print(found.upstream)
    return 0


def _spread(names: list[str], most: int = PER_PASS) -> list[str]:
    """Up to ``most`` candidates spread evenly over ``names`` (all of them when there are no more)."""
    if len(names) <= most:
        return names
    return [names[(index + 1) * len(names) // (most + 1)] for index in range(most)]


def _pass_decided(good: str, bad: str, candidates: list[str],
                  confirmed: bool) -> Callable[[dict[compare.Pair, verdict.Verdict]], bool]:
    """Once the endpoints are decided (until confirmed) and the candidates classified up to the first bad one."""

    def decided(verdicts: dict[compare.Pair, verdict.Verdict]) -> bool:
        endpoint = verdicts[(good, bad)].decision
        if not confirmed and endpoint != verdict.SLOWER:
            return endpoint != verdict.UNDECIDED  # unchanged or faster: refuse now, nothing to bisect
        for name in candidates:
            found = _classify(verdicts[(good, name)], verdicts[(name, bad)])
            if found != "good":
                return found is not None  # the first bad one ends the search here; undecided: go on
        return True

    return decided


def _classify(vs_good: verdict.Verdict, vs_bad: verdict.Verdict) -> str | None:
    """'bad', 'good' or None (undecided) for a candidate, from its verdicts against both endpoints."""
    if vs_good.decision == verdict.SLOWER:
        return "bad"
    if vs_bad.decision == verdict.SLOWER:  # and not slower than GOOD (else it would be bad above)
        return "good"
    return None


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
