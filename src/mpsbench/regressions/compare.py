"""mpsbench compare A B -b BENCH: is build B slower than build A, measured afresh?

Rounds of fresh, interleaved processes into a scratch folder (fresh.Session), never the recorded
results, until verdict.py's rule decides or the budget is spent.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mpsbench.core import asv, progress
from mpsbench.core.errors import UserError
from mpsbench.measure import devices, preselect
from mpsbench.regressions import fresh, verdict

Pair = tuple[str, str]
# a round is seconds at least, so a thousand is hours; verdict.looks lists every look
MOST_ROUNDS = 1000
log = progress.logger(__name__)
EXIT_STATUSES = """exit status:
  0  unchanged (within the regression factor) or faster: no regression
  1  slower: B is slower than the factor x A
  2  bad input (an unknown build, a regex matching no or several combinations or one on an absent device, a bad option value)
  3  undecided: too noisy or too close to the factor for the rounds allowed; the reason names the option to change"""


@dataclass
class Measured:
    times: dict[str, list[float]]  # each build's process times (fastest sample, s), round order
    verdicts: dict[Pair, verdict.Verdict] = field(default_factory=dict)
    samples: dict[str, int] = field(default_factory=dict)  # each build's samples over its processes


def measure(
    session: fresh.Session,
    builds: list[fresh.Named],
    pairs: list[Pair],
    done: Callable[[dict[Pair, verdict.Verdict]], bool] | None = None,
) -> Measured:
    """Interleaved rounds until every pair is decided (or ``done`` says so) or the budget is spent,
    a progress line a round. Extra looks past --max-rounds go on while an undecided pair could be
    decided in the time left (:func:`needed`)."""
    levels = verdict.schedule(session.min_rounds, session.max_rounds)
    measured = Measured({b.name: [] for b in builds})
    done = done or (lambda found: all(v.decision != verdict.UNDECIDED for v in found.values()))
    started, last = time.monotonic(), max(levels)
    if started >= session.deadline:  # an earlier step of the command spent the budget
        return _out_of_time(session, measured, pairs, levels, session.min_rounds)
    rounds = session.rounds(builds, last)
    try:
        for times in rounds:
            before = len(measured.times[builds[0].name])
            measured.times, measured.samples = times, dict(session.samples)
            count = len(times[builds[0].name])
            # asv may finish two rounds at once
            if due := [look for look in levels if before < look <= count]:
                look = due[-1]
                measured.verdicts = {
                    (a, b): verdict.judge_at(
                        look,
                        session.min_rounds,
                        times[a],
                        times[b],
                        session.factor,
                        levels[look],
                        session.quieter,
                    )
                    for a, b in pairs
                }
            finished = bool(due) and done(measured.verdicts)
            now = time.monotonic()
            following = next((look for look in levels if look > count), None)
            pace = (now - started) / count
            beyond, late = None, False
            if not finished and following is not None:
                if due and following > session.max_rounds:  # extra looks, while they could decide
                    beyond = _beyond_reach(session, measured, levels, count, pace, now)
                late = beyond is None and now + (following - count) * pace > session.deadline
            for number in range(before + 1, count + 1):
                shown = ", ".join(
                    f"{b.name} {times[b.name][number - 1] * 1e3:.2f} ms" for b in builds
                )
                if number == count:
                    shown += f"; {_left(measured, following, count, session, now - started, finished, last)}"
                of = (
                    f"/{session.max_rounds}"
                    if number <= session.max_rounds
                    else f" (extra, budget left; up to {last})"
                )
                log.info(f"round {number}{of}: {shown}")
            if finished:
                break
            if beyond is not None:
                return _undecided(measured, beyond)
            if late:  # the next look would end after the budget: stop with the last look's word
                return _out_of_time(session, measured, pairs, levels, following or count)
    finally:
        rounds.close()  # stops asv if the rounds were not all needed
    return measured


def needed(found: verdict.Verdict, count: int, alpha: float, factor: float) -> float:
    """About how many rounds in all would decide an undecided pair if its ratio and spread stay:
    the interval narrows as one over the square root of the rounds (inf on the factor). A guide
    for the user and the budget, never a decision."""
    if found.decision != verdict.UNDECIDED and count > 0:
        return float(count)
    if not all(
        math.isfinite(value) and value > 0 for value in (found.ratio, found.low, found.high)
    ):
        return math.inf
    error = (
        (math.log(found.high) - math.log(found.low))
        / 2
        / statistics.NormalDist().inv_cdf((1 + verdict.CONFIDENCE) / 2)
    )
    distance = abs(math.log(found.ratio) - math.log(factor))
    if distance == 0:
        return math.inf
    return max(
        count + 1.0, count * (statistics.NormalDist().inv_cdf(1 - alpha) * error / distance) ** 2
    )


def _beyond_reach(
    session: fresh.Session,
    measured: Measured,
    levels: dict[int, float],
    count: int,
    pace: float,
    now: float,
) -> str | None:
    """Why the extra looks stop here; None while an undecided pair could be decided in time."""
    extra = [look for look in levels if look > count]
    affordable = count + max(0.0, session.deadline - now) / pace if pace > 0 else math.inf
    reachable = max((look for look in extra if look <= affordable), default=count)
    open_pairs = [
        found for found in measured.verdicts.values() if found.decision == verdict.UNDECIDED
    ]
    need = min(
        (needed(found, count, levels[extra[-1]], session.factor) for found in open_pairs),
        default=math.inf,
    )
    if need <= reachable:
        if count == session.max_rounds:
            log.info(
                f"undecided after the planned {count} rounds: about {need:.0f} in all would decide; going on with"
                f" the budget left ({max(0.0, session.deadline - now) / 60:.1f} min, up to round {reachable})"
            )
        return None
    more = (
        "the ratio sits on the factor"
        if math.isinf(need)
        else (
            f"about {need:.0f} rounds in all would decide (~{(need - count) * pace / 60:.0f} min more at"
            f" {pace:.1f} s a round)"
        )
    )
    return (
        f"after {count} rounds {more}, where the time budget ({session.minutes:g} min) and the extra looks"
        f" reach round {reachable}: allow more rounds (--max-rounds) and time (--time-budget MINUTES) or"
        f" {session.quieter}"
    )


def _undecided(measured: Measured, why: str) -> Measured:
    for pair, found in measured.verdicts.items():
        if found.decision == verdict.UNDECIDED:
            measured.verdicts[pair] = dataclasses.replace(found, reason=f"{found.reason}; {why}")
    return measured


def _out_of_time(
    session: fresh.Session,
    measured: Measured,
    pairs: list[Pair],
    levels: dict[int, float],
    following: int,
) -> Measured:
    """A pair the last look decided keeps its decision; any other is undecided, with about how
    many rounds would decide it. Nothing is decided here: an unplanned look has no alpha."""
    why = (
        f"the time budget ({session.minutes:g} min, --time-budget) ends before round {following}'s look: allow more"
        f" time (--time-budget MINUTES) or {session.quieter}"
    )
    for a, b in pairs:
        found = measured.verdicts.get((a, b))
        if found is not None and found.decision != verdict.UNDECIDED:
            continue
        count = len(measured.times[a])
        if found is None:
            alpha = min(levels.values())
            if count >= 2:  # the evidence so far, for the report
                found = verdict.judge(
                    measured.times[a], measured.times[b], session.factor, alpha, session.quieter
                )
            else:
                nan = float("nan")
                found = verdict.Verdict(verdict.UNDECIDED, nan, nan, nan, 1.0, alpha, nan, "")
            why_here = f"{count} processes a side, fewer than the first look's {min(levels)}; {why}"
        else:
            why_here = f"{found.reason.removeprefix(verdict.UNDECIDED + ': ')}; {why}"
        need = needed(found, count, levels.get(following, min(levels.values())), session.factor)
        if count >= 2 and math.isfinite(need):
            why_here += f" (about {need:.0f} rounds in all would decide)"
        measured.verdicts[(a, b)] = dataclasses.replace(
            found, decision=verdict.UNDECIDED, reason=f"{verdict.UNDECIDED}: {why_here}"
        )
    return measured


def _left(
    measured: Measured,
    following: int | None,
    count: int,
    session: fresh.Session,
    elapsed: float,
    finished: bool,
    last: int,
) -> str:
    """The next look and the budget, in rounds and in seconds at this run's pace (installs
    included, so rather more than less); past --max-rounds, up to the ``last`` extra look."""
    most, pace = (session.max_rounds if count < session.max_rounds else last), elapsed / count
    decided = sum(v.decision != verdict.UNDECIDED for v in measured.verdicts.values())
    judged = f"{decided} of {len(measured.verdicts)} decided, " if measured.verdicts else ""
    if finished:
        return f"{judged}done ({elapsed:.0f} s, {pace:.1f} s a round)"
    if following is None:
        return f"{judged}budget spent ({elapsed:.0f} s)"
    return (
        f"{judged}{elapsed:.0f} s so far, {pace:.1f} s a round; next look at round {following}"
        f" (~{(following - count) * pace:.0f} s), at most {most - count} round{'s' if most - count > 1 else ''} left"
        f" (~{(most - count) * pace:.0f} s); {max(0.0, session.deadline - time.monotonic()) / 60:.1f} of the"
        f" command's {session.minutes:g} min left"
    )


def summary(measured: Measured, a: str, b: str) -> list[str]:
    found = measured.verdicts[(a, b)]
    return [
        *(
            f"{label} {name}: fast mode {verdict.fast_mode(measured.times[name]) * 1e3:.3f} ms, median"
            f" {statistics.median(measured.times[name]) * 1e3:.3f} ms over {len(measured.times[name])} processes"
            f" ({measured.samples.get(name, 0)} samples)"
            for label, name in (("A", a), ("B", b))
        ),
        f"B/A {found.ratio:.3f} [{found.low:.3f}, {found.high:.3f}] (fast modes, 95% bootstrap over processes);"
        f" A/A {found.noise:.3f}; p {found.p_value:.4f} that B is slower than the factor x A (decides below"
        f" {found.alpha:.4f})",
        f"verdict: {found.reason} (exit {found.exit_code})",
    ]


def check(args: fresh.Options) -> None:
    """Refuses what compare's and bisect's options make impossible, before anything is written."""
    if args.min_rounds > args.max_rounds:
        raise UserError(
            f"--min-rounds {args.min_rounds} is more than --max-rounds {args.max_rounds}"
        )
    fresh.round_process(None, dict(os.environ))  # refuses a bad MPSBENCH_ROUND_PROCESS
    benchmarks = preselect.discover(args.conf.benchmarks)
    found = asv.matching(preselect.names(benchmarks), [args.bench])
    fresh.one_combination(args.bench, found, " (mpsbench preselect --list lists them)")
    # Else every process would skip after asv installed both builds. Asked of the machine, as
    # preselect asks: a torch probe here would hold a GPU context through every round.
    device = preselect.devices_of(benchmarks)[found[0]]
    if device is not None and not devices.present(device):
        here = ", ".join(name for name in devices.NAMES if devices.present(name))
        raise UserError(
            f"-b {args.bench!r} names {found[0]}, which cannot run here: {devices.absent_reason(device)};"
            f" the devices here: {here}"
        )


def measured_as(args: fresh.Options) -> str:
    if args.threads is None:
        return "torch's default threads"
    return f"{args.threads} torch thread{'s' if args.threads > 1 else ''} (--threads; recorded runs use torch's default)"


def compare(a_ref: str, b_ref: str, args: fresh.Options) -> int:
    """Measures both builds afresh and prints the report; returns the exit status."""
    check(args)
    _, _, (a, b) = fresh.name_builds([a_ref, b_ref], args.manifest, args.timeline)
    if a.name == b.name:
        raise UserError(f"A and B are the same build ({a.name}): name two builds")
    with fresh.Session(args, [a, b]) as measuring:
        combination = measuring.check_bench(a.commit)
        print(
            f"compare {combination}: A {a.name} ({a.commit[:12]}) against B {b.name} ({b.commit[:12]}),"
            f" machine {measuring.machine}, factor {measuring.factor:g}, {args.min_rounds}-{args.max_rounds} rounds,"
            f" {measured_as(args)}"
        )
        measured = measure(measuring, [a, b], [(a.name, b.name)])
    print("\n".join(summary(measured, a.name, b.name)))
    return measured.verdicts[(a.name, b.name)].exit_code
