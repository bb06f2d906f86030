"""The API gateway: Numi serving the OpenAI and Anthropic APIs under /v1.

A client's request (Chat Completions, Anthropic Messages, Responses) is read into one
neutral call (`inbound`, `responses`), its model name resolved to the routes the user may
use (`models`: an endpoint's model, a project's default route and fallbacks), relayed
through the same provider adapters as the page with the same fallback rule (`relay`), and
written back in the client's own protocol (`outbound`, `responses`), whatever protocol
the endpoint speaks. Keys (`keys`) open /v1 and nothing else; the conversations of a key
that keeps them become chats, grouped by the messages they share, and every request's
usage is counted per key and model (`threads`). The web layer (`numi/web/gateway.py`)
owns the HTTP side.
"""
