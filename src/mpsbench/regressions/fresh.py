"""Builds measured afresh, never into the recorded results (docs/explanation/the-rule.md)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from pathlib import Path

from mpsbench.builds import machine, timeline
from mpsbench.builds import manifest as mf
from mpsbench.context import Suite
from mpsbench.core import asv, errors, files, progress, settings
from mpsbench.measure import devices, preselect
from mpsbench.regressions import rule, servers, verdict

log = progress.logger(__name__)
TIME_BUDGET_MINUTES = 20  # then undecided (exit 3); an int, so help says "default 20"
WORKDIR = Path(".asv/fresh")
SAMPLES = 10  # processes, not samples, carry the spread that decides
REPEAT_A_SECOND = (SAMPLES, 200, 1.0)  # a cpu row's and a forked round's (docs/explanation/loop.md)
FORKED_DEVICES = frozenset({"cuda"})  # where forked rounds' A/A matched spawned (loop.md)
ROUND_PROCESS = "MPSBENCH_ROUND_PROCESS"
DISCOVERED = "mpsbench-discovered"  # asv's environment's once whole (bin/python comes first)


@dataclass(frozen=True)
class Named:
    name: str  # CHANNEL@ID
    commit: str


def name_builds(
    refs: list[str], args: Options, roles: str = ""
) -> tuple[list[Named], preselect.Row]:
    """Check the options (rounds, round process, benchmark, its device), then name the builds
    ``refs`` give, distinct where ``roles`` says, and the combination ``-b`` chooses; writes the
    timeline."""
    if args.min_rounds > args.max_rounds:
        raise errors.UserError(
            f"--min-rounds {args.min_rounds} is more than --max-rounds {args.max_rounds}"
        )
    round_process(None, os.environ)  # refuses a bad MPSBENCH_ROUND_PROCESS
    # params never depend on the build: asv's discovery in it would find the same
    rows = {row.name: row for row in preselect.rows(preselect.discover(args.suite.conf.benchmarks))}
    found = asv.matching(rows, [args.bench])
    if len(found) != 1:
        shown = f": {', '.join(found[:3])}{', ...' if len(found) > 3 else ''}" if found else ""
        raise errors.UserError(
            f"-b {args.bench!r} matches {len(found)} benchmark combinations{shown}; give a regex"
            " that matches exactly one (mpsbench preselect --list lists them)"
        )
    chosen = rows[found[0]]
    # else every process would skip (no torch probe: it would hold a GPU context)
    if chosen.device is not None and (absent := devices.absent_reason(chosen.device)):
        raise errors.UserError(
            f"-b {args.bench!r} names {chosen.name}, which cannot run here: {absent}; the devices"
            f" here: {', '.join(filter(devices.present, devices.NAMES))}"
        )
    generated = args.suite.generate(sync=False)
    named = []
    for ref in refs:
        try:
            name = args.suite.name(ref)
        except errors.UserError as exc:
            raise errors.UserError(f"unknown build {ref!r}: {exc}") from None
        named.append(Named(name, generated.commits[name]))
    if roles and named[0].name == named[-1].name:
        raise errors.UserError(f"{roles} are the same build ({named[0].name}): name two builds")
    return named, chosen


def lineage(manifest: mf.Manifest, name: str) -> list[str]:
    """The builds from ``name``'s channel root to it, oldest first."""
    channel = manifest.channel(name.partition("@")[0])
    assert channel is not None
    own = [f"{channel.name}@{build.id}" for build in channel.builds]
    return (lineage(manifest, channel.parent) if channel.parent else []) + own[
        : own.index(name) + 1
    ]


def log_output(log: Path | None, command: list[str], output: str) -> None:
    if log is not None:
        with open(log, "a") as handle:
            handle.write(f"$ {' '.join(command)}\n{output}\n")


def run_logged(
    command: list[str], env: dict[str, str], log: Path | None, timeout: float | None = None
) -> tuple[str, int]:
    """A process's output and exit status (-1: timed out), logged."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
        output, rc = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired:
        output, rc = f"timed out after {timeout:.0f} s", -1
    log_output(log, command, output)
    return output, rc


@dataclass(frozen=True)
class Options:
    bench: str
    suite: Suite
    min_rounds: int = verdict.MIN_ROUNDS
    max_rounds: int = verdict.MAX_ROUNDS
    machine: str | None = None
    log: Path | None = None
    threads: int | None = None
    minutes: float = TIME_BUDGET_MINUTES


class Session:
    """Fresh processes of one combination, ``chosen`` by name_builds."""

    def __init__(self, args: Options, builds: list[Named], chosen: preselect.Row) -> None:
        self.combination, self.benchmark_id = chosen.name, chosen.benchmark_id
        conf = args.suite.conf
        self.root, self.benchmarks = conf.root, conf.benchmarks
        self.factor = rule.factor(conf.thresholds, chosen.name)
        self.timeline, self.log = args.suite.timeline_path.resolve(), args.log
        self.min_rounds, self.max_rounds = args.min_rounds, args.max_rounds
        self.minutes, self.deadline = args.minutes, time.monotonic() + args.minutes * 60
        self.machine = args.machine or machine.write()[0]
        self.env, self.quieter = dict(os.environ), verdict.QUIETER
        if args.threads:
            self.env["OMP_NUM_THREADS"] = str(args.threads)
        else:
            self.quieter += " or, for a cpu row on a busy machine, --threads 1"
        # no process starts ahead: it would take a cpu row's cores
        self.cpu_row = chosen.device == "cpu"
        self.mode = round_process(chosen.device, self.env)
        if self.cpu_row:
            self.env[settings.SINGLE_STEPS] = "1"
        self.repeat: int | tuple[int, int, float] = (
            REPEAT_A_SECOND if self.cpu_row or self.mode == servers.FORK else SAMPLES
        )
        self._servers: dict[str, servers.Server] = {}  # by build
        self.samples: dict[str, int] = {}  # this pass's
        self.scratch = Path(tempfile.mkdtemp(prefix="mpsbench-fresh-"))
        self.env[asv.RUN_BUILDS] = str(self.scratch / "hashes")
        channels = sorted({build.name.partition("@")[0] for build in builds})
        try:
            self.config = conf.derive(
                (self.root / WORKDIR).resolve(), self.timeline, channels, self.scratch / "results"
            )
        except BaseException:
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise

    def __enter__(self) -> Session:
        # SIGTERM (a cancelled CI job) stops servers
        self._default_sigterm = signal.signal(
            signal.SIGTERM, lambda signum, _: sys.exit(128 + signum)
        )
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            for server in self._servers.values():
                server.stop()
            for server in self._servers.values():
                log_output(self.log, server.command, server.log.read_text(errors="replace"))
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)
            signal.signal(signal.SIGTERM, self._default_sigterm)

    def _marker(self) -> Path:
        """What a discovery that ended well leaves in asv's environment (UserError: none yet)."""
        return asv.environment_python(self.config).parents[1] / DISCOVERED

    def _discovered(self) -> bool:
        with contextlib.suppress(errors.UserError):  # no environment yet
            return self._marker().is_file()
        return False

    def check_bench(self, commit: str) -> str:
        """The combination, once asv's discovery ended well in its environment: it makes that,
        installing ``commit``, and says why it cannot."""
        if self._discovered():  # no lock: it stays whole
            return self.combination
        options = ["--bench", "just-discover", "--show-stderr"]
        command = asv.run_command(
            self.config, self.machine, options, [commit], self.scratch / "hashes"
        )
        said = f"waiting for another compare or bisect in {self.root}"
        with files.lock(self.config.parent / "env", wait=lambda: log.info(said)):
            if self._discovered():  # another session made it while this one waited
                return self.combination
            printed, rc = run_logged(command, self.env, self.log)
            if rc != 0 or not (self.scratch / "results" / "benchmarks.json").is_file():
                lines = printed.strip().splitlines()
                tail = [line.strip() for line in lines if "mpsbench: error:" in line][:1]
                raise errors.UserError(
                    f"asv could not discover the suite for {commit[:12]}:"
                    f" {' | '.join(tail or lines[-3:])}"
                    + ("" if self.log else " (--log FILE keeps asv's whole output)")
                )
            self._marker().touch()
        return self.combination

    def server(self, build: Named) -> servers.Server:
        python = asv.environment_python(self.config)
        placed = servers.place(
            python,
            timeline.Reader(self.timeline).build(build.commit),
            self.root / "src",
            self.scratch,
            self.env,
        )
        return servers.Server(
            python, placed, self.benchmarks, self.benchmark_id, self.env, self.scratch, self.mode
        )

    def rounds(
        self, builds: list[Named], most: int
    ) -> Generator[dict[str, list[float]], None, None]:
        """Up to ``most`` rounds, yielding each build's times so far; the order alternates (drift)."""
        new = {
            build.name: self.server(build) for build in builds if build.name not in self._servers
        }
        self._servers |= new
        for server in new.values():  # all start at once
            server.start()
        for server in new.values():
            server.ready()
        params = {"repeat": self.repeat, "rounds": self.max_rounds}  # asv run's -a
        times: dict[str, list[float]] = {build.name: [] for build in builds}
        self.samples = {build.name: 0 for build in builds}
        for number in range(1, most + 1):
            for build in builds if number % 2 else builds[::-1]:
                server = self._servers[build.name]
                said = server.round(number, params, ahead=not self.cpu_row and number < most)
                result, rc = said.get("result"), said["rc"]
                samples = result.get("samples") if isinstance(result, dict) else None
                if rc != 0 or not isinstance(samples, list) or not samples:
                    why = {0: "skipped (n/a)", servers.TIMED_OUT: "timed out"}.get(
                        rc, f"exit status {rc}"
                    )
                    raise errors.UserError(
                        f"{self.combination} gave no value in round {number} for {build.name}"
                        f" ({why}): {server.tail()}"
                    )
                self.samples[build.name] += len(samples)
                times[build.name].append(min(map(float, samples)))
            yield {name: list(values) for name, values in times.items()}


def round_process(device: str | None, env: Mapping[str, str]) -> str:
    """servers.FORK or SPAWN for a row on ``device``; ROUND_PROCESS overrides."""
    asked = env.get(ROUND_PROCESS, "")
    if asked not in ("", servers.FORK, servers.SPAWN):
        raise errors.UserError(
            f"{ROUND_PROCESS}={asked!r}: give {servers.FORK} or {servers.SPAWN}, or leave it unset"
        )
    if not hasattr(os, "fork") or sys.platform == "darwin":
        if asked == servers.FORK:
            raise errors.UserError(
                f"{ROUND_PROCESS}=fork: this platform ({sys.platform}) runs every round spawned;"
                f" leave it unset or give {servers.SPAWN}"
            )
        return servers.SPAWN
    return asked or (servers.FORK if device in FORKED_DEVICES else servers.SPAWN)
