"""analyzer.codes.object_codes: equal JSON values share a code, whether or not they are one object."""

import numpy as np

from analyzer.codes import object_codes, object_pointers


def test_equal_values_share_a_code_shared_object_or_not():
    a = [[8, 64], [64]]
    values = np.empty(7, dtype=object)
    values[:] = [a, None, [[8, 64], [64]], a, [[8, 64]], None, "x"]
    codes, first = object_codes(values)
    assert codes[0] == codes[2] == codes[3]  # shared object and an equal copy
    assert codes[1] == codes[5]
    assert len({codes[0], codes[1], codes[4], codes[6]}) == 4
    assert len(first) == 4
    assert (codes[first] == np.arange(4)).all()
    assert first.tolist() == sorted(first.tolist())  # codes in order of first appearance


def test_pointers_are_identities():
    x = [1]
    values = np.empty(3, dtype=object)
    values[:] = [x, x, None]
    p = object_pointers(values)
    assert p[0] == p[1] == id(x) and p[2] == id(None)


def test_empty():
    codes, first = object_codes(np.empty(0, dtype=object))
    assert codes.size == 0 and first.size == 0
