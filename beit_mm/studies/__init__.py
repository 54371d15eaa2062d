"""The MIM, head and transfer studies: settings (:mod:`.settings`), study configs (:mod:`.configs`), runs and their
cache (:mod:`.runs`), the job graph (:mod:`.graph`), the report (:mod:`.report`) and the studies themselves.

Not imported by ``import beit_mm``: it needs mmseg's datasets and matplotlib.
"""
