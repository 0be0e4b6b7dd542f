"""mpsbench bisect GOOD BAD -b BENCH: the first build that made one combination slower. Each step
measures GOOD, BAD and the cheapest split of the candidates in one interleaved run."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from mpsbench.core import progress, text
from mpsbench.core.errors import UserError
from mpsbench.regressions import compare, fresh, nightlies, verdict

log = progress.logger(__name__)
NOT_SLOWER, UNDECIDED = 1, 3  # 1 as grep's "no match": a result a script acts on
MOST_PROBES = 8  # more cost a step more than they narrow
EXIT_STATUSES = """exit status:
  0  found: the first bad build and the good one before it
  1  BAD is not slower than GOOD (unchanged or faster): no regression between them to bisect
  2  bad input (an unknown build, a regex matching no or several combinations or one on an absent device, builds not on one line)
  3  undecided: the endpoints or a candidate could not be told apart; the reason names the option to change"""
HEADER = ["build", "role", "fast ms", "vs GOOD", "interval", "p", "vs BAD", "verdict"]


@dataclass(frozen=True)
class Found:
    first: str
    commit: str  # first's timeline commit, with --nightlies' builds
    before: str  # the good build before it
    upstream: str  # the PyTorch commits to read


@dataclass(frozen=True)
class Unresolved:
    status: int  # NOT_SLOWER or UNDECIDED
    reason: str


@dataclass
class Search:
    """between[low] is good (-1: GOOD), between[high] is bad (BAD is between's last)."""

    between: list[str]
    low: int = -1
    high: int = field(init=False)
    confirmed: bool = False
    processes: int = 0
    endpoints: list[str] = field(default_factory=list)  # compare's summary of GOOD against BAD
    rows: list[list[str]] = field(default_factory=lambda: [list(HEADER)])

    def __post_init__(self) -> None:
        self.high = len(self.between) - 1


def _row(
    name: str, role: str, times: list[float], vs: verdict.Verdict | None, vs_bad: str, found: str
) -> list[str]:
    good = (
        [f"{vs.ratio:.3f}", f"[{vs.low:.3f}, {vs.high:.3f}]", f"{vs.p_value:.4f}"]
        if vs
        else ["1", "", ""]
    )
    return [name, role, f"{verdict.fast_mode(times) * 1e3:.3f}", *good, vs_bad, found]


@functools.cache
def _cheapest(candidates: int) -> tuple[float, int]:
    """The processes a search among ``candidates`` expects, and the probes a step takes (each
    place of the first bad build alike likely)."""
    return min(
        (
            (_cost(candidates, nightlies.spread(range(candidates), most, int)), most)
            for most in range(1, min(candidates, MOST_PROBES) + 1)
        ),
        default=(0.0, 0),
    )


def _cost(candidates: int, measured: list[int]) -> float:
    # a step (GOOD, BAD, the measured), then the part holding the first bad build, by its odds
    parts = [high - low for low, high in itertools.pairwise([-1, *measured, candidates])]
    return (
        len(measured) + 2 + sum(part / (candidates + 1) * _cheapest(part - 1)[0] for part in parts)
    )


def probes(candidates: list[str]) -> list[str]:
    """The evenly spaced candidates whose number makes the whole search cheapest."""
    return nightlies.spread(candidates, _cheapest(len(candidates))[1], int)


def search(
    session: fresh.Session,
    good: fresh.Named,
    bad: fresh.Named,
    named: dict[str, fresh.Named],
    state: Search,
    fill: Callable[[str, str], list[fresh.Named]] = lambda good, bad: [],
) -> Unresolved | None:
    """Steps until two adjacent builds are good and bad (None; ``state`` says which) or something
    stays unresolved."""
    between = state.between
    while True:
        if state.confirmed and state.high - state.low == 1:  # --nightlies adds builds between
            added = fill(between[state.low] if state.low >= 0 else good.name, between[state.high])
            if not added:
                return None
            between[state.high : state.high] = [build.name for build in added]
            named.update((build.name, build) for build in added)
            state.high += len(added)
        left = between[state.low + 1 : state.high]
        candidates = probes(left)
        log.info(
            ("confirming: is BAD slower than GOOD? " if not state.confirmed else "")
            + f"step over {', '.join(candidates) or 'the endpoints'}"
            f" ({len(left)} candidate{'' if len(left) == 1 else 's'} left)"
        )
        pairs = [(good.name, bad.name)] + [
            pair for name in candidates for pair in ((good.name, name), (name, bad.name))
        ]
        step = compare.measure(
            session,
            [good, *(named[name] for name in candidates), bad],
            pairs,
            done=_step_decided(good.name, bad.name, candidates, state.confirmed),
        )
        state.processes += sum(len(values) for values in step.times.values())
        if not state.confirmed:
            endpoint = step.verdicts[(good.name, bad.name)]
            state.endpoints = compare.summary(step, good.name, bad.name)
            if endpoint.decision == verdict.UNDECIDED:
                return Unresolved(
                    UNDECIDED,
                    f"{bad.name} is not confirmed slower than {good.name}: {endpoint.reason}",
                )
            if endpoint.decision != verdict.SLOWER:
                return Unresolved(
                    NOT_SLOWER,
                    f"{bad.name} is not slower than {good.name} ({endpoint.reason}): no"
                    " regression between them to bisect; name a BAD that compare calls slower",
                )
            state.confirmed = True
            state.rows += [
                _row(good.name, "GOOD", step.times[good.name], None, "", "endpoint"),
                _row(bad.name, "BAD", step.times[bad.name], endpoint, "1", "confirmed slower"),
            ]
        against = []  # oldest first: name, its verdicts against GOOD and BAD, its class
        for name in candidates:
            vs_good, vs_bad = step.verdicts[(good.name, name)], step.verdicts[(name, bad.name)]
            against.append((name, vs_good, vs_bad, _classify(vs_good, vs_bad)))
        state.rows += [
            _row(name, "step", step.times[name], vs_good, f"{vs_bad.ratio:.3f}", found)
            for name, vs_good, vs_bad, found in against
        ]
        for name, vs_good, vs_bad, found in against:
            if found == "undecided":
                return Unresolved(
                    UNDECIDED,
                    f"undecided at {name}: against GOOD {vs_good.reason};"
                    f" against BAD {vs_bad.reason}",
                )
            if found == "bad":
                state.high = between.index(name)
                break
            state.low = between.index(name)


def bisect(
    good_ref: str, bad_ref: str, args: fresh.Options, adding: nightlies.Options
) -> Found | Unresolved:
    (good, bad), chosen = fresh.name_builds([good_ref, bad_ref], args, "GOOD and BAD")
    line = fresh.lineage(args.suite.manifest, bad.name)
    if good.name not in line:
        if bad.name in fresh.lineage(args.suite.manifest, good.name):
            raise UserError(
                f"{bad.name} comes before {good.name}: give GOOD (older) first, then BAD"
            )
        raise UserError(
            f"{good.name} is not an ancestor of {bad.name} on any channel: bisect along one line of"
            " builds"
        )
    between = line[line.index(good.name) + 1 :]  # up to and including BAD
    named = {name: fresh.Named(name, args.suite.timeline.commits[name]) for name in between}
    gaps = nightlies.Gaps(adding, args.suite)
    state = Search(between)
    with fresh.Session(args, [good, bad], chosen) as measuring:
        combination = measuring.check_bench(good.commit)
        print(
            f"bisect {combination}: GOOD {good.name}, BAD {bad.name}, {len(between) - 1} builds between,"
            f" machine {measuring.machine}, factor {measuring.factor:g}, {compare.measured_as(args)}"
        )
        unresolved = search(measuring, good, bad, named, state, gaps.fill)
    for said in state.endpoints:
        print("  " + said)
    if len(state.rows) > 1:
        print(text.table(state.rows, rule=False))
    print(f"{state.processes} processes in all")
    if unresolved is not None:
        return unresolved
    first = between[state.high]
    before = between[state.low] if state.low >= 0 else good.name
    manifest = gaps.suite.manifest  # with --nightlies' builds
    old, new = manifest.find(before), manifest.find(first)
    if old.git_version == new.git_version:
        upstream = (
            f"{before} and {first} share the upstream commit {new.git_version[:12]}: the change is in the builds"
            f" themselves, not in PyTorch's history (torch {old.torch_version} -> {new.torch_version})"
        )
    else:
        upstream = "PyTorch commits to read: " + gaps.suite.upstream_range(before, first)
    return Found(first, named[first].commit, before, upstream)


def outcome(found: Found | Unresolved) -> int:
    if isinstance(found, Unresolved):
        word = "undecided" if found.status == UNDECIDED else "no regression"
        print(f"{word}: {found.reason} (exit {found.status})")
        return found.status
    print(f"first bad build: {found.first} (the build before it, {found.before}, is good)")
    print(found.upstream)
    return 0


def _step_decided(
    good: str, bad: str, candidates: list[str], confirmed: bool
) -> Callable[[compare.Verdicts], bool]:

    def decided(verdicts: compare.Verdicts) -> bool:
        endpoint = verdicts[(good, bad)].decision
        if not confirmed and endpoint != verdict.SLOWER:
            return endpoint != verdict.UNDECIDED  # nothing to bisect
        classes = (_classify(verdicts[(good, n)], verdicts[(n, bad)]) for n in candidates)
        return next((found == "bad" for found in classes if found != "good"), True)

    return decided


def _classify(vs_good: verdict.Verdict, vs_bad: verdict.Verdict) -> str:
    if vs_good.decision == verdict.SLOWER:
        return "bad"
    if vs_bad.decision == verdict.SLOWER or vs_good.decision in (verdict.UNCHANGED, verdict.FASTER):
        return "good"
    return "undecided"
