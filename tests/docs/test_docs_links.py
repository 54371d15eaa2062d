"""Every relative link of README.md, docs/**/*.md and configs/*/README.md points to a file that exists, and every
``#anchor`` to a heading of that page as GitHub slugs it; code blocks and other sites are not checked."""
import glob
import os.path as osp
import re

import pytest

from ..conftest import ROOT

LINK = re.compile(r'\[[^\]]*\]\(([^)\s]+)\)')
FENCE = re.compile(r'^```.*?^```', re.M | re.S)


def pages(root: str = ROOT) -> list[str]:
    found = ['README.md'] + glob.glob('docs/**/*.md', root_dir=root, recursive=True) \
        + glob.glob('configs/*/README.md', root_dir=root)
    return sorted(set(found))


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading's text."""
    return re.sub(r'[^\w\- ]', '', heading.strip().lower()).replace(' ', '-')


def anchors(path: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r'^#{1,6} +(.+?) *#*$', FENCE.sub('', open(path).read()), re.M):
        s = slug(m.group(1))
        n = seen.get(s, 0)
        out.add(s if n == 0 else f'{s}-{n}')
        seen[s] = n + 1
    return out


def broken_links(page: str, root: str = ROOT) -> list[str]:
    broken = []
    for target in LINK.findall(FENCE.sub('', open(osp.join(root, page)).read())):
        if re.match(r'[a-z]+:', target):
            continue
        file, _, anchor = target.partition('#')
        path = osp.normpath(osp.join(root, osp.dirname(page), file)) if file else osp.join(root, page)
        if not osp.exists(path):
            broken.append(target)
        elif anchor and (not path.endswith('.md') or anchor not in anchors(path)):
            broken.append(target)
    return broken


@pytest.mark.parametrize('page', pages())
def test_links_resolve(page):
    assert broken_links(page) == [], f'{page}: links to files or headings that do not exist'


def test_pages_found():
    found = pages()
    assert 'README.md' in found and 'docs/pretraining.md' in found, found
    assert any(p.startswith('docs/studies/') for p in found), found
    for family in ('beit', 'beit2', 'cvt', 'eomt', 'mask2former', 'vqkd', 'dvae', 'vit_adapter', 'demo', 'studies'):
        assert f'configs/{family}/README.md' in found


def test_checker_fails_on_broken_links(tmp_path):
    """A missing file, a missing heading and a missing local anchor are each caught; good links are not."""
    (tmp_path / 'docs' / 'studies').mkdir(parents=True)
    (tmp_path / 'docs' / 'a.md').write_text(
        '# A page\n\n## The `x` study: what (it) says\n\n## Repeat\n\n## Repeat\n\n'
        '[ok](studies/b.md#b-heading) [ok](#the-x-study-what-it-says) [ok](#repeat-1) [web](https://example.org/x)\n'
        '[gone](missing.md) [no heading](studies/b.md#nowhere) [no local](#repeat-2)\n'
        '```\n[in code](ignored.md)\n```\n')
    (tmp_path / 'docs' / 'studies' / 'b.md').write_text('# B heading\n\n[up](../a.md#a-page)\n')
    assert broken_links('docs/a.md', root=str(tmp_path)) == ['missing.md', 'studies/b.md#nowhere', '#repeat-2']
    assert broken_links('docs/studies/b.md', root=str(tmp_path)) == []
