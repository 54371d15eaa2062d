"""The import graph of ``beit_mm``: the data flows down the floors, never up or sideways.

- :data:`FLOORS`, lowest first: every import (at module level or inside a function) goes to a lower floor or stays in
  its own package; ``data`` stands below ``models`` because the models' data preprocessors run data's device kernels
  while data needs nothing of a model;
- no two modules import each other, directly or through others;
- the file room (``beit_mm.fileio``) imports nothing else of beit_mm, not even by name;
- tools ask a model or transform what it is by its class, never by a class-name string;
- nothing in beit_mm starts a program or runs a script of ``tools/``.
"""
from __future__ import annotations

import ast
import os
import os.path as osp

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def _imports(path: str, module: str) -> set[str]:
    """Modules of ``beit_mm`` that the source file ``path`` (module ``module``) imports, anywhere in the file."""
    package = module if path.endswith('__init__.py') else module.rsplit('.', 1)[0]
    found = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith('beit_mm'))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                parts = package.split('.')
                base = '.'.join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            if base.startswith('beit_mm'):
                found.update(f'{base}.{a.name}' for a in node.names)
                found.add(base)
    return found


def _module_graph() -> dict[str, set[str]]:
    modules = {}
    for folder, _, files in os.walk(osp.join(ROOT, 'beit_mm')):
        for name in files:
            if name.endswith('.py'):
                path = osp.join(folder, name)
                dotted = osp.relpath(path, ROOT)[:-3].replace(os.sep, '.')
                modules[dotted.removesuffix('.__init__')] = path
    graph = {}
    for module, path in modules.items():
        targets = set()
        for target in _imports(path, module):
            while target not in modules and '.' in target:  # a name imported from a module
                target = target.rsplit('.', 1)[0]
            if target in modules and target != module:
                targets.add(target)
        graph[module] = targets
    return graph


#: The packages of beit_mm by floor, lowest first (STYLE rule 19).
FLOORS = (('fileio', 'registry'), ('data', ), ('models', ), ('converters', 'evaluation', 'visualization'), ('engine', ),
          ('apis', ), ('studies', 'benchmarks'))


def floor_violations(graph: dict[str, set[str]], floors=FLOORS) -> list[str]:
    """``'a imports b (up|sideways)'`` for every import between two packages of beit_mm that does not go to a lower
    floor; a package missing from ``floors`` is named too."""
    level = {package: i for i, packages in enumerate(floors) for package in packages}
    found = []
    for module, targets in sorted(graph.items()):
        here = module.split('.')[1] if module.count('.') else None
        for target in sorted(targets):
            there = target.split('.')[1] if target.count('.') else None
            if here is None or there is None or here == there:
                continue
            if here not in level or there not in level:
                found.append(f'{module} imports {target} (a package on no floor: add it to FLOORS)')
            elif level[there] >= level[here]:
                found.append(f'{module} imports {target} ({"up" if level[there] > level[here] else "sideways"})')
    return found


def test_imports_go_down_the_floors():
    assert not floor_violations(_module_graph()), floor_violations(_module_graph())


def test_the_floor_check_sees_up_and_sideways():
    graph = {'beit_mm.evaluation.probe': {'beit_mm.apis', 'beit_mm.models.builder', 'beit_mm.evaluation.x'},
             'beit_mm.converters.a': {'beit_mm.visualization.b'}, 'beit_mm.data.c': {'beit_mm.fileio.d'}}
    assert floor_violations(graph) == ['beit_mm.converters.a imports beit_mm.visualization.b (sideways)',
                                       'beit_mm.evaluation.probe imports beit_mm.apis (up)']


def test_no_import_circle_between_modules():
    """No two modules of the package import each other, directly or through others (package ``__init__`` files,
    which import their own modules to register them, are left out of the walk)."""
    graph = _module_graph()
    inits = {m for m in graph if osp.isfile(osp.join(ROOT, *m.split('.'), '__init__.py'))}
    graph = {m: ts - inits for m, ts in graph.items() if m not in inits}
    cycles, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 'open'
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 'open':
                cycles.append(path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 'done'

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, cycles


def test_the_file_room_names_no_engine_or_apis_module():
    """No module of the file room imports ``beit_mm.engine`` or ``beit_mm.apis`` (at any depth), nor names one in a
    string (an ``importlib.import_module`` or a registry lookup by dotted name would hide the arrow from the graph)."""
    upward = ('beit_mm.engine', 'beit_mm.apis')
    graph = _module_graph()
    found = [f'{m} imports {t}' for m, ts in graph.items() if m.startswith('beit_mm.fileio') for t in sorted(ts)
             if t.startswith(upward)]
    for folder, _, files in os.walk(osp.join(ROOT, 'beit_mm', 'fileio')):
        for name in sorted(f for f in files if f.endswith('.py')):
            path = osp.join(folder, name)
            for node in ast.walk(ast.parse(open(path).read())):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                        and node.value.startswith(upward)):
                    found.append(f'{osp.relpath(path, ROOT)}:{node.lineno} names {node.value!r}')
    assert not found, found


# Calls that start another program: any attribute of these modules, or these functions of ``os``.
PROCESS_MODULES = ('subprocess', 'runpy', 'pty')
PROCESS_FUNCTIONS = ('system', 'popen', 'execv', 'execve', 'execl', 'execle', 'execlp', 'execlpe', 'execvp',
                     'execvpe', 'spawnl', 'spawnle', 'spawnlp', 'spawnlpe', 'spawnv', 'spawnve', 'spawnvp',
                     'spawnvpe', 'posix_spawn', 'posix_spawnp')


def runs_a_program(root: str, top: str = 'beit_mm') -> list[str]:
    """``path:line what`` of every place under ``root/top`` that starts another program or names a script of
    ``tools/`` to run: an import of :data:`PROCESS_MODULES`, a call of ``os.<PROCESS_FUNCTIONS>``, a path built from
    the string ``'tools'`` (``osp.join(ROOT, 'tools', 'train.py')``) or a path to a script of ``tools/`` given to a
    call or put in a command list (``run(['python', 'tools/train.py'])``). Docstrings, messages that show the user a
    command (``'python tools/train.py CONFIG'``) and a tool's name as a label (``WORK_DIR_WRITER = 'tools/train.py'``)
    are not paths to run."""
    found = []
    for folder, _, files in os.walk(osp.join(root, top)):
        for name in sorted(f for f in files if f.endswith('.py')):
            path = osp.join(folder, name)
            where = osp.relpath(path, root)
            tree = ast.parse(open(path).read())
            handed = {id(arg) for node in ast.walk(tree) if isinstance(node, ast.Call) for arg in node.args}
            handed |= {id(e) for node in ast.walk(tree) if isinstance(node, (ast.List, ast.Tuple)) for e in node.elts}
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    found += [f'{where}:{node.lineno} imports {a.name}' for a in node.names
                              if a.name.split('.')[0] in PROCESS_MODULES]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    if node.module.split('.')[0] in PROCESS_MODULES or (
                            node.module == 'os' and any(a.name in PROCESS_FUNCTIONS for a in node.names)):
                        found.append(f'{where}:{node.lineno} imports from {node.module}')
                elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == 'os'
                      and node.attr in PROCESS_FUNCTIONS):
                    found.append(f'{where}:{node.lineno} calls os.{node.attr}')
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    text = node.value.strip().replace(os.sep, '/')
                    if text in ('tools', 'tools/') or (id(node) in handed and ' ' not in text and text.startswith(
                            ('tools/', './tools/')) and text.endswith(('.py', '.sh'))):
                        found.append(f'{where}:{node.lineno} names {node.value!r}')
    return found


def test_nothing_in_the_package_runs_a_program_or_a_tool():
    """The library calls the library: no module of beit_mm starts a program or builds a path to a script of tools/
    (:func:`runs_a_program`); the studies train through ``beit_mm.apis.train`` in a spawned interpreter whose target is
    a library function."""
    assert not runs_a_program(ROOT), runs_a_program(ROOT)


def test_the_scan_sees_every_way_to_run_a_tool(tmp_path):
    """:func:`runs_a_program` on a made-up package: each way of starting a tool is found, a message and a label
    are not."""
    (tmp_path / 'pkg').mkdir()
    (tmp_path / 'pkg' / 'a.py').write_text(
        'import os\nimport os.path as osp\nfrom subprocess import run\n'
        "os.system('python x.py')\n"
        "cmd = [sys.executable, 'tools/train.py']\n"
        "osp.join(ROOT, 'tools', 'train.py')\n"
        "runpy_like('tools/analysis/probe.py')\n"
        "WRITER = 'tools/train.py'\n"
        "raise SystemExit('run python tools/train.py CONFIG first')\n")
    assert runs_a_program(str(tmp_path), 'pkg') == [
        'pkg/a.py:3 imports from subprocess', 'pkg/a.py:4 calls os.system', "pkg/a.py:5 names 'tools/train.py'",
        "pkg/a.py:6 names 'tools'", "pkg/a.py:7 names 'tools/analysis/probe.py'"]


# mmengine's own test for a pretrained init is this string (mmengine/model/base_module.py: init_cfg['type'] ==
# 'Pretrained'); beit_mm.models.builder.drop_pretrained_init matches exactly what mmengine would load
SAME_STRING_AS_MMENGINE = {'Pretrained'}


def _string_literals(node: ast.AST, constants: dict[str, set[str]]) -> set[str] | None:
    """The strings of a literal (a str, or a tuple/list/set of them) or of a module-level name bound to one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts:
        parts = [_string_literals(e, constants) for e in node.elts]
        return set().union(*parts) if all(p is not None for p in parts) else None
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def _names_a_class(node: ast.AST) -> bool:
    """``x.__name__`` (``type(x).__name__``, ``x.__class__.__name__``) or a config's type (``x.get('type')``,
    ``x['type']``)."""
    if isinstance(node, ast.Attribute) and node.attr == '__name__':
        return True
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == 'get' and node.args
            and isinstance(node.args[0], ast.Constant) and node.args[0].value == 'type'):
        return True
    return (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
            and node.slice.value == 'type')


def class_name_dispatch(root: str, folders=('beit_mm', 'tools')) -> list[str]:
    """``path:line`` of every comparison (``==``, ``!=``, ``in``, ``not in``) of a class name or config type with
    string literals in the source files under ``root/<folders>`` (every folder of the package and the tools)."""
    found = []
    for top in folders:
        for folder, _, files in os.walk(osp.join(root, top)):
            for name in sorted(files):
                if not name.endswith('.py'):
                    continue
                path = osp.join(folder, name)
                tree = ast.parse(open(path).read())
                constants = {}
                for stmt in tree.body:
                    target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
                    strings = _string_literals(stmt.value, {}) if isinstance(target, ast.Name) else None
                    if strings is not None:
                        constants[target.id] = strings
                for node in ast.walk(tree):
                    if not isinstance(node, ast.Compare) or not all(
                            isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
                        continue
                    operands = [node.left, *node.comparators]
                    strings = set().union(*(_string_literals(o, constants) or set() for o in operands))
                    if strings and not strings <= SAME_STRING_AS_MMENGINE and any(map(_names_a_class, operands)):
                        found.append(f'{osp.relpath(path, root)}:{node.lineno}')
    return found


def test_tools_ask_the_class_not_its_name():
    assert not class_name_dispatch(ROOT), class_name_dispatch(ROOT)


def test_the_studies_import_no_engine_converters_or_visualization():
    """``beit_mm.studies`` train and probe through the entry points (``apis``), the models, data and evaluation."""
    allowed = ('beit_mm.studies', 'beit_mm.fileio', 'beit_mm.evaluation', 'beit_mm.data', 'beit_mm.models',
               'beit_mm.apis')
    graph = _module_graph()
    assert any(m.startswith('beit_mm.studies.') for m in graph), 'no beit_mm.studies modules found'
    outward = {m: sorted(t for t in ts if not t.startswith(allowed))
               for m, ts in graph.items() if m.startswith('beit_mm.studies')}
    assert not any(outward.values()), {m: t for m, t in outward.items() if t}
