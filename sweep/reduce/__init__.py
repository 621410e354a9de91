"""In-stream reductions (``--keep``): what to keep, the Pareto and top-k arithmetic on the host,
the streaming reducer that merges chunks' survivors, and the merge of shards.
"""
