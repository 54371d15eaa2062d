"""HF side of test_panoptic_eomt.py's post-processing parity: transformers 4.57.6 ``EomtImageProcessor.
post_process_panoptic_segmentation`` (``models/eomt/image_processing_eomt.py:849-904``); imports nothing of beit_mm.

    python eomt_hf_panoptic_reference.py IN_FILE OUT_FILE

IN_FILE: ``class_logits`` (B, Q, C + 1), ``mask_logits`` (B, Q, h, w), ``size``, ``target_sizes``,
``stuff_classes``; OUT_FILE: per image ``segmentation`` (H, W) (-1 void) and ``labels`` {segment id: class}."""
import sys
from types import SimpleNamespace

import torch
from transformers import EomtImageProcessor


def main(in_file: str, out_file: str) -> None:
    data = torch.load(in_file)
    side = data['size']
    processor = EomtImageProcessor(size=dict(shortest_edge=side, longest_edge=side))
    outputs = SimpleNamespace(class_queries_logits=data['class_logits'], masks_queries_logits=data['mask_logits'])
    results = processor.post_process_panoptic_segmentation(outputs, target_sizes=data['target_sizes'],
                                                           stuff_classes=data['stuff_classes'],
                                                           size=dict(shortest_edge=side, longest_edge=side))
    torch.save([dict(segmentation=r['segmentation'].long(), labels={s['id']: s['label_id'] for s in r['segments_info']})
                for r in results], out_file)


if __name__ == '__main__':
    main(*sys.argv[1:])
