"""Raise :class:`~trainleak.errors.MissingExtraError` (naming the ``text`` extra) when the
language-model dependencies are missing, before any module of this package imports them; the
attack and experiment registries skip modules that raise it."""

from trainleak.errors import import_extra

for _module in ("transformers", "tokenizers", "peft"):
    import_extra(_module, "text", "trainleak's language models")
