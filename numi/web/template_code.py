"""Compiled templates, kept once per process for every app in it.

Jinja compiles a template the first time an environment loads it, and each `create_app`
makes an environment of its own. A process with one app (`numi serve`) compiles each
template once either way; a process that makes many (the test suite makes one per test, a
CLI command one per call) paid the compile every time: about 35 ms a template, 61 templates
for the settings pages and a chat. In tests/web/test_xss_pages.py that was 15 of the 27 s its
six first cases took (cProfile, issue 36).

Jinja's bytecode cache is the seam for this. What a template compiles to depends on its
source and on the environment's compile settings (delimiters, whitespace rules, extensions,
which filters and tests exist, autoescaping), never on the app: the code looks up filters and
globals in the environment it is loaded into. So the code is kept by those settings, the
template's name and its source's checksum; an edited template compiles again.
"""

from __future__ import annotations

from types import CodeType

from jinja2 import BytecodeCache, Environment
from jinja2.bccache import Bucket


def _compile_settings(environment: Environment) -> tuple:
    """What the compiled code of a template depends on besides its source."""
    autoescape = environment.autoescape
    return (
        environment.block_start_string,
        environment.block_end_string,
        environment.variable_start_string,
        environment.variable_end_string,
        environment.comment_start_string,
        environment.comment_end_string,
        environment.line_statement_prefix,
        environment.line_comment_prefix,
        environment.trim_blocks,
        environment.lstrip_blocks,
        environment.newline_sequence,
        environment.keep_trailing_newline,
        environment.optimized,
        environment.is_async,
        environment.finalize is not None,
        # Flask's is a method of the app that decides by the file's extension alone.
        getattr(getattr(autoescape, "__func__", autoescape), "__qualname__", autoescape),
        tuple(sorted(environment.extensions)),
        frozenset(environment.filters),
        frozenset(environment.tests),
    )


class ProcessTemplateCode(BytecodeCache):
    """Each template's code object, in memory, shared by the environments of one process
    that compile alike. Code objects are immutable, so one is safely run by many."""

    def __init__(self) -> None:
        self._codes: dict[tuple, tuple[str, CodeType]] = {}

    def _key(self, bucket: Bucket) -> tuple:
        return (_compile_settings(bucket.environment), bucket.key)

    def load_bytecode(self, bucket: Bucket) -> None:
        kept = self._codes.get(self._key(bucket))
        if kept is not None and kept[0] == bucket.checksum:
            bucket.code = kept[1]

    def dump_bytecode(self, bucket: Bucket) -> None:
        if bucket.code is not None:
            self._codes[self._key(bucket)] = (bucket.checksum, bucket.code)

    def clear(self) -> None:
        self._codes.clear()


TEMPLATE_CODE = ProcessTemplateCode()


def share_compiled_templates(environment: Environment) -> None:
    """Let `environment` use, and add to, the process's compiled templates."""
    environment.bytecode_cache = TEMPLATE_CODE
