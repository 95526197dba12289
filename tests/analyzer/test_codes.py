"""analyzer.codes: object_codes (equal JSON values share a code, whether or not they are one object) and factorize
(pd.factorize's codes and uniques, object columns keyed by identity first)."""

import math

import numpy as np
import pandas as pd
import pytest

from analyzer.codes import factorize, object_codes, object_pointers


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


@pytest.mark.parametrize("na_sentinel", [False, True])
def test_factorize_is_pandas_factorize(na_sentinel):
    rng = np.random.default_rng(7)
    pool = ["gemm", "".join(["ge", "mm"]), None, math.nan, float("nan"), "relu", 3, "", "relu_" + "x"]
    values = np.empty(5000, dtype=object)
    values[:] = [pool[i] for i in rng.integers(0, len(pool), len(values))]  # equal strings in distinct objects
    want_codes, want_uniques = pd.factorize(values, use_na_sentinel=na_sentinel)
    codes, uniques = factorize(values, na_sentinel)
    assert codes.dtype == np.int64 and codes.tolist() == want_codes.tolist()
    assert len(uniques) == len(want_uniques)
    assert all(a is b or (a != a and b != b) for a, b in zip(uniques, want_uniques, strict=True))
    numbers = rng.integers(0, 9, 100).astype(float)  # not object: pandas' own path
    assert factorize(numbers)[0].tolist() == pd.factorize(numbers)[0].tolist()
    assert factorize(np.empty(0, dtype=object))[0].size == 0
