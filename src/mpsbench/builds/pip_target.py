"""pip under a target platform's markers: ``--platform`` alone gives macOS the CUDA torch."""

from __future__ import annotations

import runpy
import sys


def main(platform: str, python: str, *pip_args: str) -> None:
    from pip._vendor.packaging import markers

    system = "Darwin" if platform.startswith("macos") else "Linux"
    version = f"3.{python[3:]}"  # "cp310" -> "3.10"
    target = {
        "sys_platform": system.lower(),
        "platform_system": system,
        "platform_machine": platform.split("-")[1],  # macos-arm64, linux-x86_64-cpu
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
