"""End-to-end benchmarks of beit_mm next to its peers (``tools/analysis/benchmark.py`` is the CLI): the parts
(``parts.py``: models and steps), measuring them (``measure.py``: timing, memory, split, FLOPs) and the Markdown
(``report.py``: with MFU, ``mfu.py``). Imported on their own (they need mmpretrain and mmseg)."""
