"""Host facts that change what is measured, recorded with every run (issue 20).

A macOS update ships a new MPSGraph, which is exactly what changes mps speed
(pytorch#187280, #197796), and a laptop on battery throttles. Kept in the
machine entry, either would start a new graph; recorded here, they show as
their own series beside the timings of the same runs. Elsewhere (not macOS)
both skip with the reason.
"""

from mpsbench.measure import host, suite


class Host:
    """The macOS version and the power source of the run."""

    version = "1"

    def track_macos_version(self):
        """macOS's version as one number: 15.1.1 -> 15.0101 (major + minor/100 + patch/10000)."""
        version = host.macos_version()
        if version is None:
            raise suite.SkipNotImplemented("not macOS: the OS version is in the machine entry")
        return host.version_number(version)

    track_macos_version.unit = "macOS version"

    def track_on_battery(self):
        """1 when the run drew on the battery (a Mac throttles then), 0 on AC power."""
        battery = host.on_battery()
        if battery is None:
            raise suite.SkipNotImplemented("the OS reports no power source here (pmset -g batt is macOS's)")
        return int(battery)

    track_on_battery.unit = "on battery"
