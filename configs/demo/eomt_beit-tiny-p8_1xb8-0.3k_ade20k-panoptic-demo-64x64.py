# Demo: EoMT panoptic segmentation on ADE20K's panoptic layout, as the official EoMT reads it (semantic PNGs and the
# scene-parsing challenge's instance PNGs; beit_mm.ADE20KPanopticDataset with mmdet's ADE20K panoptic classes: 100
# things first, then 50 stuff), on the generated demo (python tools/make_demo_data.py --layout ade20k-panoptic ->
# data/ade_panoptic_demo: things person, car; stuff road, sky, grass). Everything else is the COCO panoptic demo's
# (configs/demo/eomt_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py: the tiny BEiT from scratch, 300 iterations,
# images fitted into 64x64 and padded); PQ/SQ/RQ from beit_mm.PanopticQualityMetric over the classes present.
_base_ = ['./eomt_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py',
          '../_base_/datasets/ade20k-panoptic_demo-64x64.py']
data_root = 'data/ade_panoptic_demo/'
model = dict(num_classes=150, num_things_classes=100)
train_dataloader = dict(dataset=dict(_delete_=True, **_base_.ade20k_panoptic_demo_train))
val_dataloader = dict(dataset=dict(_delete_=True, **_base_.ade20k_panoptic_demo_val))
test_dataloader = val_dataloader
