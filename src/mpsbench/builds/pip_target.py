"""pip under a target platform's markers: ``--platform`` alone gives macOS the CUDA torch."""

from __future__ import annotations

import runpy
import sys

_LINUX = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64"}
PLATFORM_MARKERS = {  # wheels.PLATFORMS; another platform is a KeyError, not a guess
    "macos-arm64": {
        "sys_platform": "darwin",
        "platform_system": "Darwin",
        "platform_machine": "arm64",
    },
    "linux-x86_64-cuda": _LINUX,
    "linux-x86_64-cpu": _LINUX,
}


def main(platform: str, python: str, *pip_args: str) -> None:
    from pip._vendor.packaging import markers

    version = f"3.{python[3:]}"  # "cp310" -> "3.10"
    target = {
        **PLATFORM_MARKERS[platform],
        "os_name": "posix",
        "python_version": version,
        "python_full_version": f"{version}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "implementation_version": f"{version}.0",
        "platform_release": "",
        "platform_version": "",
    }
    host = markers.default_environment
    markers.default_environment = lambda: {**host(), **target}
    sys.argv = ["pip", *pip_args]
    runpy.run_module("pip", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
