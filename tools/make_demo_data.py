"""Write the synthetic ADE20K-layout demo dataset (``beit_mm.data.demo.make_demo_ade20k``) and check its labels.

    python tools/make_demo_data.py [--root data/ade_demo] [--num-train 200] [--num-val 40] [--size 128] [--seed 0]
"""
import argparse

from beit_mm.data.demo import check_ade20k_labels, make_demo_ade20k


def main() -> None:
    parser = argparse.ArgumentParser(description='Write the synthetic ADE20K-layout demo dataset')
    parser.add_argument('--root', default='data/ade_demo', help='dataset root')
    parser.add_argument('--num-train', type=int, default=200, help='training images')
    parser.add_argument('--num-val', type=int, default=40, help='validation images')
    parser.add_argument('--size', type=int, default=128, help='image side in pixels')
    parser.add_argument('--seed', type=int, default=0, help='random seed')
    args = parser.parse_args()
    root = make_demo_ade20k(args.root, args.num_train, args.num_val, args.size, args.seed)
    counts = check_ade20k_labels(root)
    total = sum(counts.values())
    share = ', '.join(f'{value}: {count / total:.1%}' for value, count in sorted(counts.items()))
    print(f'{root}: {args.num_train} train + {args.num_val} val images; label share {share}')


if __name__ == '__main__':
    main()
