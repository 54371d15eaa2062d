"""Demo-data generators: small synthetic datasets in the real layouts (ADE20K, ImageNet, COCO, ...), each written
into a demo root under the policy of :mod:`beit_mm.data.demo.root`."""
