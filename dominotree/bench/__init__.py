"""The benchmark harness: ``python -m dominotree bench`` (``cli``: ``variants``, ``run``, ``summary``,
``report``, ``ablation``), machine facts (``machine``), ``bench-build`` (``build``), the verify-cost profiler for the
adaptive budgets (``cost``, ``python -m dominotree profile-cost``), prompt sets and the paper's
datasets (``datasets``), paired-bootstrap statistics (``stats``) and figures (``figures``)."""
