"""Hamming distances between real articles and reposts made of them, and between unrelated articles.

For N articles of ``../shared/corpus/zh/newsspider-2016.jsonl.gz`` (bodies of 200+ characters, in corpus
order), a repost is made the way portals make them (benchmarks/repost.py: full-width digits, another date
format, a source line, a site suffix on the title, another page template with an ad block and a related-links
box inside the article region). Printed: median, p95 and max distance, title and body, for
original ↔ repost and for unrelated pairs (article i ↔ article i+1), plus the share within each tier.

    python benchmarks/fingerprint_distances.py [--limit 200] [--seed 1]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from repost import Article, Draft, fullwidth, portal_repost

from scrapy_simhash import Fingerprinter, hamming_distance

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "zh" / "newsspider-2016.jsonl.gz"


def load(limit: int) -> list[Article]:
    if not CORPUS.exists():
        sys.exit(f"needs {CORPUS} (the shared corpus)")
    out: list[Article] = []
    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            paragraphs = tuple(p.strip() for p in doc["body"].replace("\r", "").split("\n") if p.strip())
            if len("".join(paragraphs)) >= 200 and doc["title"].strip():
                out.append(Article(doc["id"], "zh", doc["title"].strip(), paragraphs))
            if len(out) == limit:
                break
    return out


def percentiles(values: list[int]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
    return f"median {statistics.median(values):4.1f}  p95 {p95:3d}  max {max(values):3d}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"$ python benchmarks/fingerprint_distances.py --limit {args.limit} --seed {args.seed}")
    rng = random.Random(args.seed)
    articles = load(args.limit)
    fp = Fingerprinter()
    originals = [fp.fingerprint(a.title, a.body) for a in articles]
    reposts = []
    for a in articles:
        draft = portal_repost(fullwidth(Draft.of(a), rng), rng)
        reposts.append(fp.fingerprint(draft.title, draft.body))
    pairs = {
        "original ↔ repost": list(zip(originals, reposts, strict=True)),
        "unrelated (i ↔ i+1)": list(zip(originals, originals[1:] + originals[:1], strict=True)),
    }
    print(f"{len(articles)} articles of {CORPUS.name}; repost = full-width digits + date format + source line + "
          "title suffix + other template with ad and related links")
    for name, group in pairs.items():
        titles = [hamming_distance(a.title, b.title) for a, b in group if a.title is not None and b.title is not None]
        bodies = [hamming_distance(a.body, b.body) for a, b in group if a.body is not None and b.body is not None]
        print(f"{name:22s} title: {percentiles(titles)}  (≤2: {sum(d <= 2 for d in titles) / len(titles):6.1%})")
        print(f"{'':22s} body:  {percentiles(bodies)}  (≤3: {sum(d <= 3 for d in bodies) / len(bodies):6.1%})")


if __name__ == "__main__":
    main()
