"""docs/errors.md lists every error code the code can raise, and only those (as
tests/test_config_docs.py does for settings)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = ROOT / "docs" / "errors.md"
CODE = re.compile(r"^[a-z][a-z0-9_]*$")
# Calls whose code argument is a literal: (name, position of the code).
CODE_ARGUMENT = {
    "NumiError": 0,
    "BudgetExceeded": 0,  # budget_ledger's refusal, carrying its budget for the history
    "GatewayError": 0,
    "ProviderError": 0,
    "StreamError": 0,
    "error_response": 0,
    "invalid": 1,
    "SettingError": 0,
    "parse_bool": 2,
    "ToolFailure": 0,  # a tool call's failed result (`ok: false`, `error_code`)
    "KernelError": 0,  # run_python's kernel that cannot start, reported as a ToolFailure
    "McpRefusal": 1,  # a refusal of /mcp: (JSON-RPC number, code, ...)
}


def _literal(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def raised_codes() -> dict[str, set[str]]:
    """Code -> the files that raise it: the literal codes of NumiError, ProviderError,
    StreamError, invalid() and error_response() calls, `code=` keywords of those, and
    `{"code": ...}` in event dicts; plus the HTTP and provider code tables."""
    from numi.providers.errors import CODES
    from numi.web.errors import HTTP_CODES

    found: dict[str, set[str]] = {}

    def add(code, where):
        if code and CODE.match(code):
            found.setdefault(code, set()).add(where)

    for path in sorted((ROOT / "numi").rglob("*.py")):
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func).rsplit(".", 1)[-1]
                if name in CODE_ARGUMENT:
                    position = CODE_ARGUMENT[name]
                    if len(node.args) > position:
                        add(_literal(node.args[position]), where)
                    for keyword in node.keywords:
                        if keyword.arg == "code":
                            add(_literal(keyword.value), where)
                    if name == "invalid" and len(node.args) == 1 and not node.keywords:
                        add("invalid_input", where)  # invalid()'s default code
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if key is not None and _literal(key) == "code":
                        add(_literal(value), where)
    for code in (*CODES, *HTTP_CODES.values()):
        add(code, "table")
    # web/errors.py's fallback for an HTTP error outside HTTP_CODES.
    assert '"http_error"' in (ROOT / "numi" / "web" / "errors.py").read_text()
    add("http_error", "numi/web/errors.py")
    return found


def catalogued_codes() -> set[str]:
    text = CATALOGUE.read_text(encoding="utf-8")
    return set(re.findall(r"^\| `([a-z0-9_]+)` \|", text, re.M))


def test_every_raised_code_is_in_the_catalogue():
    missing = {
        code: sorted(where)
        for code, where in raised_codes().items()
        if code not in catalogued_codes()
    }
    assert not missing, f"error codes raised but not in docs/errors.md: {missing}"


def test_the_catalogue_lists_no_code_that_nothing_raises():
    stale = catalogued_codes() - set(raised_codes())
    assert not stale, f"docs/errors.md lists codes nothing raises: {sorted(stale)}"


def test_the_scan_finds_codes_of_every_form():
    """Not vacuous: each form of raising a code is seen."""
    codes = raised_codes()
    assert {
        "turn_running",
        "too_deep",
        "provider_timeout",
        "cancelled",
        "not_found",
        "internal_error",
    } <= set(codes)
    assert len(codes) > 60
