"""The local reranking step (numi/knowledge/late_interaction.py, issue 37): with the local
WordLlama as itself, a search with no reranker endpoint fuses in the question's words
matched one by one to the best passages' words, and says so (`ranked_by`, "close words");
the word vectors are the model's own."""

from __future__ import annotations

from numi.knowledge import late_interaction
from numi.knowledge.embedding import LocalModel
from numi.knowledge.index import wait_for_indexing
from server_wait import WAIT_SECONDS
from test_retrieval import documents, search, upload

# Eight docstrings of Python's threading module (bench/retrieval_set.json's, as they are).
THREADING = {
    "threading.enumerate.txt": (
        "threading.enumerate\n"
        "\n"
        "Return a list of all Thread objects currently alive.\n"
        "\n"
        "The list includes daemonic threads, dummy thread objects created by\n"
        "current_thread(), and the main thread. It excludes terminated threads and\n"
        "threads that have not yet been started."
    ),
    "threading.activeCount.txt": (
        "threading.activeCount\n"
        "\n"
        "Return the number of Thread objects currently alive.\n"
        "\n"
        "This function is deprecated, use active_count() instead."
    ),
    "threading.settrace.txt": (
        "threading.settrace\n"
        "\n"
        "Set a trace function for all threads started from the threading module.\n"
        "\n"
        "The func will be passed to sys.settrace() for each thread, before its run()\n"
        "method is called."
    ),
    "threading.RLock.txt": (
        "threading.RLock\n"
        "\n"
        "Factory function that returns a new reentrant lock.\n"
        "\n"
        "A reentrant lock must be released by the thread that acquired it. Once a\n"
        "thread has acquired a reentrant lock, the same thread may acquire it again\n"
        "without blocking; the thread must release it once for each time it has\n"
        "acquired it."
    ),
    "threading.active_count.txt": (
        "threading.active_count\n"
        "\n"
        "Return the number of Thread objects currently alive.\n"
        "\n"
        "The returned count is equal to the length of the list returned by\n"
        "enumerate()."
    ),
    "threading.setprofile.txt": (
        "threading.setprofile\n"
        "\n"
        "Set a profile function for all threads started from the threading module.\n"
        "\n"
        "The func will be passed to sys.setprofile() for each thread, before its\n"
        "run() method is called."
    ),
    "threading.Condition.txt": (
        "threading.Condition\n"
        "\n"
        "Class that implements a condition variable.\n"
        "\n"
        "A condition variable allows one or more threads to wait until they are\n"
        "notified by another thread.\n"
        "\n"
        "If the lock argument is given and not None, it must be a Lock or RLock\n"
        "object, and it is used as the underlying lock. Otherwise, a new RLock object\n"
        "is created and used as the underlying lock."
    ),
    "threading.Timer.txt": (
        "threading.Timer\n"
        "\n"
        "Call a function after a specified number of seconds:\n"
        "\n"
        "t = Timer(30.0, f, args=None, kwargs=None)\n"
        "t.start()\n"
        "t.cancel()     # stop the timer's action if it's still waiting"
    ),
}


def test_paraphrased_questions_find_their_passage_first(sqlite_app, sqlite_client, require_extra):
    require_extra("wordllama", "knowledge")
    app, client = sqlite_app, sqlite_client
    for name, text in THREADING.items():
        upload(client, name, text.encode())
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    assert {d["vectors"] for d in documents(client).values()} == {"done"}

    # Fused, full text and vectors put the reentrant lock first ("thread", "another"), then
    # the condition variable; its words "wait" and "notified" are the question's "sleep"
    # and "tells" to the local model's word vectors.
    found = search(
        client, "How can one worker sleep until another tells it that something has changed?"
    )
    assert found["mode"] == "hybrid" and found["ranked_by"] == "local"
    assert found["reranked"] is False and found["note"] is None  # no reranker endpoint
    best = found["passages"][0]
    assert best["name"] == "threading.Condition.txt", found
    assert "close words" in best["found_by"]
    assert [p["score"] for p in found["passages"]] == sorted(
        (p["score"] for p in found["passages"]), reverse=True
    )

    # A synonym paraphrase of enumerate's first sentence ("return a list of all thread
    # objects currently alive"): fused, the counts of live threads come first.
    found = search(
        client, "Which function does this: give back a array of all worker things currently alive?"
    )
    assert found["passages"][0]["name"] == "threading.enumerate.txt", found


def test_word_vectors_are_the_models_own_and_match_a_paraphrase(require_extra):
    require_extra("wordllama", "knowledge")
    import numpy as np

    model = LocalModel()
    words = ["misspelled", "sunshine", "disk", "x1", "naïve"]
    # A word's vector is the model's vector of that word alone (cached ids or not).
    for _ in range(2):
        assert np.allclose(
            late_interaction.word_vectors(model, words), model.embed(words), atol=1e-5
        )

    texts = [
        "The printing press spread books across Europe.",
        "Return disk usage statistics: total, used and free space in bytes.",
        "",
    ]
    asked = late_interaction.words("How much room is left on my drive?")
    scores = late_interaction.match_scores(model, asked, texts, texts)
    assert scores[1] > scores[0] and scores[2] == 0.0

    order = [(1, 0), (2, 0), (3, 0)]
    fused = {(1, 0): 0.16, (2, 0): 0.15, (3, 0): 0.1}  # 0.16 + 3/12 < 0.15 + 3/11
    ranked, by_match = late_interaction.rerank(order, fused, dict(zip(order, scores)))
    assert by_match == [(2, 0), (1, 0), (3, 0)]
    assert ranked == [(2, 0), (1, 0), (3, 0)] and fused[(2, 0)] > 0.15
