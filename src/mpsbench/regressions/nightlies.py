"""``mpsbench bisect --nightlies N``: nightlies between two adjacent builds, on a reused channel."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TypeVar

from mpsbench.builds import history, resolve
from mpsbench.builds import manifest as mf
from mpsbench.context import Suite
from mpsbench.core.errors import UserError
from mpsbench.regressions import fresh

T = TypeVar("T")

DEFAULT = 3  # a binary search over three builds is two steps
PREFIX = "bisect-"


def day(build: mf.Build) -> date:
    """A nightly's version stamp, else the build's date."""
    found = resolve.NIGHTLY_STAMP.search(build.torch_version)
    return date(*map(int, found.groups())) if found else build.when().date()


def spread(items: Sequence[T], count: int, rounding: Callable[[float], int] = round) -> list[T]:
    """At most ``count`` of ``items``, cutting them into ``count + 1`` equal runs; ``rounding``
    places a cut."""
    if len(items) <= count:
        return list(items)
    ends = {rounding((pick + 1) * (len(items) + 1) / (count + 1)) - 1 for pick in range(count)}
    return [items[position] for position in sorted(ends)]


def channel_name(good: str) -> str:
    """``bisect-CHANNEL-ID``, never ``bisect-bisect-...``."""
    channel, _, build_id = good.partition("@")
    return f"{PREFIX}{channel.removeprefix(PREFIX)}-{build_id}"


@dataclass(frozen=True)
class Options:
    nightlies: int | None = None
    indexes: tuple[str, ...] = ()  # (): PyTorch's
    transformers: str | None = None
    transformers_index: str = resolve.PYPI


@dataclass
class Gaps:
    """Fills a bisection's last gap with nightlies while the budget lasts."""

    args: Options
    suite: Suite  # made afresh once nightlies are added

    def __post_init__(self) -> None:
        self.left = self.wanted = self.args.nightlies or 0
        self.indexes = self.args.indexes or tuple(resolve.NIGHTLY_INDEXES)

    @functools.cached_property
    def dates(self) -> list[str]:
        return resolve.nightly_dates(self.indexes)

    def fill(self, good: str, bad: str) -> list[fresh.Named]:
        if not self.wanted:
            return []
        low, high = day(self.suite.manifest.find(good)), day(self.suite.manifest.find(bad))
        inside = [night for night in self.dates if low < date.fromisoformat(night) < high]
        if not inside:
            print(
                f"no nightly between {good} ({low}) and {bad} ({high}) on {', '.join(self.indexes)}"
            )
            return []
        if not self.left:
            print(
                f"{len(inside)} nightlies between {good} and {bad} ({inside[0]} .. {inside[-1]}) were"
                f" not measured: the --nightlies budget ({self.wanted}) is spent; `mpsbench bisect {good}"
                f" {bad} --nightlies N` looks among them"
            )
            return []
        channel = channel_name(good)
        existing = self.suite.manifest.channel(channel)
        if existing is not None and existing.parent != good:
            raise UserError(
                f"channel {channel} exists but forks from {existing.parent}, not {good}:"
                " remove it from the manifest or bisect from another build"
            )
        names = (
            [f"{channel}@{b.id}" for b in existing.builds if low < day(b) < high]
            if existing
            else []
        )
        if names:
            print(f"reusing {len(names)} nightlies of {channel} between {good} and {bad}")
        else:
            picked = spread(inside, self.left)
            print(
                f"{len(inside)} nightlies between {good} and {bad}; adding {len(picked)} spread by date"
                f" (--nightlies {self.wanted}) on {channel}: {', '.join(picked)}"
            )
            for night in picked:
                history.add_nightly(
                    self.suite.manifest_path,
                    self.suite.timeline_path,
                    channel,
                    night,
                    indexes=self.indexes,
                    transformers=self.args.transformers,
                    transformers_index=self.args.transformers_index,
                    parent=good,
                )
            names = [f"{channel}@{night}" for night in picked]
        self.left = max(0, self.left - len(names))
        self.suite = dataclasses.replace(self.suite)
        return [fresh.Named(name, self.suite.timeline.commits[name]) for name in names]
