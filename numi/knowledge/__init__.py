"""The user's documents as a knowledge base: chunks that know where they came from, full-text
and vector indexes, hybrid retrieval, and the passages a chat's requests carry.

- `chunking`: documents cut along their structure (headings, definitions, pages);
- `embedding`: the model that makes vectors (an endpoint's /v1/embeddings, or the local
  WordLlama of `numi[knowledge]`), run off the hub;
- `vectors`: nearest chunks (sqlite-vec on SQLite, pgvector on PostgreSQL where created,
  numpy elsewhere);
- `index`: full-text search and the background indexer;
- `retrieval`: the two rankings fused, and a chat's automatic passages.
"""
