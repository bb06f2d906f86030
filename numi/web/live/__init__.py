"""The live view: the WebSocket and SSE routes, and the HTML they push as a turn runs.

`ws` and `streams` carry a turn's events to the page; `fragments`, `lane_fragments` and
`tool_cards` draw them; `message_render` draws a saved message the same way;
`message_rate` and `open_sockets` bound and track the open sockets; `sidebar_feed` tells
a page's sidebar of the user's chats that start or stop answering.
"""
