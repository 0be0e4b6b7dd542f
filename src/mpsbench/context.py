"""The suite a command works on, built once at the command's edge and passed down.

asv.conf.json, the manifest and the timeline are each read once, when first asked for (a command
that needs no config works without one); every folder a command uses is derived here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from mpsbench.builds import history
from mpsbench.builds import manifest as mf
from mpsbench.builds import timeline as tl
from mpsbench.core import asvconf


@dataclass
class Suite:
    """asv.conf.json, the manifest and the timeline of one command, with every folder they imply."""

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
        """Each build's timeline commit: objects written, no branch moved."""
        return tl.compute(self.manifest, self.timeline_path)

    def generate(self, force: bool = False, sync: bool = True) -> tl.Generated:
        """Write the timeline, move its branches, and (``sync``) set asv.conf.json's branches."""
        generated = self.__dict__["timeline"] = tl.generate(
            self.manifest, self.timeline_path, force=force
        )
        if sync:
            history.sync_branches(
                generated, self.timeline_path, self.conf if self.config_path.is_file() else None
            )
        return generated

    def hashfile(self, python: str) -> Path:
        """The HASHFILE of the default timeline's builds for ``python``, beside the timeline;
        absolute, as asv resolves it from the config's folder."""
        return self.timeline_path.resolve().parent / f"default-py{python}.txt"

    def name(self, ref: str) -> str:
        """CHANNEL@ID of the build ``ref`` names (CHANNEL@ID, a tag, a timeline hash or prefix)."""
        return history.resolve_ref(self.manifest, self.timeline, ref)[0]

    def upstream_range(self, old: str, new: str) -> str:
        """The PyTorch commit range between two builds, as a line with a compare link."""
        return history.upstream_range(self.manifest, self.timeline, old, new)

    @property
    def reader(self) -> tl.Reader:
        """The builds of the timeline asv.conf.json walks, read from its commits."""
        return tl.Reader(self.conf.repo)
