"""URL rules whose URL builders are compiled on first use, not at start-up.

Werkzeug compiles two Python functions per rule (with `ast` and `compile`) as soon as the
rule is added, to build its URL in `url_for`. Matching a request does not use them, and
most rules are never built (API routes, POST targets): for Numi's ~100 rules that was the
largest part of `create_app()` (see bench/PROFILE.md, Start-up). Each builder is now
compiled by the first `url_for` that needs it, then kept, as before.
"""

from __future__ import annotations

from typing import Any, Callable

from werkzeug.routing import Rule


class LazyBuilderRule(Rule):
    def _compile_builder(self, append_unknown: bool = True) -> Callable[..., tuple[str, str]]:
        # Werkzeug binds what this returns to the rule (`__get__`) as `_build` /
        # `_build_unknown`; the stand-in compiles the real builder once and replaces itself.
        # Only an optimisation: should werkzeug stop calling this method, rules are
        # compiled eagerly again and nothing else changes.
        attribute = "_build_unknown" if append_unknown else "_build"

        def build_on_first_use(rule: LazyBuilderRule, **values: Any) -> tuple[str, str]:
            builder = Rule._compile_builder(rule, append_unknown).__get__(rule, None)
            setattr(rule, attribute, builder)
            return builder(**values)

        return build_on_first_use
