"""The study machinery behind ``tools/analysis/{mim,head,transfer}_study.py`` (thin CLIs over it), tested in-process.

- :mod:`.configs`: the shipped study configs and the edits that point them at a study's data and budgets,
  ``rescale_iterations`` (every iteration-valued field moves with ``max_iters``);
- :mod:`.runs`: ``tools/train.py`` in a subprocess, resuming a cut run; the run cache (``cached``: a finished run's
  metrics with the settings that produced them, reused, never mixed with other settings);
- :mod:`.graph`: the job graph (tasks with dependencies, ``--jobs`` at a time, the critical path first);
- :mod:`.report`: mean ± std, majority-class baselines, the probe's warning and the recommendation, report text,
  probe-curve picture, ``tools/run_chain.sh``'s lines;
- :mod:`.mim`, :mod:`.heads`, :mod:`.transfer`: the three studies.

Not imported by ``import beit_mm`` (it pulls in mmseg datasets and matplotlib at use); nothing in beit_mm imports it.
"""
