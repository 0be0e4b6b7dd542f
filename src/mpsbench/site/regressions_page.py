"""The Regressions page re-judged row by row: only the slower and the wrong stay; every verdict
in JUDGED."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from mpsbench.builds.timeline import Reader
from mpsbench.core.errors import UserError
from mpsbench.regressions import explain, rule
from mpsbench.results import recorded

JUDGED = "regressions-judged.json"
FeedKey = tuple[str, str | None, str]  # row, machine if named, commits
ATOM = "http://www.w3.org/2005/Atom"
LATEST = 20
EXPLAINED = "explain"
# regressions.json's entries, index.json, its revision_to_hash
Published = tuple[list[Any], dict[str, Any], dict[str, str]]


def graph_param(graph_path: str, key: str) -> str | None:
    found = re.search(rf"(?:^|/){key}-([^/]*)/", graph_path)
    return found.group(1) if found else None


def _published(html: Path) -> Published:
    try:
        detected = json.loads((html / "regressions.json").read_text())["regressions"]
        index = json.loads((html / "index.json").read_text())
        return detected, index, index["revision_to_hash"]
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(
            f"{html} holds no readable regressions.json and index.json: publish first ({exc})"
        ) from None


def _jump(
    published: Published, timeline: Reader, entry: list[Any], asv_jump: list[Any]
) -> dict[str, Any]:
    """A jump as JUDGED holds it; without asv's older build, the newer one's parent on its channel."""
    _, index, revision_to_hash = published
    name, graph_path, _, idx, *_ = entry
    rev_a, rev_b, before, after = asv_jump
    new = revision_to_hash[str(rev_b)]
    old = revision_to_hash[str(rev_a)] if rev_a is not None else timeline.parent(new)
    benchmark, machine = name.split("(", 1)[0], graph_param(graph_path, "machine")
    spec = index.get("benchmarks", {}).get(benchmark, {})
    params = {"machine": machine or ""}
    if idx is not None and spec.get("params"):
        values = list(itertools.product(*spec["params"]))[idx]
        params.update({f"p-{param}": value for param, value in zip(spec["param_names"], values)})
    params["commits"] = f"{old}-{new}" if old else new
    return dict(
        benchmark=name,
        machine=machine,
        unit=str(spec.get("unit", "")),
        old=old,
        new=new,
        revision=rev_b,
        before=before,
        after=after,
        graph=f"index.html#{benchmark}?{urllib.parse.urlencode(params)}",
    )


def judge_site(
    html: Path,
    results_dir: Path,
    found: recorded.Recorded,
    thresholds: dict[str, float],
    timeline: Reader,
) -> list[dict[str, Any]]:
    published = _published(html)
    detected, index, revision_to_hash = published
    rows = {row.entry: row for table in found.values.values() for row in table}
    revision_of = {commit: int(revision) for revision, commit in revision_to_hash.items()}
    several_branches = len(index.get("params", {}).get("branch", [])) > 1
    kept_entries: list[Any] = []
    judged: list[dict[str, Any]] = []
    kept_keys: dict[FeedKey, str | None] = {}
    for entry in detected:
        name, graph_path, graph_params, *_, jumps = entry
        branch = graph_param(graph_path, "branch")
        feed_machine = graph_params.get("machine")  # asv names it only where there are several
        if several_branches and branch and "branch" not in graph_params:
            graph_params["branch"] = branch  # else asv's page shows another channel
        row = rows.get(name)
        kept_jumps = []
        for asv_jump in jumps:
            jump = _jump(published, timeline, entry, asv_jump)
            rev_a, machine, old, new = asv_jump[0], jump["machine"], jump["old"], jump["new"]
            was, now = (
                found.get(machine, c, row) if machine and c and row else None for c in (old, new)
            )
            if was and now:
                verdict = rule.judge(thresholds, name, jump["unit"], was, now, branch)
            else:  # no numbers of ours: asv's word
                verdict = rule.Judgement(
                    rule.Decision.SLOWER,
                    rule.Decision.SLOWER.value,
                    rule.change_ratio(jump["before"], jump["after"]),
                    0.0,
                    "asv's step detection (no recorded values to judge)",
                )
            jump.update(
                branch=branch,
                ratio=verdict.ratio,
                verdict=verdict.label,
                reason=verdict.reason,
                threshold=verdict.threshold,
                regressed=verdict.regressed,
            )
            judged.append(jump)
            if verdict.regressed:
                if old:
                    jump["explain"] = _publish_table(html, results_dir, name, old, new)
                # a one-build jump: from its parent, as asv links it
                kept_jumps.append([revision_of.get(old, rev_a), *asv_jump[1:]])
                key = (name, feed_machine, new if rev_a is None else f"{old}-{new}")
                kept_keys[key] = (
                    None if verdict.slower else f"{verdict.label}: {name} ({verdict.reason})"
                )
        if kept_jumps:
            kept_entries.append([*entry[:-1], kept_jumps])
    (html / "regressions.json").write_text(
        json.dumps({"regressions": kept_entries}, separators=(",", ":"))
    )
    _filter_feed(html / "regressions.xml", kept_keys)
    (html / JUDGED).write_text(json.dumps(judged, indent=1) + "\n")
    return judged


def _publish_table(html: Path, results_dir: Path, name: str, old: str, new: str) -> str:
    table = explain.stored(results_dir) / explain.stored_name(name, old, new)
    if not table.is_file():
        return ""
    (html / EXPLAINED).mkdir(exist_ok=True)
    shutil.copyfile(table, html / EXPLAINED / table.name)
    return f"{EXPLAINED}/{table.name}"


def latest(html: Path, timeline: Reader) -> list[dict[str, Any]]:
    """The newest regressed jumps of JUDGED, newest first; where publish judged none, asv's own."""
    judged = _judged(html) or _asv_word(html, timeline)
    return sorted(
        (jump for jump in judged if jump["regressed"]),
        key=lambda j: (
            -j.get("revision", 0),  # none in an older JUDGED: last until a publish
            -rule.change_ratio(j["before"], j["after"]),
            j["benchmark"],
        ),
    )[:LATEST]


def _asv_word(html: Path, timeline: Reader) -> list[dict[str, Any]]:
    """Every jump of a site publish did not judge, kept on asv's word."""
    published = _published(html)
    return [
        {**_jump(published, timeline, entry, asv_jump), "verdict": "slower", "regressed": True}
        for entry in published[0]
        for asv_jump in entry[-1]
    ]


def _judged(html: Path) -> list[dict[str, Any]]:
    try:
        return list(json.loads((html / JUDGED).read_text()))
    except (OSError, ValueError):
        return []


def set_aside(html: Path) -> list[dict[str, Any]]:
    return [j for j in _judged(html) if not j.get("regressed")]


def _filter_feed(feed: Path, kept: dict[FeedKey, str | None]) -> None:
    """Keeps the entries of ``kept`` jumps, retitling the wrong results."""
    if not feed.is_file():
        return
    ET.register_namespace("", ATOM)
    tree = ET.parse(feed)
    root = tree.getroot()
    for entry in root.findall(f"{{{ATOM}}}entry"):
        title = entry.find(f"{{{ATOM}}}title")
        link = entry.find(f"{{{ATOM}}}link")
        href = link.get("href", "") if link is not None else ""
        params = urllib.parse.parse_qs(urllib.parse.urlsplit(href).fragment.partition("?")[2])
        name = (title.text or "").split(" ", 1)[-1] if title is not None else ""
        key = (name, params.get("machine", [None])[0], params.get("commits", [""])[0])
        if key not in kept:
            root.remove(entry)
        elif title is not None and kept[key] is not None:
            title.text = kept[key]
    tree.write(feed, encoding="utf-8", xml_declaration=True)
