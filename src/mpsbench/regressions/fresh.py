"""Measure builds afresh, one process per build and round, never into the recorded results.

``asv continuous`` and ``asv find`` overwrite recorded results, and an ``asv run`` per round spends most of its time
starting processes: compare and bisect discover the suite once with asv (``just-discover``, into a scratch
folder; it also makes the asv environment), then measure each build through its own build server (servers.py), rounds
interleaved across builds, until the caller has decided (docs/explanation/the-rule.md, "How they measure").
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from mpsbench.builds import history, machine, timeline
from mpsbench.builds import manifest as mf
from mpsbench.core import asv, asvconf, errors, files, progress, settings
from mpsbench.regressions import rule, servers, verdict

log = progress.logger(__name__)
# A command that has not answered in this long says undecided (exit 3) instead: on a loaded machine a
# bisect that went on for 25 minutes helped nobody. It stops before a look it cannot reach in time, never after one.
TIME_BUDGET_MINUTES = 20.0
WORKDIR = Path(
    ".asv/fresh"
)  # in the suite: the derived config and its asv environment, kept between commands
# samples in each process: the step rows' own minimum repeat; processes, not samples, carry the spread that decides
SAMPLES = 10
# A cpu row's process: one step a sample (settings.SINGLE_STEPS), at least SAMPLES, then more up to 200 or 1 s, so that
# its fastest sample is a step the scheduler spared: with 20 steps a sample a loaded machine spared almost none and a
# 1.24x change drowned (docs/explanation/the-rule.md, "A cpu row's samples"). A slow step (a second or more) still takes 10.
CPU_REPEAT = (SAMPLES, 200, 1.0)
# How a round's fresh process is made, per device (docs/explanation/loop.md, the A/A tables in docs/evidence/loop.md):
# forked from one warm parent per build where its A/A matched fresh interpreters' (cuda); spawned where forking changed
# what a row measures (the loaded cpu: identical builds 14-37% apart) or is unsafe (mps: a process that loaded Metal
# must not fork), and wherever the platform has no fork.
FORKED_DEVICES = frozenset({"cuda"})
# fork or spawn for every device: for measuring the choice itself (an A/A per way), not for everyday use
ROUND_PROCESS = "MPSBENCH_ROUND_PROCESS"


@dataclass(frozen=True)
class Named:
    name: str  # CHANNEL@ID
    commit: str  # its timeline commit


def name_builds(
    refs: list[str], manifest_path: Path, timeline_path: Path
) -> tuple[mf.Manifest, timeline.Generated, list[Named]]:
    """Resolve CHANNEL@ID, timeline hashes (prefixes) and tags; writes the timeline's objects and refs."""
    manifest = mf.load(manifest_path)
    generated = timeline.generate(manifest, timeline_path)
    found = []
    for ref in refs:
        try:
            name = history.resolve_ref(manifest, generated, ref)[0]
        except errors.UserError as exc:  # an unknown name, said with the ref
            raise errors.UserError(f"unknown build {ref!r}: {exc}") from None
        found.append(Named(name, generated.commits[name]))
    return manifest, generated, found


def lineage(manifest: mf.Manifest, name: str) -> list[str]:
    """Every build from the root of ``name``'s channel family to ``name`` itself, oldest first."""
    channel_name, _, build_id = name.partition("@")
    channel = manifest.channel(channel_name)
    assert channel is not None  # name came from name_builds
    ids = [build.id for build in channel.builds]
    own = [f"{channel_name}@{i}" for i in ids[: ids.index(build_id) + 1]]
    return (lineage(manifest, channel.parent) if channel.parent else []) + own


@dataclass(frozen=True)
class Options:
    """What compare and bisect measure with, typed at the command's edge (cli.py declares the options)."""

    bench: str  # a regex naming ONE combination
    min_rounds: int
    max_rounds: int
    manifest: Path
    timeline: Path
    machine: str | None = None  # None: mpsbench machine's
    log: Path | None = None
    threads: int | None = None  # None: torch's default
    suite_root: Path | None = None  # tests: a stand-in suite
    minutes: float = TIME_BUDGET_MINUTES  # the whole command's wall-clock budget (--time-budget)

    @cached_property
    def conf(self) -> asvconf.AsvConf:
        """The suite's asv.conf.json, read once for the command: its checks and its session share
        it."""
        return asvconf.load((self.suite_root or asvconf.ROOT) / asvconf.CONFIG)


class Session:
    """Fresh processes of one benchmark combination for chosen builds (options checked by compare.check)."""

    def __init__(self, args: Options, builds: list[Named]) -> None:
        root = self.root = args.suite_root or asvconf.ROOT
        conf = args.conf
        self.benchmarks = conf.benchmarks
        self.timeline = args.timeline.resolve()
        self.thresholds = conf.thresholds
        self.bench, self.log, self.min_rounds, self.max_rounds = (
            args.bench,
            args.log,
            args.min_rounds,
            args.max_rounds,
        )
        self.minutes, self.deadline = args.minutes, time.monotonic() + args.minutes * 60
        self.machine = args.machine or machine.write()[0]
        # asv hands its environment to the benchmark processes: OMP_NUM_THREADS sizes torch's intra-op pool, for both
        # builds alike; None keeps torch's default, as recorded runs have it
        self.env = dict(
            os.environ, **({} if args.threads is None else {"OMP_NUM_THREADS": str(args.threads)})
        )
        # what else would decide an undecided comparison, in its verdict
        self.quieter = verdict.QUIETER + (
            "" if args.threads else " or, for a cpu row on a busy machine, --threads 1"
        )
        self._default_sigterm: object = None
        self.key: str | None = (
            None  # the benchmark's name, once check_bench (always first) has checked the regex
        )
        self.index = -1  # the combination's position among the benchmark's parameter sets
        self.combination = ""
        self._servers: dict[
            str, servers.Server
        ] = {}  # by build name: started once per command (rounds)
        self.cpu_row = False  # check_bench tells: sampled one step at a time, its next process not started ahead
        self.mode = (
            servers.SPAWN
        )  # check_bench tells: how each round's process is made (round_process)
        self.samples: dict[
            str, int
        ] = {}  # by build name: the samples this pass's processes took (rounds)
        self.repeat: int | tuple[int, int, float] = SAMPLES  # check_bench tells: asv's -a repeat
        self._reader = timeline.Reader(self.timeline)
        self.scratch = Path(tempfile.mkdtemp(prefix="mpsbench-fresh-"))
        self.env[asv.RUN_BUILDS] = str(
            self.scratch / "hashes"
        )  # asv installs no build but the one check_bench names
        channels = sorted(
            {build.name.partition("@")[0] for build in builds}
        )  # asv wants branches; HASHFILE needs none
        try:  # __exit__ removes the scratch folder only once the session is entered: a failure here must do it itself
            self.config = conf.derive(
                (root / WORKDIR).resolve(), self.timeline, channels, self.scratch / "results"
            )
        except BaseException:
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise

    @property
    def factor(self) -> float:
        """The combination's regression factor: the one the site and alerts judge its row by (rule.py)."""
        assert self.key is not None  # check_bench (always first) named the combination
        return rule.factor(self.thresholds, self.combination)

    def __enter__(self) -> Session:
        # a SIGTERM (a CI job cancelled) becomes SystemExit, with the shell's status for a process ended by it, so that
        # the finally blocks stop asv and the servers and remove the scratch folder, as on any other way out
        self._default_sigterm = signal.signal(
            signal.SIGTERM, lambda signum, _: sys.exit(128 + signum)
        )
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            for server in self._servers.values():
                server.stop()
            for server in self._servers.values():  # --log: what each server ran and printed
                self._keep(
                    server.command,
                    server.log.read_text(errors="replace") if server.log.is_file() else "",
                )
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)
            signal.signal(signal.SIGTERM, self._default_sigterm)  # type: ignore[arg-type]

    def _keep(self, command: list[str], output: str) -> None:
        if self.log is not None:
            with open(self.log, "a") as handle:
                handle.write(f"$ {' '.join(command)}\n{output}\n")

    def check_bench(self, commit: str) -> str:
        """Discover the suite once with asv and insist that ``bench`` names exactly one combination; returns it."""
        hashfile = self.scratch / "hashes"
        hashfile.write_text(commit + "\n")
        command = [
            sys.executable,
            "-m",
            "asv",
            "run",
            "--config",
            str(self.config),
            "--machine",
            self.machine,
            "--bench",
            "just-discover",
            "--record-samples",
            "--show-stderr",
            f"HASHFILE:{hashfile}",
        ]
        # Commands in one checkout share WORKDIR's asv environment, and asv installs the build into it: one at a time.
        # The servers after it read the build's own folder, so only this step waits.
        env_lock = self.root / WORKDIR / "env"
        env_lock.parent.mkdir(parents=True, exist_ok=True)
        said = f"waiting for another compare or bisect in {self.root} to leave asv's environment"
        with files.lock(env_lock, waiting=lambda: log.info(said)):
            done = subprocess.run(command, capture_output=True, text=True, env=self.env)
        self._keep(command, done.stdout + done.stderr)
        listing = self.scratch / "results" / "benchmarks.json"
        if done.returncode != 0 or not listing.is_file():
            printed = (done.stdout + done.stderr).strip().splitlines()
            # install_build's own one-line reason, where asv printed it, says more than asv's closing lines; the first
            # one: after it asv tries the newest build of each branch, which install_build refuses (asv.RUN_BUILDS)
            tail = [line.strip() for line in printed if "mpsbench: error:" in line][:1] or printed[
                -3:
            ]
            raise errors.UserError(
                f"asv could not discover the suite for {commit[:12]}: {' | '.join(tail)}"
                + ("" if self.log else " (--log FILE keeps asv's whole output)")
            )
        from asv.benchmarks import Benchmarks
        from asv.config import Config

        listed = [
            entry for key, entry in json.loads(listing.read_text()).items() if key != "version"
        ]
        found = Benchmarks(Config.load(str(self.config)), listed, regex=self.bench)
        matches = [
            (key, index, _values(found[key]["params"], index))
            for key, indexes in found.benchmark_selection.items()
            if key in found
            for index in (indexes if indexes is not None else [-1])
        ]
        one_combination(
            self.bench,
            [asv.combination(key, values) for key, _, values in matches],
            ", e.g. \"Training.time_step\\('cpu', 'mlp', 32\\)\"",
        )
        self.key, self.index, values = matches[0]
        self.combination = asv.combination(self.key, values)
        # A cpu row is timed on the cores that the next round's process would take importing torch: start the next
        # process ahead only for a GPU row (tests/test_servers.py's real cpu row on a loaded machine: each process's fastest
        # sample 5.5-13.1 ms with the next process started ahead, 5.5-6.1 ms without).
        names = list(found[self.key].get("param_names", []))
        device = values[names.index("device")].strip("'") if "device" in names else None
        self.cpu_row = device == "cpu"
        self.mode = round_process(device, self.env)
        if self.cpu_row:
            self.env[settings.SINGLE_STEPS] = "1"
        self.repeat = CPU_REPEAT if self.cpu_row or self.mode == servers.FORK else SAMPLES
        return self.combination

    def rounds(
        self, builds: list[Named], most: int | None = None
    ) -> Generator[dict[str, list[float]], None, None]:
        """Up to ``most`` rounds (``max_rounds`` unless given: compare's extra looks go past it) of one process per
        build; after each, every build's process times so far.

        A process time is its fastest sample (SAMPLES of them; CPU_REPEAT for a cpu row: asv's ``-a repeat``). Round r
        of every build runs before round r+1 of any, in asv's order (reversed every other round), so drift hits all
        builds alike. A build's server serves every later pass of the command (bisect's GOOD and BAD); leaving the
        session stops them all.
        """
        # what `asv run -a` would hand each process
        params = {"repeat": self.repeat, "rounds": self.max_rounds}
        running = self._servers_of(builds)
        times: dict[str, list[float]] = {build.name: [] for build in builds}
        self.samples = {build.name: 0 for build in builds}
        last = most or self.max_rounds
        for number in range(1, last + 1):
            order = list(zip(builds, running))
            for build, server in order if number % 2 else order[::-1]:  # as asv: A B, B A, ...
                said = server.round(number, params, ahead=not self.cpu_row and number < last)
                times[build.name].append(self._fastest(build, server, said, number))
            yield {name: list(values) for name, values in times.items()}

    def _servers_of(self, builds: list[Named]) -> list[servers.Server]:
        """Each build's server, started (all new ones at once, then waited for) unless it serves already."""
        assert (
            self.key is not None
        )  # check_bench came first: it made the environment the servers run in
        python = asv.environment_python(self.config)
        benchmark_id = self.key if self.index < 0 else f"{self.key}-{self.index}"
        new = []
        for build in (build for build in builds if build.name not in self._servers):
            placed = servers.place(
                python, self._reader.build(build.commit), self.root / "src", self.scratch, self.env
            )
            new.append(
                servers.Server(
                    python, placed, self.benchmarks, benchmark_id, self.env, self.scratch, self.mode
                )
            )
            self._servers[build.name] = new[-1]
        for server in new:  # every new build's first process at once: their imports overlap
            server.start()
        for server in new:
            server.ready()
        return [self._servers[build.name] for build in builds]

    def _fastest(
        self, build: Named, server: servers.Server, said: dict[str, object], number: int
    ) -> float:
        result = said.get("result")
        samples = result.get("samples") if isinstance(result, dict) else None
        if said.get("rc") != 0 or not isinstance(samples, list) or not samples:
            why = (
                "timed out"
                if said.get("rc") == servers.TIMED_OUT
                else f"exit status {said.get('rc')}"
                if said.get("rc") != 0
                else "skipped (n/a)"
            )
            raise errors.UserError(
                f"{self.combination} gave no value in round {number} for {build.name} ({why}):"
                f" {server.tail()}"
            )
        self.samples[build.name] += len(samples)
        return min(float(sample) for sample in samples)


def round_process(device: str | None, env: dict[str, str]) -> str:
    """servers.FORK or servers.SPAWN for a row on ``device`` (None: a row without one), ROUND_PROCESS overriding."""
    asked = env.get(ROUND_PROCESS, "")
    if asked and asked not in (servers.FORK, servers.SPAWN):
        raise errors.UserError(
            f"{ROUND_PROCESS}={asked!r}: give {servers.FORK} or {servers.SPAWN}, or leave it unset"
        )
    if not hasattr(os, "fork") or sys.platform == "darwin":
        if asked == servers.FORK:
            raise errors.UserError(
                f"{ROUND_PROCESS}=fork: this platform ({sys.platform}) runs every round spawned; leave"
                f" it unset or give {servers.SPAWN}"
            )
        return servers.SPAWN
    return asked or (servers.FORK if device in FORKED_DEVICES else servers.SPAWN)


def one_combination(bench: str, found: list[str], hint: str) -> None:
    """Refuse a ``-b`` regex that names no or several combinations (``found``), listing the first three."""
    if len(found) != 1:
        shown = f": {', '.join(found[:3])}{', ...' if len(found) > 3 else ''}" if found else ""
        raise errors.UserError(
            f"-b {bench!r} matches {len(found)} benchmark combinations{shown}; give a regex that matches"
            f" exactly one{hint}"
        )


def _values(params: list[list[str]], index: int) -> tuple[str, ...]:
    """A benchmark's ``index``-th parameter set in asv's order, each value its repr; () for one without parameters."""
    return list(itertools.product(*params))[index] if index >= 0 else ()
