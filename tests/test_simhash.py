"""simhash(): the worked example, hashing stability, bands."""

from __future__ import annotations

import itertools
import random
import subprocess
import sys

import pytest

from scrapy_simhash.fingerprint.simhash import (
    band_layout,
    feature_hash,
    from_signed64,
    hamming_distance,
    simhash,
    split_bands,
    to_signed64,
)

# The worked example: 6-bit feature hashes injected, weights as given. Per bit (MSB first) the
# votes are 你 +3-3-3+3-3+3, 妈妈 +3-3+3-3+3+3, 喊 +2-2+2-2+2-2, 回家 -2+2+2-2-2-2,
# 吃饭 +1+1-1+1-1-1, 哦 -1-1-1+1+1-1 → sums 6 -6 2 -2 0 0 → 101000 (a zero sum is not positive).
HASHES = {
    "你": 0b100101,
    "妈妈": 0b101011,
    "喊": 0b101010,
    "叫": 0b100010,
    "回家": 0b011000,
    "吃饭": 0b110100,
    "哦": 0b000110,
}
ORIGINAL = {"你": 3, "妈妈": 3, "喊": 2, "回家": 2, "吃饭": 1, "哦": 1}
VARIANT = {"你": 3, "妈妈": 3, "叫": 2, "回家": 2, "吃饭": 1, "哦": 1}  # 喊 → 叫: bit 3 flips


def test_worked_example_exact_bits():
    a = simhash(ORIGINAL, bits=6, hash_func=HASHES.__getitem__)
    b = simhash(VARIANT, bits=6, hash_func=HASHES.__getitem__)
    assert format(a, "06b") == "101000"
    assert format(b, "06b") == "100000"
    assert hamming_distance(a, b) == 1


def test_weights_matter():
    # The same features with 喊 weighing 9 instead of 2 pull bits 1 and 3 its way.
    heavy = dict(ORIGINAL, 喊=9)
    assert format(simhash(heavy, bits=6, hash_func=HASHES.__getitem__), "06b") == "101010"


def test_empty_and_zero_weights_give_zero():
    assert simhash({}) == 0
    assert simhash({"a": 0.0}) == 0


def test_feature_hash_is_stable_blake2b():
    # Fixed values: a change of hash function would silently invalidate every stored index.
    assert feature_hash("妈妈", 64) == 5227411497930421625
    assert feature_hash("reform", 32) == 940665694
    assert feature_hash("x", 32).bit_length() <= 32
    assert feature_hash("x", 128).bit_length() <= 128
    with pytest.raises(ValueError, match="64"):
        feature_hash("x", 48)


def test_fingerprints_identical_across_processes():
    code = (
        "from scrapy_simhash.fingerprint.simhash import simhash;"
        "print(simhash({'供给侧': 2.5, '改革': 1.2, 'reform': 0.7, '2016': 1.0}))"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout.strip()
        for seed in ("1", "2", "random")
    }
    assert len(outs) == 1
    assert outs.pop() == str(simhash({"供给侧": 2.5, "改革": 1.2, "reform": 0.7, "2016": 1.0}))


@pytest.mark.parametrize("bits", [32, 64, 128])
def test_sizes(bits):
    fp = simhash({"alpha": 1.0, "beta": 2.0, "gamma": 0.5}, bits=bits)
    assert 0 <= fp < 1 << bits


def test_band_layout_even_and_covering():
    assert band_layout(64, 3) == ((0, 16), (16, 16), (32, 16), (48, 16))
    assert [w for _, w in band_layout(64, 2)] == [22, 21, 21]
    for bits, k in itertools.product((32, 64, 128), range(0, 8)):
        layout = band_layout(bits, k)
        assert len(layout) == k + 1
        assert sum(w for _, w in layout) == bits
        assert max(w for _, w in layout) - min(w for _, w in layout) <= 1
    with pytest.raises(ValueError):
        band_layout(64, 64)


def test_pigeonhole_any_k_flips_keep_one_band():
    rng = random.Random(7)
    layout = band_layout(64, 3)
    for _ in range(200):
        fp = rng.getrandbits(64)
        flips = rng.sample(range(64), 3)
        other = fp
        for bit in flips:
            other ^= 1 << bit
        assert hamming_distance(fp, other) == 3
        assert any(a == b for a, b in zip(split_bands(fp, layout), split_bands(other, layout), strict=True))


def test_signed_mapping_round_trips():
    for value in (0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1):
        signed = to_signed64(value)
        assert -(1 << 63) <= signed < 1 << 63
        assert from_signed64(signed) == value
