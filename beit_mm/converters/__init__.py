"""Pure functions: foreign checkpoint state dicts -> beit_mm state dicts."""


def __getattr__(name: str):
    if name == 'convert_beit':  # imported on use: the package's table of layouts imports no model
        from .beit import convert_beit
        return convert_beit
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
