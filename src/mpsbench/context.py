"""The suite a command works on, built once at the command's edge and passed down (docs/reference/layout.md).

asv.conf.json is read once, the manifest loaded once and the timeline computed once, each when first asked for
(a command that needs no config works where there is none); every folder a command uses is derived here.
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
        """Each build's timeline commit: every object written, no branch moved (:meth:`generate` moves them)."""
        return tl.compute(self.manifest, self.timeline_path)

    def generate(self, force: bool = False, sync: bool = True) -> tl.Generated:
        """Write the timeline, move its branches forward, and (``sync``) make asv.conf.json's branches the channels."""
        generated = self.__dict__["timeline"] = tl.generate(self.manifest, self.timeline_path, force=force)
        if sync:
            history.sync_branches(generated, self.timeline_path, self.conf if self.config_path.is_file() else None)
        return generated

    def hashfile(self, python: str) -> Path:
        """The file naming the default timeline's builds that asv runs under ``python`` (``asv run HASHFILE:``): beside
        the timeline, whose folder exists once :attr:`timeline` is computed; absolute, as asv reads it from the config's
        folder."""
        return self.timeline_path.resolve().parent / f"default-py{python}.txt"

    def name(self, ref: str) -> str:
        """CHANNEL@ID of the build ``ref`` names: CHANNEL@ID, a release's tag, or a timeline hash or unique prefix."""
        return history.resolve_ref(self.manifest, self.timeline, ref)[0]

    def upstream_range(self, old: str, new: str) -> str:
        """The PyTorch commit range between two builds, as a line with a compare link."""
        return history.upstream_range(self.manifest, self.timeline, old, new)

    @property
    def reader(self) -> tl.Reader:
        """The builds of the timeline asv.conf.json walks, read back from its commits (for the published site)."""
        return tl.Reader(self.conf.repo)
