from .two_stage_warmup_poly import BACKBONE_GROUP_KEY, TwoStageWarmupPolyLR, two_stage_warmup_poly_factor  # noqa: F401
