"""End-to-end benchmarks of beit_mm beside its peers: the parts (:mod:`.parts`), their measurement
(:mod:`.measure`), MFU (:mod:`.mfu`) and the Markdown report (:mod:`.report`). Not imported by ``beit_mm``."""
