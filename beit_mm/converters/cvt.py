"""CvT checkpoints (microsoft/CvT 'official', HF 'hf') -> ``beit_mm.CvT`` state dicts, and back to HF.

HF's weights are the official QuickGELU-trained ones: keep ``act='quick_gelu'`` for the official numbers.
"""
import re
from collections.abc import Mapping

from torch import Tensor

_SUPPORTED_SOURCES = ('official', 'hf')

_PARAM = r'(weight|bias)'
_BN = r'(weight|bias|running_mean|running_var|num_batches_tracked)'
_OFFICIAL_KEY = re.compile('|'.join([
    rf'stage\d+\.patch_embed\.(proj|norm)\.{_PARAM}',
    r'stage\d+\.cls_token',
    rf'stage\d+\.blocks\.\d+\.(norm1|norm2)\.{_PARAM}',
    r'stage\d+\.blocks\.\d+\.attn\.conv_proj_[qkv]\.conv\.weight',
    rf'stage\d+\.blocks\.\d+\.attn\.conv_proj_[qkv]\.bn\.{_BN}',
    rf'stage\d+\.blocks\.\d+\.attn\.(proj_[qkv]|proj)\.{_PARAM}',
    rf'stage\d+\.blocks\.\d+\.mlp\.(fc1|fc2)\.{_PARAM}',
    rf'norm\.{_PARAM}',
    rf'head\.{_PARAM}',
]))

_QKV = {'query': 'q', 'key': 'k', 'value': 'v'}
# (HF name without the optional 'cvt.' prefix, official name); \g<s>, \g<j> are the stage and block indices.
_HF_RULES: list[tuple[re.Pattern, str]] = [(re.compile(p), r) for p, r in [
    (rf'encoder\.stages\.(?P<s>\d+)\.embedding\.convolution_embeddings\.projection\.(?P<p>{_PARAM})',
     r'stage\g<s>.patch_embed.proj.\g<p>'),
    (rf'encoder\.stages\.(?P<s>\d+)\.embedding\.convolution_embeddings\.normalization\.(?P<p>{_PARAM})',
     r'stage\g<s>.patch_embed.norm.\g<p>'),
    (r'encoder\.stages\.(?P<s>\d+)\.cls_token', r'stage\g<s>.cls_token'),
    (rf'encoder\.stages\.(?P<s>\d+)\.layers\.(?P<j>\d+)\.layernorm_before\.(?P<p>{_PARAM})',
     r'stage\g<s>.blocks.\g<j>.norm1.\g<p>'),
    (rf'encoder\.stages\.(?P<s>\d+)\.layers\.(?P<j>\d+)\.layernorm_after\.(?P<p>{_PARAM})',
     r'stage\g<s>.blocks.\g<j>.norm2.\g<p>'),
    *[(rf'encoder\.stages\.(?P<s>\d+)\.layers\.(?P<j>\d+)\.attention\.attention\.convolution_projection_{hf}'
       r'\.convolution_projection\.convolution\.weight',
       rf'stage\g<s>.blocks.\g<j>.attn.conv_proj_{ours}.conv.weight') for hf, ours in _QKV.items()],
    *[(rf'encoder\.stages\.(?P<s>\d+)\.layers\.(?P<j>\d+)\.attention\.attention\.convolution_projection_{hf}'
       rf'\.convolution_projection\.normalization\.(?P<p>{_BN})',
       rf'stage\g<s>.blocks.\g<j>.attn.conv_proj_{ours}.bn.\g<p>') for hf, ours in _QKV.items()],
    *[(rf'encoder\.stages\.(?P<s>\d+)\.layers\.(?P<j>\d+)\.attention\.attention\.projection_{hf}\.(?P<p>{_PARAM})',
       rf'stage\g<s>.blocks.\g<j>.attn.proj_{ours}.\g<p>') for hf, ours in _QKV.items()],
    (rf'encoder\.stages\.(?P<s>\d+)\.layers\.(?P<j>\d+)\.attention\.output\.dense\.(?P<p>{_PARAM})',
     r'stage\g<s>.blocks.\g<j>.attn.proj.\g<p>'),
    (rf'encoder\.stages\.(?P<s>\d+)\.layers\.(?P<j>\d+)\.intermediate\.dense\.(?P<p>{_PARAM})',
     r'stage\g<s>.blocks.\g<j>.mlp.fc1.\g<p>'),
    (rf'encoder\.stages\.(?P<s>\d+)\.layers\.(?P<j>\d+)\.output\.dense\.(?P<p>{_PARAM})',
     r'stage\g<s>.blocks.\g<j>.mlp.fc2.\g<p>'),
    (rf'layernorm\.(?P<p>{_PARAM})', r'norm.\g<p>'),
    (rf'classifier\.(?P<p>{_PARAM})', r'head.\g<p>'),
]]


def _hf_to_official(key: str) -> str | None:
    """The official name of an HF CvT key, or None when the key is not part of HF's CvT layout."""
    name = key[len('cvt.'):] if key.startswith('cvt.') else key
    for pattern, repl in _HF_RULES:
        if pattern.fullmatch(name):
            return pattern.sub(repl, name)
    return None


def _unknown_keys_error(bad: list[str], source: str) -> ValueError:
    other = 'hf' if source == 'official' else 'official'
    other_matches = [
        k for k in bad if (_hf_to_official(k) is not None if other == 'hf' else _OFFICIAL_KEY.fullmatch(k))
    ]
    hint = (f"{len(other_matches)} of them are in the {other!r} layout: pass source={other!r} (--source {other})"
            if other_matches else
            'strip any wrapper prefix (e.g. "module.", "backbone.") and unwrap {"state_dict": ...} / {"model": ...} '
            'before converting')
    shown = ', '.join(bad[:8]) + (', ...' if len(bad) > 8 else '')
    return ValueError(f'{len(bad)} checkpoint keys match neither the {source!r} CvT layout ({shown}); {hint}')


def convert_cvt(state_dict: Mapping[str, Tensor], source: str) -> dict[str, Tensor]:
    """A CvT checkpoint -> ``beit_mm.CvT`` names.

    Args:
        state_dict: an official or HF (``CvtModel`` / ``CvtForImageClassification``) flat state dict.
        source: 'official' or 'hf'.
    Returns:
        ``CvT`` keys (+ ``norm.*``, ``head.*`` when present), sharing the input's tensors.
    Raises:
        ValueError: unknown ``source``, or keys of neither layout.
    """
    if source not in _SUPPORTED_SOURCES:
        raise ValueError(f'unknown CvT checkpoint source {source!r}; use one of {_SUPPORTED_SOURCES}')
    converted: dict[str, Tensor] = {}
    bad: list[str] = []
    for key, value in state_dict.items():
        if source == 'official':
            new_key = key if _OFFICIAL_KEY.fullmatch(key) else None
        else:
            new_key = _hf_to_official(key)
        if new_key is None:
            bad.append(key)
        else:
            converted[new_key] = value
    if bad:
        raise _unknown_keys_error(bad, source)
    return converted


# official (beit_mm) name -> HF name (without the 'cvt.' prefix of CvtForImageClassification); the inverse of _HF_RULES
_TO_HF_RULES: list[tuple[re.Pattern, str]] = [(re.compile(p), r) for p, r in [
    (rf'stage(?P<s>\d+)\.patch_embed\.proj\.(?P<p>{_PARAM})',
     r'encoder.stages.\g<s>.embedding.convolution_embeddings.projection.\g<p>'),
    (rf'stage(?P<s>\d+)\.patch_embed\.norm\.(?P<p>{_PARAM})',
     r'encoder.stages.\g<s>.embedding.convolution_embeddings.normalization.\g<p>'),
    (r'stage(?P<s>\d+)\.cls_token', r'encoder.stages.\g<s>.cls_token'),
    (rf'stage(?P<s>\d+)\.blocks\.(?P<j>\d+)\.norm1\.(?P<p>{_PARAM})',
     r'encoder.stages.\g<s>.layers.\g<j>.layernorm_before.\g<p>'),
    (rf'stage(?P<s>\d+)\.blocks\.(?P<j>\d+)\.norm2\.(?P<p>{_PARAM})',
     r'encoder.stages.\g<s>.layers.\g<j>.layernorm_after.\g<p>'),
    *[(rf'stage(?P<s>\d+)\.blocks\.(?P<j>\d+)\.attn\.conv_proj_{ours}\.conv\.weight',
       rf'encoder.stages.\g<s>.layers.\g<j>.attention.attention.convolution_projection_{hf}'
       r'.convolution_projection.convolution.weight') for hf, ours in _QKV.items()],
    *[(rf'stage(?P<s>\d+)\.blocks\.(?P<j>\d+)\.attn\.conv_proj_{ours}\.bn\.(?P<p>{_BN})',
       rf'encoder.stages.\g<s>.layers.\g<j>.attention.attention.convolution_projection_{hf}'
       r'.convolution_projection.normalization.\g<p>') for hf, ours in _QKV.items()],
    *[(rf'stage(?P<s>\d+)\.blocks\.(?P<j>\d+)\.attn\.proj_{ours}\.(?P<p>{_PARAM})',
       rf'encoder.stages.\g<s>.layers.\g<j>.attention.attention.projection_{hf}.\g<p>') for hf, ours in _QKV.items()],
    (rf'stage(?P<s>\d+)\.blocks\.(?P<j>\d+)\.attn\.proj\.(?P<p>{_PARAM})',
     r'encoder.stages.\g<s>.layers.\g<j>.attention.output.dense.\g<p>'),
    (rf'stage(?P<s>\d+)\.blocks\.(?P<j>\d+)\.mlp\.fc1\.(?P<p>{_PARAM})',
     r'encoder.stages.\g<s>.layers.\g<j>.intermediate.dense.\g<p>'),
    (rf'stage(?P<s>\d+)\.blocks\.(?P<j>\d+)\.mlp\.fc2\.(?P<p>{_PARAM})',
     r'encoder.stages.\g<s>.layers.\g<j>.output.dense.\g<p>'),
]]


def cvt_to_hf(state_dict: Mapping[str, Tensor], with_classifier: bool) -> dict[str, Tensor]:
    """``beit_mm.CvT`` state dict -> HF ``CvtModel`` names, or ``CvtForImageClassification``'s with ``with_classifier``.

    Raises:
        ValueError: keys without an HF counterpart or a missing head.
    """
    out: dict[str, Tensor] = {}
    bad: list[str] = []
    prefix = 'cvt.' if with_classifier else ''
    for key, value in state_dict.items():
        if key.startswith(('norm.', 'head.')):
            if with_classifier:
                out[('layernorm.' if key.startswith('norm.') else 'classifier.') + key.split('.', 1)[1]] = value
            else:
                bad.append(key)
            continue
        for pattern, repl in _TO_HF_RULES:
            if pattern.fullmatch(key):
                out[prefix + pattern.sub(repl, key)] = value
                break
        else:
            bad.append(key)
    if bad:
        raise ValueError(f'{len(bad)} CvT keys have no HF {"CvtForImageClassification" if with_classifier else "CvtModel"}'
                         f' counterpart: {bad[:8]} (CvtModel has no final norm or head; MIM mask tokens have none)')
    if with_classifier and not {'layernorm.weight', 'classifier.weight'} <= set(out):
        raise ValueError('CvtForImageClassification needs the final norm (norm.*) and the classifier (head.*)')
    return out
