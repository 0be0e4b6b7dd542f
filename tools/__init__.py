"""Tools that work on the suite from outside the package: calibration."""
