"""Host facts that change what is measured, recorded with every run (issues 20 and 33).

A macOS update ships a new MPSGraph and Metal, which is exactly what changes mps speed and results
(pytorch#187280, #197796; macOS 14.4 broke torch 2.2: pytorch#122016), and a laptop on battery throttles.
Kept in the machine entry, either would start a new graph; recorded here, they show as their own series
beside the timings of the same runs, so a jump that came with an OS update is told from one that came with
torch. Elsewhere (not macOS) each skips with the reason.
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

    def track_mpsgraph_version(self):
        """MetalPerformanceShadersGraph's bundle version as one number (as the macOS version)."""
        return _framework("MetalPerformanceShadersGraph")

    track_mpsgraph_version.unit = "framework version"

    def track_metal_version(self):
        """Metal's bundle version as one number: 366.14 -> 366.14."""
        return _framework("Metal")

    track_metal_version.unit = "framework version"

    def track_on_battery(self):
        """1 when the run drew on the battery (a Mac throttles then), 0 on AC power."""
        battery = host.on_battery()
        if battery is None:
            raise suite.SkipNotImplemented(
                "the OS reports no power source here (pmset -g batt is macOS's)"
            )
        return int(battery)

    track_on_battery.unit = "on battery"


def _framework(name):
    if host.macos_version() is None:
        raise suite.SkipNotImplemented(f"not macOS: {name} is Apple's")
    version = host.framework_version(name)
    if version is None:
        raise suite.SkipNotImplemented(
            f"{name}.framework has no readable version under {host.FRAMEWORKS}"
        )
    return host.version_number(version)
