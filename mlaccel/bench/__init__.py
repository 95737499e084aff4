"""Benchmarks: ``python -m mlaccel.bench <name> [options]``.

Module ``mlaccel.bench.<name>`` defines ``main(argv)`` returning an exit
code. Each measures stock and mlaccel side by side in one run and ends with
one line ``RESULT key=value ...``.
"""
