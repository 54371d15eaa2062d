"""beit_mm: BEiT and CvT backbones, masked image modeling and UPerNet segmentation on the OpenMMLab stack."""
from setuptools import find_packages, setup

setup(
    name='beit_mm',
    version='0.1.0',
    description='BEiT/CvT backbones, masked image modeling and segmentation for MMEngine/OpenMMLab',
    packages=find_packages(include=['beit_mm', 'beit_mm.*']),
    python_requires='>=3.10,<3.13',
    # The working set (tools/setup_env.sh installs it; mmcv must be built from source with its ops).
    install_requires=[
        'torch>=2.1,<2.14',
        'torchvision',
        'mmcv>=2.0.0rc4,<2.2.0',
        'mmengine==0.10.7',
        'mmsegmentation==1.2.2',
        'mmpretrain==1.2.0',
        'ftfy',
        'regex',
        'numpy<2',
        'scipy<1.16',  # linear_sum_assignment: the mask-classification loss's matching
    ],
    extras_require={'tests': ['pytest>=8', 'transformers==4.46.3', 'dall-e==0.1']},
)
