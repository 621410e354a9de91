"""Plain-Python oracles the tests trust: the ParaDL equations one configuration at a time.

The benchmarks use them as their baselines (:mod:`benchmarks.bench`).
"""
