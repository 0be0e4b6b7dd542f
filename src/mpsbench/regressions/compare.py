"""mpsbench compare A B -b BENCH: is B slower than A? Interleaved rounds of fresh processes until
verdict's rule decides or the budget is spent."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mpsbench.core import progress
from mpsbench.regressions import fresh, verdict

Pair = tuple[str, str]
Verdicts = dict[Pair, verdict.Verdict]
MOST_ROUNDS = 1000  # a round is seconds at least, so a thousand is hours
log = progress.logger(__name__)
EXIT_STATUSES = """exit status:
  0  unchanged (within the regression factor) or faster: no regression
  1  slower: B is slower than the factor x A
  2  bad input (an unknown build, a regex matching no or several combinations or one on an absent device, a bad option value)
  3  undecided: too noisy or too close to the factor for the rounds allowed; the reason names the option to change"""


@dataclass
class Measured:
    times: dict[str, list[float]]  # each process's fastest sample (s), round order
    verdicts: Verdicts = field(default_factory=dict)
    samples: dict[str, int] = field(default_factory=dict)

    def undecided(self) -> list[verdict.Verdict]:
        return [v for v in self.verdicts.values() if v.decision == verdict.UNDECIDED]


def measure(
    session: fresh.Session,
    builds: list[fresh.Named],
    pairs: list[Pair],
    done: Callable[[Verdicts], bool] | None = None,
) -> Measured:
    """Rounds until every pair is decided (or ``done``) or the budget is spent; extra looks past
    --max-rounds while an undecided pair could be decided."""
    levels = verdict.schedule(session.min_rounds, session.max_rounds)
    measured = Measured({b.name: [] for b in builds})
    started, last = time.monotonic(), max(levels)
    if started >= session.deadline:  # an earlier step spent the budget
        return _out_of_time(session, measured, pairs, levels, session.min_rounds)
    rounds = session.rounds(builds, last)
    with contextlib.closing(rounds):  # stops the servers early
        for count, times in enumerate(rounds, 1):
            measured.times, measured.samples = times, dict(session.samples)
            if looked := count in levels:
                judge = (
                    verdict.early_judge
                    if count < session.min_rounds
                    else functools.partial(verdict.judge, quieter=session.quieter)
                )
                measured.verdicts = {
                    (a, b): judge(times[a], times[b], session.factor, levels[count])
                    for a, b in pairs
                }
            finished = looked and (done(measured.verdicts) if done else not measured.undecided())
            now = time.monotonic()
            following = next((look for look in levels if look > count), None)
            pace = (now - started) / count
            beyond, late = None, False
            if not finished and following is not None:
                if looked and following > session.max_rounds:
                    beyond = _beyond_reach(session, measured, levels, count, pace, now)
                late = beyond is None and now + (following - count) * pace > session.deadline
            shown = ", ".join(f"{b.name} {times[b.name][-1] * 1e3:.2f} ms" for b in builds)
            left = _left(measured, following, count, session, now - started, finished, last)
            extra = count > session.max_rounds
            of = f" (extra, budget left; up to {last})" if extra else f"/{session.max_rounds}"
            log.info(f"round {count}{of}: {shown}; {left}")
            if finished:
                break
            if beyond is not None:
                for pair, found in measured.verdicts.items():
                    if found.decision == verdict.UNDECIDED:
                        measured.verdicts[pair] = dataclasses.replace(
                            found, reason=f"{found.reason}; {beyond}"
                        )
                return measured
            if late:  # the next look would end after the budget
                return _out_of_time(session, measured, pairs, levels, following or count)
    return measured


def needed(found: verdict.Verdict, count: int, alpha: float, factor: float) -> float:
    """About how many rounds in all would decide a pair if its ratio and spread stay."""
    if found.decision != verdict.UNDECIDED and count > 0:
        return float(count)
    if not all(0 < v < math.inf for v in (found.ratio, found.low, found.high)):
        return math.inf
    distance = abs(math.log(found.ratio / factor))
    if distance == 0:
        return math.inf
    normal = statistics.NormalDist()
    error = math.log(found.high / found.low) / 2 / normal.inv_cdf((1 + verdict.CONFIDENCE) / 2)
    return max(count + 1.0, count * (normal.inv_cdf(1 - alpha) * error / distance) ** 2)


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
    left = max(0.0, session.deadline - now)
    affordable = count + left / pace if pace > 0 else math.inf
    reachable = max((look for look in extra if look <= affordable), default=count)
    need = min(
        (needed(v, count, levels[extra[-1]], session.factor) for v in measured.undecided()),
        default=math.inf,
    )
    if need <= reachable:
        if count == session.max_rounds:
            log.info(
                f"undecided after the planned {count} rounds: about {need:.0f} in all would decide;"
                f" going on with the budget left ({left / 60:.1f} min, up to round {reachable})"
            )
        return None
    more = (
        "the ratio sits on the factor"
        if math.isinf(need)
        else f"about {need:.0f} rounds in all would decide (~{(need - count) * pace / 60:.0f} min"
        f" more at {pace:.1f} s a round)"
    )
    return (
        f"after {count} rounds {more}, where the time budget ({session.minutes:g} min) and the"
        f" extra looks reach round {reachable}: allow more rounds (--max-rounds) and time"
        f" (--time-budget MINUTES) or {session.quieter}"
    )


def _out_of_time(
    session: fresh.Session,
    measured: Measured,
    pairs: list[Pair],
    levels: dict[int, float],
    following: int,
) -> Measured:
    """Pairs the last look left undecided stay so (an unplanned look has no alpha)."""
    why = (
        f"the time budget ({session.minutes:g} min, --time-budget) ends before round"
        f" {following}'s look: allow more time (--time-budget MINUTES) or {session.quieter}"
    )
    alpha = min(levels.values())
    for a, b in pairs:
        found, count = measured.verdicts.get((a, b)), len(measured.times[a])
        if found is None:
            why_here = f"{count} processes a side, fewer than the first look's {min(levels)}; {why}"
            if count >= 2:
                found = verdict.judge(
                    measured.times[a], measured.times[b], session.factor, alpha, session.quieter
                )
            else:
                nan = math.nan
                found = verdict.Verdict(verdict.UNDECIDED, nan, nan, nan, 1.0, alpha, nan, "")
        elif found.decision == verdict.UNDECIDED:
            why_here = f"{found.reason.removeprefix(verdict.UNDECIDED + ': ')}; {why}"
        else:
            continue
        need = needed(found, count, levels.get(following, alpha), session.factor)
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
    most, pace = (session.max_rounds if count < session.max_rounds else last), elapsed / count
    decided = len(measured.verdicts) - len(measured.undecided())
    judged = f"{decided} of {len(measured.verdicts)} decided, " if measured.verdicts else ""
    if finished:
        return f"{judged}done ({elapsed:.0f} s, {pace:.1f} s a round)"
    if following is None:
        return f"{judged}budget spent ({elapsed:.0f} s)"
    left = max(0.0, session.deadline - time.monotonic()) / 60
    return (
        f"{judged}{elapsed:.0f} s so far, {pace:.1f} s a round; next look at round {following}"
        f" (~{(following - count) * pace:.0f} s), at most {most - count}"
        f" round{'s' if most - count > 1 else ''} left (~{(most - count) * pace:.0f} s);"
        f" {left:.1f} of the command's {session.minutes:g} min left"
    )


def summary(measured: Measured, a: str, b: str) -> list[str]:
    found = measured.verdicts[(a, b)]
    return [
        *(
            f"{label} {name}: fast mode {verdict.fast_mode(times) * 1e3:.3f} ms, median"
            f" {statistics.median(times) * 1e3:.3f} ms over {len(times)} processes"
            f" ({measured.samples.get(name, 0)} samples)"
            for label, name in (("A", a), ("B", b))
            for times in [measured.times[name]]
        ),
        f"B/A {found.ratio:.3f} [{found.low:.3f}, {found.high:.3f}] (fast modes, 95% bootstrap over"
        f" processes); A/A {found.noise:.3f}; p {found.p_value:.4f} that B is slower than the"
        f" factor x A (decides below {found.alpha:.4f})",
        f"verdict: {found.reason} (exit {found.exit_code})",
    ]


def measured_as(args: fresh.Options) -> str:
    if args.threads is None:
        return "torch's default threads"
    plural = "s" if args.threads > 1 else ""
    return f"{args.threads} torch thread{plural} (--threads; recorded runs use torch's default)"


def compare(a_ref: str, b_ref: str, args: fresh.Options) -> int:
    (a, b), chosen = fresh.name_builds([a_ref, b_ref], args, "A and B")
    with fresh.Session(args, [a, b], chosen) as measuring:
        combination = measuring.check_bench(a.commit)
        print(
            f"compare {combination}: A {a.name} ({a.commit[:12]}) against B {b.name}"
            f" ({b.commit[:12]}), machine {measuring.machine}, factor {measuring.factor:g},"
            f" {args.min_rounds}-{args.max_rounds} rounds, {measured_as(args)}"
        )
        measured = measure(measuring, [a, b], [(a.name, b.name)])
    print("\n".join(summary(measured, a.name, b.name)))
    return measured.verdicts[(a.name, b.name)].exit_code
