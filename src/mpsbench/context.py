"""The suite a command works on: asv.conf.json, the manifest and the timeline, each read once."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from mpsbench.builds import disk as dk
from mpsbench.builds import history, install_build
from mpsbench.builds import manifest as mf
from mpsbench.builds import timeline as tl
from mpsbench.core import asv, asvconf
from mpsbench.results import record, watch


@dataclass
class Suite:
    config_path: Path = asvconf.CONFIG
    manifest_path: Path = history.MANIFEST
    timeline_path: Path = history.TIMELINE

    @cached_property
    def conf(self) -> asvconf.AsvConf:
        return asvconf.load(self.config_path)

    @cached_property
    def manifest(self) -> mf.Manifest:
        return mf.load(self.manifest_path)

    @cached_property
    def timeline(self) -> tl.Generated:
        return tl.compute(self.manifest, self.timeline_path)

    def generate(self, force: bool = False, sync: bool = True) -> tl.Generated:
        """Write the timeline and move its branches (``sync``: also asv.conf.json's)."""
        generated = self.__dict__["timeline"] = tl.generate(
            self.manifest, self.timeline_path, force=force
        )
        if sync:
            conf = self.conf if self.config_path.is_file() else None
            history.sync_branches(generated, self.timeline_path, conf)
        return generated

    def name(self, ref: str) -> str:
        """CHANNEL@ID of the build a tag, timeline hash or CHANNEL@ID names."""
        return history.resolve_ref(self.manifest, self.timeline, ref)[0]

    def upstream_range(self, old: str, new: str) -> str:
        return history.upstream_range(self.manifest, self.timeline, old, new)

    @property
    def reader(self) -> tl.Reader:
        return tl.Reader(self.conf.repo)

    def disk(self, run: asv.RunArgs) -> watch.Disk:
        """The run's builds, newest first, each with what installing it costs here."""
        reader, builds = self.reader, {}
        for commit in record.builds(self.conf, run):
            build = reader.build(commit)
            name = (
                f"{build['channel']}@{build['id']} (torch {build.get('torch_version', '?')})"
                if build
                else commit[:8]
            )
            builds[commit] = watch.Build(name=name, **dk.facts(build, run.python)._asdict())
        return watch.Disk(install_build.cache_root(), builds)
