"""FeatureExtractor: jieba TF-IDF words, numbers, Latin words, stop words, user dictionary."""

from __future__ import annotations

import jieba
import pytest

from scrapy_simhash.fingerprint.features import FeatureExtractor, get_tokenizer, load_stop_words


@pytest.fixture(scope="module")
def fx() -> FeatureExtractor:
    return FeatureExtractor(top_k=8)


def test_chinese_words_weighted_by_idf(fx):
    w = fx.weights("中央财经领导小组会议上，习近平提出供给侧结构性改革。改革要协同发力。")
    assert "改革" in w and ("供给" in w or "供给侧" in w)
    # A word seen twice weighs twice its single weight (tf × idf).
    once = fx.weights("改革")["改革"]
    assert w["改革"] == pytest.approx(2 * once)
    # Rare words weigh more than common ones.
    rare_and_common = fx.weights("晶圆 公司")
    assert rare_and_common["晶圆"] > rare_and_common["公司"]


def test_stop_words_and_punctuation_dropped(fx):
    words = fx.words("我们的记者表示，这是一个 test of the system！！")
    assert "的" not in words and "我们" not in words and "记者" not in words
    assert "the" not in words and "of" not in words
    assert "，" not in words and "！" not in words and "!" not in words
    assert "test" in words and "system" in words


def test_latin_lower_cased_and_numbers_kept(fx):
    words = fx.words("Bank of England gave 152 MLN STG help, 3.5% up from 284")
    assert {"bank", "england", "mln", "stg", "152", "284", "3.5%"} <= set(words)
    a = fx.weights("U.K. MONEY MARKET GIVEN 152 MLN STG HELP")
    b = fx.weights("U.K. MONEY MARKET GIVEN 284 MLN STG HELP")
    assert a != b  # reports differing only in figures have different features


def test_top_k_keeps_heaviest(fx):
    text = "石墨烯 量子 计算 芯片 光刻 晶圆 台积电 英伟达 算力 模型 训练 推理 " * 2
    body = fx.body_features(text)
    assert len(body) == 8
    everything = fx.weights(text)
    assert min(body.values()) >= sorted(everything.values(), reverse=True)[7]
    assert len(fx.title_features(text)) == len(everything)  # titles keep all words


def test_extra_stop_words_from_file_and_list(tmp_path):
    path = tmp_path / "stop.txt"
    path.write_text("# comment\n石墨烯\n\nQuantum\n", encoding="utf-8")
    assert load_stop_words(path) == {"石墨烯", "quantum"}
    fx = FeatureExtractor(stop_words=path)
    assert "石墨烯" not in fx.words("石墨烯 芯片")
    assert "quantum" not in FeatureExtractor(stop_words=["Quantum"]).words("quantum chip")
    with pytest.raises(FileNotFoundError, match=r"nope\.txt"):
        FeatureExtractor(stop_words=tmp_path / "nope.txt")


def test_user_dict_changes_segmentation(tmp_path):
    default = FeatureExtractor().words("云计算平台蓝鲸智云发布")
    path = tmp_path / "user.txt"
    path.write_text("蓝鲸智云 10 nz\n", encoding="utf-8")
    custom = FeatureExtractor(user_dict=path).words("云计算平台蓝鲸智云发布")
    assert "蓝鲸智云" in custom and "蓝鲸智云" not in default
    # The default tokenizer is untouched by a user dictionary.
    assert "蓝鲸智云" not in FeatureExtractor().words("云计算平台蓝鲸智云发布")
    with pytest.raises(FileNotFoundError, match=r"missing\.txt"):
        FeatureExtractor(user_dict=tmp_path / "missing.txt")


def test_dictionary_loaded_once():
    assert get_tokenizer() is get_tokenizer() is jieba.dt
    assert FeatureExtractor().tokenizer is FeatureExtractor().tokenizer


def test_bad_top_k():
    with pytest.raises(ValueError, match="top_k"):
        FeatureExtractor(top_k=0)
