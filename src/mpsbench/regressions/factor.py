"""The one regression factor every command uses, read from asv.conf.json.

asv's publish reads ``regressions_thresholds`` while continuous and compare take ``--factor``: deriving
the factor from the thresholds' default entry keeps the site, the CLI and the reports in agreement.
For shell scripts: ``asv continuous --factor "$(python -m mpsbench.regressions.factor)" A B``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from mpsbench import command
from mpsbench.regressions import rule

CONFIG = Path("asv.conf.json")  # asv's own default: the config in the working directory


class FactorError(command.UserError):
    """asv.conf.json is missing, unreadable or holds a threshold that is not a number."""


def read_config(path: Path = CONFIG) -> dict[str, object]:
    """asv.conf.json as a dict, parsed by asv's own loader (JSON5: comments, trailing commas)."""
    from asv import util

    try:
        data = util.load_json(str(path), js_comments=True)
    except OSError as exc:
        raise FactorError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise FactorError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise FactorError(f"{path} must hold a JSON object")
    return data


def thresholds(config: Path = CONFIG) -> dict[str, float]:
    """The config's ``regressions_thresholds``: a fraction >= 0 per benchmark regex, each checked."""
    found = read_config(config).get("regressions_thresholds", {})
    if not isinstance(found, dict):
        raise FactorError(f"{config}: regressions_thresholds must map regexes to fractions")
    for regex, value in found.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
            raise FactorError(f"{config}: regressions_thresholds[{regex!r}] must be a fraction >= 0, got {value!r}")
    return {str(regex): float(value) for regex, value in found.items()}


def regression_factor(config: Path = CONFIG, entry: str = "") -> float:
    """The factor ``entry`` is judged by (rule.factor): asv publish's fraction (0.05) as asv continuous's --factor (1.05)."""
    return rule.factor(thresholds(config), entry)


def main(argv: list[str] | None = None) -> int:
    parser = command.OneLineParser(prog="python -m mpsbench.regressions.factor", description=__doc__.split("\n")[0])
    parser.add_argument("config", nargs="?", type=Path, default=CONFIG, help=f"the asv configuration (default {CONFIG})")
    parser.set_defaults(func=lambda args: print(f"{regression_factor(args.config):g}") or 0)
    return command.run(parser, argv)


if __name__ == "__main__":
    sys.exit(main())
