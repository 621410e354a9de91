"""The vectorized engine: a job's flat index space in chunks through ``jit(vmap(kernel))``.

:mod:`~sweep.engine.evaluate` wires one strategy to the kernels; :mod:`~sweep.engine.index`
cuts the index space; :mod:`~sweep.engine.program` builds a chunk's program with the
:mod:`~sweep.engine.filters` of a reduction; :mod:`~sweep.engine.survivors` brings the
candidates to the host; :mod:`~sweep.engine.compiled` keeps traced programs across runs;
:mod:`~sweep.engine.backend` and :mod:`~sweep.engine.devices` say where chunks run;
:mod:`~sweep.engine.run` streams a plan to a dataset folder, :mod:`~sweep.engine.cluster`
through Dask.
"""
