from beit_mm.fileio.names import shown


def test_control_characters_are_escaped():
    assert shown('a\nb\x1b[31m\u202ec') == 'a\\x0ab\\x1b[31m\\u202ec'
    assert '\n' not in shown(b'x\n\xffy')  # undecodable bytes come back as lone surrogates, escaped too
    assert shown('dir\\file') == 'dir\\\\file'


def test_printable_names_are_kept_and_long_names_elided():
    assert shown('images/été_01.jpg') == 'images/été_01.jpg'
    long = shown('n' * 900_000)
    assert len(long) <= 220 and '(900000 chars)' in long
