"""The labelled retrieval set (issue 37, "Measured, not asserted"): documents from Python's
own documentation text, and questions each with its known answer passage.

    python bench/retrieval_set.py [--documents 520] [--questions 200] [--out bench/retrieval_set.json]

Corpus: the docstrings of the public functions and classes of about a hundred standard
library modules (the Python Software Foundation's documentation text, under its free
licence), one document each (`<module>.<name>.txt`: the dotted name, then the docstring),
identical docstrings once. Which ones: the `documents` with the smallest SHA-256 of their
name, so the choice is fixed and spread over the modules.

Questions: about a document's first sentence (its answer passage is the chunk holding that
sentence). Half use the document's words ("Which function does this: return the absolute
value of the argument?"); half paraphrase it: every word with an entry in SYNONYMS is
replaced ("... give back the unsigned quantity of the parameter?"), and only sentences
where at least 60% of the content words were replaced count, so few of the document's
words are left for full-text search to find. No question names the function.

Deterministic for one Python version: the set written with this script is committed
(bench/retrieval_set.json), so every run measures the same questions; run it again only to
make a new set. `bench/retrieval_quality.py` measures recall@5 and MRR@10 on it.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import inspect
import json
import re
from pathlib import Path

MODULES = """abc argparse array ast base64 bisect bz2 calendar cmath codecs collections colorsys
configparser contextlib copy csv dataclasses datetime decimal difflib dis email.utils enum
filecmp fnmatch fractions functools gc getpass glob gzip hashlib heapq hmac html inspect io
ipaddress itertools json keyword locale logging lzma math mimetypes netrc numbers operator
os os.path pathlib platform plistlib pprint queue quopri random re sched secrets selectors
shlex shutil signal socket sqlite3 ssl statistics string struct subprocess sysconfig
tarfile tempfile textwrap threading time token tokenize tomllib traceback types
unicodedata urllib.parse uuid warnings wave weakref xml.etree.ElementTree zipfile
zlib""".split()

STOPWORDS = set(
    """a an the of to in on for and or is are be by as at it its this that with from if
    not no into than then which when where what who how do does can may will all any each
    other such only also but so their there these those one two per has have""".split()
)

# Words of docstrings and another way to say them: a paraphrase is the sentence with every
# listed word replaced (one pass, so a chain like remove -> delete -> erase never runs).
SYNONYMS = {
    "return": "give back", "returns": "gives back", "returned": "given back",
    "string": "text", "strings": "texts", "str": "text", "file": "document",
    "files": "documents", "directory": "folder", "directories": "folders",
    "path": "location", "paths": "locations", "pathname": "location", "remove": "delete",
    "removes": "deletes", "delete": "erase", "create": "make", "creates": "makes",
    "created": "made", "new": "fresh", "list": "array", "lists": "arrays",
    "number": "count", "numbers": "counts", "integer": "whole number",
    "integers": "whole numbers", "int": "whole number", "value": "quantity",
    "values": "quantities", "object": "thing", "objects": "things", "element": "member",
    "elements": "members", "item": "entry", "items": "entries", "character": "letter",
    "characters": "letters", "first": "initial", "last": "final", "empty": "blank",
    "argument": "parameter", "arguments": "parameters", "function": "routine",
    "functions": "routines", "call": "invoke", "called": "invoked", "given": "supplied",
    "specified": "indicated", "size": "magnitude", "length": "extent", "name": "label",
    "names": "labels", "current": "present", "time": "moment", "date": "day",
    "key": "lookup", "keys": "lookups", "dictionary": "mapping", "dict": "mapping",
    "sequence": "series", "iterator": "stream", "iterable": "collection",
    "write": "save", "writes": "saves", "read": "load", "reads": "loads", "open": "start",
    "close": "finish", "data": "information", "bytes": "octets", "byte": "octet",
    "buffer": "memory area", "default": "fallback", "error": "failure", "raise": "throw",
    "raises": "throws", "exception": "failure", "convert": "turn", "converts": "turns",
    "compute": "calculate", "computes": "calculates", "random": "arbitrary",
    "copy": "duplicate", "copies": "duplicates", "test": "check", "tests": "checks",
    "check": "verify", "contains": "holds", "contain": "hold", "instance": "example",
    "class": "kind", "type": "sort", "method": "operation", "module": "package",
    "process": "program", "thread": "worker", "lock": "mutex", "wait": "pause",
    "start": "begin", "end": "finish", "line": "row", "lines": "rows", "word": "term",
    "words": "terms", "match": "fit", "pattern": "template", "replace": "substitute",
    "split": "divide", "join": "combine", "sort": "order", "sorted": "ordered",
    "maximum": "largest", "minimum": "smallest", "absolute": "unsigned",
    "mean": "average", "count": "tally", "insert": "put", "append": "add at the end",
    "add": "append", "set": "collection", "get": "fetch", "gets": "fetches",
    "true": "yes", "false": "no", "result": "outcome", "results": "outcomes",
    "format": "layout", "formatted": "laid out", "encode": "serialize",
    "decode": "deserialize", "socket": "network endpoint", "connection": "link",
    "address": "location", "host": "machine", "server": "service", "client": "caller",
    "message": "note", "header": "heading", "headers": "headings", "table": "grid",
    "seed": "starting state", "object's": "thing's",
    "environment": "surroundings", "variable": "setting", "variables": "settings",
    "temporary": "short-lived", "archive": "bundle", "compressed": "packed",
    "compress": "pack", "decompress": "unpack", "digest": "fingerprint",
    "hash": "fingerprint", "signal": "notification", "handler": "callback",
    "queue": "waiting line", "task": "job", "tasks": "jobs", "unicode": "text encoding",
    "decimal": "base ten", "fraction": "ratio", "float": "real number",
    "floating": "real", "point": "dot", "round": "approximate", "rounded": "approximated",
}  # fmt: skip


def candidates() -> list[tuple[str, str]]:
    """(dotted name, docstring) of every public function and class the modules define."""
    found: dict[str, str] = {}
    seen_docs: set[str] = set()
    for module_name in MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name in sorted(dir(module)):
            obj = getattr(module, name, None)
            if name.startswith("_") or not callable(obj):
                continue
            doc = inspect.getdoc(obj) or ""
            if len(doc) < 80 or doc in seen_docs or first_sentence(doc) is None:
                continue
            seen_docs.add(doc)
            found[f"{module_name}.{name}"] = doc
    return sorted(found.items())


def first_sentence(doc: str) -> str | None:
    """The docstring's first sentence, if it is a plain one of 6 to 30 words."""
    paragraph = " ".join(doc.split("\n\n")[0].split())
    sentence = re.split(r"(?<=[a-z)\]])\.(?:\s|$)", paragraph)[0].strip().rstrip(".")
    words = sentence.split()
    if not 6 <= len(words) <= 30 or "(" in words[0] or sentence.startswith((">>>", "..")):
        return None
    if sentence.count("(") != sentence.count(")") or sentence.count("'") % 2:
        return None  # cut inside "(e.g." or a quotation: not a sentence
    return sentence


def content_words(sentence: str) -> list[str]:
    return [w for w in re.findall(r"[a-z']+", sentence.lower()) if w not in STOPWORDS]


def paraphrase(sentence: str) -> str | None:
    """The sentence with its listed words replaced, if at least 60% of its content words
    were; else None (too much of the document's own wording would be left)."""
    content = content_words(sentence)
    replaced = [w for w in content if w in SYNONYMS]
    if not content or len(replaced) < 0.6 * len(content):
        return None
    return re.sub(r"[A-Za-z']+", lambda m: SYNONYMS.get(m.group(0).lower(), m.group(0)), sentence)


def build(documents: int, questions: int) -> dict:
    by_hash = sorted(candidates(), key=lambda item: hashlib.sha256(item[0].encode()).hexdigest())
    chosen = by_hash[:documents]
    docs = [{"name": f"{name}.txt", "text": f"{name}\n\n{doc}"} for name, doc in chosen]
    wanted = questions // 2
    words_questions: list[dict] = []
    paraphrased: list[dict] = []
    for name, doc in chosen:
        sentence = first_sentence(doc)
        if sentence is None:
            continue
        answer = {"document": f"{name}.txt", "passage": sentence}
        said_otherwise = paraphrase(sentence)
        if said_otherwise and len(paraphrased) < wanted:
            paraphrased.append(
                {
                    "question": f"Which function does this: {said_otherwise[0].lower()}{said_otherwise[1:]}?",
                    "kind": "paraphrase",
                    **answer,
                }  # fmt: skip
            )
        elif len(words_questions) < wanted:
            words_questions.append(
                {
                    "question": f"Which function does this: {sentence[0].lower()}{sentence[1:]}?",
                    "kind": "words",
                    **answer,
                }  # fmt: skip
            )
    return {
        "about": (
            "Issue 37's labelled retrieval set, made by bench/retrieval_set.py from the "
            "docstrings of Python's standard library (Python Software Foundation "
            "documentation, under its licence). Each question's answer passage is the "
            "chunk of `document` that holds `passage`."
        ),
        "documents": docs,
        "questions": words_questions + paraphrased,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=520)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--out", default=str(Path(__file__).with_name("retrieval_set.json")))
    args = parser.parse_args()
    labelled = build(args.documents, args.questions)
    kinds = [q["kind"] for q in labelled["questions"]]
    Path(args.out).write_text(json.dumps(labelled, indent=0, ensure_ascii=False) + "\n")
    print(
        f"{len(labelled['documents'])} documents, {kinds.count('words')} questions in the "
        f"documents' words and {kinds.count('paraphrase')} paraphrased -> {args.out}"
    )


if __name__ == "__main__":
    main()
