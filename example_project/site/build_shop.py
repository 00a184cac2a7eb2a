"""The bundled product page with reviews (``shop/product.html``) and its part of ``manifest.json``.

``build_site.py`` calls this module; the page is committed, so the example needs nothing else. Every
review on the page was written for this example (no corpus text): a product page of a web shop as a
crawler meets it, with the copies review sections are full of. :data:`REVIEWS` lists them in page
order, each with what it is and, for a copy, the earlier review it copies:

* ``genuine``: a customer's own review (kept);
* ``one-word``: a one-word reply (``好评``, ``不错``): different words are different replies (kept), the
  same word again is a copy (dropped), punctuation aside;
* ``spam``: a copy posted again, often by one account in a row, with symbols inserted to slip past
  filters (``推荐购*买``) or the same text under another name (dropped);
* ``reworded``: a copy with a word swapped (``推荐`` → ``建议``), a clause cut or a short praise added
  (dropped);
* ``shop-generic``: the shop's stock reply, posted under many reviews (the first kept, every repeat
  dropped);
* ``shop-templated``: the shop's replies that share a frame (``亲，非常抱歉给您带来不便！`` … ``有任何
  问题请随时联系在线客服哦～``) around an answer of their own: different replies (kept).

What counts as a copy is the rule of ``benchmarks/short_texts.py`` (its docstring), and
``tests/test_example_project.py`` checks these labels against that rule.
"""

from __future__ import annotations

import html
from typing import Any

PAGE = "shop/product.html"

#: (id, author, date, kind, copy of (an earlier id) or None, text), in page order.
REVIEWS: tuple[tuple[str, str, str, str, str | None, str], ...] = (
    ("r01", "小鹿", "2026-03-02", "genuine", None,
     "杯子做工很精致，保温效果也不错，早上装的热水到下午还是烫的，很好用推荐购买。"),
    ("r02", "阿杰", "2026-03-02", "genuine", None,
     "容量比想象中小一点，装一瓶矿泉水刚好，放包里不占地方，颜色和图片一样。"),
    ("r03", "店家回复", "2026-03-03", "shop-generic", None,
     "亲，感谢您的支持，我们会继续努力，期待您再次光临！"),
    ("r04", "买买买888", "2026-03-03", "spam", "r01",
     "杯子做工很精致，保温效果也不错，早上装的热水到下午还是烫的，很好用推荐购*买。"),
    ("r05", "用户1186", "2026-03-03", "one-word", None, "好评"),
    ("r06", "王女士", "2026-03-04", "genuine", None,
     "盖子有点紧，拧的时候要用点力气，不过密封性确实好，倒过来也不漏水。"),
    ("r07", "店家回复", "2026-03-04", "shop-generic", "r03",
     "亲，感谢您的支持，我们会继续努力，期待您再次光临！"),
    ("r08", "买买买888", "2026-03-04", "spam", "r01",
     "杯#子做工很精致，保温效果也不错，早上装的热水到下午还是烫的，很好用推-荐购买！"),
    ("r09", "用户7421", "2026-03-05", "one-word", None, "不错"),
    ("r10", "老张", "2026-03-05", "reworded", "r01",
     "杯子做工很精致，保温效果也不错，早上装的热水到下午还是烫的，很好用建议购买。"),
    ("r11", "晴天", "2026-03-05", "one-word", "r05", "好评"),
    ("r12", "sunny_day", "2026-03-06", "genuine", None,
     "物流很快，前天下单昨天就到了，包装也很严实，杯子没有磕碰。"),
    ("r13", "店家回复", "2026-03-06", "shop-templated", None,
     "亲，非常抱歉给您带来不便！新杯子的硅胶密封圈会比较紧，用热水泡一下再拧几次就顺手了。"
     "有任何问题请随时联系在线客服哦～"),
    ("r14", "小米粥", "2026-03-07", "genuine", None,
     "用了一个月了，保温还是很好，就是外面的漆掉了一小块，有点心疼。"),
    ("r15", "用户3390", "2026-03-07", "one-word", None, "满意"),
    ("r16", "店家回复", "2026-03-07", "shop-generic", "r03",
     "亲，感谢您的支持，我们会继续努力，期待您再次光临！"),
    ("r17", "阿杰", "2026-03-08", "reworded", "r02",
     "容量比想象中小一点，装一瓶矿泉水刚好，放包里不占地方，颜色和图片一样，好评！"),
    ("r18", "花花", "2026-03-08", "genuine", None,
     "给老公买的，他说比之前那个好用多了，保温时间长，下次还会回购。"),
    ("r19", "店家回复", "2026-03-08", "shop-templated", None,
     "亲，非常抱歉给您带来不便！这次快递在中转站压了两天，我们已经和快递公司沟通，以后会优先安排顺丰发货。"
     "有任何问题请随时联系在线客服哦～"),
    ("r20", "刷单01", "2026-03-09", "spam", "r01",
     "杯子做工很精致，保温效果也不错，早上装的热水到下午还是烫的，很好用推荐购买。"),
    ("r21", "用户5512", "2026-03-09", "one-word", "r05", "好评！"),
    ("r22", "李先生", "2026-03-09", "genuine", None,
     "保温效果一般，晚上装的开水第二天早上只剩温的了，和宣传的12小时有差距。"),
    ("r23", "刷单02", "2026-03-10", "spam", "r12",
     "物流很快，前天下单昨天就到了，包装也很严实，杯子没有磕碰~~"),
    ("r24", "小鹿", "2026-03-10", "genuine", None,
     "追评：用了两个星期，杯子保温依然很好，清洗也方便，杯底没有异味。"),
    ("r25", "用户8800", "2026-03-10", "one-word", None, "差评"),
    ("r26", "王女士", "2026-03-11", "reworded", "r06",
     "盖子有点紧，拧的时候要用点力气，不过密封性确实好，倒过来也不漏水，值得购买。"),
    ("r27", "店家回复", "2026-03-11", "shop-generic", "r03",
     "亲，感谢您的支持，我们会继续努力，期待您再次光临。"),
    ("r28", "路人甲", "2026-03-11", "genuine", None,
     "颜色很好看，拿在手里很有质感，送人也很合适，朋友很喜欢。"),
    ("r29", "买买买888", "2026-03-12", "reworded", "r01",
     "保温效果也不错，早上装的热水到下午还是烫的，很好用推荐购买！！！"),
    ("r30", "阿明", "2026-03-12", "one-word", None, "一般"),
    ("r31", "店家回复", "2026-03-12", "shop-templated", None,
     "亲，非常抱歉给您带来不便！漆面磕掉的地方不影响保温，我们给您补发一个加厚杯套，这两天就寄出。"
     "有任何问题请随时联系在线客服哦～"),
    ("r32", "买买买888", "2026-03-13", "spam", "r01",
     "杯子做工很精致，保温效果也不错，早上装的热水到下午还是烫的，很好用推荐购买。。。"),
)


def review_html(rid: str, author: str, date: str, text: str) -> str:
    return (f'<li class="review" id="{rid}">\n'
            f'  <div class="review-meta"><span class="author">{html.escape(author)}</span>'
            f' <time datetime="{date}">{date}</time></div>\n'
            f'  <p class="review-text">{html.escape(text)}</p>\n'
            f"</li>")


def render_product_page() -> str:
    reviews = "\n".join(review_html(rid, author, date, text) for rid, author, date, _k, _c, text in REVIEWS)
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>双层真空不锈钢保温杯 500ml - 小山家居旗舰店</title>
<style>.review{{border-bottom:1px solid #eee;padding:6px 0}} .author{{font-weight:bold}}</style>
<script>window.shop = {{sku: "CUP-500", reviews: {len(REVIEWS)}}};</script></head>
<body>
<div class="nav"><a href="#">首页</a> &gt; <a href="#">家居日用</a> &gt; <a href="#">保温杯</a></div>
<div class="product">
  <h1 class="product-title">双层真空不锈钢保温杯 500ml</h1>
  <p class="price">¥ 59.00</p>
  <p class="desc">316 不锈钢内胆，12 小时保温，一键弹盖，可拆洗密封圈。</p>
</div>
<div class="ad-block"><a href="#">满 99 减 10，点此领券</a></div>
<h2>商品评价（{len(REVIEWS)}）</h2>
<ul class="reviews">
{reviews}
</ul>
<div class="footer"><p>小山家居旗舰店 · 本页面为 scrapy-simhash 示例所写，店铺与评价均为虚构</p></div>
</body></html>
"""


def copy_groups() -> dict[str, str]:
    """Review id → the id of the first review of its text (itself when it copies nothing)."""
    first: dict[str, str] = {}
    for rid, _a, _d, _k, copy_of, _t in REVIEWS:
        first[rid] = rid if copy_of is None else first[copy_of]
    return first


def shop_manifest() -> dict[str, Any]:
    """The page's part of manifest.json: every review, its label and the expected counts."""
    groups = copy_groups()
    reviews = [{"id": rid, "author": author, "kind": kind, "copy_of": copy_of,
                "original": None if copy_of is None else groups[rid],
                "expected": "kept" if copy_of is None else "dropped", "text": text}
               for rid, author, _d, kind, copy_of, text in REVIEWS]
    kept = sum(r["expected"] == "kept" for r in reviews)
    return {
        "description": "Reviews of the product page, in page order (the order the spider yields them). "
                       "'copy_of' is the earlier review this one copies (null: not a copy), 'original' the "
                       "first review of its copies; 'expected' is what the plugin's short mode should do.",
        "page": PAGE,
        "spider": "reviews",
        "reviews": reviews,
        "summary": {"reviews": len(reviews), "kept": kept, "dropped": len(reviews) - kept},
    }
