"""Readers of the exports of the apps people leave for Numi, one module per app family.

Each module holds one importer class (`detect`, `parse`, as `numi.chat.imported.ChatImporter`)
that turns the app's own file into neutral `ImportedChat`s with the shared helpers of
`shapes.py`; `numi.chat.importer.IMPORTERS` is the one table that lists them all. Every
module says in its docstring where the shape it reads comes from.
"""
