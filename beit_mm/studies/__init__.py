"""The study machinery behind ``tools/analysis/{mim,head,transfer}_study.py`` (thin CLIs over it), tested in-process.

- :mod:`.settings`: what a study is asked (dataclasses, checked when built), the MIM study's options;
- :mod:`.configs`: the shipped study configs (in a settings' ``config_dir``, by default ``configs/`` beside the
  package) and the edits that point them at a study's data and budgets, ``rescale_iterations`` (every
  iteration-valued field moves with ``max_iters``);
- :mod:`.runs`: ``beit_mm.apis.train.train`` in a child process, resuming a cut run; metrics from MMEngine's scalar
  files; the run cache (``cached``: a finished run's metrics with the settings that produced them, reused, never
  mixed with other settings);
- :mod:`.graph`: the job graph (tasks with dependencies, ``--jobs`` at a time, the critical path first);
- :mod:`.report`: mean ± std, majority-class baselines, the probe's warning and the recommendation, report text,
  probe-curve picture, ``tools/run_chain.sh``'s lines;
- :mod:`.mim`, :mod:`.heads`, :mod:`.transfer`: the three studies.

Not imported by ``import beit_mm`` (it pulls in mmseg datasets and matplotlib at use); nothing in beit_mm imports it.
"""
