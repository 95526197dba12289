"""Matching blocks: the in-order pairs of equal kernels between two steps' key lists (analyzer.diff.align).

The lists are cut at their common start and end and at kernels occurring once in each run (landmarks, kept in order
by a longest increasing subsequence, again inside each stretch), and each stretch in between is matched by a
longest common subsequence (Myers) in windows of WINDOW kernels that follow the match: O(n · WINDOW).

Why not difflib's SequenceMatcher (Ratcliff/Obershelp: the longest block first, then each side)? Cost: that search
visits every pair of equal keys, again for every block it finds — quadratic in how often a kernel repeats: 35M pairs (~9 s) for a 19k-op V100 training step against itself, ~1e9 (432 s) for a 97k-op step
against a 116k-op one. Quality: on repeated layers with a kernel missing here and there, the longest block can pair
layer k with layer k+n and everything after inherits the shift — a real 1,198-op Qwen step with 5% of its kernels
dropped got 402 of its 1,142 kernels paired (a longest common subsequence: all 1,142). On every step pair the tests
diff, both give the same pairs and the same Diff (tests/analyzer/test_diff_align.py). difflib's method is kept, metered, as
the reference for those tests and as the fallback for a window too different for Myers; EXACT_WORK > 0 makes
match_blocks use it first for steps under that many visited pairs.
"""

from __future__ import annotations

import bisect
from collections import Counter
from itertools import islice

import numpy as np

EXACT_WORK = 0  # kernel pairs difflib's search may visit before the landmark path takes over; 0: never used
WINDOW = 128  # kernels per side in one window: ≤ 2·128 × 128 Myers steps; a 100k-op step ≈ 1,600 windows ≈ 0.3 s
WINDOW_WORK = 2_000_000  # a window too different for Myers (> WINDOW edits) gets difflib's search up to this
# Landmarks are looked for again inside each stretch (a kernel unique to a stretch, not to the step); each round is
# O(n log n) over the stretches. Real steps need 1-3 rounds; the cap keeps a contrived step from needing n.
MAX_LANDMARK_DEPTH = 8


class _TooMuchWork(Exception):
    """The exact search visited more equal pairs than its limit; blocks: those it had found (difflib's, so far)."""

    def __init__(self, blocks: list) -> None:
        super().__init__("exact block search over its limit")
        self.blocks = blocks


def _blocks_exact(a: list, b2j: dict, alo: int, ahi: int, blo: int, bhi: int, limit: float) -> list[tuple]:
    """difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks() of a[alo:ahi] vs b[blo:bhi] as
    (i, j, size) triples: the same blocks (tests/analyzer/test_diff_align.py checks it against difflib on real steps).
    b2j: each key's positions in b, increasing; they are bisected to the rectangle instead of skipped one by one.
    Raises _TooMuchWork once more than `limit` equal pairs have been visited."""
    work = 0
    out = []
    queue = [(alo, ahi, blo, bhi)]
    bisect_left = bisect.bisect_left
    while queue:
        alo, ahi, blo, bhi = queue.pop()
        besti, bestj, bestsize = alo, blo, 0
        j2len: dict[int, int] = {}
        for i in range(alo, ahi):
            occ = b2j.get(a[i])
            lo = bisect_left(occ, blo) if occ else 0
            hi = bisect_left(occ, bhi, lo) if occ else 0
            if lo == hi:
                j2len = {}
                continue
            work += hi - lo
            get = j2len.get
            new = {}
            for j in islice(occ, lo, hi):
                k = new[j] = get(j - 1, 0) + 1
                if k > bestsize:
                    besti, bestj, bestsize = i - k + 1, j - k + 1, k
            j2len = new
            if work > limit:
                raise _TooMuchWork(out)
        if bestsize:
            out.append((besti, bestj, bestsize))
            if alo < besti and blo < bestj:
                queue.append((alo, besti, blo, bestj))
            if besti + bestsize < ahi and bestj + bestsize < bhi:
                queue.append((besti + bestsize, ahi, bestj + bestsize, bhi))
    return out


def _equal_pairs(a: np.ndarray, b: np.ndarray) -> int:
    """How many (i, j) with a[i] == b[j]: what one exact block search over the whole of a and b visits."""
    ua, ca = np.unique(a, return_counts=True)
    ub, cb = np.unique(b, return_counts=True)
    _, ia, ib = np.intersect1d(ua, ub, assume_unique=True, return_indices=True)
    return int(np.dot(ca[ia].astype(np.int64), cb[ib].astype(np.int64)))


def lis(values: list[int]) -> list[int]:
    """Indices of a longest strictly increasing subsequence of values (patience sorting, O(n log n))."""
    tails: list[int] = []
    tail_at: list[int] = []
    prev = [-1] * len(values)
    for k, v in enumerate(values):
        p = bisect.bisect_left(tails, v)
        if p == len(tails):
            tails.append(v)
            tail_at.append(k)
        else:
            tails[p] = v
            tail_at[p] = k
        prev[k] = tail_at[p - 1] if p else -1
    out = []
    k = tail_at[-1] if tail_at else -1
    while k >= 0:
        out.append(k)
        k = prev[k]
    return out[::-1]


def _landmarks(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """In-order pairs (i, j) of landmark kernels: keys occurring once in a and once in b (within these stretches),
    kept in order by a longest increasing subsequence. None when there is none. (Keys occurring equally often in
    both are no landmark: with a kernel dropped here and there in repeated layers, 'the k-th with the k-th' pairs
    layer k with layer k+1.)"""
    ua, inv_a, ca = np.unique(a, return_inverse=True, return_counts=True)
    ub, inv_b, cb = np.unique(b, return_inverse=True, return_counts=True)
    _, ia, ib = np.intersect1d(ua, ub, assume_unique=True, return_indices=True)
    ok = (ca[ia] == 1) & (cb[ib] == 1)
    if not ok.any():
        return None
    keep_a = np.zeros(len(ua), dtype=bool)
    keep_a[ia[ok]] = True
    keep_b = np.zeros(len(ub), dtype=bool)
    keep_b[ib[ok]] = True
    pa = np.flatnonzero(keep_a[inv_a.ravel()])
    pb = np.flatnonzero(keep_b[inv_b.ravel()])
    kb = b[pb]
    by_key = np.argsort(kb, kind="stable")
    partner = pb[by_key[np.searchsorted(kb[by_key], a[pa])]]  # each landmark's one position in b
    keep = lis(partner.tolist())
    return pa[keep], partner[keep]


def _lcs(a: list, alo: int, ahi: int, b: list, blo: int, bhi: int, max_d: int) -> list[tuple[int, int]] | None:
    """Matched (i, j) pairs of a longest common subsequence of a[alo:ahi] and b[blo:bhi] (Myers 1986: the shortest
    edit script, O((n + m) · D) for D edits), or None past max_d edits. Unlike the longest-block-first search it
    cannot pair layer k of one run with layer k+1 of the other because a long stretch of both happens to agree."""
    n, m = ahi - alo, bhi - blo
    max_d = min(n + m, max_d)
    off = max_d + 1
    v = [0] * (2 * max_d + 3)  # v[off + k]: furthest x reached on diagonal k = x - y
    trace = []  # v[off-d-1 : off+d+2] before step d, to walk back
    for d in range(max_d + 1):
        trace.append(v[off - d - 1 : off + d + 2])
        for k in range(-d, d + 1, 2):
            down = k == -d or (k != d and v[off + k - 1] < v[off + k + 1])
            x = v[off + k + 1] if down else v[off + k - 1] + 1  # down: b[y] inserted; right: a[x] deleted
            y = x - k
            while x < n and y < m and a[alo + x] == b[blo + y]:
                x += 1
                y += 1
            v[off + k] = x
            if x >= n and y >= m:
                return _lcs_walk_back(trace, d, n, m, alo, blo)
    return None


def _lcs_walk_back(trace: list, d_end: int, x: int, y: int, alo: int, blo: int) -> list[tuple[int, int]]:
    pairs = []
    for d in range(d_end, 0, -1):
        v = trace[d]  # v[k + d + 1] for k in [-d-1, d+1]
        k = x - y
        pk = k + 1 if k == -d or (k != d and v[k + d] < v[k + d + 2]) else k - 1
        px = v[pk + d + 1]
        py = px - pk
        mx, my = (px, py + 1) if pk == k + 1 else (px + 1, py)
        while x > mx and y > my:  # the diagonal run after the edit
            x -= 1
            y -= 1
            pairs.append((alo + x, blo + y))
        x, y = px, py
    while x > 0 and y > 0:
        x -= 1
        y -= 1
        pairs.append((alo + x, blo + y))
    pairs.reverse()
    return pairs


def _slide(a: list, b: list, b2j: dict, alo: int, ahi: int, blo: int, bhi: int, window: int) -> list:
    """Matching blocks of a[alo:ahi] vs b[blo:bhi] by a window that follows the match: a longest common subsequence
    (_lcs) of the next `window` kernels of each side, keep the pairs in the window's first half, move both sides past
    the last one kept, repeat. Repeated layers with a kernel dropped here and there stay aligned kernel for kernel
    (windows cut at fixed proportions drift by the deletions and pair layer k with layer k+1). A window more than
    `window` edits apart (unrelated work) falls back to difflib's search (metered); one with nothing in common grows
    (×2, up to 16×) before both sides skip it. Work per window: at most 2·window × window steps. (A window of a
    cross-GPU pair, H100 vs MI300 Qwen, is mostly other kernel names and takes the fallback: the same pairs.)"""
    out: list[tuple[int, int, int]] = []
    i, j, grow = alo, blo, 1
    while i < ahi and j < bhi:
        ea, eb = min(i + window * grow, ahi), min(j + window * grow, bhi)
        # Myers needs at least (n + m - 2·LCS) edits, and LCS <= the keys both windows share (with multiplicity):
        # unrelated windows skip straight to the exact search instead of spending ~window²/2 steps to give up
        shared = Counter(b[j:eb])
        common = 0
        for x in a[i:ea]:
            if shared[x] > 0:
                shared[x] -= 1
                common += 1
        pairs = _lcs(a, i, ea, b, j, eb, window) if (ea - i) + (eb - j) - 2 * common <= window else None
        if pairs is None:
            try:
                blocks = _blocks_exact(a, b2j, i, ea, j, eb, WINDOW_WORK * grow)
            except _TooMuchWork as stop:  # a window of one kernel repeated over and over: its longest blocks
                blocks = stop.blocks
            pairs = [(p + t, q + t) for p, q, size in sorted(blocks) for t in range(size)]
        if ea == ahi and eb == bhi:  # the last window: all of it
            out += [(p, q, 1) for p, q in pairs]
            break
        if not pairs:
            if grow < 16:
                grow *= 2
                continue
            i, j, grow = ea, eb, 1  # nothing in common over 16 windows: skip them
            continue
        half_a, half_b = i + (ea - i) // 2, j + (eb - j) // 2
        keep = [(p, q) for p, q in pairs if p < half_a and q < half_b] or pairs[:1]
        out += [(p, q, 1) for p, q in keep]
        i, j, grow = keep[-1][0] + 1, keep[-1][1] + 1, 1
    return out


def match_blocks(
    a: list[int], b: list[int], exact_work: float | None = None, window: int | None = None
) -> tuple[list[int], list[int]]:
    """In-order pairs of equal keys of a and b: (positions in a, positions in b) — landmarks, then windowed longest
    common subsequences (see the module doc). exact_work > 0 (default EXACT_WORK): difflib's matching blocks
    instead while that search visits at most that many pairs."""
    exact_work = EXACT_WORK if exact_work is None else exact_work
    window = WINDOW if window is None else window
    b2j: dict[int, list[int]] = {}
    for j, x in enumerate(b):
        b2j.setdefault(x, []).append(j)
    arr_a = np.asarray(a, dtype=np.int64)
    arr_b = np.asarray(b, dtype=np.int64)
    if exact_work > 0 and _equal_pairs(arr_a, arr_b) <= exact_work:
        try:
            return _pairs(_blocks_exact(a, b2j, 0, len(a), 0, len(b), exact_work))
        except _TooMuchWork:  # its blocks so far are dropped: see the comment above on shifted layers
            pass
    # A key that one run never has can pair with nothing: dropping such keys from both lists leaves every common
    # subsequence as it was, and leaves the edit distance the windows see to what the runs really reorder. A
    # compiled model fuses ~70% of an eager step's kernels away: unfiltered, a 128-kernel window of a 4-layer Llama
    # is ~230 edits apart, Myers gives up, and the longest-block fallback paired layer 1's q/k/v projections with
    # layer 2's (the rest of the step shifted by a layer: 3 of 4 attention chains, cross-layer groups).
    # Both ways are tried and the longer pairing kept (a tie: the filtered one): on unrelated steps with few shared
    # keys (HTA's df_index vs ns) the windows of the unfiltered lists happen to pair more (235 against 166).
    keep_a, keep_b = np.isin(arr_a, arr_b), np.isin(arr_b, arr_a)
    whole = _match_windows(a, b, b2j, arr_a, arr_b, window)
    if keep_a.all() and keep_b.all():
        return whole
    pos_a, pos_b = np.flatnonzero(keep_a), np.flatnonzero(keep_b)
    fa, fb = arr_a[pos_a], arr_b[pos_b]
    f2j: dict[int, list[int]] = {}
    for j, x in enumerate(fb.tolist()):
        f2j.setdefault(x, []).append(j)
    in_a, in_b = _match_windows(fa.tolist(), fb.tolist(), f2j, fa, fb, window)
    filtered = (pos_a[in_a].tolist(), pos_b[in_b].tolist())
    return filtered if len(filtered[0]) >= len(whole[0]) else whole


def _match_windows(a: list[int], b: list[int], b2j: dict, arr_a: np.ndarray, arr_b: np.ndarray, window: int):
    """match_blocks' landmark and window path (its comment above)."""
    blocks: list[tuple[int, int, int]] = []
    stack = [(0, len(a), 0, len(b), 0)]
    while stack:
        alo, ahi, blo, bhi, depth = stack.pop()
        if alo >= ahi or blo >= bhi:
            continue
        if (ahi - alo > window or bhi - blo > window) and depth < MAX_LANDMARK_DEPTH:
            p = _common_run(arr_a, arr_b, alo, ahi, blo, bhi, 1)
            if p:
                blocks.append((alo, blo, p))
                alo, blo = alo + p, blo + p
            s = _common_run(arr_a, arr_b, ahi - 1, alo - 1, bhi - 1, blo - 1, -1)
            if s:
                blocks.append((ahi - s, bhi - s, s))
                ahi, bhi = ahi - s, bhi - s
            if alo >= ahi or blo >= bhi:
                continue
            marks = _landmarks(arr_a[alo:ahi], arr_b[blo:bhi])
            if marks is not None:
                pi, pj = alo, blo
                for i, j in zip((marks[0] + alo).tolist(), (marks[1] + blo).tolist(), strict=True):
                    blocks.append((i, j, 1))
                    stack.append((pi, i, pj, j, depth + 1))
                    pi, pj = i + 1, j + 1
                stack.append((pi, ahi, pj, bhi, depth + 1))
                continue
        blocks += _slide(a, b, b2j, alo, ahi, blo, bhi, window)
    return _pairs(blocks)


def _common_run(arr_a: np.ndarray, arr_b: np.ndarray, i: int, i_end: int, j: int, j_end: int, step: int) -> int:
    """Length of the run of equal keys from (i, j) towards (i_end, j_end), exclusive, stepping by +1 or -1."""
    n = min(abs(i_end - i), abs(j_end - j))
    if n <= 0:
        return 0
    fwd = step > 0
    eq = (
        arr_a[i : i + n] == arr_b[j : j + n]
        if fwd
        else arr_a[i - n + 1 : i + 1][::-1] == arr_b[j - n + 1 : j + 1][::-1]
    )
    return n if eq.all() else int(np.argmin(eq))


def _pairs(blocks: list[tuple[int, int, int]]) -> tuple[list[int], list[int]]:
    in_a: list[int] = []
    in_b: list[int] = []
    for i, j, k in sorted(blocks):
        in_a.extend(range(i, i + k))
        in_b.extend(range(j, j + k))
    return in_a, in_b
