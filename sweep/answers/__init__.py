"""Answers from sweeps: queries over datasets (Pareto fronts, top-k, best), the ``--where``
language, co-design inverse questions, sensitivities, and plots.
"""
